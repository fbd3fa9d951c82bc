"""pipeplan.dialects"""
