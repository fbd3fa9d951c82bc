"""Observers at the pass boundaries (seeds/003 "Checkpoints and diagnostics", AB-D-1, AB-D-2).

An :class:`Observer` looks at a module after a pass that ends its ``boundary`` (one of
:data:`BOUNDARIES`) and returns an :class:`Observation`: ``ok``, ``figures`` (counts, JSON-serializable)
and ``findings`` (one string per problem, naming the op: task, candidate, command, allocation or
instruction, with its lineage path where the IR carries one). Every figure is computed from the IR alone.

=====================  ========================  ==========================================================
observer               boundary (after)          checks
=====================  ========================  ==========================================================
capability-coverage    legalization              tasks with >= 1 legal candidate on the target / tasks
                       (pplan-legalize)
cost-coverage          legalization              tasks and candidates with a resolved ``pplan.cost``, and
                       (pplan-resolve-costs)     the evidence kind (provider/status) of each
command-correlation    construction              every ``cplan.command`` traces to a ``pplan.task`` (its
                       (convert-pplan-to-cplan)  ``task`` and lineage); tasks without a command
resource-conflicts     construction              allocations overlapping in one arena while both live
                                                 (AB-S-5), queue/slot placement and engine conflicts
                                                 (AB-S-2, AB-S-6): :mod:`pipeplan.dialects.cplan_invariants`
trace-conservation     timing                    one interval per command in a projected step, no negative
                       (cplan-project-timing)    duration, per-queue busy time <= makespan
trace-conservation     simulation                every instance node started and ended once, instances end
                       (cplan-simulate)          in [0, makespan], per-queue busy time <= makespan
abi-legality           machine verification      vmachine: kernel calls match the kernel ABI, reads follow
                       (convert-cplan-to-*)      writes (:func:`pipeplan.dialects.vmachine.check_program`);
                                                 tmachine: stream order (:func:`check_streams`), each
                                                 launch's buffer args = its portable task's reads + writes
                                                 and each read is bound (weight/kv/edge) or written by an
                                                 instruction ordered before it
=====================  ========================  ==========================================================

:data:`PASS_BOUNDARIES` is the one table from pass name to the boundary it ends. An observer whose
input is absent (no ``pplan.candidates`` for capability coverage, ...) is skipped (:meth:`Observer.applies`).
:func:`observing_callback` wraps a ``PassPipeline`` callback so that the registry's observers run after
each pass; an observer that raises is reported as a failed observation, never propagated.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pipeplan.dialects import cplan, pplan, vmachine
from pipeplan.dialects import triton_machine as tmachine
from pipeplan.dialects.bindings import TargetBindingOp
from pipeplan.dialects.cplan_invariants import PlanIndex, check_invariants
from pipeplan.dialects.cplan_types import PERSISTENT_LIFETIMES
from pipeplan.dialects.graph import ancestor_sets, stable_topo_order
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipelineCallbackType
from xdsl.utils.exceptions import VerifyException

BOUNDARIES = ("legalization", "construction", "timing", "simulation", "machine verification")
"""The observation boundaries of seeds/003 "Checkpoints and diagnostics", in pipeline order."""

PASS_BOUNDARIES: dict[str, str] = {
    "pplan-legalize": "legalization",
    "pplan-resolve-costs": "legalization",
    "convert-pplan-to-cplan": "construction",
    "cplan-verify": "construction",
    "cplan-project-timing": "timing",
    "cplan-simulate": "simulation",
    "convert-cplan-to-vmachine": "machine verification",
    "convert-cplan-to-triton": "machine verification",
}
"""Pass name -> the boundary it ends (passes not listed end none)."""

SHOWN_FINDINGS = 3
"""Findings shown in an observation's one-line text (all of them are in its JSON)."""



