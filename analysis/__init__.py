"""pipeplan.analysis: evidence, list scheduling, memory planning, simulation and timelines (used by the passes)."""
