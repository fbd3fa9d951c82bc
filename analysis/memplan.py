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
  :func:`pipeplan.analysis.schedule.ancestor_sets`), so a reuse is safe under any legal
  interleaving, not only in the list schedule (AB-S-5).
* :func:`live_lower_bound` -- the lower bound every allocation must meet: the maximum over time of
  the bytes live in the schedule (persistent bytes plus transients whose first access has started
  and whose last access has not finished).

Units: bytes and seconds. Deterministic: ties are broken by buffer position.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeplan.dialects.lifetimes import PERSISTENT_LIFETIMES

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

PERSISTENT = PERSISTENT_LIFETIMES


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


def first_use_groups(items: Sequence[T], key: Callable[[T], K]) -> list[tuple[K, list[int]]]:
    """Indices of ``items`` grouped by ``key(item)``, groups in order of first use, indices ascending
    (deterministic: no set or hash order). Used per (device, memory space) and per (device, engine)."""
    groups: dict[K, list[int]] = {}
    for i, x in enumerate(items):
        groups.setdefault(key(x), []).append(i)
    return list(groups.items())


def groups_by_space(buffers: Sequence[Any]) -> list[tuple[tuple[str, str], list[int]]]:
    """Buffer indices per ``(device, space)`` (anything with those attributes), in first-use order."""
    return first_use_groups(buffers, lambda b: (b.device, b.space))


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


