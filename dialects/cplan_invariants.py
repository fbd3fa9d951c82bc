"""The seven construction invariants of the concrete plan IR (seeds/003 "Joint scheduling and memory
planning", AB-S-1..7), checked on the ``cplan.plan`` op itself.

They need nothing but the plan (no portable source, no binding), so ``cplan.plan``'s verifier runs
:func:`check_ir_invariants` on parse and reports the first violation at its op; the ``cplan-verify`` pass
(:mod:`pipeplan.transforms.cplan_verify`) reports all of them plus the commit gate. The checks are
listed in that module's docstring. Each :class:`Violation` names the commands/buffers involved, their
lineage, and its ``subject`` (the op it is about).

The checks read the ops (``cplan.command``/``alloc``/``device``/``link``/``sync`` and the extension's
``queue``/``slot``/``fire``) through :class:`PlanIndex`, an analysis built once per check: the ops by
kind and the position of the op defining each operand (SSA uses resolved to positions). Ops are told
apart by name, so this module needs none of :mod:`pipeplan.dialects.cplan`'s classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeplan.dialects.cplan_types import PERSISTENT_LIFETIMES, risk_allows
from pipeplan.dialects.diagnostics import verify_cached
from pipeplan.dialects.graph import ancestor_sets, cycle_members, stable_topo_order
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

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



def _region_ops(op: Operation) -> list[Any]:
    region = op.regions[0]
    return list(region.blocks[0].ops) if region.blocks else []


def owner_id(v: SSAValue) -> str:
    """The ``id`` of the op defining ``v`` ('' when it has none)."""
    ident = getattr(v.owner, "id", None)
    return ident.data if ident is not None and hasattr(ident, "data") else ""


class PlanIndex:
    """An analysis of one ``cplan.plan`` op: its ops by kind (``devices``, ``links``, ``allocs``,
    ``cmds``, ``syncs``, ``units`` = the extension's queues or slots, ``fires``), and per command the
    positions of the commands it depends on and of the allocations it reads and writes (-1 for an
    operand no op of the plan defines: a use of a detached op). ``index`` maps command id -> first
    position; ``devices_by_id``/``links_by_id`` id -> op (last declaration)."""

    def __init__(self, plan: Operation):
        self.plan: Any = plan
        self.devices: list[Any] = []
        self.links: list[Any] = []
        self.allocs: list[Any] = []
        self.cmds: list[Any] = []
        self.syncs: list[Any] = []
        self.ext: Any = None
        for o in _region_ops(plan):
            n = o.name
            if n == "cplan.command":
                self.cmds.append(o)
            elif n == "cplan.alloc":
                self.allocs.append(o)
            elif n == "cplan.sync":
                self.syncs.append(o)
            elif n == "cplan.device":
                self.devices.append(o)
            elif n == "cplan.link":
                self.links.append(o)
            elif n in ("cplan.queue_schedule", "cplan.slot_dataflow") and self.ext is None:
                self.ext = o
        self.is_queue = self.ext is None or self.ext.name == "cplan.queue_schedule"
        inner = _region_ops(self.ext) if self.ext is not None else []
        unit_name = "cplan.queue" if self.is_queue else "cplan.slot"
        self.units: list[Any] = [o for o in inner if o.name == unit_name]
        self.fires: list[Any] = [o for o in inner if o.name == "cplan.fire"]
        self.ids: list[str] = [c.id.data for c in self.cmds]
        self.index: dict[str, int] = {}
        for i, cid in enumerate(self.ids):
            self.index.setdefault(cid, i)
        self.cmd_pos: dict[SSAValue, int] = {c.done: i for i, c in enumerate(self.cmds)}
        self.alloc_pos: dict[SSAValue, int] = {a.result: k for k, a in enumerate(self.allocs)}
        self.devices_by_id = {d.id.data: d for d in self.devices}
        self.links_by_id = {ln.id.data: ln for ln in self.links}
        cpos, apos = self.cmd_pos, self.alloc_pos
        self.reads: list[list[int]] = []
        self.writes: list[list[int]] = []
        self.deps: list[list[int]] = []
        for c in self.cmds:
            ins, outs, after = c.groups()
            self.reads.append([apos.get(v, -1) for v in ins])
            self.writes.append([apos.get(v, -1) for v in outs])
            self.deps.append([cpos.get(v, -1) for v in after])

    def member_values(self, unit: Any) -> Sequence[SSAValue]:
        """The timepoint operands of a queue or slot, in order."""
        return unit.commands if self.is_queue else unit.members

    def members(self, unit: Any) -> list[int]:
        """Positions of the commands of a queue or slot, in order (-1 for an unknown one)."""
        return [self.cmd_pos.get(v, -1) for v in self.member_values(unit)]

    def who(self, cid: str) -> str:
        i = self.index.get(cid)
        return f"'{cid}' ({self.cmds[i].lineage_text})" if i is not None else f"'{cid}'"


def _dep_preds(cx: PlanIndex) -> list[list[int]]:
    return [[j for j in dict.fromkeys(ds) if j >= 0] for ds in cx.deps]


def execution_graph(cx: PlanIndex) -> list[list[int]]:
    """Predecessors in the execution order: queue predecessor + waited signals (queue plans), or
    firing-rule commands + waited signals (slot plans). Unknown commands are skipped (reported elsewhere)."""
    n = len(cx.cmds)
    preds: list[list[int]] = [[] for _ in range(n)]
    pos = cx.cmd_pos

    def add(w: int, s: int) -> None:
        if w >= 0 and s >= 0 and s not in preds[w]:
            preds[w].append(s)

    if cx.is_queue:
        for q in cx.units:
            order = cx.members(q)
            for a, b in zip(order, order[1:]):
                add(b, a)
    else:
        for f in cx.fires:
            w = pos.get(f.cmd, -1)
            for a in f.after:
                add(w, pos.get(a, -1))
    for s in cx.syncs:
        add(pos.get(s.wait, -1), pos.get(s.signal, -1))
    return preds


def _cycle(cx: PlanIndex, preds: list[list[int]]) -> tuple[str, tuple[str, int | str]]:
    """The text naming (up to 6 of) the commands on a cycle, and the first of them as subject."""
    cyc = cycle_members(len(cx.cmds), preds)
    return ", ".join(cx.who(cx.ids[i]) for i in cyc[:6]), ("command", cyc[0] if cyc else 0)


# --------------------------------------------------------------------------- the seven checks
def check_s1(cx: PlanIndex) -> list[Violation]:
    """AB-S-1: ids unique; dependencies acyclic (closure is :func:`check_references`'s). In IR order a
    dependency on an earlier command is acyclic by construction (SSA def-before-use); only a plan with a
    forward dependency needs the cycle search."""
    out = []
    seen: set[str] = set()
    for i, cid in enumerate(cx.ids):
        if cid in seen:
            out.append(Violation("AB-S-1", "duplicate_command", f"command id {cx.who(cid)} is declared twice",
                                 ("command", i)))
        seen.add(cid)
    preds = _dep_preds(cx)
    if any(j >= i for i, ps in enumerate(preds) for j in ps) and stable_topo_order(len(cx.cmds), preds) is None:
        text, subject = _cycle(cx, preds)
        out.append(Violation("AB-S-1", "dependency_cycle", f"command dependencies form a cycle through {text}",
                             subject))
    return out


def check_references(cx: PlanIndex) -> list[Violation]:
    """AB-S-1/2/4 closure: every dependency, queue/slot member, sync end and access is defined by a command
    or allocation of the plan. Parsed IR is closed by construction (every reference is an SSA use of an op
    of the plan), so the on-parse verifier (:func:`check_ir_invariants`) needs none of these; a use of a
    detached op (an edit of the IR) is what they find."""
    out = []
    pos = cx.cmd_pos
    for i, c in enumerate(cx.cmds):
        for v, j in zip(c.groups()[2], cx.deps[i]):
            if j < 0:
                out.append(Violation("AB-S-1", "unknown_dependency",
                                     f"command {cx.who(cx.ids[i])} depends on unknown command '{owner_id(v)}'",
                                     ("command", i)))
    kind = "queue" if cx.is_queue else "slot"
    for ui, u in enumerate(cx.units):
        where = f"queue {u.device.data}/{u.engine.data} orders" if cx.is_queue else f"slot '{u.id.data}' holds"
        out += [Violation("AB-S-2", "unknown_command", f"{where} unknown command '{owner_id(v)}'", (kind, ui))
                for v in cx.member_values(u) if v not in pos]
    for yi, s in enumerate(cx.syncs):
        for end in (s.signal, s.wait):
            if end not in pos:
                out.append(Violation("AB-S-2", "unknown_command",
                                     f"sync {owner_id(s.signal)} -> {owner_id(s.wait)} names unknown command "
                                     f"'{owner_id(end)}'", ("sync", yi)))
    for i, c in enumerate(cx.cmds):
        ins, outs, _ = c.groups()
        out += [Violation("AB-S-4", "unknown_buffer", f"command {cx.who(cx.ids[i])} accesses unallocated buffer "
                                                      f"'{owner_id(v)}'", ("command", i))
                for v in (*ins, *outs) if v not in cx.alloc_pos]
    return out


def check_s2(cx: PlanIndex) -> tuple[list[Violation], list[int] | None]:
    """AB-S-2: no deadlock, every dependency enforced, placement matches the extension.
    Returns the violations and the happens-before closure (None when the order is cyclic)."""
    out = []
    where: dict[int, tuple[str, str]] = {}
    kind = "queue" if cx.is_queue else "slot"
    for u in cx.units:
        here = (u.device.data, u.engine.data)
        for j in cx.members(u):
            if j >= 0:
                where.setdefault(j, here)
    for i, c in enumerate(cx.cmds):
        w = where.get(i)
        if w is None:
            out.append(Violation("AB-S-2", "unscheduled_command", f"command {cx.who(cx.ids[i])} is in no {kind}",
                                 ("command", i)))
        elif w != (c.device.data, c.engine.data):
            out.append(Violation("AB-S-2", "placement_mismatch",
                                 f"command {cx.who(cx.ids[i])} is placed on {c.device.data}/{c.engine.data} but its "
                                 f"{kind} is on {w[0]}/{w[1]}", ("command", i)))
    preds = execution_graph(cx)
    topo = stable_topo_order(len(cx.cmds), preds)
    if topo is None:
        text, subject = _cycle(cx, preds)
        out.append(Violation("AB-S-2", "deadlock", f"{kind} order and signal/wait edges form a cycle (deadlock) "
                                                   f"through {text}", subject))
        return out, None
    anc = ancestor_sets(len(cx.cmds), preds, topo)
    for i in range(len(cx.cmds)):
        for j in dict.fromkeys(cx.deps[i]):
            if j >= 0 and not (anc[i] >> j) & 1:
                out.append(Violation("AB-S-2", "unenforced_dependency",
                                     f"dependency {cx.who(cx.ids[j])} -> {cx.who(cx.ids[i])} is not enforced by {kind} "
                                     f"order or signal/wait (missing wait)", ("command", i)))
    return out, anc


GENERIC_IMPLS = ("", "generic", "unsupported")


def _link_of(c: Any) -> str:
    return "" if c.link is None else c.link.data


def check_s3(cx: PlanIndex) -> list[Violation]:
    """AB-S-3: legal implementation and placement."""
    out = []
    for i, c in enumerate(cx.cmds):
        who, dev, eng, impl = cx.who(cx.ids[i]), c.device.data, c.engine.data, c.impl.data
        if impl in GENERIC_IMPLS:
            out.append(Violation("AB-S-3", "no_implementation",
                                 f"command {who} has no legal implementation ('{impl}')", ("command", i)))
        d = cx.devices_by_id.get(dev)
        if d is None:
            out.append(Violation("AB-S-3", "unknown_device", f"command {who} is placed on undeclared device "
                                                             f"'{dev}'", ("command", i)))
        elif eng not in d.engines.data:
            out.append(Violation("AB-S-3", "unknown_engine", f"command {who} is placed on engine '{eng}' "
                                                             f"that device '{dev}' lacks", ("command", i)))
        link = _link_of(c)
        if link:
            ln = cx.links_by_id.get(link)
            if ln is None:
                out.append(Violation("AB-S-3", "unknown_link", f"command {who} uses undeclared link "
                                                               f"'{link}'", ("command", i)))
            elif ln.src.data != dev:
                out.append(Violation("AB-S-3", "link_placement", f"command {who} on '{dev}' uses link "
                                                                 f"'{link}' leaving '{ln.src.data}'", ("command", i)))
    return out


def _accessors(cx: PlanIndex) -> tuple[list[list[int]], list[list[int]]]:
    """Per allocation position: the commands reading it, and those writing it (each once, in order)."""
    readers: list[list[int]] = [[] for _ in cx.allocs]
    writers: list[list[int]] = [[] for _ in cx.allocs]
    for i in range(len(cx.cmds)):
        for k in dict.fromkeys(cx.reads[i]):
            if k >= 0:
                readers[k].append(i)
        for k in dict.fromkeys(cx.writes[i]):
            if k >= 0:
                writers[k].append(i)
    return readers, writers


def check_s4(cx: PlanIndex, anc: list[int] | None) -> list[Violation]:
    """AB-S-4: allocation ids unique; accesses name allocations on the right device; transient reads follow
    a writer."""
    out = []
    seen: set[str] = set()
    for k, a in enumerate(cx.allocs):
        aid = a.id.data
        if aid in seen:
            out.append(Violation("AB-S-4", "duplicate_alloc", f"allocation id '{aid}' (source '{a.source.data}') is "
                                                              f"declared twice", ("alloc", k)))
        seen.add(aid)
    ends = [(ln.src.data, ln.dst.data) for ln in cx.links]
    for i, c in enumerate(cx.cmds):
        dev = c.device.data
        linked: set[str] | None = None
        for k in cx.reads[i] + cx.writes[i]:
            if k < 0:
                continue
            a = cx.allocs[k]
            adev = a.device.data
            if adev == dev:
                continue
            if a.lifetime.data == "edge":
                if linked is None:
                    linked = {dev} | {d for s, d in ends if s == dev} | {s for s, d in ends if d == dev}
                if adev in linked:
                    continue
            out.append(Violation("AB-S-4", "buffer_placement",
                                 f"command {cx.who(cx.ids[i])} on '{dev}' accesses buffer '{a.id.data}' (source "
                                 f"'{a.source.data}') allocated on '{adev}'", ("command", i)))
    if anc is None:
        return out
    readers, writers = _accessors(cx)
    for k, a in enumerate(cx.allocs):
        if a.lifetime.data in PERSISTENT_LIFETIMES:
            continue
        for r in readers[k]:
            ws = [w for w in writers[k] if w != r]
            if not any((anc[r] >> w) & 1 for w in ws):
                out.append(Violation(
                    "AB-S-4", "lifetime_gap",
                    f"transient buffer '{a.id.data}' (source '{a.source.data}') is read by {cx.who(cx.ids[r])} before "
                    f"any producer is guaranteed to have written it (producers: "
                    f"{', '.join(cx.who(cx.ids[w]) for w in ws) or 'none'})", ("command", r)))
    return out


@dataclass(frozen=True)
class _Range:
    """One allocation's byte range as the overlap sweep of :func:`check_s5` reads it (``k``: its position)."""

    k: int
    id: str
    offset: int
    size: int
    lifetime: str


def check_s5(cx: PlanIndex, anc: list[int] | None) -> list[Violation]:
    """AB-S-5: overlapping allocations are transient and ordered in every legal execution."""
    out = []
    readers, writers = _accessors(cx)
    acc = [sorted(set(readers[k] + writers[k])) for k in range(len(cx.allocs))]
    masks = [(_mask(xs), _before_all(xs, anc)) for xs in acc] if anc is not None else []
    groups: dict[tuple[str, str], list[_Range]] = {}
    for k, a in enumerate(cx.allocs):
        size = a.size.value.data
        if size > 0:
            groups.setdefault((a.device.data, a.space.data), []).append(
                _Range(k, a.id.data, a.offset.value.data, size, a.lifetime.data))
    # per allocation: (whether no overlap with it can be fine, accessed, accesses mask, ~happens-before mask):
    # the common separated pair is decided here without building _overlap_problem's message
    quick = [(not xs or anc is None, bool(xs), *((masks[k][0], ~masks[k][1]) if anc is not None else (0, 0)))
             for k, xs in enumerate(acc)]
    for (dev, space), ranges in sorted(groups.items()):
        ranges = sorted(ranges, key=lambda r: (r.offset, r.id))
        active: list[_Range] = []
        for a in ranges:
            active = [b for b in active if b.offset + b.size > a.offset]
            qa = quick[a.k] if a.lifetime not in PERSISTENT_LIFETIMES else None
            for b in active:
                if a.id == b.id:
                    continue
                if qa is not None and b.lifetime not in PERSISTENT_LIFETIMES:
                    qb = quick[b.k]
                    if not qa[1] or not qb[1]:
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


def _overlap_problem(cx: PlanIndex, a: _Range, b: _Range, acc: list[list[int]], anc: list[int] | None,
                     masks: list[tuple[int, int]]) -> str:
    if a.lifetime in PERSISTENT_LIFETIMES or b.lifetime in PERSISTENT_LIFETIMES:
        return f"a {a.lifetime if a.lifetime in PERSISTENT_LIFETIMES else b.lifetime} buffer is live for the whole plan"
    aa, bb = acc[a.k], acc[b.k]
    if not aa or not bb:
        return ""
    if anc is None:
        return "no execution order exists to separate them"

    ma, mb = masks[a.k], masks[b.k]
    if not ma[0] & ~mb[1] or not mb[0] & ~ma[1]:
        return ""
    shared = next((x for x in aa if x in set(bb)), None)
    if shared is not None:
        return f"they may be live at once: {cx.who(cx.ids[shared])} accesses both"
    x, y = _not_before(aa, bb, anc)
    y2, x2 = _not_before(bb, aa, anc)
    return (f"they may be live at once: {cx.who(cx.ids[x])} does not happen-before {cx.who(cx.ids[y])} and "
            f"{cx.who(cx.ids[y2])} does not happen-before {cx.who(cx.ids[x2])} in every legal execution")


def _not_before(xs: list[int], ys: list[int], anc: list[int]) -> tuple[int, int]:
    """A witness ``(x, y)``, x in ``xs`` and y in ``ys``, such that x does not happen-before y (the
    caller knows one exists: not every access of ``xs`` precedes every access of ``ys``)."""
    return next(((x, y) for x in xs for y in ys if not (anc[y] >> x) & 1), (xs[0], ys[0]))


def _mask(xs: list[int]) -> int:
    m = 0
    for x in xs:
        m |= 1 << x
    return m


def _before_all(ys: list[int], anc: list[int] | None) -> int:
    """Bitset of the commands that happen-before every command in ``ys``."""
    m = -1
    for y in ys:
        m &= anc[y]  # type: ignore[index]
    return m


def _ints(d: Any) -> dict[str, int]:
    """A ``{key = N : i64}`` dictionary attribute as key -> N."""
    return {k: v.value.data for k, v in d.data.items()}


def check_s6(cx: PlanIndex) -> list[Violation]:
    """AB-S-6: device and link ids unique; device/memory-space, engine and link capacities."""
    out = []
    for kind, items in (("device", cx.devices), ("link", cx.links)):
        ids: set[str] = set()
        for pos, x in enumerate(items):
            xid = x.id.data
            if xid in ids:
                out.append(Violation("AB-S-6", f"duplicate_{kind}", f"{kind} id '{xid}' is declared twice",
                                     (kind, pos)))
            ids.add(xid)
    caps = {dev: _ints(d.capacity) for dev, d in cx.devices_by_id.items()}
    high: dict[tuple[str, str], int] = {}
    for a in cx.allocs:
        aid, dev, space = a.id.data, a.device.data, a.space.data
        cap = caps.get(dev)
        if cap is None:
            out.append(Violation("AB-S-6", "unknown_device", f"allocation '{aid}' is on undeclared device "
                                                             f"'{dev}'", ("alloc", aid)))
            continue
        if space not in cap:
            out.append(Violation("AB-S-6", "unknown_space", f"allocation '{aid}' is in memory space '{space}' that "
                                                            f"device '{dev}' lacks", ("alloc", aid)))
            continue
        k = (dev, space)
        high[k] = max(high.get(k, 0), a.offset.value.data + a.size.value.data)
    for (dev, space), peak in sorted(high.items()):
        cap_ = caps[dev][space]
        if peak > cap_:
            here = [a for a in cx.allocs if (a.device.data, a.space.data) == (dev, space)]
            top = sorted(here, key=lambda a: (-a.size.value.data, a.id.data))[:5]
            over = max(here, key=lambda a: a.offset.value.data + a.size.value.data)
            out.append(Violation("AB-S-6", "capacity_exceeded",
                                 f"device '{dev}' memory space '{space}': peak {peak} bytes exceeds capacity {cap_}; "
                                 f"largest: {', '.join(f'{a.id.data} ({a.size.value.data} B)' for a in top)}",
                                 ("alloc", over.id.data)))
    per_engine: dict[tuple[str, str], int] = {}
    first_unit: dict[tuple[str, str], int] = {}
    for ui, u in enumerate(cx.units):
        key = (u.device.data, u.engine.data)
        per_engine[key] = per_engine.get(key, 0) + 1
        first_unit.setdefault(key, ui)
    unit_kind = "queue" if cx.is_queue else "slot"
    for (dev, eng), n_units in sorted(per_engine.items()):
        d = cx.devices_by_id.get(dev)
        slots = _ints(d.engines).get(eng) if d is not None else None
        if slots is None:
            out.append(Violation("AB-S-6", "unknown_engine", f"{dev}/{eng} is used by the schedule but not declared",
                                 (unit_kind, first_unit[(dev, eng)])))
        elif n_units > slots:
            out.append(Violation("AB-S-6", "engine_oversubscribed", f"engine {dev}/{eng} has {slots} slot(s) but the "
                                                                    f"schedule uses {n_units}", (unit_kind, first_unit[(dev, eng)])))
    for i, c in enumerate(cx.cmds):
        link = _link_of(c)
        ln = cx.links_by_id.get(link) if link else None
        if ln is not None:
            moved = sum(cx.allocs[k].size.value.data for k in dict.fromkeys(cx.writes[i]) if k >= 0)
            cap = ln.capacity.value.data
            if moved > cap:
                out.append(Violation("AB-S-6", "link_capacity", f"command {cx.who(cx.ids[i])} moves {moved} bytes over "
                                                                 f"link '{ln.id.data}' of capacity {cap}", ("command", i)))
    return out


def check_s7(cx: PlanIndex) -> list[Violation]:
    """AB-S-7: every cost used is present or covered by the explicit risk policy."""
    out = []
    risk = cx.plan.risk.data
    for i, c in enumerate(cx.cmds):
        status = c.status.data
        if not risk_allows(risk, status):
            by = "" if c.provider is None else f" (provider '{c.provider.data}')"
            out.append(Violation("AB-S-7", "cost_not_covered",
                                 f"command {cx.who(cx.ids[i])} uses a {status} cost{by} "
                                 f"that risk policy '{risk}' does not cover", ("command", i)))
    return out


def _core(cx: PlanIndex) -> list[Violation]:
    s2, anc = check_s2(cx)
    return check_s1(cx) + s2 + check_s3(cx) + check_s4(cx, anc) + check_s5(cx, anc) + check_s6(cx) + check_s7(cx)


CORE_KEY = "_pp_core"
"""Key in a ``cplan.plan`` op's ``__dict__`` of the violations its verifier last found (see :func:`_core_of`)."""


def core_violations(plan: Operation) -> tuple[Violation, ...]:
    """:func:`_core` of ``plan``, computed afresh and kept on the op (``plan.__dict__[CORE_KEY]``): what the
    op verifier runs."""
    found = plan.__dict__[CORE_KEY] = tuple(_core(PlanIndex(plan)))
    return found


def _core_of(plan: Operation) -> list[Violation]:
    """The violations ``cplan.plan``'s verifier found when the op verified and has not changed since
    (:func:`~pipeplan.dialects.diagnostics.verify_cached` finds nothing to re-run, or re-runs the verifier,
    which refreshes them); else computed afresh: the op verifier, ``cplan-verify`` and the lowering check
    the same plan once."""
    if "_pp_verified" in plan.__dict__ and CORE_KEY in plan.__dict__:
        try:
            verify_cached(plan)  # type: ignore[arg-type]
        except VerifyException:
            pass
        else:
            cached = plan.__dict__.get(CORE_KEY)
            if cached is not None:
                return list(cached)
    return list(core_violations(plan))


def check_ir_invariants(plan: Operation) -> list[Violation]:
    """The violations of AB-S-1..7 of a ``cplan.plan`` op whose references are closed (parsed IR: every
    reference is an SSA use of an op of the plan), in invariant order: what its verifier checks on parse."""
    return _core_of(plan)


def check_invariants(plan: Operation, index: PlanIndex | None = None) -> list[Violation]:
    """All violations of AB-S-1..7 of a ``cplan.plan`` op, references (:func:`check_references`) included, in
    invariant order (empty when the plan is sound). ``index``: the plan's PlanIndex when the caller has it."""
    return sorted(check_references(index or PlanIndex(plan)) + _core_of(plan), key=lambda v: v.invariant)
