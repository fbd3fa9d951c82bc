"""The package and weight cache directory: ``$PIPEPLAN_CACHE``, else ``~/.cache/pipeplan``.

Its checks and the cached artifacts are :mod:`pipeplan.runtime.weights_source`; this is the name only,
so that the pool reader (local peaks cache) and the runtime agree on it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "default_cache_dir"]

CACHE_ENV = "PIPEPLAN_CACHE"


def default_cache_dir() -> Path:
    """``$PIPEPLAN_CACHE`` if set, else ``~/.cache/pipeplan`` (not created here)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "pipeplan"
