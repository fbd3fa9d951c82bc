"""``convert-pplan-to-cplan``: bind a costed PortablePlanIR into one concrete plan (``cplan.plan``) envelope.

Seeds/003 "Joint scheduling and memory planning" and "Implemented reference-binder passes".
The pass is a thin adapter: :func:`problem_from_module` reads the ``pplan.plan``, its selected
``pplan.candidates``, the ``pplan.costed_view`` and the three bindings into a
:class:`~pipeplan.analysis.schedule.Problem`; :func:`bind` (the pure normalizer, also used by the
commit gate ``cplan-verify``) writes its decisions as one ``cplan.plan`` op
(:func:`~pipeplan.dialects.cplan.build_plan`).

Binders (option ``binder``):

* ``reference-queue`` (BindReferenceQueueTargetPass) and ``reference-slot``
  (BindReferenceSlotTargetPass): contract reference binders, not schedulers. 1:1 task -> command
  (``cmd.<task>``), the same dependency topology and buffer uses, implementation and placement only
  from the bindings, stable-order aligned linear allocation per (device, memory space) (AB-R-1..4).
  Commands run in the stable topological order of the portable tasks. Both emit the same commands
  and allocations and differ in the typed extension: per-queue command order with the fewest
  signal/wait edges that enforce every cross-queue dependency, or slots with one firing rule per
  command (all its dependencies) and a token sync for every dependency between slots (AB-R-7).
* ``list-schedule``: the production binder: critical-path list scheduling over the CostedTaskView
  (:func:`~pipeplan.analysis.schedule.list_schedule`) joint with interval memory planning that
  reuses transient buffers whose lifetimes cannot overlap in any legal execution
  (:func:`~pipeplan.analysis.memplan.plan_memory`); weights, KV cache and edge objects are
  persistent. Emits the queue schedule extension.

Every binder rejects, with a :class:`~pipeplan.dialects.cplan.CplanError` (``PassFailedException``
in the pass) naming device, peak and contributors, when a device's memory-space capacity is
exceeded; and when a cost is not covered by the risk policy (AB-S-7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from pipeplan.analysis.memplan import (
    MemoryPlan,
    PlanBuffer,
    SpaceReport,
    first_use_groups,
    groups_by_space,
    linear_offsets,
    plan_memory,
)
from pipeplan.analysis.schedule import (
    BufferNode,
    Problem,
    Schedule,
    TaskNode,
    ancestor_sets,
    cycle_members,
    effective_durations,
    list_schedule,
    predecessors,
    stable_topo_order,
)
from pipeplan.dialects.bindings import DeploymentBinding, EvidencePolicy, TargetBinding, require_binding
from pipeplan.dialects.cplan import (
    Alloc,
    Command,
    CplanError,
    Device,
    Fire,
    Lineage,
    Link,
    Queue,
    QueueSchedule,
    Slot,
    SlotDataflow,
    Sync,
    build_plan,
)
from pipeplan.dialects.cplan import PlanOp as CPlanOp
from pipeplan.dialects.diagnostics import gc_paused
from pipeplan.dialects.pplan import (
    MEMSPACES,
    BufferInfo,
    BufferType,
    CandidatesOp,
    CostedViewOp,
    EdgeObjectOp,
    KvOp,
    TableOp,
    TaskOp,
    WeightOp,
    find_plan,
    portable_digest,
)
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

CMD = "cmd."
ALLOC = "alloc."


def command_id(task_id: str) -> str:
    """The command id of portable task ``task_id`` (the 1:1 identity map, AB-R-1)."""
    return CMD + task_id


def alloc_id(buffer_id: str) -> str:
    """The allocation id of portable buffer ``buffer_id``."""
    return ALLOC + buffer_id


@dataclass(frozen=True)
class BindResult:
    """A bound plan (the ``cplan.plan`` op, unattached and not yet verified) plus the memory figures per
    (device, space) and the schedule it came from (``schedule`` is None for the reference binders)."""

    plan: CPlanOp
    reports: tuple[SpaceReport, ...]
    schedule: Schedule | None


# --------------------------------------------------------------------------- validation
def _check_problem(p: Problem) -> None:
    """Placement/implementation come only from explicit bindings (AB-R-4, AB-S-3); every use names
    a declared buffer. Raises CplanError(missing_binding | invalid_problem)."""
    devs = {d.id: d for d in p.devices}
    links = {ln.id: ln for ln in p.links}
    bufs = set()
    for b in p.buffers:
        if b.id in bufs:
            raise CplanError(f"duplicate buffer id '{b.id}'", code="invalid_problem", where=b.id)
        bufs.add(b.id)
        d = devs.get(b.device)
        if d is None:
            raise CplanError(f"buffer '{b.id}' ({b.lineage}) is on device '{b.device}' that the deployment binding "
                             f"does not declare", code="missing_binding", where=b.id)
        if b.space not in dict(d.capacities):
            raise CplanError(f"buffer '{b.id}' ({b.lineage}) needs memory space '{b.space}' that device '{b.device}' "
                             f"does not have", code="missing_binding", where=b.id)
    for t in p.tasks:
        d = devs.get(t.device)
        if d is None:
            raise CplanError(f"task '{t.id}' ({t.lineage}) has no device placement in the deployment binding "
                             f"(device '{t.device}')", code="missing_binding", where=t.id)
        if t.engine not in dict(d.engines):
            raise CplanError(f"task '{t.id}' ({t.lineage}) needs engine '{t.engine}' that device '{t.device}' lacks",
                             code="missing_binding", where=t.id)
        if not t.implementation or (t.candidates and t.implementation not in t.candidates):
            raise CplanError(f"task '{t.id}' ({t.lineage}) has no selected legal implementation "
                             f"(got '{t.implementation}', candidates {list(t.candidates)})",
                             code="missing_binding", where=t.id)
        if t.link and t.link not in links:
            raise CplanError(f"task '{t.id}' ({t.lineage}) uses undeclared link '{t.link}'", code="missing_binding",
                             where=t.id)
        if t.origin is None:
            raise CplanError(f"task '{t.id}' ({t.lineage}) has no origin (step, stage, block, model op)",
                             code="invalid_problem", where=t.id)
        for u in t.reads + t.writes:
            if u not in bufs:
                raise CplanError(f"task '{t.id}' ({t.lineage}) uses undeclared buffer '{u}'", code="invalid_problem",
                                 where=t.id)


def _topo(p: Problem) -> tuple[list[list[int]], list[int]]:
    preds = predecessors(p.tasks)
    topo = stable_topo_order(len(p.tasks), preds)
    if topo is None:
        cyc = cycle_members(len(p.tasks), preds)
        names = ", ".join(f"'{p.tasks[i].id}' ({p.tasks[i].lineage})" for i in cyc[:6])
        raise CplanError(f"task dependencies form a cycle through {names}", code="invalid_problem")
    return preds, topo


# --------------------------------------------------------------------------- common core
def _commands(p: Problem) -> tuple[Command, ...]:
    return tuple(Command(
        id=command_id(t.id), task=t.id, op=t.op, implementation=t.implementation, device=t.device, engine=t.engine,
        deps=tuple(command_id(d) for d in t.deps), reads=tuple(alloc_id(b) for b in t.reads),
        writes=tuple(alloc_id(b) for b in t.writes), lineage=_origin(t), provider=t.provider, status=t.status,
        duration=t.duration, link=t.link) for t in p.tasks)


def _origin(t: TaskNode) -> Lineage:
    if t.origin is None:  # validate() rejects such a problem first
        raise CplanError(f"task '{t.id}' ({t.lineage}) has no origin", code="invalid_problem", where=t.id)
    return t.origin


def _syncs(p: Problem, order: list[int] | tuple[int, ...]) -> tuple[Sync, ...]:
    """One signal/wait edge per dependency whose two tasks run on different (device, engine)s,
    in ``order`` of the waiting task, then dependency order."""
    idx = {t.id: i for i, t in enumerate(p.tasks)}
    out = []
    for v in order:
        t = p.tasks[v]
        for d in dict.fromkeys(t.deps):
            u = p.tasks[idx[d]]
            if (u.device, u.engine) != (t.device, t.engine):
                out.append(Sync(command_id(u.id), command_id(t.id)))
    return tuple(out)


def _reduced_syncs(p: Problem, order: list[int] | tuple[int, ...]) -> tuple[Sync, ...]:
    """Queue plans: the fewest signal/wait edges that, with queue order, enforce every dependency.

    ``order`` is the run order (a topological order of dependencies in which each queue's commands
    appear in queue order). A cross-queue dependency gets a sync unless queue order and the syncs
    already kept make it implied (greedy transitive reduction, latest signal first), so dropping any
    emitted sync leaves some dependency unenforced. Sorted by waiting command, then signal position.
    """
    idx = {t.id: i for i, t in enumerate(p.tasks)}
    pos = {v: k for k, v in enumerate(order)}
    last: dict[tuple[str, str], int] = {}
    anc = [0] * len(p.tasks)
    out: list[Sync] = []
    for v in order:
        t = p.tasks[v]
        q = (t.device, t.engine)
        reach = 0
        if q in last:
            u = last[q]
            reach = anc[u] | (1 << u)
        last[q] = v
        kept = []
        cands = sorted({idx[d] for d in t.deps if (p.tasks[idx[d]].device, p.tasks[idx[d]].engine) != q},
                       key=lambda u: -pos[u])
        for u in cands:
            if not (reach >> u) & 1:
                kept.append(u)
                reach |= anc[u] | (1 << u)
        anc[v] = reach
        out += [Sync(command_id(p.tasks[u].id), command_id(t.id)) for u in sorted(kept, key=lambda u: pos[u])]
    return tuple(out)


def _capacity_check(p: Problem, ends: dict[tuple[str, str], int], contributors: dict[tuple[str, str], list[str]]
                    ) -> None:
    """Reject when a (device, space) high-water mark exceeds its capacity (AB-S-6)."""
    caps = {d.id: dict(d.capacities) for d in p.devices}
    for (dev, space), peak in ends.items():
        cap = caps[dev][space]
        if peak > cap:
            who = "; ".join(contributors[(dev, space)])
            raise CplanError(f"device '{dev}' memory space '{space}': peak {peak} bytes exceeds capacity {cap} bytes; "
                             f"largest contributors: {who}", code="capacity_exceeded", where=dev)


def _contributors(p: Problem, idxs: list[int]) -> list[str]:
    top = sorted(idxs, key=lambda i: (-p.buffers[i].size, i))[:5]
    return [f"'{p.buffers[i].id}' {p.buffers[i].size} B {p.buffers[i].lifetime} ({p.buffers[i].lineage})" for i in top]


def _linear_allocs(p: Problem) -> tuple[Alloc, ...]:
    """Stable-order aligned linear allocation per (device, space) (AB-R-3)."""
    offsets = [0] * len(p.buffers)
    ends: dict[tuple[str, str], int] = {}
    contrib: dict[tuple[str, str], list[str]] = {}
    for key, idxs in groups_by_space(p.buffers):
        offs, end = linear_offsets([(p.buffers[i].size, p.buffers[i].alignment) for i in idxs])
        for i, o in zip(idxs, offs):
            offsets[i] = o
        ends[key] = end
        contrib[key] = _contributors(p, idxs)
    _capacity_check(p, ends, contrib)
    return _allocs(p, offsets)


def _allocs(p: Problem, offsets: list[int] | tuple[int, ...]) -> tuple[Alloc, ...]:
    return tuple(Alloc(alloc_id(b.id), b.id, b.device, b.space, offsets[i], b.size, b.alignment, b.lifetime)
                 for i, b in enumerate(p.buffers))


def _plan(p: Problem, binder: str, allocs, commands, syncs, ext) -> CPlanOp:
    return build_plan(binder=binder, target=p.target, deployment=p.deployment, evidence=p.evidence, risk=p.risk,
                      source=p.source, devices=p.devices, links=p.links, allocs=allocs, commands=commands,
                      syncs=syncs, extension=ext)


def _by_engine(p: Problem, order: list[int]) -> list[tuple[tuple[str, str], list[int]]]:
    """The tasks of ``order`` per (device, engine), engines in first-use order, tasks in ``order``."""
    groups = first_use_groups(order, lambda v: (p.tasks[v].device, p.tasks[v].engine))
    return [(k, [order[i] for i in idxs]) for k, idxs in groups]


def _queues_in_order(p: Problem, order: list[int]) -> QueueSchedule:
    return QueueSchedule(tuple(Queue(k[0], k[1], tuple(command_id(p.tasks[v].id) for v in vs))
                               for k, vs in _by_engine(p, order)))


def _slots_in_order(p: Problem, order: list[int]) -> SlotDataflow:
    fires = tuple(Fire(command_id(p.tasks[v].id), slot_id(p.tasks[v].device, p.tasks[v].engine),
                       tuple(command_id(d) for d in dict.fromkeys(p.tasks[v].deps))) for v in order)
    return SlotDataflow(tuple(Slot(slot_id(*k), k[0], k[1], tuple(command_id(p.tasks[v].id) for v in vs))
                              for k, vs in _by_engine(p, order)), fires)


def slot_id(device: str, engine: str) -> str:
    """The id of the dataflow slot of ``engine`` on ``device`` (one slot per engine)."""
    return f"slot.{device}.{engine}"


# --------------------------------------------------------------------------- binders
def bind_reference(p: Problem, extension: str) -> BindResult:
    """BindReferenceQueueTargetPass (``extension="queue"``) or BindReferenceSlotTargetPass
    (``"slot"``): see the module docstring. Raises CplanError (missing_binding, invalid_problem,
    cost_not_covered, capacity_exceeded)."""
    _check_problem(p)
    _, topo = _topo(p)
    effective_durations(p)  # AB-S-7: the plan carries these costs; reject uncovered ones here
    allocs = _linear_allocs(p)
    ext = _queues_in_order(p, topo) if extension == "queue" else _slots_in_order(p, topo)
    binder = "reference-queue" if extension == "queue" else "reference-slot"
    syncs = _reduced_syncs(p, topo) if extension == "queue" else _syncs(p, topo)
    return BindResult(_plan(p, binder, allocs, _commands(p), syncs, ext), (), None)


def execution_preds(n: int, queues: QueueSchedule, syncs: tuple[Sync, ...], index: dict[str, int]) -> list[list[int]]:
    """Predecessors of each command in the execution graph of a queue plan: the previous command
    of its queue and the signals it waits for. ``index`` maps command id -> position."""
    preds: list[list[int]] = [[] for _ in range(n)]
    for q in queues.queues:
        for a, b in zip(q.order, q.order[1:]):
            preds[index[b]].append(index[a])
    for s in syncs:
        w, g = index[s.wait], index[s.signal]
        if g not in preds[w]:
            preds[w].append(g)
    return preds


def bind_list_schedule(p: Problem) -> BindResult:
    """The production binder (see the module docstring). Raises CplanError (missing_binding,
    invalid_problem, cost_not_covered, capacity_exceeded naming device, peak and contributors)."""
    _check_problem(p)
    sched = list_schedule(p)
    idx = {t.id: i for i, t in enumerate(p.tasks)}
    queues = QueueSchedule(tuple(Queue(k[0], k[1], tuple(command_id(p.tasks[v].id) for v in vs))
                                 for k, vs in sched.queues))
    syncs = _reduced_syncs(p, sched.order)
    cidx = {command_id(t): i for t, i in idx.items()}
    preds = execution_preds(len(p.tasks), queues, syncs, cidx)
    anc = ancestor_sets(len(p.tasks), preds, list(sched.order))
    accessors: list[list[int]] = [[] for _ in p.buffers]
    bidx = {b.id: i for i, b in enumerate(p.buffers)}
    for v, t in enumerate(p.tasks):
        for u in dict.fromkeys(t.reads + t.writes):
            accessors[bidx[u]].append(v)
    pbufs = [PlanBuffer(b.id, b.device, b.space, b.size, b.alignment, b.lifetime, tuple(accessors[i]))
             for i, b in enumerate(p.buffers)]
    qpos = [(0, 0)] * len(p.tasks)
    for qn, (_, vs) in enumerate(sched.queues):
        for k, v in enumerate(vs):
            qpos[v] = (qn, k)
    mem: MemoryPlan = plan_memory(pbufs, anc, list(sched.start), list(sched.finish), qpos)
    ends = {(r.device, r.space): r.peak for r in mem.reports}
    bylineage = {b.id: b for b in p.buffers}
    contrib = {(r.device, r.space): [f"'{n}' {s} B {bylineage[n].lifetime} ({bylineage[n].lineage})"
                                     for n, s in r.contributors[:5]] for r in mem.reports}
    _capacity_check(p, ends, contrib)
    plan = _plan(p, "list-schedule", _allocs(p, mem.offsets), _commands(p), syncs, queues)
    return BindResult(plan, mem.reports, sched)


def bind(p: Problem, binder: str) -> BindResult:
    """The pure normalizer: the same Problem and binder always give the same ``cplan.plan`` (op for op).

    Raises CplanError(unsupported_binder) for an unknown binder name, and whatever the binder raises.
    """
    if binder == "reference-queue":
        return bind_reference(p, "queue")
    if binder == "reference-slot":
        return bind_reference(p, "slot")
    if binder == "list-schedule":
        return bind_list_schedule(p)
    raise CplanError(f"unknown binder '{binder}' (reference-queue | reference-slot | list-schedule)",
                     code="unsupported_binder")


# --------------------------------------------------------------------------- pplan adapter
@dataclass(frozen=True)
class PlanTask:
    """One ``pplan.task`` as the adapter reads it: the op, its id, stage index, read and written buffer names
    (``TaskOp.reads()``/``writes()``), dependencies (``PlanOp.dependencies()``) and lineage."""

    op: TaskOp
    id: str
    stage: int
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    deps: tuple[str, ...]
    lineage: str


def task_lineage(t: TaskOp) -> Lineage:
    """The :class:`~pipeplan.dialects.cplan_types.Lineage` of portable task ``t`` (its step, stage, block,
    model op and the edge a send/recv moves): the ``#cplan.lineage`` of its command."""
    return Lineage(t.step_name, t.stage_index, t.block.value.data, t.model_op.data, t.edge or "")


