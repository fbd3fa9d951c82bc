"""Execution backends: where stage workers run and how their edges are carried (DESIGN.md §4).

- :class:`InprocBackend` (``"inproc"``): one thread per stage in this process, bounded-queue edges
  (:class:`~pipeplan.runtime.transport.InprocTransport`). For tests and debugging.
- :class:`LocalBackend` (``"local"``, the default): one process per stage, forked by a stage host
  (``multiprocessing`` forkserver) that imported the runtime once (:data:`STAGE_PRELOAD`,
  :func:`prestart_stage_host`); shared-memory ring edges (:class:`~pipeplan.runtime.shm_ring.ShmTransport`),
  a shared control block (stop flag, per-stage heartbeats: :class:`~pipeplan.runtime.shm_ring.StageControl`)
  and one event pipe per stage. The orchestrator owns the rings and the control block and unlinks them in
  :meth:`stop`.

- ``"ray"``: :class:`pipeplan.runtime.ray_backend.RayBackend` (stage actors on the Ray nodes that
  carry the plan's node ids; imported lazily, ``ray`` is optional).

All expose the same small surface to the orchestrator: ``transport`` (to open the token edges),
``next_event(timeout)``, ``dead_stage()`` and ``stalled_stage(limit_s)`` (liveness) and ``stop()``
(idempotent: stop every stage, join or terminate it, release the edges; nothing is leaked).

Threads: :func:`default_num_threads` sizes each stage's kernel threads (the CPU table's, or torch's intra-op
pool) from the usable cores (the default of ``inproc`` runs; a ``local`` stage process uses one thread unless
told otherwise).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import select
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ProvisionStage
from pipeplan.runtime.events import Event
from pipeplan.runtime.shm_ring import BEAT_S
from pipeplan.runtime.stage import FaultInjection, StageProgram, StageWorker
from pipeplan.runtime.stage_host import prestart_stage_host, stage_context
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
    missing from it: that stage faults ``bind``; :class:`~pipeplan.runtime.orchestrator.Pipeline` always
    gives them); parallel: KV-cache slots per stage (concurrent
    sequences: :class:`~pipeplan.runtime.stage.StageWorker`'s ``parallel``); micro_batches: most DATA frames
    in flight (the orchestrator's policy; the local backend sizes its rings' spin with it)."""

    kernels: str | None = None
    cache_dir: str | None = None
    num_threads: int | None = None
    programs: Mapping[int, StageProgram] | None = None
    parallel: int = 1
    micro_batches: int = 1

    def program_for(self, stage: int) -> StageProgram | None:
        """The compiled program of ``stage``, or None."""
        return None if self.programs is None else self.programs.get(stage)


