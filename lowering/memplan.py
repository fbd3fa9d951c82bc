"""Memory planning: aligned linear allocation and interference-based interval allocation.

* :func:`linear_offsets` -- the reference binders' stable-order aligned linear allocation
  (seeds/003 "Implemented reference-binder passes"): ``offset_0 = 0``,
  ``bound_i = align_up(offset_i, alignment_i)``, ``offset_(i+1) = bound_i + size_i``; buffer ``i``
  is placed at ``bound_i``.
* :func:`plan_memory` -- the production planner (joint with scheduling): per (device, memory space)
  the persistent buffers (weight, kv, edge) are placed linearly first; transient buffers are then
  placed greedily by decreasing size at the lowest aligned offset that does not overlap any
  already-placed transient buffer they *interfere* with (TFLite's "greedy by size" arena strategy,
  Pisarchyk & Lee 2020, arXiv:2001.03288). Two transients interfere unless every access of one
  happens-before every access of the other in *every* legal execution (the happens-before closure
  of dependencies, queue order and signal/wait, as bitsets from
  :func:`pipeplan.lowering.schedule.ancestor_sets`), so a reuse is safe under any legal
  interleaving, not only in the list schedule (AB-S-5).
* :func:`live_lower_bound` -- the lower bound every allocation must meet: the maximum over time of
  the bytes live in the schedule (persistent bytes plus transients whose first access has started
  and whose last access has not finished).

Units: bytes and seconds. Deterministic: ties are broken by buffer position.
"""

from __future__ import annotations

from dataclasses import dataclass

PERSISTENT = ("weight", "kv", "edge")


def align_up(x: int, alignment: int) -> int:
    """Smallest multiple of ``alignment`` (a positive power of two) that is >= ``x``."""
    return (x + alignment - 1) & ~(alignment - 1)


def linear_offsets(items: list[tuple[int, int]]) -> tuple[list[int], int]:
    """Aligned linear allocation of ``(size, alignment)`` items in the given order.

    Returns the offsets (``bound_i``) and the end (``offset_n``) in bytes.
    """
    out: list[int] = []
    off = 0
    for size, al in items:
        bound = align_up(off, al)
        out.append(bound)
        off = bound + size
    return out, off


@dataclass(frozen=True)
class PlanBuffer:
    """What the planner needs of one buffer: identity, placement, size/alignment, lifetime class,
    and ``accessors`` (indices of the commands reading or writing it)."""

    id: str
    device: str
    space: str
    size: int
    alignment: int
    lifetime: str
    accessors: tuple[int, ...]


@dataclass(frozen=True)
class SpaceReport:
    """Per (device, memory space) figures in bytes: ``peak`` is the allocated high-water mark,
    ``lower_bound`` the max-live-bytes bound; ``transient_*`` the same restricted to transients;
    ``contributors`` the largest buffers live at the bound's peak instant."""

    device: str
    space: str
    peak: int
    lower_bound: int
    persistent: int
    transient_peak: int
    transient_lower_bound: int
    contributors: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class MemoryPlan:
    """Offsets per buffer (same order as the input) and one report per (device, space)."""

    offsets: tuple[int, ...]
    reports: tuple[SpaceReport, ...]


def precedence_masks(buffers: list[PlanBuffer], anc: list[int]) -> tuple[list[int], list[int]]:
    """Per buffer: ``acc`` = bitset of its accessors; ``before`` = bitset of commands that
    happen-before *every* accessor (AND of the accessors' ancestor sets; all ones when unused)."""
    accs, befores = [], []
    for b in buffers:
        a = 0
        before = -1
        for c in b.accessors:
            a |= 1 << c
            before &= anc[c]
        accs.append(a)
        befores.append(before)
    return accs, befores


def interferes(i: int, j: int, accs: list[int], befores: list[int]) -> bool:
    """True unless one buffer's accesses all happen-before the other's (or one is never accessed)."""
    if accs[i] == 0 or accs[j] == 0:
        return False
    return bool(accs[i] & ~befores[j]) and bool(accs[j] & ~befores[i])


def _groups(buffers: list[PlanBuffer]) -> list[tuple[tuple[str, str], list[int]]]:
    keys: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for i, b in enumerate(buffers):
        k = (b.device, b.space)
        if k not in groups:
            groups[k] = []
            keys.append(k)
        groups[k].append(i)
    return [(k, groups[k]) for k in keys]


