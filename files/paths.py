"""Input paths checked before any ``open()``: a FIFO, a device node, a socket or a directory given where a
file is expected is a typed error at once (an ``open()`` on a FIFO blocks until a writer appears).

:func:`check_input_file` is called where a file path enters: the GGUF reader (every shard), the pool and
model-facts TOML readers, the plan, package and timeline readers.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pipeplan.errors import PipeplanError

__all__ = ["InputPathError", "check_input_file", "file_kind"]


class InputPathError(PipeplanError):
    """An input path that is not a readable regular file: code ``file_not_found`` (absent, or a path
    through a non-directory), ``bad_input_path`` (a directory, FIFO, device node or socket) or
    ``unreadable`` (permission denied, or another OS error on open)."""

    code = "bad_input_path"


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``regular file``, ``directory``, ``FIFO``, ``character device``,
    ``block device``, ``socket``, ``symbolic link`` or ``special file``."""
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symbolic link")):
        if test(mode):
            return name
    return "special file"


def check_input_file(path: str | os.PathLike[str], what: str = "input",
                     error: type[PipeplanError] = InputPathError) -> Path:
    """Check that ``path`` is a readable regular file, without blocking; returns it as a Path.

    ``os.stat`` (symbolic links followed) first: anything but a regular file is refused before any
    ``open()``. Then an ``O_RDONLY | O_NONBLOCK`` open (never blocks) whose ``fstat`` must again be a
    regular file (the path may have been replaced in between), closed at once.

    Args:
        path: the path. what: how the message names it (``"model"``, ``"--nodes"``, ...).
        error: the PipeplanError subclass raised (e.g. GGUFError for the GGUF reader), constructed as
            ``error(message, code=..., where=str(path))``.
    Raises: ``error`` with code ``file_not_found``, ``bad_input_path`` or ``unreadable`` (class docstring).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"{what} {p}: no such file", code="file_not_found", where=str(p)) from None
    except NotADirectoryError:
        raise error(f"{what} {p}: a parent of this path is not a directory", code="file_not_found",
                    where=str(p)) from None
    except OSError as e:
        raise error(f"{what} {p}: cannot stat: {e.strerror or e}", code="unreadable", where=str(p)) from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {p}: is a {file_kind(st.st_mode)}, not a regular file", code="bad_input_path",
                    where=str(p))
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        why = "permission denied" if e.errno in (errno.EACCES, errno.EPERM) else (e.strerror or str(e))
        raise error(f"{what} {p}: cannot open for reading: {why}", code="unreadable", where=str(p)) from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise error(f"{what} {p}: is a {file_kind(mode)}, not a regular file", code="bad_input_path", where=str(p))
    return p
