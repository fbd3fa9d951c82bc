"""The seven construction invariants of ConcretePlanIR (seeds/003 "Joint scheduling and memory
planning", AB-S-1..7), as pure functions over :class:`~pipeplan.dialects.cplan_types.ConcretePlan`.

They need nothing but the plan (no portable source, no binding), so ``cplan.plan``'s verifier runs
:func:`check_invariants` on parse and reports the first violation at its op; the ``cplan-verify`` pass
(:mod:`pipeplan.transforms.cplan_verify`) reports all of them plus the commit gate. The checks are
listed in that module's docstring. Each :class:`Violation` names the commands/buffers involved, their
lineage, and its ``subject`` (the op it is about).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeplan.dialects.cplan_types import PERSISTENT_LIFETIMES, ConcretePlan, QueueSchedule, risk_allows
from pipeplan.dialects.graph import ancestor_sets, cycle_members, stable_topo_order

INVARIANTS: dict[str, str] = {
    "AB-S-1": "command dependencies must be closed and acyclic",
    "AB-S-2": "queue order and signal/wait edges must not deadlock and must enforce every dependency",
    "AB-S-3": "every command needs a legal implementation and placement",
    "AB-S-4": "buffer lifetimes must cover all producers and consumers",
    "AB-S-5": "reused allocations must not overlap in any legal execution",
    "AB-S-6": "device, memory-space, engine and link capacities must be respected",
    "AB-S-7": "every cost used must be present or covered by the risk policy",
}
"""Contract ID -> the invariant it states (shared/CONTRACTS.md), as named in on-parse diagnostics."""


@dataclass(frozen=True)
class Violation:
    """One failed invariant: ``invariant`` (e.g. ``AB-S-5``), a stable ``code`` and a message naming
    the commands/buffers involved and their lineage."""

    invariant: str
    code: str
    message: str
    subject: tuple[str, int | str] = field(default=("plan", 0), compare=False)
    """The op the violation is about: ``("command", i)`` (i-th command), ``("alloc", id)`` or ``("alloc", k)``
    (k-th allocation), ``("device", k)``, ``("link", k)``, ``("sync", i)``,
    ``("queue", i)`` / ``("slot", i)`` (i-th queue or slot of the extension) or ``("plan", 0)``."""

    def text(self) -> str:
        """``AB-S-n code: message`` (the ``cplan-verify`` pass's line)."""
        return f"{self.invariant} {self.code}: {self.message}"

    def diagnostic_text(self) -> str:
        """``[AB-S-n] <invariant> (code): message`` (the on-parse verifier message)."""
        return f"[{self.invariant}] {INVARIANTS.get(self.invariant, self.invariant)} ({self.code}): {self.message}"


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


def _cycle(cx: _Ctx, preds: list[list[int]]) -> tuple[str, tuple[str, int | str]]:
    """The text naming (up to 6 of) the commands on a cycle, and the first of them as subject."""
    cyc = cycle_members(len(cx.cmds), preds)
    return ", ".join(cx.who(cx.cmds[i].id) for i in cyc[:6]), ("command", cyc[0] if cyc else 0)


# --------------------------------------------------------------------------- the seven checks
def check_s1(cx: _Ctx) -> list[Violation]:
    """AB-S-1: ids unique; dependencies acyclic (closure is :func:`check_references`'s). In IR order a
    dependency on an earlier command is acyclic by construction (SSA def-before-use); only a plan with a
    forward dependency needs the cycle search."""
    out = []
    seen: set[str] = set()
    for i, c in enumerate(cx.cmds):
        if c.id in seen:
            out.append(Violation("AB-S-1", "duplicate_command", f"command id {cx.who(c.id)} is declared twice",
                                 ("command", i)))
        seen.add(c.id)
    preds = _dep_preds(cx)
    if any(j >= i for i, ps in enumerate(preds) for j in ps) and stable_topo_order(len(cx.cmds), preds) is None:
        text, subject = _cycle(cx, preds)
        out.append(Violation("AB-S-1", "dependency_cycle", f"command dependencies form a cycle through {text}",
                             subject))
    return out


def check_references(cx: _Ctx) -> list[Violation]:
    """AB-S-1/2/4 closure of the value form: every dependency, queue/slot member, sync end and access names
    a declared command or allocation. In IR every reference is an SSA use, so the on-parse verifier
    (:func:`check_ir_invariants`) needs none of these."""
    out = []
    for i, c in enumerate(cx.cmds):
        for d in c.deps:
            if d not in cx.index:
                out.append(Violation("AB-S-1", "unknown_dependency",
                                     f"command {cx.who(c.id)} depends on unknown command '{d}'", ("command", i)))
    ext = cx.plan.extension
    if isinstance(ext, QueueSchedule):
        for qi, q in enumerate(ext.queues):
            out += [Violation("AB-S-2", "unknown_command", f"queue {q.device}/{q.engine} orders unknown command '{c}'",
                              ("queue", qi)) for c in q.order if c not in cx.index]
    else:
        for si, sl in enumerate(ext.slots):
            out += [Violation("AB-S-2", "unknown_command", f"slot '{sl.id}' holds unknown command '{c}'",
                              ("slot", si)) for c in sl.commands if c not in cx.index]
    for yi, s in enumerate(cx.plan.syncs):
        for end in (s.signal, s.wait):
            if end not in cx.index:
                out.append(Violation("AB-S-2", "unknown_command",
                                     f"sync {s.signal} -> {s.wait} names unknown command '{end}'", ("sync", yi)))
    for i, c in enumerate(cx.cmds):
        out += [Violation("AB-S-4", "unknown_buffer", f"command {cx.who(c.id)} accesses unallocated buffer '{u}'",
                          ("command", i)) for u in c.reads + c.writes if u not in cx.allocs]
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
    else:
        for sl in ext.slots:
            for c in sl.commands:
                where.setdefault(c, (sl.device, sl.engine))
    for i, c in enumerate(cx.cmds):
        w = where.get(c.id)
        if w is None:
            out.append(Violation("AB-S-2", "unscheduled_command", f"command {cx.who(c.id)} is in no {kind}",
                                 ("command", i)))
        elif w != (c.device, c.engine):
            out.append(Violation("AB-S-2", "placement_mismatch",
                                 f"command {cx.who(c.id)} is placed on {c.device}/{c.engine} but its {kind} is "
                                 f"on {w[0]}/{w[1]}", ("command", i)))
    preds = execution_graph(cx)
    topo = stable_topo_order(len(cx.cmds), preds)
    if topo is None:
        text, subject = _cycle(cx, preds)
        out.append(Violation("AB-S-2", "deadlock", f"{kind} order and signal/wait edges form a cycle (deadlock) "
                                                   f"through {text}", subject))
        return out, None
    anc = ancestor_sets(len(cx.cmds), preds, topo)
    for i, c in enumerate(cx.cmds):
        for d in dict.fromkeys(c.deps):
            j = cx.index.get(d)
            if j is not None and not (anc[i] >> j) & 1:
                out.append(Violation("AB-S-2", "unenforced_dependency",
                                     f"dependency {cx.who(d)} -> {cx.who(c.id)} is not enforced by {kind} order or "
                                     f"signal/wait (missing wait)", ("command", i)))
    return out, anc


GENERIC_IMPLS = ("", "generic", "unsupported")


def check_s3(cx: _Ctx) -> list[Violation]:
    """AB-S-3: legal implementation and placement."""
    out = []
    for i, c in enumerate(cx.cmds):
        if c.implementation in GENERIC_IMPLS:
            out.append(Violation("AB-S-3", "no_implementation",
                                 f"command {cx.who(c.id)} has no legal implementation ('{c.implementation}')", ("command", i)))
        d = cx.devices.get(c.device)
        if d is None:
            out.append(Violation("AB-S-3", "unknown_device", f"command {cx.who(c.id)} is placed on undeclared device "
                                                             f"'{c.device}'", ("command", i)))
        elif c.engine not in dict(d.engines):
            out.append(Violation("AB-S-3", "unknown_engine", f"command {cx.who(c.id)} is placed on engine '{c.engine}' "
                                                             f"that device '{c.device}' lacks", ("command", i)))
        if c.link:
            ln = cx.links.get(c.link)
            if ln is None:
                out.append(Violation("AB-S-3", "unknown_link", f"command {cx.who(c.id)} uses undeclared link "
                                                               f"'{c.link}'", ("command", i)))
            elif ln.src != c.device:
                out.append(Violation("AB-S-3", "link_placement", f"command {cx.who(c.id)} on '{c.device}' uses link "
                                                                 f"'{c.link}' leaving '{ln.src}'", ("command", i)))
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
    """AB-S-4: allocation ids unique; accesses name allocations on the right device; transient reads follow
    a writer."""
    out = []
    seen: set[str] = set()
    for k, a in enumerate(cx.plan.allocs):
        if a.id in seen:
            out.append(Violation("AB-S-4", "duplicate_alloc", f"allocation id '{a.id}' (source '{a.source}') is "
                                                              f"declared twice", ("alloc", k)))
        seen.add(a.id)
    for i, c in enumerate(cx.cmds):
        ok_devs = {c.device}
        linked = {c.device} | {ln.dst for ln in cx.plan.links if ln.src == c.device} | \
            {ln.src for ln in cx.plan.links if ln.dst == c.device}
        for u in c.reads + c.writes:
            a = cx.allocs.get(u)
            if a is not None and a.device not in (linked if a.lifetime == "edge" else ok_devs):
                out.append(Violation("AB-S-4", "buffer_placement",
                                     f"command {cx.who(c.id)} on '{c.device}' accesses buffer '{u}' (source "
                                     f"'{a.source}') allocated on '{a.device}'", ("command", i)))
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
                    f"{', '.join(cx.who(cx.cmds[w].id) for w in ws) or 'none'})", ("command", r)))
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
    # per allocation id: (whether no overlap with it can be fine, accessed, accesses mask, ~happens-before mask):
    # the common separated pair is decided here without building _overlap_problem's message
    quick = {a: (not xs or a not in masks, bool(xs), *((masks[a][0], ~masks[a][1]) if a in masks else (0, 0)))
             for a, xs in acc.items()}
    for (dev, space), allocs in sorted(groups.items()):
        allocs = sorted(allocs, key=lambda a: (a.offset, a.id))
        active: list = []
        for a in allocs:
            active = [b for b in active if b.offset + b.size > a.offset]
            qa = quick.get(a.id) if a.lifetime not in PERSISTENT_LIFETIMES else None
            for b in active:
                if a.id == b.id:
                    continue
                if qa is not None and b.lifetime not in PERSISTENT_LIFETIMES:
                    qb = quick.get(b.id)
                    if qb is None or not qa[1] or not qb[1]:
                        continue  # one of them is never accessed: no conflict
                    if not (qa[0] or qb[0]) and (not qa[2] & qb[3] or not qb[2] & qa[3]):
                        continue  # ordered in every legal execution
                msg = _overlap_problem(cx, a, b, acc, anc, masks)
                if msg:
                    out.append(Violation("AB-S-5", "unsafe_reuse", f"{dev}/{space}: allocations '{b.id}' "
                                                                   f"[{b.offset}, {b.offset + b.size}) and '{a.id}' "
                                                                   f"[{a.offset}, {a.offset + a.size}) overlap; {msg}",
                                         ("alloc", a.id)))
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
    """AB-S-6: device and link ids unique; device/memory-space, engine and link capacities."""
    out = []
    for kind, items in (("device", cx.plan.devices), ("link", cx.plan.links)):
        ids: set[str] = set()
        for pos, x in enumerate(items):
            if x.id in ids:
                out.append(Violation("AB-S-6", f"duplicate_{kind}", f"{kind} id '{x.id}' is declared twice",
                                     (kind, pos)))
            ids.add(x.id)
    high: dict[tuple[str, str], int] = {}
    for a in cx.plan.allocs:
        d = cx.devices.get(a.device)
        if d is None:
            out.append(Violation("AB-S-6", "unknown_device", f"allocation '{a.id}' is on undeclared device "
                                                             f"'{a.device}'", ("alloc", a.id)))
            continue
        if a.space not in dict(d.capacities):
            out.append(Violation("AB-S-6", "unknown_space", f"allocation '{a.id}' is in memory space '{a.space}' that "
                                                            f"device '{a.device}' lacks", ("alloc", a.id)))
            continue
        k = (a.device, a.space)
        high[k] = max(high.get(k, 0), a.offset + a.size)
    for (dev, space), peak in sorted(high.items()):
        cap = dict(cx.devices[dev].capacities)[space]
        if peak > cap:
            top = sorted((a for a in cx.plan.allocs if (a.device, a.space) == (dev, space)),
                         key=lambda a: (-a.size, a.id))[:5]
            over = max((a for a in cx.plan.allocs if (a.device, a.space) == (dev, space)),
                       key=lambda a: a.offset + a.size)
            out.append(Violation("AB-S-6", "capacity_exceeded",
                                 f"device '{dev}' memory space '{space}': peak {peak} bytes exceeds capacity {cap}; "
                                 f"largest: {', '.join(f'{a.id} ({a.size} B)' for a in top)}", ("alloc", over.id)))
    per_engine: dict[tuple[str, str], int] = {}
    ext = cx.plan.extension
    units = [(q.device, q.engine) for q in ext.queues] if isinstance(ext, QueueSchedule) else \
        [(s.device, s.engine) for s in ext.slots]
    first_unit: dict[tuple[str, str], int] = {}
    for ui, u in enumerate(units):
        per_engine[u] = per_engine.get(u, 0) + 1
        first_unit.setdefault(u, ui)
    unit_kind = "queue" if isinstance(ext, QueueSchedule) else "slot"
    for (dev, eng), n_units in sorted(per_engine.items()):
        d = cx.devices.get(dev)
        slots = dict(d.engines).get(eng) if d else None
        if slots is None:
            out.append(Violation("AB-S-6", "unknown_engine", f"{dev}/{eng} is used by the schedule but not declared",
                                 (unit_kind, first_unit[(dev, eng)])))
        elif n_units > slots:
            out.append(Violation("AB-S-6", "engine_oversubscribed", f"engine {dev}/{eng} has {slots} slot(s) but the "
                                                                    f"schedule uses {n_units}", (unit_kind, first_unit[(dev, eng)])))
    for i, c in enumerate(cx.cmds):
        ln = cx.links.get(c.link) if c.link else None
        if ln is not None:
            moved = sum(cx.allocs[w].size for w in dict.fromkeys(c.writes) if w in cx.allocs)
            if moved > ln.capacity:
                out.append(Violation("AB-S-6", "link_capacity", f"command {cx.who(c.id)} moves {moved} bytes over link "
                                                                 f"'{ln.id}' of capacity {ln.capacity}", ("command", i)))
    return out


