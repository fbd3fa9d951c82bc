"""pipeplan.frontend"""
