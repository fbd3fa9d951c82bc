"""SIGINT and SIGTERM as exceptions, so that an interrupted run unwinds through its cleanup.

Python turns SIGINT into KeyboardInterrupt but lets SIGTERM kill the process at once, skipping every
``finally``: stage processes, shared-memory rings and semaphores would be left behind. Under
:func:`interrupts_raise` both signals raise :class:`Interrupted` (a KeyboardInterrupt) in the main
thread; the orchestrator stops its stages and unlinks its segments while the exception propagates
(:class:`pipeplan.runtime.orchestrator.Pipeline`). :func:`exits_on_interrupt` wraps a CLI command's
``main``: one ``error[interrupted]: ...`` line and exit status ``128 + signal`` (130 SIGINT, 143 SIGTERM),
the shell convention for a process ended by that signal.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``signum`` is the signal number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_status(self) -> int:
        """``128 + signum``: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


@contextlib.contextmanager
def _handled_by(handler: Callable[[int, Any], None]) -> Iterator[bool]:
    """Within the block SIGINT and SIGTERM go to ``handler``; on exit the handlers in place before are put back,
    whatever the block installed. Yields False (and changes nothing) outside the main thread, where Python
    delivers no signal."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    old = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield True
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread.

    The first signal raises; later ones are ignored until the block is left, so the cleanup the first one
    triggers is not cut short (it is bounded: stages that do not stop are killed). The previous handlers
    are restored on exit. Outside the main thread this is a no-op (Python delivers signals there only)."""

    def handler(signum: int, frame: Any) -> None:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    with _handled_by(handler):
        yield


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Within the block (a start-up that must not be cut in half, e.g. ``ray.init`` starting the processes of an
    embedded Ray instance, which an interrupt there leaves orphaned), SIGINT and SIGTERM are recorded, not
    acted on. On exit the handlers in place before the block are put back, whatever the block installed (Ray
    installs its own SIGTERM handler, which exits without any cleanup), and a recorded signal is then delivered
    to them (re-raised with ``signal.raise_signal``). Outside the main thread this is a no-op."""
    got: list[int] = []
    try:
        with _handled_by(lambda signum, frame: got.append(signum)):
            yield
    finally:
        if got:
            signal.raise_signal(got[0])


def exits_on_interrupt(main: Callable[..., int]) -> Callable[..., int]:
    """Decorate a command's ``main(args) -> int``: run it under :func:`interrupts_raise`; an interrupt (after
    the cleanup it unwound through) prints ``error[interrupted]: interrupted by SIGINT|SIGTERM ...`` on stderr
    and returns 130 / 143. A command that fails (interrupt or exception) also stops the stage host it
    started (:func:`pipeplan.runtime.stage_host.stop_stage_host`; one running before is left alone), so
    nothing it started outlives it."""

    @functools.wraps(main)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        from pipeplan.runtime.stage_host import stage_host_pid, stop_stage_host

        had_host = stage_host_pid() is not None
        try:
            with interrupts_raise():
                return main(*args, **kwargs)
        except BaseException as e:
            if not had_host:
                stop_stage_host()
            it = interrupt_of(e)
            if it is None:
                raise
            print(f"error[interrupted]: interrupted by {signal.Signals(it.signum).name}; every stage was stopped and "
                  f"its shared memory released", file=sys.stderr)
            return it.exit_status

    return wrapper


def interrupt_of(e: BaseException) -> Interrupted | None:
    """The :class:`Interrupted` ``e`` is, or the one it was raised from or while handling (a signal that
    arrived inside an import or a library call that wraps what it catches, e.g. a ``RuntimeError``)."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        if isinstance(x, Interrupted):
            return x
        seen.add(id(x))
        x = x.__cause__ or x.__context__
    return None