class _QueueIntervals:
    """Placed transients whose accessors all sit on one in-order queue, indexed by their queue
    position interval ``[a, b]`` for window queries: buckets of width :attr:`W` by ``a`` for short
    intervals (``b - a < W``) plus a list of long ones. A query costs O(buckets in the window +
    long intervals + answer)."""

    W = 32

    def __init__(self) -> None:
        self.short: dict[int, list[tuple[int, int, int, int]]] = {}
        self.long: list[tuple[int, int, int, int]] = []

    def add(self, a: int, b: int, off: int, end: int) -> None:
        item = (a, b, off, end)
        if b - a < self.W:
            self.short.setdefault(a // self.W, []).append(item)
        else:
            self.long.append(item)

    def overlapping(self, p: int, s: int) -> list[tuple[int, int]]:
        """``(offset, end)`` of the placed intervals with ``b > p`` and ``a < s`` (non-empty ones).

        The window may hold no position at all (``s == p + 1``: the querying buffer is accessed only
        on other queues, between positions ``p`` and ``p + 1`` of this one); an interval that spans it
        (``a <= p < b``) still meets it: its buffer is live throughout the querying buffer's accesses.
        """
        out = [(o, e) for a, b, o, e in self.long if b > p and a < s and e > o]
        lo = max(p - self.W + 1, 0) // self.W  # a short interval with b > p has a > p - W
        hi = (s - 1) // self.W
        if hi - lo + 1 > len(self.short):
            keys = [k for k in self.short if lo <= k <= hi]
        else:
            keys = [k for k in range(lo, hi + 1) if k in self.short]
        for k in keys:
            out += [(o, e) for a, b, o, e in self.short[k] if b > p and a < s and e > o]
        return out


def _queue_layout(queue_pos: list[tuple[int, int]] | None, n_cmds: int
                  ) -> tuple[dict[int, list[int]], dict[int, int]] | None:
    """Commands of each queue in position order and each queue's command bitset, or None when
    ``queue_pos`` is absent or its positions are not exactly ``0..len-1`` on every queue."""
    if queue_pos is None or len(queue_pos) != n_cmds:
        return None
    cmds: dict[int, dict[int, int]] = {}
    for c, (q, k) in enumerate(queue_pos):
        cmds.setdefault(q, {})[k] = c
    order: dict[int, list[int]] = {}
    masks: dict[int, int] = {}
    for q, by_pos in cmds.items():
        if sorted(by_pos) != list(range(len(by_pos))):
            return None
        order[q] = [by_pos[k] for k in range(len(by_pos))]
        m = 0
        for c in order[q]:
            m |= 1 << c
        masks[q] = m
    return order, masks


def plan_memory(buffers: list[PlanBuffer], anc: list[int], start: list[float], finish: list[float],
                queue_pos: list[tuple[int, int]] | None = None) -> MemoryPlan:
    """Joint interval allocation (see module docstring). ``anc`` is the happens-before closure of
    the final plan's commands (bitsets; it must contain queue order), ``start``/``finish`` their
    scheduled times (seconds).

    ``queue_pos`` (optional) gives each command's (queue number, position in that queue). Commands
    of one in-order queue are totally ordered, so the ancestors of any command on a queue ``q`` form
    a prefix of ``q``, and ancestor sets grow along ``q``. For a transient ``j`` all of whose
    accessors sit on ``q`` at positions ``[a_j, b_j]`` and any transient ``i``:

    * all of ``j`` happens-before all of ``i``  iff  ``b_j <= P_i(q)``, where ``P_i(q)`` is the last
      position of the prefix of ``q`` that precedes every accessor of ``i`` (a popcount);
    * all of ``i`` happens-before all of ``j``  iff  ``a_j >= S_i(q)``, the first position of ``q``
      whose ancestor set holds every accessor of ``i`` (a binary search along ``q``).

    So ``i`` and ``j`` interfere iff ``[a_j, b_j]`` meets the open window ``(P_i(q), S_i(q))`` —
    exactly the bitset test of :func:`interferes`, answered by a window query over the placed
    intervals of ``q`` instead of a scan of every placed buffer. Transients accessed from several
    queues (or all of them when ``queue_pos`` is None) use the bitset test. Cost per transient:
    O(queues x (log queue length + window buckets) + conflicts + multi-queue transients), so the
    planner is near-linear in buffers for pipeline plans (each transient meets a bounded window).

    Returns offsets (bytes) for every buffer and per-space reports; raises nothing (capacity is
    checked by the caller, which knows the devices).
    Source: greedy-by-size (TFLite arena planner, arXiv:2001.03288); seeds/003 AB-S-5 for the
    "no overlap in any legal execution" guarantee.
    """
    accs, befores = precedence_masks(buffers, anc)
    layout = _queue_layout(queue_pos, len(anc))
    span: list[tuple[int, int, int] | None] = [None] * len(buffers)
    if layout is not None and queue_pos is not None:
        for i, b in enumerate(buffers):
            qs = {queue_pos[c][0] for c in b.accessors}
            if len(qs) == 1:
                ps = [queue_pos[c][1] for c in b.accessors]
                span[i] = (qs.pop(), min(ps), max(ps))

    def window(i: int, q: int) -> tuple[int, int]:
        """``(P_i(q), S_i(q))`` (see the docstring)."""
        assert layout is not None
        order, masks = layout
        p = (befores[i] & masks[q]).bit_count() - 1
        need, cmds = accs[i], order[q]
        lo, hi = p + 1, len(cmds)  # positions <= p precede i's accessors: none of them can follow them
        while lo < hi:
            mid = (lo + hi) // 2
            if need & ~anc[cmds[mid]]:
                lo = mid + 1
            else:
                hi = mid
        return p, lo

    offsets = [0] * len(buffers)
    reports: list[SpaceReport] = []
    for (dev, space), idxs in groups_by_space(buffers):
        pers = [i for i in idxs if buffers[i].lifetime in PERSISTENT]
        trans = [i for i in idxs if buffers[i].lifetime not in PERSISTENT]
        offs, base = linear_offsets([(buffers[i].size, buffers[i].alignment) for i in pers])
        for i, o in zip(pers, offs):
            offsets[i] = o
        by_queue: dict[int, _QueueIntervals] = {}
        multi: list[tuple[int, int, int]] = []  # (offset, end, buffer index): bitset-tested
        peak = base
        for i in sorted(trans, key=lambda k: (-buffers[k].size, k)):
            b = buffers[i]
            ranges: list[tuple[int, int]] = []
            if accs[i]:
                for q, placed_q in by_queue.items():
                    ranges += placed_q.overlapping(*window(i, q))
                ranges += [(o, e) for o, e, j in multi if e > o and interferes(i, j, accs, befores)]
            ranges.sort()
            cand = align_up(base, b.alignment)
            for o, e in ranges:
                if cand + b.size <= o:
                    break
                if e > cand:
                    cand = align_up(e, b.alignment)
            offsets[i] = cand
            peak = max(peak, cand + b.size)
            sp = span[i]
            if not accs[i]:
                pass  # never accessed: interferes with nothing, so nothing needs to see it
            elif sp is not None:
                by_queue.setdefault(sp[0], _QueueIntervals()).add(sp[1], sp[2], cand, cand + b.size)
            else:
                multi.append((cand, cand + b.size, i))
        members = [buffers[i] for i in idxs]
        bound, tbound, contrib = live_lower_bound(members, start, finish)
        reports.append(SpaceReport(dev, space, peak, bound, base, peak - base, tbound, contrib))
    return MemoryPlan(tuple(offsets), tuple(reports))
