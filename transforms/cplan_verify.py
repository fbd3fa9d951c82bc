"""``cplan-verify``: the seven construction invariants and the commit gate of ConcretePlanIR.

Seeds/003 "Joint scheduling and memory planning" (AB-S-1..7) and "Implemented reference-binder
passes" (AB-R-5, AB-R-6). Pure functions over :class:`~pipeplan.dialects.cplan.ConcretePlan`:

* :func:`check_invariants` -- returns every :class:`Violation` of:
  1. ``AB-S-1`` command ids unique, dependencies closed (name existing commands) and acyclic;
  2. ``AB-S-2`` the execution order cannot deadlock and enforces every dependency: queue plans run
     each queue in order and a command waits for its ``cplan.sync`` signals, so queue order plus
     signal/wait must be acyclic and every dependency must be implied by it (a dropped wait is an
     unenforced dependency); slot plans fire on their firing rules, which must cover every
     dependency and be acyclic; every command is in exactly one queue/slot matching its placement;
  3. ``AB-S-3`` every command names an implementation (not empty/``generic``) and is placed on a
     declared device and one of its engines; a transfer's link is declared and leaves its device;
  4. ``AB-S-4`` every buffer access names an allocation on the command's device (an ``edge``
     object may also be on a device linked to it: both link endpoints see it), and each read of a transient buffer happens after one
     of its writers in every execution (its lifetime covers producers and consumers);
  5. ``AB-S-5`` two allocations whose byte ranges overlap in one (device, space) are both
     transient and every access of one happens-before every access of the other in every legal
     execution (the happens-before closure of the execution order, not one schedule);
  6. ``AB-S-6`` per device and memory space the high-water mark fits the capacity; queues or slots
     per engine fit its slot count; a transfer's bytes fit its link's capacity;
  7. ``AB-S-7`` every command's cost status is covered by the plan's risk policy.

  Each message names the commands/buffers involved and their lineage.
* :func:`commit_gate` (AB-R-5) -- rebuilds the plan from its portable Problem with the same pure
  normalizer (:func:`~pipeplan.transforms.convert_pplan_to_cplan.bind`) and requires equality of
  source-buffer identity, exact size, task lineage, command mapping and the typed extension.
* :func:`relation_violations` (AB-R-6) -- portable <-> concrete relations: buffer identity,
  capacity (size) and alignment; dependency correspondence; buffer access; operation identity;
  target ABI (plan target and legal implementation).

The pass ``cplan-verify`` runs :func:`check_invariants` on every ``cplan.plan`` of the module and,
when the module also holds the portable source (``convert-pplan-to-cplan{keep_source=true}``) or
``require_source`` is set, the commit gate and relation invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pipeplan.dialects.cplan import (
    PERSISTENT_LIFETIMES,
    ConcretePlan,
    CplanError,
    PlanOp,
    QueueSchedule,
    plan_from_ir,
    risk_allows,
)
from pipeplan.lowering.schedule import Problem, ancestor_sets, stable_topo_order
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException


@dataclass(frozen=True)
class Violation:
    """One failed invariant: ``invariant`` (e.g. ``AB-S-5``), a stable ``code`` and a message naming
    the commands/buffers involved and their lineage."""

    invariant: str
    code: str
    message: str

    def text(self) -> str:
        return f"{self.invariant} {self.code}: {self.message}"


class _Ctx:
    """Indexes shared by the checks."""

    def __init__(self, plan: ConcretePlan):
        self.plan = plan
        self.cmds = plan.commands
        self.index: dict[str, int] = {}
        for i, c in enumerate(plan.commands):
            self.index.setdefault(c.id, i)
        self.allocs = {a.id: a for a in plan.allocs}
        self.devices = {d.id: d for d in plan.devices}
        self.links = {ln.id: ln for ln in plan.links}

    def who(self, cid: str) -> str:
        i = self.index.get(cid)
        return f"'{cid}' ({self.cmds[i].lineage})" if i is not None else f"'{cid}'"


def _dep_preds(cx: _Ctx) -> list[list[int]]:
    return [[cx.index[d] for d in dict.fromkeys(c.deps) if d in cx.index] for c in cx.cmds]


def execution_graph(cx: _Ctx) -> list[list[int]]:
    """Predecessors in the execution order: queue predecessor + waited signals (queue plans), or
    firing-rule commands + waited signals (slot plans). Unknown ids are skipped (reported elsewhere)."""
    n = len(cx.cmds)
    preds: list[list[int]] = [[] for _ in range(n)]

    def add(w: str, s: str) -> None:
        if w in cx.index and s in cx.index and cx.index[s] not in preds[cx.index[w]]:
            preds[cx.index[w]].append(cx.index[s])

    ext = cx.plan.extension
    if isinstance(ext, QueueSchedule):
        for q in ext.queues:
            for a, b in zip(q.order, q.order[1:]):
                add(b, a)
    else:
        for f in ext.fires:
            for a in f.after:
                add(f.command, a)
    for s in cx.plan.syncs:
        add(s.wait, s.signal)
    return preds


def _cycle_text(cx: _Ctx, preds: list[list[int]]) -> str:
    from pipeplan.lowering.schedule import cycle_members

    cyc = cycle_members(len(cx.cmds), preds)
    return ", ".join(cx.who(cx.cmds[i].id) for i in cyc[:6])


# --------------------------------------------------------------------------- the seven checks
def check_s1(cx: _Ctx) -> list[Violation]:
    """AB-S-1: ids unique; dependencies closed and acyclic."""
    out = []
    seen: set[str] = set()
    for c in cx.cmds:
        if c.id in seen:
            out.append(Violation("AB-S-1", "duplicate_command", f"command id {cx.who(c.id)} is declared twice"))
        seen.add(c.id)
        for d in c.deps:
            if d not in cx.index:
                out.append(Violation("AB-S-1", "unknown_dependency",
                                     f"command {cx.who(c.id)} depends on unknown command '{d}'"))
    preds = _dep_preds(cx)
    if stable_topo_order(len(cx.cmds), preds) is None:
        out.append(Violation("AB-S-1", "dependency_cycle", f"command dependencies form a cycle through "
                                                           f"{_cycle_text(cx, preds)}"))
    return out


def check_s2(cx: _Ctx) -> tuple[list[Violation], list[int] | None]:
    """AB-S-2: no deadlock, every dependency enforced, placement matches the extension.
    Returns the violations and the happens-before closure (None when the order is cyclic)."""
    out = []
    ext = cx.plan.extension
    where: dict[str, tuple[str, str]] = {}
    kind = "queue" if isinstance(ext, QueueSchedule) else "slot"
    if isinstance(ext, QueueSchedule):
        for q in ext.queues:
            for c in q.order:
                where.setdefault(c, (q.device, q.engine))
                if c not in cx.index:
                    out.append(Violation("AB-S-2", "unknown_command",
                                         f"queue {q.device}/{q.engine} orders unknown command '{c}'"))
    else:
        for s in ext.slots:
            for c in s.commands:
                where.setdefault(c, (s.device, s.engine))
                if c not in cx.index:
                    out.append(Violation("AB-S-2", "unknown_command", f"slot '{s.id}' holds unknown command '{c}'"))
    for s in cx.plan.syncs:
        for end in (s.signal, s.wait):
            if end not in cx.index:
                out.append(Violation("AB-S-2", "unknown_command",
                                     f"sync {s.signal} -> {s.wait} names unknown command '{end}'"))
    for c in cx.cmds:
        w = where.get(c.id)
        if w is None:
            out.append(Violation("AB-S-2", "unscheduled_command", f"command {cx.who(c.id)} is in no {kind}"))
        elif w != (c.device, c.engine):
            out.append(Violation("AB-S-2", "placement_mismatch",
                                 f"command {cx.who(c.id)} is placed on {c.device}/{c.engine} but its {kind} is "
                                 f"on {w[0]}/{w[1]}"))
    preds = execution_graph(cx)
    topo = stable_topo_order(len(cx.cmds), preds)
    if topo is None:
        out.append(Violation("AB-S-2", "deadlock", f"{kind} order and signal/wait edges form a cycle (deadlock) "
                                                   f"through {_cycle_text(cx, preds)}"))
        return out, None
    anc = ancestor_sets(len(cx.cmds), preds, topo)
    for i, c in enumerate(cx.cmds):
        for d in dict.fromkeys(c.deps):
            j = cx.index.get(d)
            if j is not None and not (anc[i] >> j) & 1:
                out.append(Violation("AB-S-2", "unenforced_dependency",
                                     f"dependency {cx.who(d)} -> {cx.who(c.id)} is not enforced by {kind} order or "
                                     f"signal/wait (missing wait)"))
    return out, anc


GENERIC_IMPLS = ("", "generic", "unsupported")


def check_s3(cx: _Ctx) -> list[Violation]:
    """AB-S-3: legal implementation and placement."""
    out = []
    for c in cx.cmds:
        if c.implementation in GENERIC_IMPLS:
            out.append(Violation("AB-S-3", "no_implementation",
                                 f"command {cx.who(c.id)} has no legal implementation ('{c.implementation}')"))
        d = cx.devices.get(c.device)
        if d is None:
            out.append(Violation("AB-S-3", "unknown_device", f"command {cx.who(c.id)} is placed on undeclared device "
                                                             f"'{c.device}'"))
        elif c.engine not in dict(d.engines):
            out.append(Violation("AB-S-3", "unknown_engine", f"command {cx.who(c.id)} is placed on engine '{c.engine}' "
                                                             f"that device '{c.device}' lacks"))
        if c.link:
            ln = cx.links.get(c.link)
            if ln is None:
                out.append(Violation("AB-S-3", "unknown_link", f"command {cx.who(c.id)} uses undeclared link "
                                                               f"'{c.link}'"))
            elif ln.src != c.device:
                out.append(Violation("AB-S-3", "link_placement", f"command {cx.who(c.id)} on '{c.device}' uses link "
                                                                 f"'{c.link}' leaving '{ln.src}'"))
    return out


def _accessors(cx: _Ctx) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    readers: dict[str, list[int]] = {a: [] for a in cx.allocs}
    writers: dict[str, list[int]] = {a: [] for a in cx.allocs}
    for i, c in enumerate(cx.cmds):
        for r in dict.fromkeys(c.reads):
            if r in readers:
                readers[r].append(i)
        for w in dict.fromkeys(c.writes):
            if w in writers:
                writers[w].append(i)
    return readers, writers


def check_s4(cx: _Ctx, anc: list[int] | None) -> list[Violation]:
    """AB-S-4: accesses name allocations on the right device; transient reads follow a writer."""
    out = []
    for c in cx.cmds:
        ok_devs = {c.device}
        linked = {c.device} | {ln.dst for ln in cx.plan.links if ln.src == c.device} | \
            {ln.src for ln in cx.plan.links if ln.dst == c.device}
        for u in c.reads + c.writes:
            a = cx.allocs.get(u)
            if a is None:
                out.append(Violation("AB-S-4", "unknown_buffer", f"command {cx.who(c.id)} accesses unallocated buffer "
                                                                 f"'{u}'"))
            elif a.device not in (linked if a.lifetime == "edge" else ok_devs):
                out.append(Violation("AB-S-4", "buffer_placement",
                                     f"command {cx.who(c.id)} on '{c.device}' accesses buffer '{u}' (source "
                                     f"'{a.source}') allocated on '{a.device}'"))
    if anc is None:
        return out
    readers, writers = _accessors(cx)
    for aid, a in cx.allocs.items():
        if a.lifetime in PERSISTENT_LIFETIMES:
            continue
        for r in readers[aid]:
            ws = [w for w in writers[aid] if w != r]
            if not any((anc[r] >> w) & 1 for w in ws):
                out.append(Violation(
                    "AB-S-4", "lifetime_gap",
                    f"transient buffer '{aid}' (source '{a.source}') is read by {cx.who(cx.cmds[r].id)} before any "
                    f"producer is guaranteed to have written it (producers: "
                    f"{', '.join(cx.who(cx.cmds[w].id) for w in ws) or 'none'})"))
    return out


def check_s5(cx: _Ctx, anc: list[int] | None) -> list[Violation]:
    """AB-S-5: overlapping allocations are transient and ordered in every legal execution."""
    out = []
    readers, writers = _accessors(cx)
    acc: dict[str, list[int]] = {a: sorted(set(readers[a] + writers[a])) for a in cx.allocs}
    masks = {a: (_mask(xs), _before_all(xs, anc)) for a, xs in acc.items()} if anc is not None else {}
    groups: dict[tuple[str, str], list] = {}
    for a in cx.plan.allocs:
        if a.size > 0:
            groups.setdefault((a.device, a.space), []).append(a)
    for (dev, space), allocs in sorted(groups.items()):
        allocs = sorted(allocs, key=lambda a: (a.offset, a.id))
        active: list = []
        for a in allocs:
            active = [b for b in active if b.offset + b.size > a.offset]
            for b in active:
                if a.id == b.id:
                    continue
                msg = _overlap_problem(cx, a, b, acc, anc, masks)
                if msg:
                    out.append(Violation("AB-S-5", "unsafe_reuse", f"{dev}/{space}: allocations '{b.id}' "
                                                                   f"[{b.offset}, {b.offset + b.size}) and '{a.id}' "
                                                                   f"[{a.offset}, {a.offset + a.size}) overlap; {msg}"))
            active.append(a)
    return out


def _overlap_problem(cx: _Ctx, a, b, acc: dict[str, list[int]], anc: list[int] | None,
                     masks: dict[str, tuple[int, int]]) -> str:
    if a.lifetime in PERSISTENT_LIFETIMES or b.lifetime in PERSISTENT_LIFETIMES:
        return f"a {a.lifetime if a.lifetime in PERSISTENT_LIFETIMES else b.lifetime} buffer is live for the whole plan"
    aa, bb = acc.get(a.id, []), acc.get(b.id, [])
    if not aa or not bb:
        return ""
    if anc is None:
        return "no execution order exists to separate them"

    ma, mb = masks[a.id], masks[b.id]
    if not ma[0] & ~mb[1] or not mb[0] & ~ma[1]:
        return ""
    shared = next((x for x in aa if x in set(bb)), None)
    if shared is not None:
        return f"they may be live at once: {cx.who(cx.cmds[shared].id)} accesses both"
    x, y = _not_before(aa, bb, anc)
    y2, x2 = _not_before(bb, aa, anc)
    return (f"they may be live at once: {cx.who(cx.cmds[x].id)} does not happen-before {cx.who(cx.cmds[y].id)} and "
            f"{cx.who(cx.cmds[y2].id)} does not happen-before {cx.who(cx.cmds[x2].id)} in every legal execution")


def _not_before(xs: list[int], ys: list[int], anc: list[int]) -> tuple[int, int]:
    """A witness ``(x, y)``, x in ``xs`` and y in ``ys``, such that x does not happen-before y (the
    caller knows one exists: not every access of ``xs`` precedes every access of ``ys``)."""
    return next(((x, y) for x in xs for y in ys if not (anc[y] >> x) & 1), (xs[0], ys[0]))


def _mask(xs: list[int]) -> int:
    m = 0
    for x in xs:
        m |= 1 << x
    return m


def _before_all(ys: list[int], anc: list[int]) -> int:
    """Bitset of the commands that happen-before every command in ``ys``."""
    m = -1
    for y in ys:
        m &= anc[y]
    return m


def check_s6(cx: _Ctx) -> list[Violation]:
    """AB-S-6: device/memory-space, engine and link capacities."""
    out = []
    high: dict[tuple[str, str], int] = {}
    for a in cx.plan.allocs:
        d = cx.devices.get(a.device)
        if d is None:
            out.append(Violation("AB-S-6", "unknown_device", f"allocation '{a.id}' is on undeclared device "
                                                             f"'{a.device}'"))
            continue
        if a.space not in dict(d.capacities):
            out.append(Violation("AB-S-6", "unknown_space", f"allocation '{a.id}' is in memory space '{a.space}' that "
                                                            f"device '{a.device}' lacks"))
            continue
        k = (a.device, a.space)
        high[k] = max(high.get(k, 0), a.offset + a.size)
    for (dev, space), peak in sorted(high.items()):
        cap = dict(cx.devices[dev].capacities)[space]
        if peak > cap:
            top = sorted((a for a in cx.plan.allocs if (a.device, a.space) == (dev, space)),
                         key=lambda a: (-a.size, a.id))[:5]
            out.append(Violation("AB-S-6", "capacity_exceeded",
                                 f"device '{dev}' memory space '{space}': peak {peak} bytes exceeds capacity {cap}; "
                                 f"largest: {', '.join(f'{a.id} ({a.size} B)' for a in top)}"))
    per_engine: dict[tuple[str, str], int] = {}
    ext = cx.plan.extension
    units = [(q.device, q.engine) for q in ext.queues] if isinstance(ext, QueueSchedule) else \
        [(s.device, s.engine) for s in ext.slots]
    for u in units:
        per_engine[u] = per_engine.get(u, 0) + 1
    for (dev, eng), n_units in sorted(per_engine.items()):
        d = cx.devices.get(dev)
        slots = dict(d.engines).get(eng) if d else None
        if slots is None:
            out.append(Violation("AB-S-6", "unknown_engine", f"{dev}/{eng} is used by the schedule but not declared"))
        elif n_units > slots:
            out.append(Violation("AB-S-6", "engine_oversubscribed", f"engine {dev}/{eng} has {slots} slot(s) but the "
                                                                    f"schedule uses {n_units}"))
    for c in cx.cmds:
        ln = cx.links.get(c.link) if c.link else None
        if ln is not None:
            moved = sum(cx.allocs[w].size for w in dict.fromkeys(c.writes) if w in cx.allocs)
            if moved > ln.capacity:
                out.append(Violation("AB-S-6", "link_capacity", f"command {cx.who(c.id)} moves {moved} bytes over link "
                                                                 f"'{ln.id}' of capacity {ln.capacity}"))
    return out


def check_s7(cx: _Ctx) -> list[Violation]:
    """AB-S-7: every cost used is present or covered by the explicit risk policy."""
    out = []
    for c in cx.cmds:
        if not risk_allows(cx.plan.risk, c.status):
            out.append(Violation("AB-S-7", "cost_not_covered",
                                 f"command {cx.who(c.id)} uses a {c.status} cost (provider '{c.provider}') that risk "
                                 f"policy '{cx.plan.risk}' does not cover"))
    return out


def check_invariants(plan: ConcretePlan) -> list[Violation]:
    """All violations of AB-S-1..7 in invariant order (empty when the plan is sound)."""
    cx = _Ctx(plan)
    s2, anc = check_s2(cx)
    return check_s1(cx) + s2 + check_s3(cx) + check_s4(cx, anc) + check_s5(cx, anc) + check_s6(cx) + check_s7(cx)


# --------------------------------------------------------------------------- commit gate + relations
def commit_gate(plan: ConcretePlan, problem: Problem) -> list[Violation]:
    """AB-R-5: rebuild with the same binder and pure normalizer and compare (empty when equal).

    Differences are reported per field group: source-buffer identity and exact size (allocations),
    task lineage and command mapping (commands), signal/wait edges, the typed extension, and the
    plan's identities. Raises nothing; a rebuild that fails is reported as a violation.
    """
    from pipeplan.transforms.convert_pplan_to_cplan import bind

    try:
        ref = bind(problem, plan.binder).plan
    except CplanError as e:
        return [Violation("AB-R-5", "rebuild_failed", f"the portable source no longer binds: {e.message}")]
    out = []
    names = {"allocs": "allocation (source-buffer identity, exact size, offset)", "commands":
             "command mapping / task lineage", "syncs": "signal/wait edges", "extension": "typed extension"}
    for f in fields(ConcretePlan):
        got, want = getattr(plan, f.name), getattr(ref, f.name)
        if got == want:
            continue
        what = names.get(f.name, f.name)
        if isinstance(got, tuple) and isinstance(want, tuple):
            k = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
            out.append(Violation("AB-R-5", "commit_gate_mismatch",
                                 f"{what} differs from the rebuild at #{k}: got "
                                 f"{got[k] if k < len(got) else '<none>'}, rebuilt "
                                 f"{want[k] if k < len(want) else '<none>'}"))
        else:
            out.append(Violation("AB-R-5", "commit_gate_mismatch", f"{what} differs from the rebuild: got {got!r}, "
                                                                   f"rebuilt {want!r}"))
    return out


def relation_violations(plan: ConcretePlan, problem: Problem) -> list[Violation]:
    """AB-R-6: portable <-> concrete relations (see the module docstring)."""
    from pipeplan.transforms.convert_pplan_to_cplan import alloc_id, command_id

    out = []
    if plan.target != problem.target or plan.source != problem.source:
        out.append(Violation("AB-R-6", "target_abi", f"plan is bound to target '{plan.target}' from '{plan.source}', "
                                                     f"the portable input to '{problem.target}' from '{problem.source}'"))
    by_source: dict[str, list] = {}
    for a in plan.allocs:
        by_source.setdefault(a.source, []).append(a)
    for b in problem.buffers:
        got = by_source.get(b.id, [])
        if len(got) != 1:
            out.append(Violation("AB-R-6", "buffer_identity", f"portable buffer '{b.id}' ({b.lineage}) has {len(got)} "
                                                              f"allocations, expected 1"))
            continue
        a = got[0]
        if a.size < b.size or a.alignment % b.alignment or a.offset % b.alignment or a.lifetime != b.lifetime:
            out.append(Violation("AB-R-6", "buffer_capacity",
                                 f"allocation '{a.id}' ({a.size} B, align {a.alignment}, offset {a.offset}, "
                                 f"{a.lifetime}) does not hold portable buffer '{b.id}' ({b.size} B, align "
                                 f"{b.alignment}, {b.lifetime})"))
    known = {b.id for b in problem.buffers}
    for a in plan.allocs:
        if a.source not in known:
            out.append(Violation("AB-R-6", "buffer_identity", f"allocation '{a.id}' has no portable buffer "
                                                              f"'{a.source}'"))
    cmds = {c.task: c for c in plan.commands}
    for t in problem.tasks:
        c = cmds.get(t.id)
        if c is None:
            out.append(Violation("AB-R-6", "operation_identity", f"portable task '{t.id}' ({t.lineage}) has no "
                                                                 f"command"))
            continue
        if c.op != t.op or c.id != command_id(t.id):
            out.append(Violation("AB-R-6", "operation_identity", f"command '{c.id}' runs op '{c.op}' but task "
                                                                 f"'{t.id}' ({t.lineage}) is '{t.op}'"))
        if c.deps != tuple(command_id(d) for d in t.deps):
            out.append(Violation("AB-R-6", "dependency_correspondence",
                                 f"command '{c.id}' depends on {list(c.deps)} but task '{t.id}' ({t.lineage}) on "
                                 f"{list(t.deps)}"))
        if c.reads != tuple(alloc_id(b) for b in t.reads) or c.writes != tuple(alloc_id(b) for b in t.writes):
            out.append(Violation("AB-R-6", "buffer_access", f"command '{c.id}' accesses {list(c.reads)}/"
                                                            f"{list(c.writes)} but task '{t.id}' ({t.lineage}) "
                                                            f"{list(t.reads)}/{list(t.writes)}"))
        if t.candidates and c.implementation not in t.candidates:
            out.append(Violation("AB-R-6", "target_abi", f"command '{c.id}' uses implementation "
                                                         f"'{c.implementation}' that target '{problem.target}' does "
                                                         f"not offer for task '{t.id}' ({t.lineage})"))
    tasks = {t.id for t in problem.tasks}
    for c in plan.commands:
        if c.task not in tasks:
            out.append(Violation("AB-R-6", "operation_identity", f"command '{c.id}' has no portable task '{c.task}'"))
    return out


def verify_plan(plan: ConcretePlan, problem: Problem | None = None) -> list[Violation]:
    """Invariants, then (with the portable ``problem``) the commit gate and relation invariants."""
    out = check_invariants(plan)
    if problem is not None:
        out += relation_violations(plan, problem) + commit_gate(plan, problem)
    return out


@dataclass(frozen=True)
class CplanVerifyPass(ModulePass):
    """Verify every ``cplan.plan`` of the module (see the module docstring).

    Option ``require_source``: fail when the module lacks the portable source needed by the commit
    gate. Raises PassFailedException listing up to 20 violations, one per line, each
    ``AB-S-n code: message`` or ``AB-R-n code: message``.
    """

    name = "cplan-verify"

    require_source: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plans = [o for o in op.ops if isinstance(o, PlanOp)]
        if not plans:
            raise PassFailedException("cplan-verify: the module holds no cplan.plan")
        problem = None
        if any(o.name == "pplan.plan" for o in op.ops):
            from pipeplan.transforms.convert_pplan_to_cplan import problem_from_module

            try:
                problem = problem_from_module(op, plans[0].risk.data)
            except CplanError as e:
                raise PassFailedException(e.one_line()) from None
        elif self.require_source:
            raise PassFailedException("cplan-verify: commit gate needs the portable source; run "
                                      "convert-pplan-to-cplan{keep_source=true}")
        errors: list[Violation] = []
        for p in plans:
            errors += verify_plan(plan_from_ir(p), problem)
        if errors:
            lines = [v.text() for v in errors[:20]]
            more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
            raise PassFailedException("cplan-verify failed:\n" + "\n".join(lines) + more)
