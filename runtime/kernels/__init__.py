"""pipeplan.runtime.kernels"""