PARALLEL_MIN_ELEMENTS = 1 << 20
"""A stage whose largest weight has fewer elements runs its ops on one thread: the per-op work is smaller
than waking and joining a thread pool, and on a busy host every op waits for the pool's slowest,
preempted, thread (a 1-stage stories260K run fell from ~840 to 3-9 tok/s with a competing process)."""


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def default_num_threads(provisions: Sequence[ProvisionStage], cores: int | None = None) -> int:
    """Kernel threads per stage: ``cores // stages`` (at least 1, so never more threads in all than
    cores, and 1 when stages >= cores), and 1 when no stage has a weight of :data:`PARALLEL_MIN_ELEMENTS`
    elements or more. ``cores``: default :func:`usable_cores`."""
    n = max(1, len(provisions))
    c = usable_cores() if cores is None else max(1, int(cores))
    largest = max((math.prod(t.shape) for p in provisions for t in p.tensors), default=0)
    return 1 if largest < PARALLEL_MIN_ELEMENTS else max(1, c // n)


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

    def stalled_stage(self, limit_s: float) -> tuple[int, str] | None:
        """``(stage, detail)`` of a live stage that stopped running (no heartbeat for ``limit_s`` s), else None.
        Backends without heartbeats never report one."""
        return None

    @abstractmethod
    def stop(self, grace_s: float = 2.0) -> None:
        """Stop every stage (waiting ``grace_s`` for a clean exit, then forcing it) and release edges."""

    def expect_exit(self) -> None:
        """Tell the backend that stages are about to end on purpose (SHUTDOWN sent)."""
        self._expect_exit = True

    @abstractmethod
    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every stage to end; True when all did."""


def _threads_api(kernels: str | None) -> Any:
    """The module whose ``get_num_threads``/``set_num_threads`` size the kernels of ``kernels`` (a dotted
    table name): the table module when it has them (the CPU table), else torch."""
    import importlib

    if kernels is not None:
        try:
            mod = importlib.import_module(kernels)
        except ImportError:  # the stage reports it when it loads
            mod = None
        if mod is not None and hasattr(mod, "set_num_threads") and hasattr(mod, "get_num_threads"):
            return mod
    import torch

    return torch


# --------------------------------------------------------------------------- inproc
class InprocBackend(Backend):
    """Threads in this process; events on a ``queue.Queue``. The stages share this process's kernel threads
    setting (the table's ``get/set_num_threads``, else torch's intra-op pool): a ``num_threads`` option sets it
    for the run and :meth:`stop` restores the caller's setting."""

    name = "inproc"

    def __init__(self) -> None:
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._results: dict[int, bool] = {}
        self._stages: list[int] = []
        self._expect_exit = False
        self._caller_threads: int | None = None
        self._threads_api: Any = None
        self.workers: list[StageWorker] = []

    def start(self, provisions, fault_injection, options):
        self.transport = InprocTransport(routes_from_provisions(list(provisions)))
        if options.num_threads is not None:
            self._threads_api = _threads_api(options.kernels)
            self._caller_threads = self._threads_api.get_num_threads()
        for p in provisions:
            w = StageWorker(p, self._events.put, fault_injection=fault_injection, kernels=options.kernels,
                            cache_dir=options.cache_dir, num_threads=options.num_threads,
                            program=options.program_for(p.stage), parallel=options.parallel)
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
        if self._caller_threads is not None:
            self._threads_api.set_num_threads(self._caller_threads)
            self._caller_threads = None


# --------------------------------------------------------------------------- local processes
STARTUP_GRACE_S = 30.0
"""Liveness limit for a stage process that has not beaten yet (it is still starting up)."""
WATCH_GAP_S = 1.0
"""A longer pause between two liveness checks restarts the silence clock (:meth:`LocalBackend.stalled_stage`)."""


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM (main thread only) while a stage process is created and recorded, so that an
    interrupt never leaves a started process the backend does not know about; they arrive right after
    (for the first stage that can be after the stage host finished its imports: ``proc.start()`` waits
    for it)."""
    blockable = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if not blockable:
        yield
        return
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _proc_state(pid: int | None) -> str:
    """The one-letter state of ``pid`` from /proc (``T``: stopped), or "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


class _Emitter:
    """A stage process's event sink: one pipe to the orchestrator (a vanished reader is not an error)."""

    def __init__(self, conn: Any):
        self.conn = conn
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLOUT)

    def __call__(self, ev: Event) -> None:
        try:
            self.conn.send(ev)
        except OSError:  # the orchestrator is gone; nobody to tell
            pass

    def reader_alive(self) -> bool:
        """Whether the orchestrator still holds the pipe's read end (a pipe without readers polls POLLERR):
        the orchestrator is alive. The stage host is no witness: stage processes keep it running."""
        return not any(e & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, e in self._poll.poll(0))


def _heartbeat(control: Any, slot: int, worker: StageWorker, done: threading.Event) -> None:
    while not done.is_set():
        control.beat(slot, worker.served)
        done.wait(BEAT_S)


def _preload_kernels(kernels: str | None) -> None:
    """Import the stage's kernel table before the first heartbeat: a table the stage host does not preload
    (the torch reference or Triton: torch's import holds the GIL for seconds) then loads within the
    start-up grace instead of silencing a stage that has beaten. An import error is left to the worker,
    which reports it as a fault."""
    import importlib

    with contextlib.suppress(Exception):
        importlib.import_module(kernels or "pipeplan.runtime.kernels.reference")


