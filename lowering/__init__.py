"""pipeplan.lowering"""
