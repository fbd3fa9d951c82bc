"""pipeplan.files: input path checks, atomic output writes and the cache directory (no pipeplan imports but errors)."""
