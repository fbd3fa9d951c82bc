"""The stage host: the process that forks local stage processes with the runtime already imported.

A stage process needs numpy, gguf and the runtime (and torch for the reference and Triton targets):
importing them takes a second or more of CPU, and a
``spawn``-ed stage pays that each, on top of its interpreter start. The local backend instead forks
its stages from a ``multiprocessing`` forkserver that imported :data:`STAGE_PRELOAD` once
(:func:`stage_context`); :func:`prestart_stage_host` starts that server early (``pipeplan run`` does it
first thing), so its imports overlap the orchestrator's planning and compiling, and the orchestrator
itself never imports torch. This module imports nothing heavy, so calling it costs milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from multiprocessing.context import BaseContext

STAGE_PRELOAD = ("pipeplan.runtime.backends", "pipeplan.runtime.stage", "pipeplan.runtime.program",
                 "pipeplan.runtime.kernels.cpu", "pipeplan.runtime.loader",
                 "pipeplan.runtime.sampling", "pipeplan.runtime.shm_ring", "pipeplan.runtime.weights_source",
                 "pipeplan.frontend.gguf_facts")
"""Modules the stage host imports once, before it forks any stage: everything a stage of the ``cpu`` target
(the default) imports while it loads and serves; none imports torch, so a cpu stage process never holds it
(a ``reference`` stage imports torch itself) (a module that fails to import is
skipped: the stage imports it itself and reports what is wrong)."""

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""Thread-pool sizes set to 1 in the stage host's environment unless the user set them: a stage sizes
torch's intra-op pool itself (``torch.set_num_threads``), and no library starts one thread per core in
the host (threads do not survive a fork)."""


def stage_context() -> BaseContext:
    """The multiprocessing context of stage processes: ``forkserver`` with :data:`STAGE_PRELOAD` where the
    platform has it (Linux, macOS), else ``spawn``."""
    import multiprocessing as mp

    if "forkserver" not in mp.get_all_start_methods():  # pragma: no cover - Windows
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(STAGE_PRELOAD))
    return ctx


def prestart_stage_host() -> None:
    """Start the stage host now and return at once (its imports then run alongside the caller's work).
    Idempotent (a dead host is started again); the host serves every later local run of this process and
    exits when this process and its stages have exited."""
    if stage_context().get_start_method() != "forkserver":  # pragma: no cover - Windows
        return
    from multiprocessing import forkserver

    saved = {k: os.environ.get(k) for k in THREAD_ENV}
    try:
        for k in THREAD_ENV:
            os.environ.setdefault(k, "1")
        forkserver.ensure_running()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


def stage_host_pid() -> int | None:
    """The pid of this process's stage host, None when none was started (or it was stopped)."""
    fs = sys.modules.get("multiprocessing.forkserver")
    return getattr(getattr(fs, "_forkserver", None), "_forkserver_pid", None)


def stop_stage_host() -> None:
    """Terminate this process's stage host now, if one was started (an interrupted command: the host may
    still be importing, and would otherwise finish that before it notices its parent is gone). Stage
    processes it forked are not touched: their orchestrator stops them. A later local run starts a new one."""
    pid = stage_host_pid()
    if pid is None:
        return
    server = sys.modules["multiprocessing.forkserver"]._forkserver  # type: ignore[attr-defined]
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(OSError, AttributeError):
        server._stop()  # closes the alive pipe, reaps the host, forgets its address
