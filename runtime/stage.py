"""The stage worker: weight lifecycle (seed 001) and the serve loop.

:class:`StageWorker` runs the lifecycle of one stage from its :class:`ProvisionStage` and reports
it through ``emit``:

1. resolve the weight source to local files (download / shards / cache)    -> fault ``download``
2. parse: read the GGUF header (``read_model_facts``) and check that every
   TensorSlice of the provision matches the file's tensor index (name, ggml
   type, shape, shard, offset, size)                                         -> fault ``parse``
3. validate the assigned layer range against the plan: ``0 <= start < end <=
   block_count``, the file's block count equals the plan's, the embedding/head
   flags match the stage position, and the provision's tensors are exactly
   the range's                                                                -> fault ``invalid_range``
4. load only the stage's own byte ranges (mmap + dequantize)               -> fault ``parse``/``download``
5. allocate (KV cache, rope table) and 6. bind the compiled stage program given to the worker
   (``program=``: what the compiler produced, e.g. a replay package's stage program from
   :func:`pipeplan.runtime.compiled.load_compiled_stages`; a worker never builds one of its own: none
   given is a ``bind`` fault); check every weight it reads                   -> fault ``allocation``/``bind``
7. emit :class:`WeightsReady` (WL-R-1..3), 8. connect the inbound and outbound
   edges through the transport by ``(node_id, edge_id)``, 9. emit :class:`StageReady`.

Any failure emits one :class:`StageFaulted` (carrying ``StageFault(kind, stage, detail)``) and the
stage never emits ``StageReady`` (WL-F-1..6). :meth:`StageWorker.serve` then loops on the inbound
edge: DATA frames run the executor (the last stage samples a token id and sends it on token-out; a
micro-batched frame, ``Frame.segments``, runs the rows of several sequences and returns one id per segment),
RESET starts a new sequence in the frame's KV-cache slot (clears that slot's cache, new sampler), SHUTDOWN ends the loop (both are
forwarded downstream). A failure while serving is a ``runtime`` fault.

Kernels: the torch reference table by default, or any module with a ``KERNELS`` table (e.g.
``"pipeplan.runtime.kernels.cpu"``, numpy buffers and no torch, or ``"pipeplan.runtime.kernels.triton"``
for ``--target cuda``). When the table module has them, its
``load_stage_weights(files, tensors)`` hook loads the weights (e.g. kept in GGUF format on the GPU)
and its ``allocate(shape)`` hook allocates the KV cache; its ``device()`` says where activations
live: inputs are moved there and results moved back to the CPU at the edges (frames carry numpy).

``--target cuda``: a :class:`~pipeplan.runtime.tmachine_run.TMachineStageProgram` given as ``program=`` is
bound instead (:meth:`StageWorker._bind_tmachine`): one tmachine interpreter per KV-cache slot runs the
lowered program's streams of this stage's node; the last stage samples the logits its argmax launch read.

Fault injection is explicit: a :class:`FaultInjection` given to the worker is consulted at the
step of its kind and makes that step fail through the step's own error path (no monkeypatching).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from pipeplan.errors import STAGE_FAULT_KINDS, GGUFError, PipeplanError, StageFault
from pipeplan.plan_types import ModelFacts, ProvisionStage
from pipeplan.runtime.events import Event, StageFaulted, StageReady, WeightsReady
from pipeplan.runtime.tmachine_run import TMachineStage, TMachineStageProgram
from pipeplan.runtime.trace import JsonlTrace
from pipeplan.runtime.transport import (
    DATA,
    RESET,
    SHUTDOWN,
    Frame,
    RecvEndpoint,
    Segment,
    SendEndpoint,
    Transport,
)

if TYPE_CHECKING:
    from pipeplan.runtime.sampling import Sampler

POLL_S = 0.05
"""Seconds a blocked worker waits on an edge before re-checking its stop flag."""

INJECT_ENV = "PIPEPLAN_INJECT_FAULT"


class FaultInjectionError(PipeplanError):
    """A malformed fault-injection spec (code ``bad_fault_injection``)."""

    code = "bad_fault_injection"


_DECIMAL = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class FaultInjection:
    """Make stage ``stage`` fail at the step of ``kind`` (a StageFault kind).

    ``after`` (runtime only): number of DATA frames served before the failure. The step fails
    through its own path: ``download`` -> the weight source resolves to nothing; ``parse`` -> the
    header check sees a corrupt index; ``invalid_range`` -> the range is checked as
    ``[start, block_count + 1)``; ``allocation`` -> the KV-cache allocator raises; ``bind`` -> the
    first weight the program reads is withheld from the executor; ``runtime`` -> the serve loop
    raises after ``after`` frames.
    """

    stage: int
    kind: str
    after: int = 0

    def __post_init__(self):
        if self.kind not in STAGE_FAULT_KINDS:
            raise FaultInjectionError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(STAGE_FAULT_KINDS)}",
                                      where="kind")
        if self.stage < 0 or self.after < 0:
            raise FaultInjectionError(f"fault injection stage/after must be >= 0, got {self.stage}/{self.after}")

    @classmethod
    def parse(cls, text: str) -> FaultInjection:
        """Parse ``"STAGE:KIND"`` or ``"STAGE:runtime:AFTER"`` (e.g. ``"1:bind"``).

        STAGE and AFTER are ASCII decimal numbers of at most 9 digits (``str.isdigit`` would also accept
        other scripts' digits and superscripts). Raises FaultInjectionError naming the bad part."""
        parts = text.strip().split(":")
        if (len(parts) not in (2, 3) or not _DECIMAL.fullmatch(parts[0])
                or (len(parts) == 3 and not _DECIMAL.fullmatch(parts[2]))):
            raise FaultInjectionError(f"fault injection {text!r} is not STAGE:KIND or STAGE:KIND:AFTER "
                                      f"(STAGE, AFTER: decimal numbers 0-9)", where=text)
        return cls(int(parts[0]), parts[1], int(parts[2]) if len(parts) == 3 else 0)

    @classmethod
    def from_env(cls, environ: dict | None = None) -> FaultInjection | None:
        """The injection named by ``$PIPEPLAN_INJECT_FAULT``, or None when it is unset/empty."""
        v = (os.environ if environ is None else environ).get(INJECT_ENV, "").strip()
        return cls.parse(v) if v else None

    def hits(self, stage: int, kind: str) -> bool:
        """Whether this injection targets ``kind`` on ``stage``."""
        return self.stage == stage and self.kind == kind


@dataclass(frozen=True)
class StageProgram:
    """A compiled stage program: what the runtime binds instead of building its own.

    Attributes:
        steps: step name (``"prefill"``, ``"decode"``) -> the ordered KernelCall list of that step
            (the calling convention of :mod:`pipeplan.runtime.program`); every step shares the
            stage's weights and KV cache.
        rows: step name -> most rows (tokens) one instance of the step takes (0: no limit).
        source: where it came from (e.g. ``"sha256:<machine digest> stage 1"``), for diagnostics.

    Step choice per frame of ``T`` rows: ``decode`` when ``T == 1`` and the program has it, else
    ``prefill`` (else the only step). A frame with more rows than its step's ``rows`` is a runtime
    fault: the orchestrator chunks prompts by :attr:`prefill_rows` so this does not happen.
    """

    steps: Mapping[str, tuple[Any, ...]]
    rows: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    trace: str = ""
    """Directory of the instruction trace (:mod:`pipeplan.runtime.trace`; ``""``: none)."""

    @classmethod
    def of(cls, program: Any) -> StageProgram:
        """Normalize ``program``: a StageProgram, a ``{step: calls}`` mapping, or one call list (one
        ``"any"`` step used for every frame)."""
        if isinstance(program, StageProgram):
            return program
        if isinstance(program, Mapping):
            return cls({str(k): tuple(v) for k, v in program.items()})
        return cls({"any": tuple(program)})

    @property
    def prefill_rows(self) -> int:
        """Most rows of a prompt frame (the ``prefill`` step's rows; 0: no limit)."""
        return int(self.rows.get("prefill", self.rows.get("any", 0)) or 0)

    def step_for(self, rows: int) -> str:
        """The step that runs a frame of ``rows`` tokens (see the class docstring)."""
        if rows == 1 and "decode" in self.steps:
            return "decode"
        if "prefill" in self.steps:
            return "prefill"
        return next(iter(self.steps))


def _kernel_table(kernels: str | ModuleType | None) -> Any:
    if kernels is None:
        from pipeplan.runtime.kernels import reference

        return reference
    if isinstance(kernels, str):
        return importlib.import_module(kernels)
    return kernels


class StageWorker:
    """One pipeline stage (see the module docstring for the lifecycle).

    Args:
        provision: the stage's ProvisionStage (its only source of range, weights and edges: WL-A-1/2).
        emit: called with each lifecycle event, in order (thread/process-safe sink of the caller).
        fault_injection: optional :class:`FaultInjection` (ignored unless it targets this stage).
        kernels: kernel module (or its dotted name) for the executor; default the torch reference.
        cache_dir: weight cache directory (default ``$PIPEPLAN_CACHE`` / ``~/.cache/pipeplan``).
        num_threads: threads of the kernel table in this worker's process (its ``set_num_threads``, else
            ``torch.set_num_threads``; None: leave as is).
        on_request: called with each URL the worker downloads (tests count requests).
        program: the compiled stage program to bind (:class:`StageProgram`, ``{step: calls}``, one
            ``Sequence[KernelCall]``, or a :class:`~pipeplan.runtime.tmachine_run.TMachineStageProgram`). It must
            cover exactly the provision's blocks (else a ``bind`` fault naming the blocks); None is a ``bind``
            fault naming the stage (the runtime never builds a program: the orchestrator compiles the plan).
        parallel: KV-cache slots (concurrent sequences): each slot has its own caches and ``n_past``, and
            on the last stage its own sampler. A frame names its slot (``Frame.slot``); a RESET resets only
            that slot. A slot outside ``[0, parallel)`` is a ``runtime`` fault.
    """

    def __init__(self, provision: ProvisionStage, emit: Callable[[Event], None], *,
                 fault_injection: FaultInjection | None = None, kernels: str | ModuleType | None = None,
                 cache_dir: str | os.PathLike | None = None, num_threads: int | None = None,
                 on_request: Callable[[str], None] | None = None,
                 program: (StageProgram | TMachineStageProgram | Mapping[str, Sequence[Any]] | Sequence[Any]
                           | None) = None,
                 parallel: int = 1):
        self.p = provision
        self.parallel = max(1, int(parallel))
        self.program: StageProgram | TMachineStageProgram | None = (
            program if program is None or isinstance(program, TMachineStageProgram) else StageProgram.of(program))
        self.emit = emit
        self.fi = fault_injection if (fault_injection and fault_injection.stage == provision.stage) else None
        self.kernels = kernels
        self.cache_dir = cache_dir
        self.num_threads = num_threads
        self.on_request = on_request
        self.files: list[Path] = []
        self.facts: ModelFacts | None = None
        self.executor = None
        self.executors: dict[str, Any] = {}
        self._device = None
        self._numpy = False
        self.mapped_bytes = 0
        self.tensor_bytes = 0
        self.bound: StageProgram | None = None
        self.tmachine: TMachineStage | None = None
        """The bound tmachine interpreters (``--target cuda``: a :class:`TMachineStageProgram` was given)."""
        self._n_past = [0] * self.parallel
        self.faulted = False
        self.ready = False
        self.served = 0
        self._rx: RecvEndpoint | None = None
        self._tx: SendEndpoint | None = None
        self._samplers: list[Sampler | None] = [None] * self.parallel
        self.segments_served: dict[int, int] = {}
        """Micro-batched DATA frames served, by their number of segments (sequences)."""
        self._trace: JsonlTrace | None = None
        self._runs: list[tuple[str, int, list[tuple[int, float, float]]]] = []
        self._sampled: list[float] = []
        self._frames: list[tuple[Any, float, list[float], tuple[float, float]]] = []
        self._kept = 0

    # ------------------------------------------------------------------ lifecycle
    def _inject(self, kind: str) -> bool:
        return self.fi is not None and self.fi.hits(self.p.stage, kind)

    def _fault(self, kind: str, detail: str) -> StageFault:
        f = StageFault(kind, self.p.stage, " ".join(str(detail).split()))
        if not self.faulted:
            self.faulted = True
            self.emit(StageFaulted.of(f, self.p.node_id))
        return f

    def load(self) -> WeightsReady:
        """Steps 1-7: resolve, parse, validate, load, allocate, bind, emit WeightsReady.

        Returns the emitted event. Raises the StageFault it emitted on failure.
        """
        t0 = time.monotonic()
        try:
            self._resolve()
            self._parse()
            self._validate_range()
            weights = self._load()
            self._bind(weights)
        except StageFault as f:
            raise self._fault(f.kind, f.detail) from None
        except Exception as e:  # an unexpected failure is still a typed fault, never a bare traceback
            raise self._fault("runtime", f"unexpected {type(e).__name__} during load: {e}") from None
        ev = WeightsReady(self.p.stage, self.p.node_id, self.mapped_bytes, time.monotonic() - t0)
        self.emit(ev)
        return ev

    def _resolve(self) -> None:
        from pipeplan.runtime.weights_source import resolve_weight_source

        src = self.p.weights
        if self._inject("download"):
            raise StageFault("download", self.p.stage, "injected download failure: weight source "
                             f"{', '.join(src.uris)} could not be fetched")
        self.files = resolve_weight_source(src, stage=self.p.stage, cache_dir=self.cache_dir,
                                           on_request=self.on_request)

    def _parse(self) -> None:
        from pipeplan.frontend.gguf_facts import read_model_facts

        s = self.p.stage
        try:
            if self._inject("parse"):
                raise GGUFError(f"{self.files[0]}: injected parse failure: tensor index unreadable")
            facts = read_model_facts(self.files[0])
        except GGUFError as e:
            raise StageFault("parse", s, f"cannot parse weights: {e.one_line()}") from None
        if len(facts.files) != len(self.files):
            raise StageFault("parse", s, f"the weight source has {len(self.files)} shard(s) but the GGUF header "
                                         f"says {len(facts.files)}")
        for t in self.p.tensors:
            ft = facts.tensor(t.name)
            if ft is None:
                raise StageFault("parse", s, f"tensor {t.name} of the provision is not in the file's tensor index")
            got = (ft.ggml_type, tuple(ft.shape), ft.shard, ft.offset, ft.n_bytes)
            want = (t.ggml_type, tuple(t.shape), t.shard, t.offset, t.n_bytes)
            if got != want:
                raise StageFault("parse", s, f"tensor {t.name}: file has (type, shape, shard, offset, bytes) = {got}, "
                                             f"the provision says {want}")
        self.facts = facts

    def _validate_range(self) -> None:
        p, facts = self.p, self.facts
        assert facts is not None
        start, end = p.layer_start, p.layer_end
        if self._inject("invalid_range"):
            end = p.block_count + 1
        where = f"stage {p.stage}: layer range [{start}, {end})"
        if not (0 <= start < end <= p.block_count):
            raise StageFault("invalid_range", p.stage, f"{where} is not a non-empty range inside the plan's "
                                                       f"[0, {p.block_count})")
        if facts.block_count != p.block_count:
            raise StageFault("invalid_range", p.stage, f"{where}: the plan says {p.block_count} blocks but the file "
                                                       f"has {facts.block_count}")
        if not (0 <= p.stage < p.stage_count) or p.has_embedding != (p.stage == 0) or \
                p.has_head != (p.stage == p.stage_count - 1):
            raise StageFault("invalid_range", p.stage, f"{where}: stage {p.stage} of {p.stage_count} with "
                                                       f"has_embedding={p.has_embedding}, has_head={p.has_head}")
        want = {t.name for t in facts.tensors_for_stage(start, end, p.has_embedding, p.has_head)}
        got = [t.name for t in p.tensors]
        if len(got) != len(set(got)) or set(got) != want:
            extra, missing = sorted(set(got) - want), sorted(want - set(got))
            raise StageFault("invalid_range", p.stage, f"{where}: provision tensors are not exactly the range's "
                                                       f"(outside the range: {extra[:4]}, missing: {missing[:4]})")

    def _load(self):
        from pipeplan.runtime.loader import LoaderError, load_stage_weights

        table = _kernel_table(self.kernels)
        loader = getattr(table, "load_stage_weights", None) or load_stage_weights
        try:
            w = loader(self.files, self.p.tensors)
        except LoaderError as e:
            raise StageFault(e.kind if e.kind in STAGE_FAULT_KINDS else "parse", self.p.stage,
                             f"cannot load weights: {e.detail}") from None
        except PipeplanError as e:  # DequantError and friends: bytes that do not decode
            kind = getattr(e, "kind", "parse") or "parse"
            raise StageFault(kind if kind in STAGE_FAULT_KINDS else "parse", self.p.stage,
                             f"cannot load weights: {e.one_line()}") from None
        self.mapped_bytes, self.tensor_bytes = w.mapped_bytes, w.tensor_bytes
        return w

    def _bind_tmachine(self, program: TMachineStageProgram, weights) -> None:
        """Bind the lowered tmachine program (:class:`~pipeplan.runtime.tmachine_run.TMachineStage`: one
        interpreter per KV-cache slot over the streams of this stage's node). A program that does not bind
        (the interpreter's ``tmachine:<reason>``) is a ``bind`` fault; the injected ``allocation`` fault fails
        before the buffers are allocated, the injected ``bind`` fault withholds the stage's first weight."""
        from pipeplan.runtime.program import HParams

        p = self.p
        assert self.facts is not None
        table = _kernel_table(self.kernels)
        dev = getattr(table, "device", None)
        self._device = dev() if callable(dev) else None
        self._numpy = False
        tensors: Any = weights
        try:
            if self._inject("allocation"):
                raise StageFault("allocation", p.stage, "injected allocation failure for the tmachine program's "
                                                        "KV and transient buffers")
            if self._inject("bind"):
                withheld = next(t.name for t in p.tensors)
                tensors = {k: v for k, v in weights.items() if k != withheld}
            hp = HParams.from_facts(self.facts)
            self.tmachine = TMachineStage(program, tensors, stage=p.stage, slots=self.parallel,
                                          rope_bases={"rope_table": hp.rope_base, "rope_table_swa": hp.rope_base_swa},
                                          has_embedding=p.has_embedding, has_head=p.has_head)
        except StageFault:
            raise
        except PipeplanError as e:
            kind = getattr(e, "kind", "bind")
            raise StageFault(kind if kind in STAGE_FAULT_KINDS else "bind", p.stage, e.one_line()) from None
        self.executor = self.tmachine
        self._n_past = [0] * self.parallel

    def _programs(self) -> StageProgram:
        """The program to bind: the compiled one, checked to cover exactly this stage's blocks and
        head/embedding role. Raises StageFault(bind) when none was given or it covers other blocks."""
        p = self.p
        if not isinstance(self.program, StageProgram):
            raise StageFault("bind", p.stage, f"stage {p.stage} was given no compiled stage program (the runtime "
                                              f"binds only the plan's compiled machine program: Pipeline compiles "
                                              f"it, or pass programs=)")
        want = set(range(p.layer_start, p.layer_end))
        for name, calls in self.program.steps.items():
            got = {c.block for c in calls if c.block is not None}
            first = any(c.kernel == "embedding_gather" for c in calls)
            last = any(c.kernel == "last_row" for c in calls)
            if got != want or first != p.has_embedding or last != p.has_head:
                raise StageFault("bind", p.stage, f"compiled program {self.program.source or ''} step '{name}' "
                                                  f"covers blocks {sorted(got)} (embedding={first}, head={last}) "
                                                  f"but the provision assigns [{p.layer_start}, {p.layer_end}) "
                                                  f"(embedding={p.has_embedding}, head={p.has_head})")
        return self.program

    def _bind(self, weights) -> None:
        from pipeplan.runtime.program import (
            AllocationError,
            BindError,
            HParams,
            ProgramError,
            StageExecutor,
            is_cache,
        )

        p = self.p
        assert self.facts is not None
        if isinstance(self.program, TMachineStageProgram):
            return self._bind_tmachine(self.program, weights)
        table = _kernel_table(self.kernels)
        hook = getattr(table, "allocate", None)
        dev = getattr(table, "device", None)
        self._device = dev() if callable(dev) else None
        self._numpy = getattr(table, "ARRAYS", "torch") == "numpy"
        if hook is None:
            import torch

            def hook(shape):
                return torch.zeros(shape, dtype=torch.float32)
        shared: dict[tuple[int, str], Any] = {}
        names: list[tuple[int, str]] = []

        def allocate(shape):
            """KV-cache tensors by (slot, cache name), shared by the step executors (an executor allocates
            its caches slot by slot, in the order its program first reads them: ``names``)."""
            if self._inject("allocation"):  # the allocator fails like an out-of-memory device would
                raise RuntimeError(f"injected allocation failure for KV cache {shape}")
            name = names.pop(0)
            if name not in shared:
                shared[name] = hook(shape)
            return shared[name]

        tensors: Any = weights
        try:
            hp = HParams.from_facts(self.facts)  # the executor's hyper-parameters
            prog = self._programs()
            if self._inject("bind"):
                first = next(iter(prog.steps.values()))
                withheld = next(n for c in first for n in c.inputs if n.endswith(".weight"))
                tensors = {k: v for k, v in weights.items() if k != withheld}
            self.executors = {}
            for name, calls in prog.steps.items():
                order = list(dict.fromkeys(x for c in calls for x in c.inputs if is_cache(x)))
                names[:] = [(k, x) for k in range(self.parallel) for x in order]
                self.executors[name] = StageExecutor(hp, list(calls), tensors, p.max_seq_len, table,
                                                     num_threads=self.num_threads, allocate=allocate,
                                                     slots=self.parallel)
            self.bound = prog
            self.executor = next(iter(self.executors.values()))
            if prog.trace:
                self._trace = JsonlTrace(Path(prog.trace) / f"stage{p.stage}.jsonl", p.stage, 0)
                for ex in self.executors.values():
                    ex.trace = []
        except StageFault:
            raise
        except AllocationError as e:
            raise StageFault("allocation", p.stage, e.message) from None
        except BindError as e:
            raise StageFault("bind", p.stage, e.message) from None
        except ProgramError as e:
            raise StageFault(e.kind, p.stage, e.message) from None
        except PipeplanError as e:
            raise StageFault("bind", p.stage, e.one_line()) from None
        self._n_past = [0] * self.parallel

    def connect(self, transport: Transport) -> StageReady:
        """Step 8-9: open the inbound edge on this node and the outbound edge to its consumer node, then
        emit StageReady. Requires a successful :meth:`load`. A transport error faults the stage (bind)."""
        if self.executor is None or self.faulted:
            raise self._fault("bind", "connect() before a successful load()")
        try:
            self._rx = transport.open_recv(self.p.node_id, self.p.inbound.edge_id)
            self._tx = transport.open_send(self.p.outbound.peer_node_id, self.p.outbound.edge_id)
        except PipeplanError as e:
            raise self._fault("bind", f"cannot connect edges: {e.one_line()}") from None
        ev = StageReady(self.p.stage, self.p.node_id)
        self.ready = True
        self.emit(ev)
        return ev

    # ------------------------------------------------------------------ serving
    def _send(self, frame: Frame, stop: threading.Event | Any | None) -> bool:
        assert self._tx is not None
        while not self._tx.send(frame, timeout=POLL_S):
            if stop is not None and stop.is_set():
                return False
        return True

    def _step(self, frame: Frame) -> Frame:
        p = self.p
        bound, fi = self.bound, self.fi
        assert frame.array is not None and (self.executors and bound is not None or self.tmachine is not None)
        if fi is not None and self._inject("runtime") and self.served >= fi.after:
            raise RuntimeError(f"injected runtime failure after {self.served} frames")
        if self._numpy:  # numpy table (the CPU target): no torch in this process
            x: Any = frame.array
            if p.has_embedding and x.dtype != np.int64:
                x = x.astype(np.int64)
        else:
            import torch  # (stage.py imports no torch at module level: the orchestrator process needs none)

            x = torch.from_numpy(frame.array)
            if p.has_embedding:
                x = x.long()
            if self._device is not None and x.device != self._device:
                x = x.to(self._device)
        if self.tmachine is not None:
            return self._step_tmachine(frame, x)
        assert bound is not None
        if frame.segments is not None:
            return self._step_segments(frame, x)
        slot = frame.slot
        if not 0 <= slot < self.parallel:
            raise RuntimeError(f"frame of sequence {frame.seq_id} names KV-cache slot {slot}; this stage has "
                               f"{self.parallel} (parallel)")
        rows = int(x.shape[0])
        step = bound.step_for(rows)
        limit = int(bound.rows.get(step, 0) or 0)
        if limit and rows > limit:
            raise RuntimeError(f"a frame of {rows} rows exceeds the compiled '{step}' step's {limit} rows")
        ex = self.executors[step]
        ex.n_pasts[slot] = self._n_past[slot]  # the steps share the KV cache: [0, n_past) are written
        out = ex.forward(x, frame.position, last_only=p.has_head, slot=slot)
        if self._trace is not None:
            self._take_runs(step, slot, ex)
        self._n_past[slot] = ex.n_pasts[slot]
        self.served += 1
        if not self._numpy and out.device.type != "cpu":  # edges carry host memory
            out = out.cpu()
        if p.has_head:
            tok = self._sample(slot, out[-1])
            return Frame(DATA, frame.seq_id, frame.position + rows, np.array([tok], dtype=np.int32), None, slot)
        return Frame(DATA, frame.seq_id, frame.position, out if self._numpy else out.numpy(), None, slot)

    def _step_tmachine(self, frame: Frame, x: Any) -> Frame:
        """A DATA frame through the tmachine interpreters: each sequence (the frame, or each segment of a
        micro-batched frame) runs in its slot's interpreter at its position; the last stage samples the
        logits of each sequence's last row with the slot's sampler, the others send the rows on."""
        import torch

        p, tm = self.p, self.tmachine
        assert tm is not None
        segs = frame.segments
        spans = ([(int(sg.slot), int(sg.position), int(sg.n_rows)) for sg in segs] if segs is not None
                 else [(int(frame.slot), int(frame.position), int(x.shape[0]))])
        if sum(n for _, _, n in spans) != int(x.shape[0]) or any(n < 1 for _, _, n in spans):
            raise RuntimeError(f"segment rows {[n for _, _, n in spans]} do not add up to the frame's "
                               f"{int(x.shape[0])} rows")
        outs, r = [], 0
        for slot, pos, n in spans:
            if not 0 <= slot < self.parallel:
                raise RuntimeError(f"frame of sequence {frame.seq_id} names KV-cache slot {slot}; this stage has "
                                   f"{self.parallel} (parallel)")
            if pos < 0 or pos + n > p.max_seq_len:
                raise RuntimeError(f"frame of sequence {frame.seq_id}: positions [{pos}, {pos + n}) exceed the "
                                   f"plan's max_seq_len {p.max_seq_len}")
            outs.append(tm.forward(x[r:r + n], pos, slot).cpu())
            r += n
            self._n_past[slot] = pos + n
        self.served += 1
        if segs is not None:
            self.segments_served[len(segs)] = self.segments_served.get(len(segs), 0) + 1
        if p.has_head:
            toks = [self._sample(slot, o) for (slot, _, _), o in zip(spans, outs, strict=True)]
            if segs is None:
                return Frame(DATA, frame.seq_id, frame.position + spans[0][2], np.array(toks, dtype=np.int32), None,
                             frame.slot)
            nxt = tuple(Segment(sg.seq_id, sg.slot, sg.position + sg.n_rows, 1) for sg in segs)
            return Frame(DATA, frame.seq_id, nxt[0].position, np.asarray(toks, dtype=np.int32), None, frame.slot, nxt)
        arr = np.ascontiguousarray(torch.cat(outs).numpy())
        return Frame(DATA, frame.seq_id, frame.position, arr, None, frame.slot, segs)

    def _sample(self, slot: int, logits: Any) -> int:
        sampler = self._samplers[slot]
        if sampler is None:
            from pipeplan.runtime.sampling import Sampler

            sampler = self._samplers[slot] = Sampler()
        if self._trace is None:
            return sampler.sample(logits)
        t0 = time.perf_counter()
        tok = sampler.sample(logits)
        self._sampled += [t0, time.perf_counter()]
        return tok

    def _take_runs(self, step: str, slot: int, ex: Any) -> None:
        """Keep the executor's call log of this frame (split into step runs by :meth:`_flush_trace`)."""
        self._runs.append((step, slot, ex.trace))
        self._kept += len(ex.trace)
        ex.trace = []

    def _keep_frame(self, t_recv: float, t_send: tuple[float, float]) -> None:
        """Keep one DATA frame's raw times (its step runs, arrival, sampling, send) for :meth:`_flush_trace`."""
        self._frames.append((self._runs, t_recv, self._sampled, t_send))
        self._runs, self._sampled = [], []
        assert self._trace is not None
        if self._kept >= self._trace.limit:
            self._flush_trace()

    def _flush_trace(self) -> None:
        """The records of the kept frames (:mod:`pipeplan.runtime.trace`): per step run, the inbound object (the
        frame's first run), the kernel calls, the sampled token and the outbound object (its last run)."""
        tr = self._trace
        assert tr is not None
        for logs, t_recv, sampled, t_send in self._frames:
            runs: list[tuple[str, int, list[tuple[int, float, float]]]] = []
            for step, slot, log in logs:  # a new run where the call index does not grow
                for rec in log:
                    if not runs or runs[-1][0] != step or runs[-1][1] != slot or rec[0] <= runs[-1][2][-1][0]:
                        runs.append((step, slot, []))
                    runs[-1][2].append(rec)
            for k, (step, slot, calls) in enumerate(runs):
                tr.slot = slot
                prog = self.executors[step].run_program
                index = 0
                if k == 0:
                    tr.record(step, 0, "recv", t_recv, calls[0][1] if calls else t_recv)
                    index = 1
                for i, t0, t1 in calls:
                    tr.record(step, index, "kernel", t0, t1, kernel=prog[i].kernel, call=i)
                    index += 1
                if k == len(runs) - 1:
                    if sampled:
                        tr.record(step, index, "argmax", sampled[0], sampled[-1])
                        index += 1
                    tr.record(step, index, "send", *t_send)
        self._frames.clear()
        self._kept = 0
        tr.flush()

    def _step_segments(self, frame: Frame, x: Any) -> Frame:
        """A micro-batched frame (``frame.segments``): the segments grouped by the step each one takes alone
        (:meth:`StageProgram.step_for` of its rows), each group one ``forward_segments`` call of that step's
        executor; the last stage samples one token per segment with its slot's sampler."""
        from pipeplan.runtime.program import ExecutionError

        p, bound = self.p, self.bound
        assert frame.segments is not None and bound is not None
        segs = frame.segments
        rows = int(x.shape[0])
        if sum(int(sg.n_rows) for sg in segs) != rows or any(int(sg.n_rows) < 1 for sg in segs):
            raise ExecutionError(f"segment rows {[int(sg.n_rows) for sg in segs]} do not add up to the frame's "
                                 f"{rows} rows", where="segments")
        starts, r = [], 0
        groups: dict[str, list[int]] = {}
        for i, sg in enumerate(segs):
            if not 0 <= sg.slot < self.parallel:
                raise ExecutionError(f"segment of sequence {sg.seq_id} names KV-cache slot {sg.slot}; this stage "
                                     f"has {self.parallel} (parallel)", where="segments")
            step = bound.step_for(int(sg.n_rows))
            limit = int(bound.rows.get(step, 0) or 0)
            if limit and sg.n_rows > limit:
                raise ExecutionError(f"a segment of {sg.n_rows} rows exceeds the compiled '{step}' step's {limit} "
                                     f"rows", where="segments")
            groups.setdefault(step, []).append(i)
            starts.append(r)
            r += int(sg.n_rows)
        keep = p.has_head  # the last stage returns each segment's last row (its logits)
        parts: list[Any] = [None] * len(segs)
        for step, idx in groups.items():
            ex = self.executors[step]
            for i in idx:
                ex.n_pasts[segs[i].slot] = self._n_past[segs[i].slot]
            table = [(int(segs[i].slot), int(segs[i].position), int(segs[i].n_rows)) for i in idx]
            xs = x if len(idx) == len(segs) else self._rows_of(x, [(starts[i], int(segs[i].n_rows)) for i in idx])
            out = ex.forward_segments(xs, table, last_only=keep)
            if self._trace is not None:
                self._take_runs(step, table[0][0], ex)
            if not self._numpy and out.device.type != "cpu":
                out = out.cpu()
            out = out if self._numpy else out.numpy()
            o = 0
            for i in idx:
                n = 1 if keep else int(segs[i].n_rows)
                parts[i] = out[o:o + n]
                o += n
                self._n_past[segs[i].slot] = ex.n_pasts[segs[i].slot]
        self.served += 1
        self.segments_served[len(segs)] = self.segments_served.get(len(segs), 0) + 1
        if p.has_head:
            toks = [self._sample(int(sg.slot), parts[i][-1]) for i, sg in enumerate(segs)]
            nxt = tuple(Segment(sg.seq_id, sg.slot, sg.position + sg.n_rows, 1) for sg in segs)
            return Frame(DATA, frame.seq_id, nxt[0].position, np.asarray(toks, dtype=np.int32), None, frame.slot, nxt)
        arr = out if len(groups) == 1 else np.concatenate(parts, axis=0)
        return Frame(DATA, frame.seq_id, frame.position, np.ascontiguousarray(arr), None, frame.slot, segs)

    def _rows_of(self, x: Any, spans: Sequence[tuple[int, int]]) -> Any:
        """The rows ``[r, r + n)`` of ``x`` for each span, joined (a group of a mixed micro-batch)."""
        if self._numpy:
            return np.concatenate([x[r:r + n] for r, n in spans], axis=0)
        import torch

        return torch.cat([x[r:r + n] for r, n in spans], dim=0)

    def serve(self, stop: threading.Event | Any | None = None, alive: Callable[[], bool] | None = None) -> int:
        """Serve frames until SHUTDOWN (forwarded downstream) or ``stop`` is set / ``alive()`` is False.

        Returns the number of DATA frames served. Raises (after emitting) StageFault(kind="runtime")
        when executing, sampling or sending fails."""
        if not self.ready or self._rx is None:
            raise self._fault("runtime", "serve() before the stage is ready")
        rx, tx = self._rx, self._tx
        assert tx is not None
        try:
            while True:
                frame = rx.recv(timeout=POLL_S)
                if frame is None:
                    if (stop is not None and stop.is_set()) or (alive is not None and not alive()):
                        return self.served
                    continue
                if frame.op == DATA:
                    t_recv = time.perf_counter()
                    tx.announce()  # wake the consumer now: its wake-up overlaps this step's computation
                    out = self._step(frame)
                elif frame.op == RESET:
                    slot = frame.slot
                    if not 0 <= slot < self.parallel:
                        raise RuntimeError(f"RESET of sequence {frame.seq_id} names KV-cache slot {slot}; this "
                                           f"stage has {self.parallel} (parallel)")
                    for ex in self.executors.values():  # shared caches: zeroing twice is harmless
                        ex.reset(slot)
                    if self.tmachine is not None:
                        self.tmachine.reset(slot)
                    self._n_past[slot] = 0
                    if self.p.has_head:
                        from pipeplan.runtime.sampling import Sampler

                        sp = frame.sampler
                        self._samplers[slot] = Sampler() if sp is None else Sampler(
                            sp.temperature, sp.top_k, sp.top_p, None if sp.seed < 0 else sp.seed)
                    out = frame
                elif frame.op == SHUTDOWN:
                    self._send(frame, stop)
                    return self.served
                else:
                    raise RuntimeError(f"unknown frame op {frame.op} on edge {rx.edge_id}")
                t_send = time.perf_counter()
                if not self._send(out, stop):
                    return self.served
                if frame.op == DATA and self._trace is not None:
                    self._keep_frame(t_recv, (t_send, time.perf_counter()))
        except StageFault:
            raise
        except PipeplanError as e:
            raise self._fault("runtime", e.one_line()) from None
        except Exception as e:
            raise self._fault("runtime", f"{type(e).__name__}: {e}") from None
        finally:
            with contextlib.suppress(OSError):  # a trace directory removed under the run: records missing
                if self._trace is not None:
                    self._flush_trace()
                if self.tmachine is not None:
                    self.tmachine.flush_traces()

    def run(self, transport: Transport, stop: threading.Event | Any | None = None,
            alive: Callable[[], bool] | None = None) -> bool:
        """load + connect + serve; every failure is emitted as a StageFaulted event, never raised.

        Returns True on a clean end (SHUTDOWN or stop), False after a fault."""
        try:
            self.load()
            if stop is not None and stop.is_set():
                return True
            self.connect(transport)
            self.serve(stop, alive)
            return True
        except StageFault:
            return False
        except BaseException as e:  # pragma: no cover - defensive: report, never die silently
            self._fault("runtime", f"{type(e).__name__}: {e}")
            return False

