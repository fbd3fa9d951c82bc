"""uvicorn on a socket bound before the model loads, with a graceful stop.

:func:`bind_socket` binds (and so checks) HOST:PORT before any planning or loading work; port 0 picks a
free port (:func:`bound_url` names it). :class:`Server` is ``uvicorn.Server`` whose exit request (SIGTERM /
SIGINT, or :meth:`Server.stop`) first calls ``on_exit`` (the scheduler's ``begin_shutdown``: running
streams end after their current token, waiting requests get 503), then uvicorn stops accepting, waits for
the open responses (at most :data:`GRACEFUL_S` seconds) and runs the app's lifespan shutdown, which closes
the pipeline; later signals are ignored until then (the stop is bounded).
:meth:`Server.serve_forever` raises :class:`~pipeplan.runtime.interrupts.Interrupted` for the first signal
once everything stopped, outside the event loop, so the command reports it as any interrupted command does
(exit 130 / 143).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn
from pipeplan.errors import PipeplanError

BACKLOG = 2048
"""Listen backlog of the server socket (uvicorn's default)."""
GRACEFUL_S = 10.0
"""Most seconds a shutdown waits for open responses before uvicorn cancels them."""


class ServeBindError(PipeplanError):
    """HOST:PORT cannot be bound (code ``bind_failed``): in use, not an address of this machine, no permission."""

    code = "bind_failed"


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (``0``: a free port) and listening, IPv6 when ``host`` is an IPv6
    address.

    Raises ServeBindError naming the address and the OS's reason."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ServeBindError(f"--host {host}: not an address of this machine ({e})", where="host") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(BACKLOG)  # from now on connections wait in the backlog until uvicorn accepts them
        sock.set_inheritable(True)
    except OSError as e:
        sock.close()
        raise ServeBindError(f"cannot listen on {host}:{port}: {e.strerror or e}", where="port") from None
    return sock


def bound_url(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a bound socket (brackets around an IPv6 host)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Server(uvicorn.Server):
    """``uvicorn.Server`` that calls ``on_exit`` first when asked to stop (signal or :meth:`stop`)."""

    def __init__(self, app: Any, *, on_exit: Callable[[], None], log_level: str = "warning"):
        config = uvicorn.Config(app, log_level=log_level, access_log=log_level in ("info", "debug", "trace"),
                                lifespan="on", timeout_graceful_shutdown=int(GRACEFUL_S))
        super().__init__(config)
        self.on_exit = on_exit
        self.signals: list[int] = []
        """The signals received while serving, in order."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The first SIGINT/SIGTERM starts the graceful stop; later ones are ignored, so the cleanup is not cut
        short (it is bounded: :data:`GRACEFUL_S`, then the pipeline's own bounded close), as
        :func:`~pipeplan.runtime.interrupts.interrupts_raise` does."""
        self.signals.append(sig)
        if len(self.signals) == 1:
            self.on_exit()
            self.should_exit = True

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's handlers for SIGINT/SIGTERM while serving (main thread only), restored after; unlike
        uvicorn's own, the signal is not raised again inside the event loop (:meth:`serve_forever` does)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in saved.items():
                signal.signal(s, h)

    def serve_forever(self, sock: socket.socket) -> None:
        """Serve on ``sock`` until stopped; raises Interrupted for the first signal that stopped it."""
        from pipeplan.runtime.interrupts import Interrupted

        self.run(sockets=[sock])
        if self.signals:
            raise Interrupted(self.signals[0])

    def stop(self) -> None:
        """Stop serving (from any thread): the same graceful path as a signal, without one."""
        self.on_exit()
        self.should_exit = True