def read_plan(plan: PPlanOp) -> tuple[list[PlanTask], list[BufferInfo]]:
    """The plan's tasks in program order and its buffers (``PlanOp.buffers()``'s order), in one walk: each
    value's buffer name, declaration and producing task are found once (through stage/step results)."""
    name: dict[SSAValue, str] = {}
    decl: dict[SSAValue, Operation | None] = {}
    root: dict[SSAValue, SSAValue] = {}
    prod: dict[SSAValue, str] = {}
    readers: dict[SSAValue, list[str]] = {}
    buffers: list[BufferInfo] = []
    seen: set[Operation] = set()
    block = plan.body.block
    for o in block.ops:
        if isinstance(o, EdgeObjectOp | WeightOp | TableOp | KvOp):
            v = o.results[0]
            name[v], decl[v] = o.buffer_name, o
            if isinstance(o, EdgeObjectOp):
                seen.add(o)
                buffers.append(BufferInfo(o.buffer_name, o.type, -1, o.origin_text))
    tasks: list[PlanTask] = []

    def close(region_op: Operation) -> None:  # a region's results stand for the values it yields
        y = region_op.regions[0].block.last_op
        assert y is not None
        for res, yv in zip(region_op.results, y.operands):
            root[res] = root.get(yv, yv)
            if yv in name:
                name[res], decl[res] = name[yv], decl[yv]

    for sp in plan.steps():
        step = str(sp.step.data)
        for st in sp.stages():
            idx = st.index.value.data
            pre = f"{step}.s{idx}."
            for t in st.tasks():
                seg = t.properties["operandSegmentSizes"]
                assert isinstance(seg, DenseArrayBase)
                n_in, n_up, _ = seg.get_values()
                operands = t.operands
                ins, ups, after = operands[:n_in], operands[n_in:n_in + n_up], operands[n_in + n_up:]
                me = pre + t.task.data
                deps: dict[str, None] = {}
                in_roots = [root.get(v, v) for v in ins]
                for rv in in_roots:
                    if rv in prod:
                        deps[prod[rv]] = None
                for v in ups:
                    rv = root.get(v, v)
                    if rv in prod:
                        deps[prod[rv]] = None
                    for x in readers.get(rv, ()):
                        deps[x] = None
                for v in after:
                    rv = root.get(v, v)
                    if rv in prod:
                        deps[prod[rv]] = None
                deps.pop(me, None)
                for rv in in_roots:
                    readers.setdefault(rv, []).append(me)
                for v in (*ins, *ups):
                    d = decl[v]
                    if isinstance(d, WeightOp | TableOp | KvOp) and d not in seen:
                        seen.add(d)
                        buffers.append(BufferInfo(d.buffer_name, d.type, d.stage.value.data, d.origin_text))
                written = [r for r in t.results if isinstance(r.type, BufferType)]
                for r in t.results:
                    prod[r] = me
                if ups:
                    for r, u in zip(written, ups):
                        name[r], decl[r] = name[u], decl[u]
                elif written:
                    assert t.out is not None
                    name[written[0]], decl[written[0]] = f"{pre}{t.out.data}", None
                if t.out is not None and written:
                    buffers.append(BufferInfo(name[written[0]], cast(BufferType, written[0].type), idx,
                                              f"{step}:{t.out.data}"))
                blk = t.block.value.data
                where = f"stage {idx}" + (f" block {blk}" if blk >= 0 else "")
                tasks.append(PlanTask(t, me, idx, tuple(name[v] for v in ins), tuple(name[r] for r in written),
                                      tuple(deps), f"model op {t.model_op.data} -> {where} ({step}) -> task @{me}"))
            close(st)
        close(sp)
    for o in block.ops:
        if isinstance(o, WeightOp | TableOp | KvOp) and o not in seen:
            buffers.append(BufferInfo(o.buffer_name, o.type, o.stage.value.data, o.origin_text))
    return tasks, buffers