def _stage_process_main(provision: ProvisionStage, slot: int, transport: Any, events: Any, control: Any,
                        fault_injection: FaultInjection | None, options: WorkerOptions, env: Mapping[str, str]
                        ) -> None:
    """Entry point of a stage process: take the orchestrator's environment, beat, run the worker, then close
    the edges and the event pipe.

    SIGINT is ignored (the orchestrator stops its stages: a terminal's Ctrl-C reaches the whole process
    group). A thread stamps the control block's heartbeat ``slot`` (and the frames served so far) every
    BEAT_S s, from the start (once the kernel table is imported): while loading and while a long step runs
    too. Exit status 0 after a clean end, 1 after a (reported) fault. The serve loop also ends when the orchestrator goes away (its end
    of the event pipe closes), so an orphan never lingers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for k in [k for k in os.environ if k not in env]:
        del os.environ[k]
    os.environ.update(env)
    emit = _Emitter(events)
    _preload_kernels(options.kernels)
    worker = StageWorker(provision, emit, fault_injection=fault_injection, kernels=options.kernels,
                         cache_dir=options.cache_dir, num_threads=options.num_threads,
                         program=options.program_for(provision.stage), parallel=options.parallel)
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(control, slot, worker, done), name="pipeplan-heartbeat",
                            daemon=True)
    beat.start()
    ok = worker.run(transport, control, alive=emit.reader_alive)
    worker.executor = None
    done.set()
    beat.join()
    transport.close()
    control.close()
    events.close()
    sys.exit(0 if ok else 1)


class LocalBackend(Backend):
    """One process per stage (from :func:`stage_context`: forked by a stage host that preloaded the runtime),
    shared-memory rings, a control block (stop flag, heartbeats) and one event pipe per stage.

    Every /dev/shm object of the run is named ``pipeplan-<this pid>-...`` (see
    :mod:`pipeplan.runtime.shm_ring`); :meth:`start` first removes leftovers of dead runs, :meth:`stop`
    unlinks this run's. ``start_method`` overrides the context (e.g. ``"spawn"``).
    """

    name = "local"

    def __init__(self, start_method: str | None = None):
        import multiprocessing as mp

        self.ctx = stage_context() if start_method is None else mp.get_context(start_method)
        if self.ctx.get_start_method() == "forkserver":
            prestart_stage_host()
        self.procs: list[Any] = []
        self._pids: list[int | None] = []
        self._stages: list[int] = []
        self._started_ns: list[int] = []
        self._watched_ns = self._since_ns = 0
        self._readers: list[Any] = []
        self._expect_exit = False
        self._stopped = False
        self._pending: list[Event] = []
        self.control: Any = None
        self.removed_orphans: list[tuple[str, int]] = []
        """``(name, bytes)`` of the leftovers of dead runs that :meth:`start` removed."""
        self.transport = None  # type: ignore[assignment]

    def start(self, provisions, fault_injection, options):
        from pipeplan.runtime.shm_ring import (
            ShmTransport,
            StageControl,
            announce_for,
            remove_orphans,
            spin_budget,
        )

        try:
            self.removed_orphans = remove_orphans()
        except OSError:  # an entry we may not remove is not this run's problem
            self.removed_orphans = []
        routes = routes_from_provisions(list(provisions))
        env = dict(os.environ)
        if self.ctx.get_start_method() == "forkserver":
            prestart_stage_host()  # running already (see __init__) unless it died: never under blocked signals
        try:
            spin_s = spin_budget(len(provisions), options.micro_batches, usable_cores())
            self.transport = ShmTransport.create(routes, self.ctx, spin_s=spin_s, announce=announce_for(spin_s))
            self.control = StageControl(len(provisions))
            for slot, p in enumerate(provisions):
                reader, writer = self.ctx.Pipe(duplex=False)
                proc = self.ctx.Process(target=_stage_process_main, name=f"pipeplan-stage-{p.stage}",
                                        args=(p, slot, self.transport, writer, self.control, fault_injection,
                                              options, env), daemon=True)
                try:
                    with _signals_deferred():
                        proc.start()
                        self.procs.append(proc)
                        self._readers.append(reader)
                        self._pids.append(proc.pid)
                        self._stages.append(p.stage)
                        self._started_ns.append(time.monotonic_ns())
                finally:
                    writer.close()
        except BaseException:
            self.stop(0.5)
            raise

    @property
    def pids(self) -> list[int | None]:
        """Stage process ids, in stage order."""
        return list(self._pids)

    def shm_entries(self) -> list[str]:
        """Every /dev/shm entry of this run (ring segments, their semaphores, the control block)."""
        out = [] if self.transport is None else self.transport.shm_entries()
        return out + ([] if self.control is None else [self.control.name])

    def _poll(self, timeout: float) -> bool:
        """Receive what the event pipes hold (waiting at most ``timeout`` s for something); False when none
        was readable."""
        from multiprocessing.connection import wait

        if not self._readers:
            return False
        ready = wait(self._readers, timeout)
        for r in ready:
            conn: Any = r
            try:
                self._pending.append(conn.recv())
            except (EOFError, OSError):  # the stage closed its end (it ended)
                self._readers.remove(conn)
                conn.close()
        return bool(ready)

    def next_event(self, timeout):
        if not self._pending and not self._stopped:
            self._poll(timeout)
        return self._pending.pop(0) if self._pending else None

    def dead_stage(self):
        if self._expect_exit:
            return None
        for stage, p in zip(self._stages, self.procs):
            code = p.exitcode
            if code is not None:
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                return stage, f"stage process (pid {p.pid}) {how}"
        return None

    def stalled_stage(self, limit_s):
        """See :meth:`Backend.stalled_stage`. Silence counts only while this process watched: after a gap of
        more than :data:`WATCH_GAP_S` between two calls (this process was stopped itself, e.g. Ctrl-Z of the
        whole job, or not polling because tokens flowed) the stages' silence is measured from now."""
        if self._expect_exit or self._stopped or self.control is None:
            return None
        now = time.monotonic_ns()
        if now - self._watched_ns > WATCH_GAP_S * 1e9:
            self._since_ns = now
        self._watched_ns = now
        for slot, (stage, p) in enumerate(zip(self._stages, self.procs)):
            if p.exitcode is not None:
                continue
            last = self.control.last_beat(slot)
            limit = limit_s if last else max(limit_s, STARTUP_GRACE_S)
            quiet = (now - max(last or self._started_ns[slot], self._since_ns)) / 1e9
            if quiet > limit:
                why = "it is stopped (e.g. SIGSTOP)" if _proc_state(p.pid) in ("T", "t") else "it is not running"
                return stage, (f"stage process (pid {p.pid}) sent no heartbeat for {quiet:.1f} s (liveness limit "
                               f"{limit:g} s): {why}")
        return None

    def wait_exit(self, timeout):
        end = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, end - time.monotonic()))
        return all(p.exitcode is not None for p in self.procs)

    def stop(self, grace_s=2.0):
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.procs:
                if self.control is not None:
                    self.control.set()
                self.wait_exit(grace_s)
                for p in self.procs:
                    if p.exitcode is None:
                        with contextlib.suppress(OSError):  # a stopped process must run to take SIGTERM
                            os.kill(p.pid, signal.SIGCONT)
                        p.terminate()
                for p in self.procs:
                    p.join(1.0)
                    if p.exitcode is None:
                        p.kill()
                        p.join(1.0)
                for p in self.procs:
                    if p.exitcode is not None:
                        p.close()
            while self._poll(0.0):  # keep what the stages reported before their end
                pass
        finally:
            for r in self._readers:
                r.close()
            self._readers = []
            if self.transport is not None:
                self.transport.unlink()
            if self.control is not None:
                self.control.unlink()


