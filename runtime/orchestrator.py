"""The orchestrator: the run authority that starts the stages, feeds tokens and collects them.

Flow (DESIGN.md §1, §4): the orchestrator starts one worker per :class:`ProvisionStage` on a
backend, records every lifecycle event in one :class:`~pipeplan.runtime.events.EventLog` (total
order), and waits until every stage reported ``StageReady``. Per sequence it sends a RESET frame
(new KV cache, sampler parameters) and the prompt ids on the token-in edge (prefill); activations
go stage to stage on the activation edges; the last stage samples and returns one token id on the
token-out edge; the orchestrator feeds it back on token-in (decode) until EOS or ``max_tokens``.

Failure: a ``StageFaulted`` event, a stage that dies (checked every ``POLL_S`` while waiting, so a
killed stage process is reported as ``StageFault(kind="runtime")`` well within 5 s), or a stage that
stops running without dying (no heartbeat for ``liveness_s`` s: a SIGSTOPped or frozen process, see
:meth:`~pipeplan.runtime.backends.Backend.stalled_stage`) stops all stages, joins/terminates them,
releases the edges (unlinks shared memory) and raises the :class:`~pipeplan.errors.StageFault`. An
interrupt (KeyboardInterrupt, or SIGTERM under :func:`~pipeplan.runtime.interrupts.interrupts_raise`)
stops everything the same way before it propagates. Several sequences can run through one started
:class:`Pipeline` (the per-process start cost is paid once).

Compiled programs (issue 13 item 5): every stage binds the program the compiler produced, never one of its
own. ``Pipeline(..., programs={stage: StageProgram})`` hands the stages those (a replay package's,
:func:`pipeplan.runtime.compiled.load_compiled_stages`, or ``compile_for_run``'s as ``pipeplan run`` does);
without ``programs`` :meth:`Pipeline.start` first compiles the RunPlan the provisions state through the same
compile path (:func:`pipeplan.runtime.compiled.compile_provisions`, the package cache of ``cache_dir``; the
model's facts from ``model`` or the provisions' weight source) and hands each stage its program. A prompt
longer than the compiled prefill step's rows is sent in chunks of at most that many rows (positions advance
chunk by chunk; the token sampled after the last chunk is the first generated one, the last stage's samples
after earlier chunks are discarded: with a non-greedy sampler they still consume draws of its generator).

Concurrent sequences (issue 14 item 1): ``Pipeline(..., parallel=N)`` starts every stage with N KV-cache
slots (and N samplers on the last stage). :meth:`Pipeline.submit` admits a :class:`GenRequest` into a free
slot (FIFO, not before its ``delay_s``); one loop thread drives every admitted sequence by the micro-batch
policy of :class:`Pipeline` (``micro_batches``, by default the M the compiled package's costs predict
fastest): at most M DATA frames in flight, a decode frame carries
the rows of up to ``ceil(N / M)`` ready sequences (``Frame.segments``), a prefill chunk travels alone, so
with M = S every stage works on a different frame, and a new request's prefill chunks interleave with the
running decodes. The loop sends without blocking and drains the return edge while a send waits, so the
ring never deadlocks whatever its ``ring_slots`` (fewer slots only add back-pressure). Greedy ids of every
sequence are those of a single-sequence run: each slot is its own cache and the stages compute every
segment's rows as they would alone (:meth:`~pipeplan.runtime.program.StageExecutor.forward_segments`).
:meth:`Pipeline.generate_concurrent` runs a batch of requests and returns one :class:`GenResult` each.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pipeplan.analysis.concurrency import MicroBatchChoice, choose_micro_batches
from pipeplan.errors import PipeplanError, StageFault
from pipeplan.plan_types import ProvisionStage
from pipeplan.runtime.backends import Backend, WorkerOptions, default_num_threads, make_backend
from pipeplan.runtime.compiled import CompiledRun, compile_provisions, provisions_model
from pipeplan.runtime.events import Event, EventLog, StageFaulted, StageReady, event_to_dict
from pipeplan.runtime.stage import POLL_S, FaultInjection, StageProgram
from pipeplan.runtime.tmachine_run import TMachineStageProgram, compile_target
from pipeplan.runtime.transport import (
    DATA,
    MAX_SEGMENTS,
    ORCHESTRATOR_NODE,
    RESET,
    SHUTDOWN,
    Frame,
    SamplerParams,
    Segment,
)

DEATH_GRACE_S = 0.3
"""After noticing a dead stage, how long to wait for its StageFaulted event before calling it a crash."""

LIVENESS_ENV = "PIPEPLAN_LIVENESS_S"
DEFAULT_LIVENESS_S = 10.0
"""Seconds without a heartbeat after which a live stage process is a ``StageFault(runtime)``. Stage
processes beat from a thread every 0.1 s, also while a long step runs, so the limit only has to cover
scheduling hiccups of a busy host, not the slowest step. ``$PIPEPLAN_LIVENESS_S`` overrides it."""


def liveness_limit(value: float | None = None) -> float:
    """``value``, else ``$PIPEPLAN_LIVENESS_S``, else :data:`DEFAULT_LIVENESS_S` (seconds).

    Raises RunRequestError (``invalid_request``) for a value that is not a finite number > 0."""
    raw: object = value
    if raw is None:
        raw = os.environ.get(LIVENESS_ENV, "").strip() or DEFAULT_LIVENESS_S
    try:
        v = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise RunRequestError(f"liveness limit must be a finite number of seconds > 0, got {raw!r} "
                              f"({LIVENESS_ENV} or liveness_s)", where="liveness_s")
    return v


class RunRequestError(PipeplanError):
    """A generation request the plan cannot serve (code ``invalid_request``): empty prompt,
    ``max_tokens < 1``, or prompt + generated positions beyond the plan's ``max_seq_len``."""

    code = "invalid_request"


