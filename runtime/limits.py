"""Range checks of user-given runtime counts, before they reach torch or the OS
(``torch.set_num_threads(100000)`` crashes the process)."""

from __future__ import annotations

import os

from pipeplan.errors import PipeplanError

__all__ = ["LimitError", "check_thread_count", "max_threads"]


class LimitError(PipeplanError):
    """A count outside its accepted range (code ``invalid_request``)."""

    code = "invalid_request"


def max_threads() -> int:
    """The most threads a stage may ask for: 4 x ``os.cpu_count()`` (1 core when it is unknown)."""
    return 4 * (os.cpu_count() or 1)


def check_thread_count(n: object, what: str = "--threads") -> int:
    """``n`` when it is an int in ``[1, max_threads()]``; raises LimitError naming ``what`` otherwise."""
    hi = max_threads()
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= hi:
        raise LimitError(f"{what} must be an integer in [1, {hi}] (4 x the {os.cpu_count() or 1} cores), got {n!r}",
                         where=what.lstrip("-").replace("-", "_"))
    return n
