"""pipeplan.transforms"""
