"""Execution backends: where stage workers run and how their edges are carried (DESIGN.md §4).

- :class:`InprocBackend` (``"inproc"``): one thread per stage in this process, bounded-queue edges
  (:class:`~pipeplan.runtime.transport.InprocTransport`). For tests and debugging.
- :class:`LocalBackend` (``"local"``, the default): one process per stage from the ``spawn``
  context, shared-memory ring edges (:class:`~pipeplan.runtime.shm_ring.ShmTransport`), events on a
  ``multiprocessing`` queue. The orchestrator owns the rings and unlinks them in :meth:`stop`.

- ``"ray"``: :class:`pipeplan.runtime.ray_backend.RayBackend` (stage actors on the Ray nodes that
  carry the plan's node ids; imported lazily, ``ray`` is optional).

All expose the same small surface to the orchestrator: ``transport`` (to open the token edges),
``next_event(timeout)``, ``dead_stage()`` (liveness) and ``stop()`` (idempotent: stop every stage,
join or terminate it, release the edges; nothing is leaked).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ProvisionStage
from pipeplan.runtime.events import Event
from pipeplan.runtime.stage import FaultInjection, StageProgram, StageWorker
from pipeplan.runtime.transport import InprocTransport, Transport, routes_from_provisions

BACKENDS = ("local", "inproc", "ray")


class BackendError(PipeplanError):
    """An unknown backend name (code ``bad_backend``)."""

    code = "bad_backend"


@dataclass(frozen=True)
class WorkerOptions:
    """Options every stage worker gets (picklable).

    kernels: dotted kernel module name (None: torch reference); cache_dir: weight cache;
    num_threads: torch threads per stage (None: leave torch's default); programs: stage index ->
    the compiled :class:`~pipeplan.runtime.stage.StageProgram` that stage binds (None, or a stage
    missing from it: the worker builds its own program)."""

    kernels: str | None = None
    cache_dir: str | None = None
    num_threads: int | None = None
    programs: Mapping[int, StageProgram] | None = None

    def program_for(self, stage: int) -> StageProgram | None:
        """The compiled program of ``stage``, or None."""
        return None if self.programs is None else self.programs.get(stage)


class Backend(ABC):
    """Runs the stage workers of one pipeline."""

    name: str
    transport: Transport

    @abstractmethod
    def start(self, provisions: Sequence[ProvisionStage], fault_injection: FaultInjection | None,
              options: WorkerOptions) -> None:
        """Create the edges and launch one worker per provision (returns at once)."""

    @abstractmethod
    def next_event(self, timeout: float) -> Event | None:
        """The next lifecycle event from any stage, waiting at most ``timeout`` s; None if none."""

    @abstractmethod
    def dead_stage(self) -> tuple[int, str] | None:
        """``(stage, detail)`` of a stage that ended without being told to, else None."""

    @abstractmethod
    def stop(self, grace_s: float = 2.0) -> None:
        """Stop every stage (waiting ``grace_s`` for a clean exit, then forcing it) and release edges."""

    def expect_exit(self) -> None:
        """Tell the backend that stages are about to end on purpose (SHUTDOWN sent)."""
        self._expect_exit = True

    @abstractmethod
    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every stage to end; True when all did."""


# --------------------------------------------------------------------------- inproc
class InprocBackend(Backend):
    """Threads in this process; events on a ``queue.Queue``."""

    name = "inproc"

    def __init__(self):
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._results: dict[int, bool] = {}
        self._stages: list[int] = []
        self._expect_exit = False
        self.workers: list[StageWorker] = []

    def start(self, provisions, fault_injection, options):
        self.transport = InprocTransport(routes_from_provisions(list(provisions)))
        for p in provisions:
            w = StageWorker(p, self._events.put, fault_injection=fault_injection, kernels=options.kernels,
                            cache_dir=options.cache_dir, num_threads=options.num_threads,
                            program=options.program_for(p.stage))
            self.workers.append(w)

            def body(w=w, stage=p.stage):
                self._results[stage] = w.run(self.transport, self._stop)

            t = threading.Thread(target=body, name=f"pipeplan-stage-{p.stage}", daemon=True)
            self._threads.append(t)
            self._stages.append(p.stage)
            t.start()

    def next_event(self, timeout):
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def dead_stage(self):
        for stage, t in zip(self._stages, self._threads):
            if not t.is_alive() and stage not in self._results:
                return stage, f"stage {stage} thread ended without a result"
            if not t.is_alive() and not self._expect_exit and self._results.get(stage) is True:
                return stage, f"stage {stage} stopped serving unexpectedly"
        return None

    def wait_exit(self, timeout):
        for t in self._threads:
            t.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def stop(self, grace_s=2.0):
        self._stop.set()
        for t in self._threads:
            t.join(grace_s)


# --------------------------------------------------------------------------- local processes
def _stage_process_main(provision: ProvisionStage, transport: Any, events: Any, stop: Any,
                        fault_injection: FaultInjection | None, options: WorkerOptions) -> None:
    """Entry point of a stage process: run the worker, then close the edges and flush events.

    Exit status 0 after a clean end, 1 after a (reported) fault. The loop also ends when the parent
    process disappears (its pid changes), so an orphan never lingers."""
    parent = os.getppid()
    worker = StageWorker(provision, events.put, fault_injection=fault_injection, kernels=options.kernels,
                         cache_dir=options.cache_dir, num_threads=options.num_threads,
                         program=options.program_for(provision.stage))
    ok = worker.run(transport, stop, alive=lambda: os.getppid() == parent)
    worker.executor = None
    transport.close()
    events.close()
    events.join_thread()
    sys.exit(0 if ok else 1)


class LocalBackend(Backend):
    """One ``spawn``-ed process per stage, shared-memory rings, a ``multiprocessing`` event queue."""

    name = "local"

    def __init__(self):
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")
        self.procs: list[Any] = []
        self._pids: list[int | None] = []
        self._stages: list[int] = []
        self._expect_exit = False
        self._stopped = False
        self._pending: list[Event] = []
        self.transport = None  # type: ignore[assignment]

    def start(self, provisions, fault_injection, options):
        from pipeplan.runtime.shm_ring import ShmTransport

        routes = routes_from_provisions(list(provisions))
        self._events = self.ctx.Queue()
        self._stop = self.ctx.Event()
        self.transport = ShmTransport.create(routes, self.ctx)
        try:
            for p in provisions:
                proc = self.ctx.Process(target=_stage_process_main, name=f"pipeplan-stage-{p.stage}",
                                        args=(p, self.transport, self._events, self._stop, fault_injection, options),
                                        daemon=True)
                proc.start()
                self.procs.append(proc)
                self._pids.append(proc.pid)
                self._stages.append(p.stage)
        except BaseException:
            self.stop(0.5)
            raise

    @property
    def pids(self) -> list[int | None]:
        """Stage process ids, in stage order."""
        return list(self._pids)

    def next_event(self, timeout):
        if self._pending:
            return self._pending.pop(0)
        if self._stopped or not hasattr(self, "_events"):
            return None
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def dead_stage(self):
        if self._expect_exit:
            return None
        for stage, p in zip(self._stages, self.procs):
            code = p.exitcode
            if code is not None:
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                return stage, f"stage process (pid {p.pid}) {how}"
        return None

    def wait_exit(self, timeout):
        import time

        end = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, end - time.monotonic()))
        return all(p.exitcode is not None for p in self.procs)

    def stop(self, grace_s=2.0):
        if self._stopped:
            return
        self._stopped = True
        if self.procs:
            self._stop.set()
            self.wait_exit(grace_s)
            for p in self.procs:
                if p.exitcode is None:
                    p.terminate()
            for p in self.procs:
                p.join(1.0)
                if p.exitcode is None:
                    p.kill()
                    p.join(1.0)
            for p in self.procs:
                p.close()
        if self.transport is not None:
            self.transport.unlink()
        if hasattr(self, "_events"):
            while True:  # keep what the stages reported before their end
                try:
                    self._pending.append(self._events.get(timeout=0.01))
                except (queue.Empty, OSError, EOFError, ValueError):
                    break
            self._events.close()
            self._events.join_thread()


def make_backend(name: str, *, ray_address: str | None = None, ray_init: Mapping[str, Any] | None = None) -> Backend:
    """A fresh backend by name: ``"local"``, ``"inproc"`` or ``"ray"``.

    ``ray_address`` (ray only): cluster address for ``ray.init`` (None: the Ray already initialised in
    this process, else an embedded local instance carrying every node id of the plan); ``ray_init``:
    extra ``ray.init`` keyword arguments (e.g. ``_temp_dir``). Raises BackendError for another name
    (or ``ray_address`` given to a non-ray backend), RayUnavailableError when ``ray`` is missing."""
    if name != "ray" and ray_address is not None:
        raise BackendError(f"--ray-address only applies to the ray backend, not {name!r}", where="ray_address")
    if name == "local":
        return LocalBackend()
    if name == "inproc":
        return InprocBackend()
    if name == "ray":
        from pipeplan.runtime.ray_backend import make_ray_backend

        return make_ray_backend(ray_address, init_kwargs=ray_init)
    raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}", where="backend")
