"""``pipeplan run --target cuda``: the lowered ``tmachine`` program is what the stages run (issue 13 item 5).

Compile (:func:`compile_tmachine_for_run`, in the orchestrator's process): the RunPlan is compiled for the
``cuda-triton`` target (``compile_plan``: ``convert-runplan-to-pplan`` with the prefill step's rows,
``pplan-legalize{target=cuda-triton}``, implementation selection, costs, ``convert-pplan-to-cplan
{binder=reference-queue keep_source=true}``) and lowered by ``convert-cplan-to-triton{model=MODEL}`` (with
``interpret`` when Triton runs its CPU interpreter: ``TRITON_INTERPRET=1`` or no GPU visible). The printed
``tmachine.program`` is cached as ``<cache>/packages/<key>.tmachine.mlir`` (key: sha256 of the plan, pool,
model file identity, evidence, rows, interpret and the tmachine revision) and reused when it parses and
verifies. Each stage gets a :class:`TMachineStageProgram`: the program text (picklable; parsed once in the
stage) and the ``tmachine.stream`` device of its node.

Stage (:class:`TMachineStage`, built by :class:`~pipeplan.runtime.stage.StageWorker` when its program is a
:class:`TMachineStageProgram`): one :class:`~pipeplan.runtime.tmachine_interp.TMachineInterpreter` per
KV-cache slot (``parallel``: each slot its own KV, transient and edge buffers; the weights are shared),
each running only the streams of the stage's device. A frame of ``R`` rows at ``position`` is
``forward(rows, position)`` of its slot's interpreter; the last stage returns the logits row its last
step's argmax launch read, which the worker samples as the CPU path does.

Observing launches: with ``$PIPEPLAN_TMACHINE_TRACE`` set to a directory when the run is compiled (it is read
by the compiling process and carried by the stage programs, so it reaches stage processes of any backend,
whatever environment their host was started with), every stage appends each executed instruction
(:class:`~pipeplan.runtime.tmachine_interp.InstructionEvent` plus ``stage`` and ``slot``) as one JSON line to
``<dir>/stage<i>.jsonl`` when it stops serving (:mod:`pipeplan.runtime.trace`). ``pipeplan run --target cuda --timeline/--trace`` records the same
way (a private directory) and turns the records into the measured TimelineBundle (:func:`measured_timeline`).

Errors: RunPlanRejection(``invalid_runtime_config``) when two stages share a node (a stage runs the streams
of its node); PackageError from the compiler (failing pass); CacheError(``cache_unusable``); at bind, the
interpreter's TMachineError (``tmachine:<reason>``), which the worker reports as a ``bind`` StageFault.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeplan.errors import PipeplanError
from pipeplan.runtime.trace import JsonlTrace, append_traces, read_traces, timeline_from_records

if TYPE_CHECKING:
    import torch
    from pipeplan.dialects.triton_machine import ProgramOp
    from pipeplan.runtime.tmachine_interp import TMachineInterpreter

KERNEL_PACKAGES = {"cuda-triton": "pipeplan.runtime.kernels.triton"}
"""``tmachine.program`` target -> the kernel package its launches resolve in (:mod:`~pipeplan.runtime.tmachine_interp`)."""


def compile_target(kernels: str | None) -> str:
    """The compile target whose machine program a stage running kernel table ``kernels`` executes: the table's
    ``tmachine.program`` target (:data:`KERNEL_PACKAGES`: the Triton table's is ``cuda-triton``), else
    ``virtual-queue`` (the cpu and reference tables run the vmachine program)."""
    for target, package in KERNEL_PACKAGES.items():
        if package == kernels:
            return target
    return "virtual-queue"


TRACE_ENV = "PIPEPLAN_TMACHINE_TRACE"
"""Directory where every stage appends its executed instructions as JSON lines (module docstring)."""

TMACHINE_TARGET = "cuda-triton"
BINDER = "reference-queue"


def interpret_default() -> bool:
    """Whether the Triton kernels run under the CPU interpreter here: ``TRITON_INTERPRET`` set (not 0), or
    no GPU visible to torch (the kernel package then sets it)."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return True
    import torch

    return not torch.cuda.is_available()


_PARSED: dict[str, ProgramOp] = {}
_PARSED_KEEP = 4
_PARSE_LOCK = threading.Lock()


@dataclass(frozen=True)
class TMachineStageProgram:
    """What one stage binds for ``--target cuda`` (picklable).

    Attributes:
        text: the printed ``tmachine.program`` (all stages; the stage runs the streams of ``device``).
        device: the ``tmachine.stream`` device of this stage (its node id).
        rows: step -> rows of one instance (``prefill``: the compiled prefill rows, ``decode``: 1).
        source: where it came from (``<file> stage <i>``), for diagnostics.
        trace: directory of the instruction trace (module docstring; ``""``: none).
    """

    text: str
    device: str
    rows: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    trace: str = ""

    @property
    def prefill_rows(self) -> int:
        """Most rows of a prompt frame (the orchestrator's chunk size; 0: no limit)."""
        return int(self.rows.get("prefill", 0) or 0)

    def parse(self) -> ProgramOp:
        """The verified ``tmachine.program`` of :attr:`text`, parsed once per process (the stages of an
        in-process run and the compiling orchestrator share it: read it, never change it). Raises
        PipeplanError(``tmachine:parse``): the text does not parse or verify, or its ``revision`` is not this
        dialect's :data:`~pipeplan.dialects.triton_machine.REVISION`."""
        key = hashlib.sha256(self.text.encode()).hexdigest()
        with _PARSE_LOCK:
            prog = _PARSED.get(key)
            if prog is None:
                prog = self._parse()
                _PARSED[key] = prog
                while len(_PARSED) > _PARSED_KEEP:
                    _PARSED.pop(next(iter(_PARSED)))
        return prog

    def _parse(self) -> ProgramOp:
        from pipeplan.api import parse_module, register_pipeplan
        from pipeplan.dialects.triton_machine import REVISION, ProgramOp
        from xdsl.context import Context

        try:
            module = parse_module(register_pipeplan(Context()), self.text, self.source or "<tmachine>")
        except Exception as e:  # parse or verify error of a tampered/foreign text
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise PipeplanError(f"{self.source}: the tmachine program does not parse: {first}",
                                code="tmachine:parse", where=self.source) from None
        progs = [o for o in module.ops if isinstance(o, ProgramOp)]
        if len(progs) != 1:
            raise PipeplanError(f"{self.source}: holds {len(progs)} tmachine.program ops, expected 1",
                                code="tmachine:parse", where=self.source)
        prog = progs[0]
        if prog.revision.data != REVISION:
            raise PipeplanError(f"{self.source}: the tmachine program is revision '{prog.revision.data}', this "
                                f"runtime runs '{REVISION}' (recompile it)", code="tmachine:parse", where=self.source)
        prog.detach()
        return prog


@dataclass(frozen=True)
class TMachineRun:
    """The lowered program prepared for a run (the ``CompiledRun`` shape ``pipeplan run`` reports):
    ``package`` (the cached program file), ``programs`` (stage -> :class:`TMachineStageProgram`),
    ``cached``, ``compile_s`` (0 on a cache hit), ``load_s``."""

    package: Path
    programs: dict[int, TMachineStageProgram]
    cached: bool
    compile_s: float
    load_s: float


def lower_for_run(plan_module, pool_path: str | Path, model: str | Path, *, evidence: Sequence[str] = ("roofline",),
                  prompt_len: int = 8, interpret: bool = True) -> ProgramOp:
    """Compile ``plan_module`` (a RunPlan module; not changed) down to its ``tmachine.program`` (module
    docstring). Raises PackageError with the failing pass's message."""
    from pipeplan.api import register_pipeplan
    from pipeplan.compiler.replay_package import PackageError, _diagnostic, compile_plan
    from pipeplan.dialects.triton_machine import ProgramOp
    from pipeplan.transforms.convert_cplan_to_triton import ConvertCplanToTritonPass
    from xdsl.context import Context
    from xdsl.utils.exceptions import PassFailedException

    module, _ = compile_plan(plan_module, TMACHINE_TARGET, tuple(evidence), pool=pool_path, prompt_len=prompt_len,
                             binder=BINDER)
    try:
        ConvertCplanToTritonPass(model=str(model), interpret=interpret).apply(register_pipeplan(Context()), module)
    except PassFailedException as e:
        msg, code = _diagnostic(" ".join(str(e).split()))
        raise PackageError(msg, code=code) from None
    prog = next(o for o in module.ops if isinstance(o, ProgramOp))
    prog.detach()
    return prog


def shared_device(devices: Mapping[int, str]) -> tuple[int, int, str] | None:
    """``(earlier stage, stage, device)`` of the first two stages of ``devices`` (stage -> device) on one
    device, else None: a tmachine stage runs its device's streams, so each needs its own device."""
    seen: dict[str, int] = {}
    for s, d in sorted(devices.items()):
        if d in seen:
            return seen[d], s, d
        seen[d] = s
    return None


def tmachine_stage_programs(text: str, devices: Mapping[int, str], rows: Mapping[str, int], where: str | Path,
                   trace: str | None = None) -> dict[int, TMachineStageProgram]:
    """stage -> its :class:`TMachineStageProgram` of the program ``text`` (the streams of its device in
    ``devices``; ``rows`` per step), named ``<where> stage <k>``. ``trace`` None: ``$PIPEPLAN_TMACHINE_TRACE``."""
    trace = os.environ.get(TRACE_ENV, "") if trace is None else trace
    return {s: TMachineStageProgram(text, d, dict(rows), f"{where} stage {s}", trace) for s, d in sorted(devices.items())}


def _stage_devices(plan_module) -> dict[int, str]:
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import RunPlanRejection

    devices = {p.stage: p.node_id for p in project_provisions(plan_module)}
    shared = shared_device(devices)
    if shared is not None:
        first, s, d = shared
        raise RunPlanRejection(f"--target cuda runs each stage as the tmachine streams of its node, but stages "
                               f"{first} and {s} are both on node {d} (give each stage its own node)",
                               code="invalid_runtime_config", where=f"stage {s}")
    return devices


def compile_tmachine_for_run(plan_module, pool_text: str, model: str | Path, *, cache_dir: str | Path | None = None,
                             evidence: Sequence[str] = ("roofline",), prompt_len: int = 8,
                             interpret: bool | None = None, trace: str | None = None) -> TMachineRun:
    """Compile the plan to its ``tmachine.program`` (or reuse the cached one) and give each stage its part
    (module docstring). ``interpret`` None: :func:`interpret_default`; ``trace`` None: ``$PIPEPLAN_TMACHINE_TRACE``.

    Raises: RunPlanRejection(invalid_runtime_config) for two stages on one node; PackageError (the
    compiler's diagnostic); CacheError(cache_unusable) when the cache cannot be written."""
    from pipeplan.compiler.replay_package import print_module
    from pipeplan.dialects.triton_machine import REVISION
    from pipeplan.runtime.weights_source import cache_root, cache_write_error, staged_with_pool

    t0 = time.perf_counter()
    if interpret is None:
        interpret = interpret_default()
    devices = _stage_devices(plan_module)
    st = os.stat(model)
    key = hashlib.sha256("\0".join(["tmachine-run/1", REVISION, print_module(plan_module), pool_text,
                                     str(Path(model).resolve()), str(st.st_size), str(st.st_mtime_ns),
                                     ",".join(evidence), str(prompt_len), BINDER, str(bool(interpret))]
                                    ).encode()).hexdigest()[:24]
    root = cache_root(cache_dir)
    final = root / "packages" / f"{key}.tmachine.mlir"
    rows = {"prefill": int(prompt_len), "decode": 1}
    trace = os.environ.get(TRACE_ENV, "") if trace is None else trace

    def stages(text: str) -> dict[int, TMachineStageProgram]:
        return tmachine_stage_programs(text, devices, rows, final, trace)

    if final.is_file():
        try:
            text = final.read_text(encoding="utf-8")
            stages(text)[min(devices)].parse()  # a tampered or truncated file is recompiled
            return TMachineRun(final, stages(text), True, 0.0, time.perf_counter() - t0)
        except (OSError, UnicodeDecodeError, PipeplanError):
            pass
    with staged_with_pool(cache_dir, final, pool_text, "the tmachine program") as tmpdir:
        prog = lower_for_run(plan_module, tmpdir / "pool.toml", model, evidence=evidence, prompt_len=prompt_len,
                             interpret=interpret)
        text = print_module(prog)
        t1 = time.perf_counter()
        try:
            (tmpdir / "program.mlir").write_text(text, encoding="utf-8")
            os.replace(tmpdir / "program.mlir", final)
        except OSError as e:
            raise cache_write_error(cache_dir, f"the tmachine program {final}", e) from None
    return TMachineRun(final, stages(text), False, t1 - t0, time.perf_counter() - t1)


def measured_timeline(program: TMachineStageProgram, traces: Mapping[int, Sequence[Mapping[str, Any]]],
                      meta: Mapping[str, Any] | None = None) -> Any:
    """The measured :class:`~pipeplan.analysis.timeline.TimelineBundle` of a tmachine run from its stages' trace
    records (:func:`~pipeplan.runtime.trace.read_traces`; :func:`~pipeplan.runtime.trace.timeline_from_records`):
    one event per executed instruction with the kernel (launches) or op name, the stream as queue/engine and the
    lineage. Digests: ``machine`` (sha256 of the program text) and ``concrete`` (the plan the program lowers)."""
    from pipeplan.runtime.tmachine_interp import instructions

    prog = program.parse()
    info = {o.id.data: (o.id.data, o.cmd.data, s.device.data, s.engine.data, "", o.lineage_text)
            for s, ops in instructions(prog) for o in ops}
    digests = {"machine": f"sha256:{hashlib.sha256(program.text.encode()).hexdigest()}",
               "concrete": prog.concrete.data}
    return timeline_from_records(traces, lambda _s, ev: info.get(ev["id"], (ev["id"], "", "", "", "", "")), digests,
                                 {"source": "pipeplan.runtime.tmachine_run", **dict(meta or {})})


class TMachineStage:
    """The interpreters of one stage, one per KV-cache slot (module docstring).

    Args:
        program: the stage's :class:`TMachineStageProgram`. weights: GGUF name -> weight as the Triton kernels
            read it. stage: the stage index. rope_bases: ``rope_table``/``rope_table_swa`` -> base. slots: KV-cache
            slots. has_embedding / has_head: the provision's role, checked against the stage's launches.
        listeners: extra listeners (each told about every slot's instructions).

    Raises: TMachineError (``tmachine:<reason>``: the program does not bind), PipeplanError
        (``tmachine:parse``; ``tmachine:abi`` when the device's streams do not match the stage's role).
    """

    def __init__(self, program: TMachineStageProgram, weights: Mapping[str, Any], *, stage: int,
                 rope_bases: Mapping[str, float], slots: int = 1, has_embedding: bool, has_head: bool,
                 listeners: Sequence[Any] = ()):
        from pipeplan.dialects.triton_machine import LaunchOp
        from pipeplan.runtime.tmachine_interp import TMachineError, TMachineInterpreter, instructions

        prog = program.parse()
        mine = [o for s, ops in instructions(prog) if s.device.data == program.device for o in ops]
        kernels = {o.kernel.data for o in mine if isinstance(o, LaunchOp)}
        first, last = "embedding:_gather_kernel" in kernels, "argmax:_argmax_kernel" in kernels
        if not mine or first != has_embedding or last != has_head:
            raise TMachineError("abi", f"{program.source}: the streams of device {program.device} hold "
                                f"{len(mine)} instructions (embedding={first}, argmax={last}) but the stage has "
                                f"embedding={has_embedding}, head={has_head}", where=program.device)
        trace = program.trace
        self.traces: list[JsonlTrace] = []
        self.slots: list[TMachineInterpreter] = []
        for k in range(max(1, slots)):
            ls = list(listeners)
            if trace:
                self.traces.append(JsonlTrace(Path(trace) / f"stage{stage}.jsonl", stage, k))
                ls.append(self.traces[-1])
            self.slots.append(TMachineInterpreter(prog, weights, rope_bases=rope_bases, devices=[program.device],
                                                  listeners=ls))
        got = dict(self.slots[0].rows)
        if any(got.get(k, v) != v for k, v in program.rows.items()):
            raise TMachineError("rows", f"{program.source}: the program's steps take {got} inbound rows, the run "
                                f"expects {dict(program.rows)}", where=program.device)
        self.has_head = has_head
        self._logits = [{st: self._argmax_input(it, st) for st in it.steps} for it in self.slots] if has_head else []

    @staticmethod
    def _argmax_input(it: TMachineInterpreter, step: str) -> torch.Tensor:
        from pipeplan.dialects.triton_machine import LaunchOp
        from pipeplan.runtime.tmachine_interp import TMachineError

        for op, _ in it.steps[step]:
            if isinstance(op, LaunchOp) and op.kernel.data == "argmax:_argmax_kernel":
                return it.buffers[op.arg_ids[0]]
        raise TMachineError("abi", f"step '{step}' of the last stage has no argmax launch (its logits)", where=step)

    def flush_traces(self) -> None:
        """Write the kept trace records (the worker calls this when it stops serving)."""
        for t in self.traces:
            t.flush()

    def reset(self, slot: int) -> None:
        """A new sequence in ``slot``: zero its KV caches."""
        self.slots[slot].reset()

    def forward(self, x: torch.Tensor, position: int, slot: int) -> torch.Tensor:
        """Run ``x`` (``[R]`` ids or ``[R, D]`` rows) at ``position`` in ``slot``: the outbound rows (``[R, D]``),
        or on the last stage the ``[V]`` logits of the frame's last row (what its last argmax read)."""
        it = self.slots[slot]
        out = it.forward(x, position)
        for t in self.traces:
            if t.full:
                t.flush()
        if not self.has_head:
            return out
        return self._logits[slot][it.last_step or "decode"][-1]


__all__ = ["TRACE_ENV", "JsonlTrace", "shared_device", "tmachine_stage_programs", "TMachineRun", "TMachineStage", "TMachineStageProgram",
           "append_traces", "compile_tmachine_for_run", "interpret_default", "lower_for_run", "measured_timeline",
           "read_traces"]