def live_lower_bound(members: list[PlanBuffer], start: list[float], finish: list[float]
                     ) -> tuple[int, int, tuple[tuple[str, int], ...]]:
    """Max over time of live bytes of ``members`` (see module docstring).

    Returns (total bound, transient-only bound, the live buffers at the peak, largest first). A
    buffer's live interval is [first accessor start, last accessor finish]; at equal times ends are
    processed before starts (a buffer may be reused by a command starting when the last reader
    ends). Persistent buffers are live throughout.
    """
    persistent = sum(b.size for b in members if b.lifetime in PERSISTENT)
    events: list[tuple[float, int, int]] = []  # (time, 0=end/1=start, member index)
    for k, b in enumerate(members):
        if b.lifetime in PERSISTENT or not b.accessors:
            continue
        events.append((min(start[c] for c in b.accessors), 1, k))
        events.append((max(finish[c] for c in b.accessors), 0, k))
    events.sort()
    live = 0
    best = 0
    best_set: list[int] = []
    cur: set[int] = set()
    for _, kind, k in events:
        if kind == 1:
            live += members[k].size
            cur.add(k)
            if live > best:
                best = live
                best_set = sorted(cur)
        else:
            live -= members[k].size
            cur.discard(k)
    at_peak = [k for k, b in enumerate(members) if b.lifetime in PERSISTENT] + best_set
    contrib = sorted(((members[k].id, members[k].size) for k in at_peak), key=lambda x: (-x[1], x[0]))
    return persistent + best, best, tuple(contrib[:8])


def plan_memory(buffers: list[PlanBuffer], anc: list[int], start: list[float], finish: list[float],
                queue_pos: list[tuple[int, int]] | None = None) -> MemoryPlan:
    """Joint interval allocation (see module docstring). ``anc`` is the happens-before closure of
    the final plan's commands, ``start``/``finish`` their scheduled times (seconds).

    ``queue_pos`` (optional) gives each command's (queue number, position in that queue). Commands
    of one in-order queue are totally ordered, so for two buffers all of whose accessors sit on the
    same queue, "every access of A happens-before every access of B" is exactly
    ``last position of A < first position of B``: an O(1) test that replaces the bitset test
    (same answer, since the closure contains queue order and is acyclic).

    Returns offsets (bytes) for every buffer and per-space reports; raises nothing (capacity is
    checked by the caller, which knows the devices).
    """
    accs, befores = precedence_masks(buffers, anc)
    span: list[tuple[int, int, int] | None] = []
    for b in buffers:
        qs = {queue_pos[c][0] for c in b.accessors} if queue_pos is not None and b.accessors else set()
        if len(qs) == 1:
            ps = [queue_pos[c][1] for c in b.accessors]  # type: ignore[index]
            span.append((qs.pop(), min(ps), max(ps)))
        else:
            span.append(None)

    def conflict(i: int, j: int) -> bool:
        si, sj = span[i], span[j]
        if si is not None and sj is not None and si[0] == sj[0]:
            return not (si[2] < sj[1] or sj[2] < si[1])
        return bool(accs[i] and accs[j] and accs[i] & ~befores[j] and accs[j] & ~befores[i])

    offsets = [0] * len(buffers)
    reports: list[SpaceReport] = []
    for (dev, space), idxs in _groups(buffers):
        pers = [i for i in idxs if buffers[i].lifetime in PERSISTENT]
        trans = [i for i in idxs if buffers[i].lifetime not in PERSISTENT]
        offs, base = linear_offsets([(buffers[i].size, buffers[i].alignment) for i in pers])
        for i, o in zip(pers, offs):
            offsets[i] = o
        placed: list[tuple[int, int, int]] = []  # (offset, end, buffer index)
        for i in sorted(trans, key=lambda k: (-buffers[k].size, k)):
            b = buffers[i]
            ranges = sorted((o, e) for o, e, j in placed if e > o and conflict(i, j))
            cand = align_up(base, b.alignment)
            for o, e in ranges:
                if cand + b.size <= o:
                    break
                if e > cand:
                    cand = align_up(e, b.alignment)
            offsets[i] = cand
            placed.append((cand, cand + b.size, i))
        peak = max([base] + [e for _, e, _ in placed])
        members = [buffers[i] for i in idxs]
        bound, tbound, contrib = live_lower_bound(members, start, finish)
        reports.append(SpaceReport(dev, space, peak, bound, base, peak - base, tbound, contrib))
    return MemoryPlan(tuple(offsets), tuple(reports))
