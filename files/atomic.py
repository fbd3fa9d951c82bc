"""Output files written atomically, and never over anything that is not a regular file.

Every writer of a user-named output (``pipeplan compile -o`` package files, ``--timeline``, ``--trace``,
``pipeplan plan -o``, ``compare --trace``) goes through :func:`write_file_atomic`:

* before any work, :func:`check_output_file`: the parent is an existing directory, and the target is
  absent or a regular file — a directory, FIFO, device node (``/dev/null``), socket or symbolic link is
  refused (``error[bad_output_path]``), so it is never replaced; a target that is one of the command's
  inputs (same device and inode as a path given to :func:`note_inputs`) is ``error[output_is_input]``;
  an existing target the user may not write (``os.access`` W_OK false, or no write bit at all, e.g.
  mode 444 even for root) is ``error[write_failed]``;
* the bytes go to a temporary file beside the target (``.<name>.<random>.tmp``, same file system), are
  flushed and fsynced, then ``os.replace`` puts the file in place: a reader sees the old file or the
  whole new one, never a prefix;
* a failed write (``ENOSPC``, ``EACCES``, ``EROFS``, ...) removes the temporary file, leaves the target
  as it was and is one ``error[write_failed]`` line naming the option and the path.

A replaced file keeps its permission bits; a new one gets ``0o666 & ~umask`` like ``open(path, "w")``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from pipeplan.errors import PipeplanError
from pipeplan.files.paths import file_kind

__all__ = ["GuardedStdout", "OutputPathError", "check_output_file", "clear_inputs", "current_umask", "note_inputs",
           "write_file_atomic"]

_INPUTS: dict[tuple[int, int], str] = {}
"""(st_dev, st_ino) -> path of each input file of the running command (:func:`note_inputs`)."""


def note_inputs(*paths: str | os.PathLike[str] | None) -> None:
    """Record the command's input files: an output later checked by :func:`check_output_file` that is
    the same file (device and inode, so also through a hard or symbolic link) is refused. Paths that are
    ``None`` or not existing files are skipped."""
    for path in paths:
        if path is None:
            continue
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            _INPUTS[(st.st_dev, st.st_ino)] = str(path)


def clear_inputs() -> None:
    """Forget the inputs recorded by :func:`note_inputs` (at the start of each command)."""
    _INPUTS.clear()


class OutputPathError(PipeplanError):
    """An output path that cannot be written where the user asked (code ``bad_output_path``: a missing or
    non-directory parent, a target that is not a regular file; ``write_failed``: an OS error while
    writing, e.g. no space left, permission denied, read-only file system)."""

    code = "bad_output_path"


def current_umask() -> int:
    """The process umask: ``Umask:`` of ``/proc/self/status`` (Linux), else read by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output_file(path: str | os.PathLike[str], option: str, *, code: str | None = None) -> Path:
    """Check, before any work, that a file can be put at ``path`` (``option`` names it in the message):
    the parent is an existing directory, and ``path`` is absent or a regular file (not a symbolic link).
    Returns the path. Raises OutputPathError (code ``bad_output_path``, or ``code``); nothing is created."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # the parent check below names the component that is not a directory
    except OSError as e:
        raise OutputPathError(f"{option} {p}: cannot stat: {e.strerror or e}", code=code, where=str(p)) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        raise OutputPathError(f"{option} {p}: is a {kind}, not a regular file (refusing to replace it)",
                              code=code, where=str(p))
    if st is not None:
        same = _INPUTS.get((st.st_dev, st.st_ino))
        if same is not None:
            raise OutputPathError(f"{option} {p}: is the command's input {same} (refusing to replace it)",
                                  code="output_is_input", where=str(p))
        if not os.access(p, os.W_OK) or not st.st_mode & 0o222:
            raise OutputPathError(f"{option} {p}: cannot write: permission denied (mode "
                                  f"{stat.S_IMODE(st.st_mode):o}; refusing to replace a read-only file)",
                                  code="write_failed", where=str(p))
    if not parent.is_dir():
        up = parent
        while not up.exists() and up != up.parent:
            up = up.parent
        why = "does not exist" if up != parent else "is not a directory"
        raise OutputPathError(f"{option} {p}: directory {parent} {why}", code=code, where=str(p))
    return p


def write_file_atomic(path: str | os.PathLike[str], data: str | bytes, option: str, *,
                      code: str | None = None) -> Path:
    """Write ``data`` (str: UTF-8) to ``path`` atomically (module docstring). Returns the path.

    Raises OutputPathError: code ``bad_output_path`` (or ``code``) when :func:`check_output_file`
    refuses the path, ``write_failed`` (or ``code``) on an OS error; the target is then unchanged and no
    temporary file is left."""
    p = check_output_file(path, option, code=code)
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
        try:
            view = memoryview(blob)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
            try:
                mode = stat.S_IMODE(os.stat(p).st_mode)
            except FileNotFoundError:
                mode = 0o666 & ~current_umask()
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        check_output_file(p, option, code=code)  # still absent or a regular file just before the rename
        os.replace(tmp, p)
        tmp = None
    except OSError as e:
        raise OutputPathError(f"{option} {p}: cannot write: {e.strerror or e}", code=code or "write_failed",
                              where=str(p)) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p



class GuardedStdout:
    """Stands in for ``sys.stdout`` while a command runs: a ``write``/``flush`` that fails with an OS
    error (``ENOSPC`` on ``/dev/full``, ``EIO``, ``EBADF``) or a stdout that is closed (``sys.stdout is
    None``, as with ``>&-``) raises ``OutputPathError(write_failed, where="stdout")`` instead of an
    ``OSError``/``AttributeError`` traceback. ``BrokenPipeError`` (a reader such as ``head`` went away)
    passes through unchanged. Other attributes are those of the wrapped stream."""

    def __init__(self, stream):
        self._stream = stream

    def _failed(self, e: OSError | None) -> OutputPathError:
        why = "is closed" if e is None else f"cannot write: {e.strerror or e}"
        return OutputPathError(f"stdout: {why}", code="write_failed", where="stdout")

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._failed(None)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None
        except ValueError as e:  # I/O operation on closed file
            raise OutputPathError(f"stdout: cannot write: {e}", code="write_failed", where="stdout") from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None
        except ValueError:
            pass

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str):
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)