def check_s7(cx: _Ctx) -> list[Violation]:
    """AB-S-7: every cost used is present or covered by the explicit risk policy."""
    out = []
    for i, c in enumerate(cx.cmds):
        if not risk_allows(cx.plan.risk, c.status):
            out.append(Violation("AB-S-7", "cost_not_covered",
                                 f"command {cx.who(c.id)} uses a {c.status} cost (provider '{c.provider}') that risk "
                                 f"policy '{cx.plan.risk}' does not cover", ("command", i)))
    return out


def _core(cx: _Ctx) -> list[Violation]:
    s2, anc = check_s2(cx)
    return check_s1(cx) + s2 + check_s3(cx) + check_s4(cx, anc) + check_s5(cx, anc) + check_s6(cx) + check_s7(cx)


def _core_of(plan: ConcretePlan, cx: _Ctx | None = None) -> list[Violation]:
    """:func:`_core` of ``plan``, computed once per plan value (a frozen dataclass: kept in its ``__dict__``,
    outside its fields): the op verifier, ``cplan-verify`` and the lowering check the same plan."""
    cached = plan.__dict__.get("_pp_core")
    if cached is None:
        cached = plan.__dict__["_pp_core"] = tuple(_core(cx if cx is not None else _Ctx(plan)))
    return list(cached)


def check_ir_invariants(plan: ConcretePlan) -> list[Violation]:
    """The violations of AB-S-1..7 a plan read from IR can have (its references are SSA uses, closed by
    construction), in invariant order: what ``cplan.plan``'s verifier checks on parse."""
    return _core_of(plan)


def check_invariants(plan: ConcretePlan) -> list[Violation]:
    """All violations of AB-S-1..7 of a value-form plan, references (:func:`check_references`) included, in
    invariant order (empty when the plan is sound)."""
    cx = _Ctx(plan)
    return sorted(check_references(cx) + _core_of(plan, cx), key=lambda v: v.invariant)
