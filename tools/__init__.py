"""pipeplan.tools"""