def check_ray_address(backend: str, ray_address: str | None) -> None:
    """``--ray-address`` (not None) goes with the ``ray`` backend only: the same check for ``run``, ``replay``,
    ``serve`` and ``calibrate``. Raises BackendError (``bad_backend``, where ``ray_address``)."""
    if ray_address is not None and backend != "ray":
        raise BackendError(f"--ray-address needs --backend ray (the backend is {backend!r})", where="ray_address")


def make_backend(name: str, *, ray_address: str | None = None, ray_init: Mapping[str, Any] | None = None) -> Backend:
    """A fresh backend by name: ``"local"``, ``"inproc"`` or ``"ray"``.

    ``ray_address`` (ray only): cluster address for ``ray.init`` (None: the Ray already initialised in
    this process, else an embedded local instance carrying every node id of the plan); ``ray_init``:
    extra ``ray.init`` keyword arguments (e.g. ``_temp_dir``). Raises BackendError for another name
    (or ``ray_address`` given to a non-ray backend), RayUnavailableError when ``ray`` is missing."""
    check_ray_address(name, ray_address)
    if name == "local":
        return LocalBackend()
    if name == "inproc":
        return InprocBackend()
    if name == "ray":
        from pipeplan.runtime.ray_backend import make_ray_backend

        return make_ray_backend(ray_address, init_kwargs=ray_init)
    raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}", where="backend")