@dataclass(frozen=True)
class Observation:
    """What one observer saw at one boundary. ``summary`` is the figures in words (one line)."""

    boundary: str
    name: str
    ok: bool
    figures: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    summary: str = ""
    after: str = ""
    """The pass that had just run ("" when observed outside a pipeline)."""

    def line(self) -> str:
        """``observe[<boundary>] <name>: ok|FAIL, <summary>[; N findings: a; b; c (and k more)]``."""
        text = f"observe[{self.boundary}] {self.name}: {'ok' if self.ok else 'FAIL'}"
        if self.summary:
            text += f", {self.summary}"
        if self.findings:
            shown = "; ".join(self.findings[:SHOWN_FINDINGS])
            more = f" (and {len(self.findings) - SHOWN_FINDINGS} more)" if len(self.findings) > SHOWN_FINDINGS else ""
            text += f"; {len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}: {shown}{more}"
        return " ".join(text.split())

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict of every field."""
        return dataclasses.asdict(self)


class Observer(ABC):
    """Base class of an observer: ``name`` (kebab-case), ``boundary`` (one of :data:`BOUNDARIES`)."""

    name: ClassVar[str] = ""
    boundary: str = ""

    def applies(self, module: ModuleOp) -> bool:
        """Whether the module holds what this observer reads (default: always)."""
        return True

    @abstractmethod
    def observe(self, module: ModuleOp) -> Observation:
        """The observation of ``module``; raises nothing for a malformed plan (a finding instead)."""

    def result(self, ok: bool, figures: dict[str, Any], findings: list[str], summary: str) -> Observation:
        """An :class:`Observation` of this observer at its boundary."""
        return Observation(self.boundary, self.name, ok, figures, findings, summary)


class ObserverRegistry:
    """Observers in registration order; :meth:`observe` runs those of one boundary."""

    def __init__(self, observers: Iterable[Observer] = ()):
        self._observers: list[Observer] = []
        for o in observers:
            self.register(o)

    def register(self, observer: Observer) -> Observer:
        """Add ``observer``. Raises ValueError: an unknown boundary, or a (name, boundary) pair already present."""
        if observer.boundary not in BOUNDARIES:
            raise ValueError(f"observer {observer.name!r}: unknown boundary {observer.boundary!r} "
                             f"(one of {', '.join(BOUNDARIES)})")
        if any((o.name, o.boundary) == (observer.name, observer.boundary) for o in self._observers):
            raise ValueError(f"observer {observer.name!r} is already registered at boundary {observer.boundary!r}")
        self._observers.append(observer)
        return observer

    def observers(self, boundary: str | None = None) -> list[Observer]:
        """The registered observers (of ``boundary`` only, when given)."""
        return [o for o in self._observers if boundary is None or o.boundary == boundary]

    def observe(self, module: ModuleOp, boundary: str, after: str = "") -> list[Observation]:
        """Run the observers of ``boundary`` that apply to ``module``. An observer that raises yields a
        failed observation naming the exception."""
        out = []
        for o in self.observers(boundary):
            try:
                if not o.applies(module):
                    continue
                obs = o.observe(module)
            except Exception as e:  # an observer never stops the pipeline: its failure is a finding
                obs = Observation(boundary, o.name, False, {}, [f"observer raised {type(e).__name__}: "
                                                                f"{' '.join(str(e).split())[:300]}"])
            out.append(dataclasses.replace(obs, after=after))
        return out


def observing_callback(registry: ObserverRegistry, emit: Callable[[Observation], None],
                       inner: PassPipelineCallbackType | None = None) -> PassPipelineCallbackType:
    """A ``PassPipeline`` callback: ``inner`` first (xdsl-opt's verify/print/timing), then, when the pass
    that just ran ends a boundary (:data:`PASS_BOUNDARIES`), each observation of ``registry`` to ``emit``."""

    def callback(previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None) -> None:
        if inner is not None:
            inner(previous, module, next_pass)
        if previous is not None and previous.name in PASS_BOUNDARIES:
            for obs in registry.observe(module, PASS_BOUNDARIES[previous.name], after=previous.name):
                emit(obs)

    return callback


# --------------------------------------------------------------------------- helpers
def _top(module: ModuleOp, cls: type[Operation]) -> list[Any]:
    return [o for o in module.ops if isinstance(o, cls)]


def _inner(op: Operation, cls: type[Operation]) -> list[Any]:
    return [o for b in op.regions for blk in b.blocks for o in blk.ops if isinstance(o, cls)]


def _tasks(module: ModuleOp) -> list[pplan.TaskOp]:
    plans = _top(module, pplan.PlanOp)
    return plans[0].tasks() if len(plans) == 1 else []


def _ref(attr: Any) -> str:
    return attr.root_reference.data


def _str_list(attr: ArrayAttr) -> list[str]:
    return [a.data for a in attr.data if isinstance(a, StringAttr)]


def _fnum(d: DictionaryAttr, key: str) -> float | None:
    v = d.data.get(key)
    return float(v.value.data) if isinstance(v, FloatAttr) else None


# --------------------------------------------------------------------------- legalization
class CapabilityCoverage(Observer):
    """Tasks with at least one legal ``pplan.candidate`` on the target / all tasks (AB-L-1, AB-I-2)."""

    name = "capability-coverage"
    boundary = "legalization"

    def applies(self, module: ModuleOp) -> bool:
        return bool(_top(module, pplan.CandidatesOp))

    def observe(self, module: ModuleOp) -> Observation:
        tasks = _tasks(module)
        findings: list[str] = []
        figures: dict[str, Any] = {"tasks": len(tasks), "targets": {}}
        parts = []
        bindings = {b.target.data: b.plugin_revision.data for b in _top(module, TargetBindingOp)}
        for cs in _top(module, pplan.CandidatesOp):
            n_cands = sum(len(t.candidates) for t in tasks)
            legal = sum(1 for t in tasks if t.candidates)
            target = bindings.get(cs.target.data, cs.target.data)
            figures["targets"][target] = {"legal_tasks": legal, "candidates": n_cands}
            parts.append(f"{legal}/{len(tasks)} tasks legal on {target} ({n_cands} candidates)")
            findings += [f"task @{t.task_id} has no legal candidate on {target} ({t.lineage})"
                         for t in tasks if not t.candidates]
        return self.result(not findings and bool(tasks), figures, findings or ([] if tasks else ["no pplan.task"]),
                           "; ".join(parts))


class CostCoverage(Observer):
    """Tasks and candidates with a resolved ``pplan.cost``; the evidence kind (provider, status) of each
    (AB-C-1, AB-C-3)."""

    name = "cost-coverage"
    boundary = "legalization"

    def applies(self, module: ModuleOp) -> bool:
        return bool(_top(module, pplan.CostedViewOp))

    def observe(self, module: ModuleOp) -> Observation:
        tasks = _tasks(module)
        cands = [(t, c) for t in tasks for c in t.candidates]
        costs = [(t, c) for t in tasks for c in t.costs]
        costed_cands = {pplan.candidate_id(t.task_id, c.rule) for t, c in costs}
        costed_tasks = {t.task_id for t, _ in costs}
        kinds = Counter(f"{c.evidence}/{c.status}" for _, c in costs)
        findings = [f"task @{t.task_id} has no resolved cost ({t.lineage})" for t in tasks
                    if t.task_id not in costed_tasks]
        findings += [f"candidate @{pplan.candidate_id(t.task_id, c.rule)} (task @{t.task_id}) has no resolved cost"
                     for t, c in cands if pplan.candidate_id(t.task_id, c.rule) not in costed_cands]
        known = {pplan.candidate_id(t.task_id, c.rule) for t, c in cands}
        findings += [f"cost of @{t.task_id} names unknown candidate @{pplan.candidate_id(t.task_id, c.rule)}"
                     for t, c in costs if pplan.candidate_id(t.task_id, c.rule) not in known]
        n_tasks = sum(1 for t in tasks if t.task_id in costed_tasks)
        n_cands = sum(1 for t, c in cands if pplan.candidate_id(t.task_id, c.rule) in costed_cands)
        figures = {"tasks": len(tasks), "costed_tasks": n_tasks, "candidates": len(cands),
                   "costed_candidates": n_cands, "evidence": dict(sorted(kinds.items()))}
        ev = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
        return self.result(not findings, figures, findings,
                           f"{n_tasks}/{len(tasks)} tasks and {n_cands}/{len(cands)} candidates costed (evidence: {ev})")


# --------------------------------------------------------------------------- construction
class CommandCorrelation(Observer):
    """Every ``cplan.command`` traces to a portable task: its ``task`` names a ``pplan.task`` whose step,
    stage, block and model op its ``#cplan.lineage`` states; every task has a command (AB-D-1). Without the
    portable source (``keep_source=false``) there is nothing to trace to: every command counts as traced."""

    name = "command-correlation"
    boundary = "construction"

    def applies(self, module: ModuleOp) -> bool:
        return bool(_top(module, cplan.PlanOp))

    def observe(self, module: ModuleOp) -> Observation:
        cmds = [c for p in _top(module, cplan.PlanOp) for c in _inner(p, cplan.CommandOp)]
        tasks = {t.task_id: t for t in _tasks(module)}
        findings: list[str] = []
        traced: set[str] = set()
        for c in cmds:
            task, lin = c.task.data, c.lineage
            t = tasks.get(task)
            if tasks and t is None:
                findings.append(f"command '{c.id.data}' names task @{task} that is not in the portable plan")
            elif t is not None and (lin.step, lin.stage, lin.block, lin.model_op) != (
                    t.step_name, t.stage_index, t.block.value.data, t.model_op.data):
                findings.append(f"command '{c.id.data}': lineage {lin} does not agree with its task @{task} "
                                f"({t.lineage})")
            else:
                traced.add(task)
        untraced = [t for name, t in tasks.items() if name not in traced]
        findings += [f"task @{t.task_id} has no concrete command ({t.lineage})" for t in untraced]
        figures = {"commands": len(cmds), "traced_commands": sum(1 for c in cmds if c.task.data in traced),
                   "tasks": len(tasks), "tasks_with_command": len(tasks) - len(untraced),
                   "source_kept": bool(tasks)}
        summary = (f"{figures['traced_commands']}/{len(cmds)} commands trace to a portable task, "
                   + (f"{figures['tasks_with_command']}/{len(tasks)} tasks have a command" if tasks
                      else "portable source not kept (lineage only)"))
        return self.result(not findings and bool(cmds), figures, findings or ([] if cmds else ["no cplan.command"]),
                           summary)


_QUEUE_CODES = {"unknown_command", "unscheduled_command", "placement_mismatch", "deadlock", "unknown_engine",
                "engine_oversubscribed"}


class ResourceConflicts(Observer):
    """Allocations that overlap in one arena (device, memory space) while both may be live (AB-S-5), and
    queue conflicts: commands in no queue or on another engine's queue, queues that deadlock, engines
    with more queues than slots (AB-S-2, AB-S-6). Reuses :func:`check_invariants`."""

    name = "resource-conflicts"
    boundary = "construction"

    def applies(self, module: ModuleOp) -> bool:
        return bool(_top(module, cplan.PlanOp))

    def observe(self, module: ModuleOp) -> Observation:
        findings: list[str] = []
        figures: dict[str, Any] = {"allocations": 0, "arenas": 0, "queues": 0, "alloc_conflicts": 0,
                                   "queue_conflicts": 0}
        for op in _top(module, cplan.PlanOp):
            cx = PlanIndex(op)
            figures["allocations"] += len(cx.allocs)
            figures["arenas"] += len({(a.device.data, a.space.data) for a in cx.allocs})
            figures["queues"] += len(cx.units)
            for v in check_invariants(op, cx):
                if v.invariant == "AB-S-5":
                    figures["alloc_conflicts"] += 1
                elif v.code in _QUEUE_CODES:
                    figures["queue_conflicts"] += 1
                else:
                    continue
                findings.append(f"[{v.invariant}] {v.code}: {v.message}")
        f = figures
        return self.result(not findings, figures, findings,
                           f"{f['allocations']} allocations in {f['arenas']} arenas, {f['alloc_conflicts']} "
                           f"overlapping while live; {f['queues']} queues, {f['queue_conflicts']} queue conflicts")


# --------------------------------------------------------------------------- timing / simulation
class TraceConservation(Observer):
    """The projected trace of a timed ``cplan.plan`` (``timing`` annotations of cplan-project-timing):
    every command has exactly one interval, in a step the projection ran; no interval ends before it
    starts or starts before 0; each queue's busy time (sum of its commands' durations) <= makespan
    (AB-T-1, AB-D-2). Times in seconds."""

    name = "trace-conservation"

    def __init__(self, boundary: str = "timing"):
        self.boundary = boundary

    def applies(self, module: ModuleOp) -> bool:
        return any("timing" in p.attributes for p in _top(module, cplan.PlanOp))

    def observe(self, module: ModuleOp) -> Observation:
        findings: list[str] = []
        intervals = 0
        busy: dict[str, float] = {}
        makespan = 0.0
        n_cmds = 0
        for p in _top(module, cplan.PlanOp):
            summary = p.attributes.get("timing")
            if not isinstance(summary, DictionaryAttr) or _fnum(summary, "makespan") is None:
                findings.append("cplan.plan: timing annotation without a makespan")
                continue
            makespan = max(makespan, _fnum(summary, "makespan") or 0.0)
            steps_attr = summary.data.get("steps")
            steps = set(_str_list(steps_attr)) if isinstance(steps_attr, ArrayAttr) else set()
            for c in _inner(p, cplan.CommandOp):
                n_cmds += 1
                cid = c.id.data
                step = c.lineage.step
                t = c.attributes.get("timing")
                if not isinstance(t, DictionaryAttr):
                    if step in steps:
                        findings.append(f"command '{cid}' ({c.lineage_text}) has no interval in step '{step}'")
                    continue
                if step not in steps:
                    findings.append(f"command '{cid}' has an interval but its step '{step}' was not projected")
                intervals += 1
                for lo, hi in (("start", "end"), ("lo_start", "lo_end"), ("hi_start", "hi_end")):
                    a, b = _fnum(t, lo), _fnum(t, hi)
                    if a is None or b is None:
                        findings.append(f"command '{cid}': interval lacks {lo}/{hi}")
                    elif b < a or a < 0:
                        findings.append(f"command '{cid}': {lo} {a:.6g} s, {hi} {b:.6g} s (negative duration or "
                                        f"start before 0)")
                s, e = _fnum(t, "start"), _fnum(t, "end")
                if s is not None and e is not None and e >= s:
                    q = f"{c.device.data}/{c.engine.data}"
                    busy[q] = busy.get(q, 0.0) + (e - s)
        for q, b in sorted(busy.items()):
            if b > makespan * (1 + 1e-9) + 1e-15:
                findings.append(f"queue {q} is busy {b:.6g} s, more than the makespan {makespan:.6g} s")
        top = max(busy.values(), default=0.0)
        figures = {"commands": n_cmds, "intervals": intervals, "makespan_s": makespan,
                   "busy_s": dict(sorted(busy.items()))}
        return self.result(not findings, figures, findings,
                           f"{intervals}/{n_cmds} commands with one interval, makespan {makespan:.6g} s, busiest "
                           f"queue {top:.6g} s")


class SimulatedTraceConservation(Observer):
    """The simulated run of a ``cplan.plan`` (the ``simulation`` annotation of cplan-simulate): every node of
    the instance graph started and ended once, the instances end within ``[0, makespan]`` and the last at the
    makespan, and each queue's busy time <= makespan (AB-T-2, AB-D-2). Times in seconds."""

    name = "trace-conservation"
    boundary = "simulation"

    def applies(self, module: ModuleOp) -> bool:
        return any("simulation" in p.attributes for p in _top(module, cplan.PlanOp))

    def observe(self, module: ModuleOp) -> Observation:
        findings: list[str] = []
        figures: dict[str, Any] = {}
        for p in _top(module, cplan.PlanOp):
            sim = p.attributes.get("simulation")
            if sim is None:
                continue
            makespan = _fnum(sim, "makespan") if isinstance(sim, DictionaryAttr) else None
            if makespan is None or makespan < 0:
                findings.append("cplan.plan: simulation annotation without a makespan >= 0")
                continue
            assert isinstance(sim, DictionaryAttr)
            counts = {k: v.value.data for k, v in sim.data.items() if isinstance(v, IntegerAttr)}
            nodes = counts.get("nodes", -1)
            for k in ("starts", "ends"):
                if counts.get(k) != nodes:
                    findings.append(f"cplan.plan: {counts.get(k)} simulated {k} for {nodes} instance nodes")
            ends_attr = sim.data.get("instance_ends")
            ends = [float(e.value.data) for e in ends_attr.data if isinstance(e, FloatAttr)] \
                if isinstance(ends_attr, ArrayAttr) else []
            sched_attr = sim.data.get("schedule")
            sched = _str_list(sched_attr) if isinstance(sched_attr, ArrayAttr) else []
            if len(ends) != len(sched):
                findings.append(f"cplan.plan: {len(ends)} instance ends for a schedule of {len(sched)} instances")
            for i, end in enumerate(ends):
                if not 0.0 <= end <= makespan * (1 + 1e-9) + 1e-15:
                    findings.append(f"instance {i} ({sched[i] if i < len(sched) else '?'}) ends at {end:.6g} s, "
                                    f"outside [0, makespan {makespan:.6g} s]")
            if ends and abs(max(ends) - makespan) > makespan * 1e-9 + 1e-15:
                findings.append(f"the last instance ends at {max(ends):.6g} s, not at the makespan {makespan:.6g} s")
            busy_attr = sim.data.get("busy")
            busy = {q: float(b.value.data) for q, b in busy_attr.data.items() if isinstance(b, FloatAttr)} \
                if isinstance(busy_attr, DictionaryAttr) else {}
            for q, b in sorted(busy.items()):
                if b < 0 or b > makespan * (1 + 1e-9) + 1e-15:
                    findings.append(f"queue {q} is busy {b:.6g} s in the simulated run, outside [0, makespan "
                                    f"{makespan:.6g} s]")
            figures = {"instances": len(sched), "nodes": nodes, "makespan_s": makespan, "busy_s": busy}
        return self.result(not findings, figures, findings,
                           f"{figures.get('nodes', 0)} nodes over {figures.get('instances', 0)} instances started "
                           f"and ended once, makespan {figures.get('makespan_s', 0.0):.6g} s")