def problem_from_module(module: ModuleOp, risk: str = "policy") -> Problem:
    """Read a costed ``pplan`` module into a Problem (see pipeplan.dialects.pplan/bindings).

    * tasks: one per ``pplan.task`` in program order, placed on the device the DeploymentBinding
      assigns to its stage; implementation and engine from its rank-0 ``#pplan.candidate`` (the
      module's ``pplan.candidates`` names the target = TargetBinding); cost from the task's
      ``#pplan.cost`` of that candidate once a ``pplan.costed_view`` is in the module (``missing`` when
      there is none); send/recv tasks use
      the link from the sender's device to the next stage's device;
    * buffers: one per ``pplan.buffer``; a stage buffer lives on its stage's device, an edge buffer
      (stage -1) on the device of the task that writes it (else the first that reads it); the
      memory space is the buffer's ``memspace``;
    * devices: every deployment device, capacity ``memory_bytes`` for each memory space
      (``device``, ``host``, ``link``), engines = those the selected candidates use, 1 slot each;
    * links: ``link.<a>.<b>`` between consecutive stage devices (chain topology), capacity the
      receiver's ``memory_bytes`` (a transfer must fit in the receiver);
    * risk: ``policy`` derives it from the EvidencePolicy (``fallback = allow`` ->
      ``accept-fallback``, else ``strict``); any RISK_POLICIES name overrides it explicitly.

    Raises PassFailedException ("missing binding: ..."), CplanError(missing_binding) when a task has
    no selected candidate or a stage has no device.
    """
    need = "convert-pplan-to-cplan"
    tb = TargetBinding.from_op(require_binding(module, "TargetBinding", need))  # type: ignore[arg-type]
    db = DeploymentBinding.from_op(require_binding(module, "DeploymentBinding", need))  # type: ignore[arg-type]
    ep = EvidencePolicy.from_op(require_binding(module, "EvidencePolicy", need))  # type: ignore[arg-type]
    try:
        plan = find_plan(module)
    except ValueError as e:
        raise CplanError(str(e), code="invalid_problem") from None
    cands_ops = [o for o in module.ops if isinstance(o, CandidatesOp) and o.target.data == tb.target]
    if len(cands_ops) != 1:
        raise CplanError(f"expected one pplan.candidates for target '{tb.target}', found {len(cands_ops)}; run "
                         f"pplan-legalize and pplan-select-implementations first", code="missing_binding")
    views = [o for o in module.ops if isinstance(o, CostedViewOp)]
    if risk == "policy":
        risk = "accept-fallback" if ep.fallback == "allow" else "strict"

    def stage_dev(stage: int, what: str) -> str:
        try:
            return db.stage_device(stage).id
        except KeyError:
            raise CplanError(f"{what}: stage {stage} has no device in the deployment binding",
                             code="missing_binding") from None

    engines: dict[str, list[str]] = {d.id: [] for d in db.devices}
    tasks = []
    ptasks, pbuffers = read_plan(plan)
    for pt in ptasks:
        t, name = pt.op, pt.id
        cands = t.candidates
        cand = next((c for c in cands if c.rank == 0), None)  # TaskOp.selected_candidate
        if cand is None:
            raise CplanError(f"no selected implementation for {pt.lineage}", code="missing_binding", where=name)
        dev = stage_dev(pt.stage, pt.lineage)
        eng = cand.engine
        if eng not in engines[dev]:
            engines[dev].append(eng)
        cost = t.cost_of(cand.rule) if views else None
        link = ""
        op_name = str(t.op.data)
        if op_name == "send":
            nxt = pt.stage + 1
            if nxt < len(db.stage_devices):
                link = f"link.{dev}.{stage_dev(nxt, pt.lineage)}"
        lineage = f"{pt.lineage} -> candidate {cand.impl}"
        tasks.append(TaskNode(
            id=name, op=op_name, device=dev, engine=eng, implementation=cand.impl,
            deps=pt.deps, reads=pt.reads, writes=pt.writes,
            duration=None if cost is None else cost.duration_s,
            provider="" if cost is None else cost.evidence,
            status="missing" if cost is None else cost.status, lineage=lineage,
            candidates=tuple(c.impl for c in cands), link=link,
            origin=task_lineage(t)))
    writer: dict[str, str] = {}
    reader: dict[str, str] = {}
    for tn in tasks:
        for w in tn.writes:
            writer.setdefault(w, tn.device)
        for r in tn.reads:
            reader.setdefault(r, tn.device)
    buffers = []
    for b in pbuffers:
        name, st = b.name, b.stage
        if st >= 0:
            dev = stage_dev(st, f"buffer @{name}")
        else:
            dev = writer.get(name) or reader.get(name) or db.stage_devices[0]
        buffers.append(BufferNode(name, dev, b.type.memspace, b.type.nbytes, b.type.alignment,
                                  b.type.lifetime, f"{b.origin} on stage {st}"))

    devices = tuple(Device(d.id, tuple((s, d.memory_bytes) for s in MEMSPACES),
                           tuple((e, 1) for e in engines[d.id])) for d in db.devices)
    links = []
    seen = set()
    for a, b2 in zip(db.stage_devices, db.stage_devices[1:]):
        lid = f"link.{a}.{b2}"
        if lid not in seen:
            seen.add(lid)
            links.append(Link(lid, a, b2, db.device(b2).memory_bytes))
    return Problem(tuple(tasks), tuple(buffers), devices, tuple(links), target=tb.plugin_revision,
                   deployment="deployment:" + ",".join(db.stage_devices), evidence=f"{','.join(ep.providers)}@{ep.revision}",
                   risk=risk, source="sha256:" + portable_digest(plan))


