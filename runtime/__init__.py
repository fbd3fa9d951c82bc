"""pipeplan.runtime"""
