"""pipeplan: a compiler and runtime for pipeline-parallel LLM inference, built on xDSL.

Import nothing heavy here: ``xdsl-opt`` loads ``pipeplan.universe`` through an entry point.
The embedding API for other xDSL-based compilers is :mod:`pipeplan.api`.
"""

__version__ = "0.1.0"