@dataclass(frozen=True)
class ConvertPplanToCplanPass(ModulePass):
    """Bind the module's costed ``pplan.plan`` into one ``cplan.plan`` (see the module docstring).

    Options: ``binder`` = ``list-schedule`` (default) | ``reference-queue`` | ``reference-slot``;
    ``risk`` = ``policy`` (derive from the EvidencePolicy) or a RISK_POLICIES name;
    ``keep_source`` keeps the pplan ops next to the new plan so ``cplan-verify`` can run the commit
    gate (by default the portable ops are removed, as a conversion does).

    Errors: PassFailedException carrying the CplanError's one-line message (missing binding,
    capacity exceeded with device/peak/contributors, uncovered cost, unknown binder).
    """

    name = "convert-pplan-to-cplan"

    binder: str = "list-schedule"
    risk: str = "policy"
    keep_source: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():  # thousands of acyclic values and ops: no cyclic-GC scans while they are built
            self._apply(op)

    def _apply(self, op: ModuleOp) -> None:
        try:
            problem = problem_from_module(op, self.risk)
            result = bind(problem, self.binder)
        except CplanError as e:
            raise PassFailedException(e.one_line()) from None
        new = result.plan
        if not self.keep_source:
            for o in list(op.ops):
                if o.name.startswith("pplan."):
                    o.detach()
                    o.erase()
        op.body.block.add_op(new)
        new.verify()