@dataclass
class RunResult:
    """Outcome of one sequence.

    Attributes:
        token_ids: generated ids (EOS, when reached, ends the list and is not included).
        prompt_ids: the prompt's ids (BOS first) as tokenized with the GGUF's own vocabulary.
        text: the generated ids decoded.
        events: the run's lifecycle events in total order (``seq``).
        timings: seconds and rates: ``load_s`` (start -> all StageReady), ``prefill_s`` (prompt sent
            -> first token), ``decode_s`` (first -> last token), ``prefill_tok_s``, ``decode_tok_s``
            (generated tokens after the first / decode_s), ``n_prompt``, ``n_generated``.
    """

    token_ids: list[int]
    prompt_ids: list[int]
    text: str
    events: list[Event] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        """JSON-ready dict: ids, text, ordered events, timings."""
        return {"prompt_ids": self.prompt_ids, "token_ids": self.token_ids, "text": self.text,
                "events": [event_to_dict(e) for e in self.events], "timings": self.timings}


class Pipeline:
    """A started pipeline of stages (context manager).

    Args:
        provisions: one ProvisionStage per stage (stage order), e.g. from ``project_provisions``.
        backend: ``"local"`` (processes + shared memory) or ``"inproc"`` (threads), or a Backend.
        fault_injection: forwarded to every worker (only the targeted stage acts on it).
        on_event: called with each event, in total order, as it is recorded.
        kernels / cache_dir / num_threads: see :class:`~pipeplan.runtime.backends.WorkerOptions`
            (``num_threads`` defaults to 1 for ``local``: one core per stage process; for ``inproc``, whose
            stage threads share this process's cores, to :func:`~pipeplan.runtime.backends.default_num_threads`:
            the usable cores split among the stages, 1 for small models).
        programs: the compiled stage programs (stage -> StageProgram, or the tmachine programs of ``--target
            cuda``); None: :meth:`start` compiles the provisions' RunPlan (module docstring; :attr:`compiled`) for
            the target of ``kernels`` (:func:`~pipeplan.runtime.tmachine_run.compile_target`: the Triton table's tmachine program, else the
            virtual-queue program).
        model: the GGUF whose header facts the compile of ``programs=None`` reads (default: the first
            provision's weight source, when it is on this host without a download).
        liveness_s: heartbeat limit (see :func:`liveness_limit`).
        parallel: most sequences in flight at once (KV-cache slots per stage; see the module docstring).
        prefill_rows: most prompt rows per frame (at most the compiled prefill step's rows; default those).
            With ``programs=None`` the prefill step is compiled for this many rows (default
            :data:`~pipeplan.runtime.compiled.DEFAULT_PREFILL_ROWS`, at most ``max_seq_len - 1``).
        micro_batches: M, most DATA frames in flight at once. Default: ``min(parallel, number of stages)``,
            and with ``programs=None`` the M :meth:`compile` predicts fastest on the compiled package's costs
            (:func:`~pipeplan.analysis.concurrency.choose_micro_batches`; :attr:`micro_batch_choice`).

    Micro-batch policy (with ``parallel = N``; deterministic): the loop keeps one FIFO of *ready* sequences,
    in the order they became ready (admitted, or their last frame returned). While fewer than M DATA frames
    are in flight (counting frames composed and not yet sent) and a sequence is ready, it sends the next
    frame: if the oldest ready sequence has prompt rows left, that prompt chunk (at most ``prefill_rows``
    rows) alone, as one of the M frames; else the oldest ready decoding sequences (FIFO, skipping sequences
    with prompt rows left) up to ``ceil(N / M)`` of them (at most :data:`~pipeplan.runtime.transport.
    MAX_SEGMENTS`), one row each, in one frame (a frame of one sequence has no segment table). Frames are sent
    as soon as one may be, never held back to fill up. So M = 1 decodes all N sequences in one frame per step,
    and M = N sends one frame per sequence (no micro-batching). A RESET (admission) travels ahead of the
    sequence's first chunk and does not count as one of the M.
    :attr:`segments_sent` / :attr:`segments_returned` count DATA frames by the sequences they carry.

    Raises: RunRequestError (no provisions, bad ``liveness_s``, ``parallel`` or ``micro_batches`` not an int
        >= 1); from :meth:`start`: StageFault; the compile's errors (RunRequestError when the model's facts
        are not readable here, RunPlanRejection, PackageError, GGUFError for a bad ``model``); BackendError
        for an unknown backend name.
    """

    def __init__(self, provisions: Sequence[ProvisionStage], *, backend: str | Backend = "local",
                 fault_injection: FaultInjection | None = None, on_event: Callable[[Event], None] | None = None,
                 kernels: str | None = None, cache_dir: str | os.PathLike | None = None,
                 num_threads: int | None = None, programs: Mapping[int, StageProgram] | None = None,
                 liveness_s: float | None = None, parallel: int = 1, prefill_rows: int | None = None,
                 micro_batches: int | None = None, model: str | os.PathLike | None = None):
        if not provisions:
            raise RunRequestError("no stage provisions given", where="provisions")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise RunRequestError(f"parallel must be an integer >= 1, got {parallel!r}", where="parallel")
        if micro_batches is not None and (isinstance(micro_batches, bool) or not isinstance(micro_batches, int)
                                          or micro_batches < 1):
            raise RunRequestError(f"micro_batches must be an integer >= 1, got {micro_batches!r}",
                                  where="micro_batches")
        self.parallel = parallel
        self._micro_batches_given = micro_batches
        self.micro_batch_choice: MicroBatchChoice | None = None
        """The prediction :meth:`compile` chose M by (None: M was given, or is ``min(parallel, stages)``)."""
        self._set_micro_batches(min(parallel, len(provisions)) if micro_batches is None else micro_batches)
        self.segments_sent: collections.Counter[int] = collections.Counter()
        self.segments_returned: collections.Counter[int] = collections.Counter()
        self.provisions = sorted(provisions, key=lambda p: p.stage)
        self.liveness_s = liveness_limit(liveness_s)
        self.backend = make_backend(backend) if isinstance(backend, str) else backend
        if num_threads is None and self.backend.name == "local":
            num_threads = 1
        elif num_threads is None and self.backend.name == "inproc":
            num_threads = default_num_threads(self.provisions)
        if prefill_rows is not None and (isinstance(prefill_rows, bool) or not isinstance(prefill_rows, int)
                                         or prefill_rows < 1):
            raise RunRequestError(f"prefill_rows must be an integer >= 1, got {prefill_rows!r}", where="prefill_rows")
        self.model = model
        self.compiled: CompiledRun | None = None
        """The compile :meth:`start` made when no ``programs`` were given (package path, cache hit, seconds)."""
        self.options = WorkerOptions(kernels, None if cache_dir is None else str(cache_dir), num_threads,
                                     None if programs is None else dict(programs), parallel, self.micro_batches)
        self._prefill_rows_given = prefill_rows
        self.prefill_rows = self._rows(programs)
        """Most prompt rows per frame (0: the whole prompt in one frame; set by :meth:`start` when it compiles)."""
        self.fault_injection = fault_injection
        self.log = EventLog(on_event)
        self.max_seq_len = min(p.max_seq_len for p in self.provisions)
        self.load_s = 0.0
        self._seq = 0
        self._started = False
        self._closed = False
        self._tx = self._rx = None
        # concurrent sequences: submitted handles (any thread), the loop thread and its state
        self._lock = threading.Lock()
        self._pending: collections.deque[GenHandle] = collections.deque()
        self._wake = threading.Event()
        self._loop: threading.Thread | None = None
        self._stopping = False
        self._failure: BaseException | None = None
        self._active_handles: list[GenHandle] = []

    def _set_micro_batches(self, m: int) -> None:
        self.micro_batches = m
        """M: most DATA frames in flight (see the class docstring)."""
        self.batch_rows = min(-(-self.parallel // m), MAX_SEGMENTS)
        """Most sequences one decode frame carries: ``ceil(parallel / micro_batches)``."""
        if hasattr(self, "options"):
            self.options = dataclasses.replace(self.options, micro_batches=m)

    def _rows(self, programs: Mapping[int, StageProgram] | None) -> int:
        rows = [p.prefill_rows for p in (programs or {}).values() if p.prefill_rows > 0]
        if self._prefill_rows_given is not None:
            rows.append(self._prefill_rows_given)
        return min(rows) if rows else 0

    def compile(self) -> CompiledRun:
        """Compile the RunPlan the provisions state (:func:`~pipeplan.runtime.compiled.compile_provisions`, the
        package cache of ``cache_dir``) and make its stage programs the ones the stages bind; :meth:`start`
        calls it when no ``programs`` were given. Without a given ``micro_batches`` (and ``parallel`` > 1), M
        becomes the one the package's stage costs predict fastest (:attr:`micro_batch_choice`; unchanged when
        they are not readable). Returns the :class:`~pipeplan.runtime.compiled.CompiledRun`.

        Raises RunRequestError (``invalid_request``) when the model's facts are not readable on this host
        (give ``model=`` or ``programs=``); RunPlanRejection, PackageError, CacheError from the compile."""
        facts, path, why = provisions_model(self.provisions, self.model, cache_dir=self.options.cache_dir)
        if facts is None:
            raise RunRequestError(f"the stages need compiled programs and the orchestrator cannot compile the plan: "
                                  f"{why}; give Pipeline(model=<the GGUF>) or programs=", where="model")
        target = compile_target(self.options.kernels)
        run = compile_provisions(self.provisions, facts, cache_dir=self.options.cache_dir, parallel=self.parallel,
                                 prefill_rows=self._prefill_rows_given, target=target, model=path)
        self.compiled = run
        programs = {s: p for s, p in run.programs.items() if isinstance(p, StageProgram | TMachineStageProgram)}
        self.options = dataclasses.replace(self.options, programs=programs)
        self.prefill_rows = self._rows(programs)
        if self._micro_batches_given is None and self.parallel > 1:
            choice = choose_micro_batches(run.package, self.parallel, backend=self.backend.name)
            if choice is not None:
                self.micro_batch_choice = choice
                self._set_micro_batches(choice.micro_batches)
        return run

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Pipeline:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _drain(self, timeout: float = 0.0) -> None:
        ev = self.backend.next_event(timeout)
        while ev is not None:
            self.log.record(ev)
            ev = self.backend.next_event(0.0)

    def _check(self) -> None:
        """Raise the first StageFault seen, or a runtime fault for a stage that died."""
        self._drain()
        f = self.log.first_fault()
        if f is not None:
            raise f.fault
        dead = self.backend.dead_stage()
        if dead is not None:
            end = time.monotonic() + DEATH_GRACE_S
            while time.monotonic() < end and self.log.first_fault() is None:
                self._drain(0.05)
            f = self.log.first_fault()
            raise f.fault if f is not None else StageFault("runtime", dead[0], dead[1])
        stalled = self.backend.stalled_stage(self.liveness_s)
        if stalled is not None:
            raise StageFault("runtime", stalled[0], stalled[1])

    def start(self) -> float:
        """Launch the stages and wait until all are ready. Returns the load time in seconds.

        Without ``programs`` the plan is compiled first (:meth:`compile`; not counted in the load time).

        Raises StageFault (after stopping everything) when a stage faults or dies while loading; the errors of
        :meth:`compile`."""
        if self.options.programs is None:
            self.compile()
        t0 = time.monotonic()
        self._started = True
        try:
            self.backend.start(self.provisions, self.fault_injection, self.options)
            first, last = self.provisions[0], self.provisions[-1]
            self._tx = self.backend.transport.open_send(first.node_id, first.inbound.edge_id)
            self._rx = self.backend.transport.open_recv(ORCHESTRATOR_NODE, last.outbound.edge_id)
            want = {p.stage for p in self.provisions}
            while True:
                ev = self.backend.next_event(POLL_S)
                if ev is not None:
                    self.log.record(ev)
                    if isinstance(ev, StageFaulted):
                        raise ev.fault
                ready = {e.stage for e in self.log.events if isinstance(e, StageReady)}
                if ready >= want:
                    break
                if ev is None:
                    self._check()
        except BaseException:
            self.close(force=True)
            raise
        self.load_s = time.monotonic() - t0
        return self.load_s

    def close(self, force: bool = False) -> None:
        """Shut the stages down (SHUTDOWN through the pipeline, or forced), join/terminate them and
        release the edges. Idempotent; safe after a fault."""
        if self._closed:
            return
        loop = self._loop
        if loop is not None and loop is not threading.current_thread():
            self._stopping = True
            self._wake.set()
            loop.join(timeout=None if not force else 5.0)
        if self._closed:
            return
        self._closed = True
        try:
            if not force and self._started and self._tx is not None and self.log.first_fault() is None:
                self.backend.expect_exit()
                if self._tx.send(Frame(SHUTDOWN), timeout=1.0):
                    self.backend.wait_exit(5.0)
        finally:
            # after a fault there is nothing to finish: stages that do not stop at once are terminated
            self.backend.stop(grace_s=0.2 if force else 2.0)
            self._drain()

    @property
    def events(self) -> list[Event]:
        """The recorded events in total order."""
        return self.log.events

    # ------------------------------------------------------------------ generation
    def _send(self, frame: Frame) -> None:
        assert self._tx is not None
        while not self._tx.send(frame, timeout=POLL_S):
            self._check()

    def _recv_token(self, seq_id: int) -> tuple[int, int]:
        assert self._rx is not None
        while True:
            f = self._rx.recv(timeout=POLL_S)
            if f is None:
                self._check()
                continue
            if f.op == DATA and f.seq_id == seq_id:
                assert f.array is not None
                return int(f.array[0]), f.position
            if f.op == SHUTDOWN:
                raise StageFault("runtime", self.provisions[-1].stage, "pipeline shut down while generating")

    def generate_ids(self, prompt_ids: Sequence[int], max_tokens: int, *, temperature: float = 0.0,
                     top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                     eos_id: int | None = None, on_token: Callable[[int], None] | None = None,
                     should_stop: Callable[[], bool] | None = None) -> tuple[list[int], dict[str, float]]:
        """Generate up to ``max_tokens`` ids after ``prompt_ids`` (stops early at ``eos_id``); ``on_token``
        is called with each generated id as soon as it arrives (EOS excluded).

        ``should_stop`` (cancellation): called after each generated id (after ``on_token``); True ends this
        sequence there, before the next step is sent, so no frame of it is left in the stages and the
        pipeline stays running for the next sequence. An exception from ``on_token`` or ``should_stop``
        stops the whole pipeline, like any other failure.

        With ``parallel > 1`` (or once :meth:`submit` started the loop thread) the call is one sequence of the
        loop thread (:meth:`submit`; thread-safe), and the timings also hold ``queue_s`` (submitted -> admitted).

        Returns ``(ids, timings)``; see :class:`RunResult` for the timing keys.
        Raises:
            RunRequestError: empty prompt, ``max_tokens < 1``, or ``len(prompt) + max_tokens - 1`` above
                the plan's ``max_seq_len``.
            StageFault: a stage faulted or died (everything is stopped first).
        """
        if self.parallel > 1 or self._loop is not None:  # the loop thread drives every sequence: this is one
            h = self.submit(GenRequest(prompt_ids, max_tokens, temperature, top_k, top_p, seed, eos_id),
                            on_token=on_token, should_stop=should_stop)
            r = h.result()
            return r.ids, {"load_s": self.load_s, **r.timings}
        if not self._started or self._closed:
            raise RunRequestError("the pipeline is not running", where="pipeline")
        n = len(prompt_ids)
        if n < 1 or max_tokens < 1:
            raise RunRequestError(f"need a non-empty prompt and max_tokens >= 1 (got {n} ids, {max_tokens})")
        if n + max_tokens - 1 > self.max_seq_len:
            raise RunRequestError(f"prompt of {n} tokens + {max_tokens} generated exceeds the plan's max_seq_len "
                                  f"{self.max_seq_len}", where="max_tokens")
        self._seq += 1
        seq = self._seq
        sp = SamplerParams(float(temperature), int(top_k), float(top_p), -1 if seed is None else int(seed))
        try:
            self._send(Frame(RESET, seq, 0, None, sp))
            t0 = time.perf_counter()
            ids = np.asarray(prompt_ids, dtype=np.int32)
            chunk = self.prefill_rows or n
            for k in range(0, n, chunk):
                self._send(Frame(DATA, seq, k, ids[k:k + chunk]))
                tok, pos = self._recv_token(seq)
            t1 = time.perf_counter()
            out: list[int] = []
            while True:
                if eos_id is not None and tok == eos_id:
                    break
                out.append(tok)
                if on_token is not None:
                    on_token(tok)
                if len(out) >= max_tokens:
                    break
                if should_stop is not None and should_stop():
                    break
                self._send(Frame(DATA, seq, pos, np.array([tok], dtype=np.int32)))
                tok, pos = self._recv_token(seq)
            t2 = time.perf_counter()
        except BaseException:
            self.close(force=True)
            raise
        prefill, decode = t1 - t0, t2 - t1
        steps = max(len(out) - 1, 0)
        timings = {"load_s": self.load_s, "prefill_s": prefill, "decode_s": decode,
                   "prefill_tok_s": n / prefill if prefill > 0 else 0.0,
                   "decode_tok_s": steps / decode if decode > 0 and steps else 0.0,
                   "n_prompt": n, "n_generated": len(out)}
        return out, timings


    # ------------------------------------------------------------------ concurrent sequences
    def _validate(self, req: GenRequest) -> None:
        n = len(req.prompt_ids)
        if n < 1 or req.max_tokens < 1:
            raise RunRequestError(f"need a non-empty prompt and max_tokens >= 1 (got {n} ids, {req.max_tokens})")
        if n + req.max_tokens - 1 > self.max_seq_len:
            raise RunRequestError(f"prompt of {n} tokens + {req.max_tokens} generated exceeds the plan's "
                                  f"max_seq_len {self.max_seq_len}", where="max_tokens")
        if not (math.isfinite(req.delay_s) and req.delay_s >= 0):
            raise RunRequestError(f"delay_s must be a finite number >= 0, got {req.delay_s!r}", where="delay_s")

    def submit(self, req: GenRequest, *, on_token: Callable[[int], None] | None = None,
               should_stop: Callable[[], bool] | None = None, t0: float | None = None) -> GenHandle:
        """Queue ``req`` for the loop thread (thread-safe; starts the loop on first use). It is admitted into a
        free KV-cache slot in submission order, no earlier than ``delay_s`` after ``t0`` (default: now,
        ``time.perf_counter()``). ``on_token(id)`` is called from the loop thread with each generated id (EOS
        excluded); ``should_stop()`` after each, True ends the sequence there (like :meth:`GenHandle.cancel`).
        An exception from either stops the pipeline (as :meth:`generate_ids`).

        Returns the :class:`GenHandle`. Raises RunRequestError (bad request, or the pipeline not running /
        stopped after a failure: then the failure is the cause)."""
        self._validate(req)
        now = time.perf_counter()
        h = GenHandle(req, (now if t0 is None else t0) + req.delay_s, now, on_token, should_stop)
        with self._lock:
            if not self._started or self._closed or self._stopping or self._failure is not None:
                raise RunRequestError("the pipeline is not running", where="pipeline") from self._failure
            self._pending.append(h)
            if self._loop is None:
                self._loop = threading.Thread(target=self._loop_main, name="pipeplan-sequences", daemon=True)
                self._loop.start()
        self._wake.set()
        return h

    def generate_concurrent(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        """Run ``requests`` concurrently (at most ``parallel`` at a time, each admitted no earlier than its
        ``delay_s`` after this call starts) and return their results in request order.

        Raises RunRequestError (a bad request: nothing is run), StageFault (a stage failed: the pipeline is
        stopped)."""
        for r in requests:
            self._validate(r)
        t0 = time.perf_counter()
        handles = [self.submit(r, t0=t0) for r in requests]
        return [h.result() for h in handles]

    def _loop_main(self) -> None:
        """The loop thread: drives every admitted sequence until :meth:`close` (or a failure)."""
        try:
            self._drive()
        except BaseException as e:  # a fault or a callback failure: stop everything, fail every handle
            with self._lock:
                self._failure = e
                failed = list(self._pending)
                self._pending.clear()
            try:
                self.close(force=True)
            finally:
                for h in failed + list(self._active_handles):
                    h._fail(e)
                self._active_handles = []

    def _drive(self) -> None:
        assert self._tx is not None and self._rx is not None
        tx, rx = self._tx, self._rx
        free = list(range(self.parallel - 1, -1, -1))  # pop() hands out slot 0 first
        active: dict[int, GenHandle] = {}
        ready: collections.deque[GenHandle] = collections.deque()  # FIFO by readiness (class docstring)
        outbox: collections.deque[Frame] = collections.deque()
        in_flight = 0  # frames sent and not yet returned (DATA and RESET)
        data_frames = 0  # DATA frames composed and not yet returned: at most micro_batches
        m, cap = self.micro_batches, self.batch_rows
        next_check = time.monotonic() + POLL_S
        seq = self._seq

        def end(h: GenHandle) -> None:
            del active[h.slot]
            free.append(h.slot)
            h._finish()
            self._active_handles = list(active.values())

        while True:
            now = time.perf_counter()
            if self._stopping:  # close(): cancel the running sequences, wait for their frames
                for h in active.values():
                    h.cancelled = True
                with self._lock:
                    dropped = list(self._pending)
                    self._pending.clear()
                for h in dropped:
                    h._fail(RunRequestError("the pipeline was closed before this request ran", where="pipeline"))
            # admit: FIFO, into free slots, once due
            wait = POLL_S
            while free and not self._stopping:
                with self._lock:
                    h = self._pending[0] if self._pending else None
                    if h is not None and h.cancelled:
                        self._pending.popleft()
                    elif h is not None and h.admit_at <= now:
                        self._pending.popleft()
                    elif h is not None:
                        wait = min(wait, h.admit_at - now)
                        h = None
                if h is None:
                    break
                if h.cancelled:
                    h._finish()
                    continue
                seq += 1
                self._seq = seq
                h._admit(seq, free.pop(), now)
                active[h.slot] = h
                r = h.req
                sp = SamplerParams(float(r.temperature), int(r.top_k), float(r.top_p),
                                   -1 if r.seed is None else int(r.seed))
                outbox.append(Frame(RESET, seq, 0, None, sp, h.slot))
                ready.append(h)
            self._active_handles = list(active.values())
            # a ready sequence cancelled while it waited has no frame in flight: it ends here
            if any(h.cancelled for h in ready):
                for h in [h for h in ready if h.cancelled]:
                    ready.remove(h)
                    end(h)
            if self._stopping and in_flight == 0 and not outbox and not ready:
                for h in list(active.values()):
                    h._finish()
                return
            # compose: at most m DATA frames in flight, each a prompt chunk or up to cap decode rows
            while data_frames < m and ready:
                outbox.append(self._compose(ready, cap))
                data_frames += 1
            # send what is ready without blocking
            while outbox and tx.send(outbox[0], timeout=0):
                f = outbox.popleft()
                in_flight += 1
                if f.op == DATA:
                    self.segments_sent[1 if f.segments is None else len(f.segments)] += 1
            # receive: at once while a send waits, else until the next admission or POLL_S
            if outbox:
                timeout = 0.0005
            elif in_flight:
                timeout = POLL_S
            else:
                timeout = max(0.0, wait)
            if in_flight:
                f = rx.recv(timeout=timeout)
            else:
                f = None
                if timeout > 0:
                    self._wake.wait(timeout)
                    self._wake.clear()
            if f is not None:
                in_flight -= 1
                if f.op == SHUTDOWN:
                    raise StageFault("runtime", self.provisions[-1].stage, "pipeline shut down while generating")
                if f.op == DATA:
                    data_frames -= 1
                    assert f.array is not None
                    segs = f.segments or (Segment(f.seq_id, f.slot, f.position, 1),)
                    self.segments_returned[len(segs)] += 1
                    if len(segs) != f.array.shape[0]:
                        raise StageFault("runtime", self.provisions[-1].stage,
                                         f"token frame of {f.array.shape[0]} ids for {len(segs)} sequences")
                    t_now = time.perf_counter()
                    for sg, tok in zip(segs, f.array.tolist(), strict=True):
                        h = active.get(sg.slot)
                        if h is None or h.seq_id != sg.seq_id:
                            raise StageFault("runtime", self.provisions[-1].stage,
                                             f"token for sequence {sg.seq_id} in slot {sg.slot}, which runs "
                                             f"{None if h is None else h.seq_id}")
                        if h._on_step(int(tok), sg.position, t_now):
                            ready.append(h)
                        else:
                            end(h)
            if time.monotonic() >= next_check:
                self._check()
                next_check = time.monotonic() + POLL_S

    def _compose(self, ready: collections.deque[GenHandle], cap: int) -> Frame:
        """The next DATA frame from the ready FIFO (class docstring): the oldest sequence's prompt chunk, or
        up to ``cap`` decoding sequences (oldest first) in one frame; taken sequences leave ``ready``."""
        h = ready[0]
        if h.prefilling:
            ready.popleft()
            return h._next_chunk(self.prefill_rows)
        if cap == 1 or len(ready) == 1:
            ready.popleft()
            return h._decode_frame()
        take: list[GenHandle] = []
        keep: list[GenHandle] = []
        for g in ready:
            (take if len(take) < cap and not g.prefilling else keep).append(g)
        ready.clear()
        ready.extend(keep)
        if len(take) == 1:
            return take[0]._decode_frame()
        ids = np.asarray([g._tok for g in take], dtype=np.int32)
        segs = tuple(Segment(g.seq_id, g.slot, g._pos, 1) for g in take)
        return Frame(DATA, h.seq_id, h._pos, ids, None, h.slot, segs)


@dataclass(frozen=True)
class GenRequest:
    """One sequence for :meth:`Pipeline.generate_concurrent` / :meth:`Pipeline.submit`: prompt ids (BOS
    first), ``max_tokens``, sampling (temperature 0: greedy), the EOS id that ends it early (excluded from
    the ids), and ``delay_s``: admitted no earlier than this many seconds after the call starts."""

    prompt_ids: Sequence[int]
    max_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    eos_id: int | None = None
    delay_s: float = 0.0


@dataclass
class GenResult:
    """Outcome of one :class:`GenRequest`: generated ``ids``, ``token_times`` (``time.perf_counter()`` when
    each id arrived) and ``timings`` (:class:`RunResult`'s keys plus ``queue_s``: submitted -> admitted)."""

    ids: list[int]
    token_times: list[float]
    timings: dict[str, float]


class GenHandle:
    """A submitted sequence (:meth:`Pipeline.submit`): :meth:`result` waits for it, :meth:`cancel` ends it
    after its current step (its slot is then free for the next queued request). Thread-safe."""

    def __init__(self, req: GenRequest, admit_at: float, submitted: float,
                 on_token: Callable[[int], None] | None, should_stop: Callable[[], bool] | None):
        self.req = req
        self.admit_at = admit_at
        self.submitted = submitted
        self.on_token = on_token
        self.should_stop = should_stop
        self.cancelled = False
        self.seq_id = 0
        self.slot = -1
        self.ids: list[int] = []
        self.token_times: list[float] = []
        self._k = 0  # prompt rows sent so far
        self._tok = self._pos = 0  # the next decode step: its token and position
        self._t_admit = self._t_first = 0.0
        self._done = threading.Event()
        self._error: BaseException | None = None

    def cancel(self) -> None:
        """End the sequence after its current step (dropped if not admitted yet). Safe from any thread."""
        self.cancelled = True

    @property
    def done(self) -> bool:
        """Whether the sequence ended (finished, cancelled or failed)."""
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> GenResult:
        """Wait for the end; the :class:`GenResult` (ids so far for a cancelled one).

        Raises the failure that stopped the pipeline (StageFault, ...), or TimeoutError after ``timeout`` s."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"sequence {self.seq_id} still running after {timeout} s")
        if self._error is not None:
            raise self._error
        n = len(self.req.prompt_ids)
        first = self._t_first or self._t_admit
        last = self.token_times[-1] if self.token_times else first
        prefill, decode = first - self._t_admit, last - first
        steps = max(len(self.ids) - 1, 0)
        timings = {"queue_s": self._t_admit - self.submitted if self._t_admit else 0.0,
                   "prefill_s": prefill, "decode_s": decode,
                   "prefill_tok_s": n / prefill if prefill > 0 else 0.0,
                   "decode_tok_s": steps / decode if decode > 0 and steps else 0.0,
                   "n_prompt": n, "n_generated": len(self.ids)}
        return GenResult(list(self.ids), list(self.token_times), timings)

    # loop thread only
    def _admit(self, seq_id: int, slot: int, now: float) -> None:
        self.seq_id, self.slot, self._t_admit = seq_id, slot, now

    @property
    def prefilling(self) -> bool:
        """Whether prompt rows are left to send (the next frame is a prompt chunk)."""
        return self._k < len(self.req.prompt_ids)

    def _decode_frame(self) -> Frame:
        return Frame(DATA, self.seq_id, self._pos, np.array([self._tok], dtype=np.int32), None, self.slot)

    def _next_chunk(self, rows: int) -> Frame:
        ids = self.req.prompt_ids
        n = len(ids)
        chunk = rows or n
        k = self._k
        self._k = min(n, k + chunk)
        return Frame(DATA, self.seq_id, k, np.asarray(ids[k:k + chunk], dtype=np.int32), None, self.slot)

    def _on_step(self, tok: int, pos: int, now: float) -> bool:
        """A token came back (``pos``: the sequence's next position): True when the sequence has a next step
        (a prompt chunk, or the decode of ``tok`` at ``pos``), False when it ends."""
        if self.cancelled:
            return False
        if self._k < len(self.req.prompt_ids):  # more prompt chunks: this sample is discarded
            return True
        if not self._t_first:
            self._t_first = now
        r = self.req
        if r.eos_id is not None and tok == r.eos_id:
            return False
        self.ids.append(tok)
        self.token_times.append(now)
        if self.on_token is not None:
            self.on_token(tok)
        if len(self.ids) >= r.max_tokens:
            return False
        if self.should_stop is not None and self.should_stop():
            return False
        self._tok, self._pos = tok, pos
        return True

    def _finish(self) -> None:
        self._done.set()

    def _fail(self, e: BaseException) -> None:
        if not self._done.is_set():
            self._error = e
            self._done.set()


def generate_many(model_path: str | os.PathLike, provisions: Sequence[ProvisionStage], prompts: Sequence[str], *,
                  max_tokens: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                  seed: int | None = None, backend: str | Backend = "local",
                  fault_injection: FaultInjection | None = None, on_event: Callable[[Event], None] | None = None,
                  kernels: str | None = None, cache_dir: str | os.PathLike | None = None,
                  num_threads: int | None = None, programs: Mapping[int, StageProgram] | None = None,
                  on_token: Callable[[int, str], None] | None = None, parallel: int = 1,
                  micro_batches: int | None = None) -> list[RunResult]:
    """Run several prompts through ONE started pipeline (see :func:`generate`): one after another, or with
    ``parallel > 1`` up to that many at once (:meth:`Pipeline.generate_concurrent`; results in prompt order;
    ``micro_batches``: see :class:`Pipeline`).

    Every result carries the same run events; ``timings["load_s"]`` is the one start cost. ``on_token``
    streams every sequence's tokens in turn (see :func:`generate`); it needs sequences one after another
    (RunRequestError with ``parallel > 1`` and several prompts)."""
    from pipeplan.runtime.sampling import Sampler
    from pipeplan.runtime.token_stream import PieceDecoder
    from pipeplan.runtime.tokenizer import SPMTokenizer

    Sampler(temperature, top_k, top_p, seed)  # SamplingError before any stage starts
    concurrent = parallel > 1 and len(prompts) > 1
    if concurrent and on_token is not None:
        raise RunRequestError("on_token streams one sequence at a time: several prompts with parallel > 1 cannot "
                              "be streamed", where="on_token")
    tok = SPMTokenizer.from_gguf(model_path)
    encoded = [tok.encode(p, add_bos=True) for p in prompts]
    limit = min((p.max_seq_len for p in provisions), default=0)
    for ids in encoded:
        if max_tokens < 1 or len(ids) + max_tokens - 1 > limit:
            raise RunRequestError(f"prompt of {len(ids)} tokens + {max_tokens} generated does not fit the plan's "
                                  f"max_seq_len {limit} (max_tokens must be >= 1)", where="max_tokens")
    results: list[RunResult] = []
    with Pipeline(provisions, backend=backend, fault_injection=fault_injection, on_event=on_event,
                  kernels=kernels, cache_dir=cache_dir, num_threads=num_threads, programs=programs,
                  parallel=parallel, micro_batches=micro_batches, model=model_path) as pipe:
        if concurrent:
            done = pipe.generate_concurrent([GenRequest(ids, max_tokens, temperature, top_k, top_p, seed, tok.eos_id)
                                             for ids in encoded])
            for ids, g in zip(encoded, done, strict=True):
                results.append(RunResult(g.ids, list(ids), tok.decode(g.ids), [], {"load_s": pipe.load_s, **g.timings}))
        for ids in encoded if not concurrent else ():
            out, timings = pipe.generate_ids(ids, max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                             seed=seed, eos_id=tok.eos_id,
                                             on_token=None if on_token is None else PieceDecoder(tok, on_token))
            results.append(RunResult(out, list(ids), tok.decode(out), [], timings))
    for r in results:
        r.events = pipe.events
    return results


def generate(model_path: str | os.PathLike, provisions: Sequence[ProvisionStage], prompt: str, *,
             max_tokens: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             seed: int | None = None, backend: str | Backend = "local",
             fault_injection: FaultInjection | None = None, on_event: Callable[[Event], None] | None = None,
             kernels: str | None = None, cache_dir: str | os.PathLike | None = None,
             num_threads: int | None = None, programs: Mapping[int, StageProgram] | None = None,
             on_token: Callable[[int, str], None] | None = None, parallel: int = 1,
             micro_batches: int | None = None) -> RunResult:
    """Generate a continuation of ``prompt`` through the pipeline the provisions describe.

    Args:
        model_path: a local GGUF (or its first shard) whose vocabulary tokenizes the prompt.
        provisions: the stages' ProvisionStage values (from ``runplan_build.project_provisions``).
        prompt: text; encoded with BOS (llama.cpp SPM rules).
        max_tokens: most tokens to generate (stops early at the vocabulary's EOS).
        temperature / top_k / top_p / seed: sampling (temperature 0: greedy), applied by the last stage.
        backend: ``"local"`` (default), ``"inproc"``, ``"ray"``, or a Backend instance.
        programs: compiled stage programs (stage -> StageProgram) the stages bind; None: the plan the
            provisions state is compiled (``model_path`` gives its model facts; :meth:`Pipeline.compile`).
        fault_injection: optional :class:`~pipeplan.runtime.stage.FaultInjection`.
        on_event: called with every lifecycle event in order.
        on_token: called as ``on_token(token_id, text_piece)`` with each generated token as soon as the
            last stage returns it (EOS excluded): ``text_piece`` is the text it completes, decoded across
            multi-byte UTF-8 splits (:class:`~pipeplan.runtime.token_stream.PieceDecoder`).
        parallel: KV-cache slots the stages hold (:class:`Pipeline`); the one sequence uses one.
        micro_batches: see :class:`Pipeline`.
    Returns: :class:`RunResult`.
    Raises: StageFault (a stage failed; everything stopped), RunRequestError, TokenizerError,
        SamplingError (bad sampling parameters are checked before any stage starts); without ``programs`` the
        compile's RunPlanRejection / PackageError (:meth:`Pipeline.compile`).
    """
    return generate_many(model_path, provisions, [prompt], max_tokens=max_tokens, temperature=temperature,
                         top_k=top_k, top_p=top_p, seed=seed, backend=backend, fault_injection=fault_injection,
                         on_event=on_event, kernels=kernels, cache_dir=cache_dir, num_threads=num_threads,
                         programs=programs, on_token=on_token, parallel=parallel, micro_batches=micro_batches)[0]