# --------------------------------------------------------------------------- machine verification
class AbiLegality(Observer):
    """Machine ABI legality (AB-M-1, AB-D-1). ``vmachine.program``: every ``vmachine.kernel`` matches its
    :data:`~pipeplan.dialects.vmachine.KERNEL_ABI` signature and every instruction reads buffers that are
    declared, bound or written before it (:func:`~pipeplan.dialects.vmachine.check_program`, which stops
    at the first problem). ``tmachine.program``: :func:`~pipeplan.dialects.triton_machine.check_streams`;
    with the portable source in the module, each launch/view's buffer args are its task's (its ``task``)
    reads then writes (count checked), and each read is a weight/kv/edge buffer or written by an instruction ordered
    before it (stream order + waits)."""

    name = "abi-legality"
    boundary = "machine verification"

    def applies(self, module: ModuleOp) -> bool:
        return bool(_top(module, vmachine.ProgramOp) or _top(module, tmachine.ProgramOp))

    def observe(self, module: ModuleOp) -> Observation:
        findings: list[str] = []
        n = 0
        for prog in _top(module, vmachine.ProgramOp):
            for o in prog.walk():
                if isinstance(o, vmachine.INSTRUCTIONS):
                    n += 1
                    try:
                        o.verify_()
                    except VerifyException as e:
                        findings.append(str(e).splitlines()[0])
            if not findings:
                try:
                    vmachine.check_program(prog)
                except vmachine.MachineVerifyError as e:
                    findings.append(e.message)
        for tprog in _top(module, tmachine.ProgramOp):
            n += sum(1 for o in tprog.walk() if isinstance(o, tmachine.INSTRUCTIONS))
            findings += self._tmachine(module, tprog)
        return self.result(not findings, {"instructions": n, "findings": len(findings)}, findings,
                           f"{n} instructions, {len(findings)} ABI or dataflow violations")

    @staticmethod
    def _tmachine(module: ModuleOp, prog: tmachine.ProgramOp) -> list[str]:
        try:
            tmachine.check_streams(prog)
        except VerifyException as e:
            return [str(e).splitlines()[0]]
        tasks = {t.task_id: t for t in _tasks(module)}
        if not tasks:
            return []
        lifetimes = {b.name: b.type.lifetime for p in _top(module, pplan.PlanOp) for b in p.buffers()}
        streams = [list(b.ops) for s in prog.walk() if isinstance(s, tmachine.StreamOp) for b in s.body.blocks]
        flat = [o for ops in streams for o in ops if isinstance(o, tmachine.INSTRUCTIONS)]
        index = {id(o): i for i, o in enumerate(flat)}
        node = {o: i for i, o in enumerate(flat)}
        preds: list[list[int]] = [[] for _ in flat]
        for ops in streams:
            ins = [o for o in ops if isinstance(o, tmachine.INSTRUCTIONS)]
            for a, b in zip(ins, ins[1:]):
                preds[index[id(b)]].append(index[id(a)])
        for i, o in enumerate(flat):
            preds[i] += [node[w] for t in o.waits if (w := tmachine.signaller(t)) in node]
        topo = stable_topo_order(len(flat), preds)
        anc = ancestor_sets(len(flat), preds, topo) if topo is not None else [0] * len(flat)
        findings: list[str] = []
        reads_of: list[list[str]] = []
        writer: dict[str, list[int]] = {}
        for i, o in enumerate(flat):
            task = tasks.get(o.task.data)
            if task is None:
                findings.append(f"instruction '{o.id.data}' lowers task @{o.task.data}, which the portable plan "
                                "does not hold")
                reads_of.append([])
                continue
            reads, writes = task.reads(), task.writes()
            args = list(o.arg_ids)
            if len(args) != len(reads) + len(writes):
                kernel = o.kernel.data if isinstance(o, tmachine.LaunchOp) else o.name
                findings.append(f"instruction '{o.id.data}' ({kernel}) passes {len(args)} buffer args, its task "
                                f"@{task.task_id} reads {len(reads)} and writes {len(writes)} buffers")
                reads_of.append([])
                continue
            persistent = [lifetimes.get(r, "") in PERSISTENT_LIFETIMES for r in reads]
            reads_of.append([a for a, p in zip(args[:len(reads)], persistent) if not p])
            for a in args[len(reads):]:
                writer.setdefault(a, []).append(i)
        for i, o in enumerate(flat):
            for a in reads_of[i]:
                if not any((anc[i] >> w) & 1 for w in writer.get(a, [])):
                    findings.append(f"instruction '{o.id.data}' reads buffer '{a}' that no instruction ordered "
                                    f"before it writes ({o.lineage_text})")
        return findings


def default_observers() -> list[Observer]:
    """The observers of the module docstring's table, one instance each (trace conservation at both the
    timing and the simulation boundary: the projection's intervals, the simulated run's summary)."""
    return [CapabilityCoverage(), CostCoverage(), CommandCorrelation(), ResourceConflicts(),
            TraceConservation("timing"), SimulatedTraceConservation(), AbiLegality()]


def default_registry() -> ObserverRegistry:
    """A new registry holding :func:`default_observers` (embedders add their own with ``register``)."""
    return ObserverRegistry(default_observers())


__all__ = ["BOUNDARIES", "PASS_BOUNDARIES", "AbiLegality", "CapabilityCoverage", "CommandCorrelation",
           "CostCoverage", "Observation", "Observer", "ObserverRegistry", "ResourceConflicts", "SimulatedTraceConservation",
           "TraceConservation",
           "default_observers", "default_registry", "observing_callback"]
