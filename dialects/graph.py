"""Graph helpers over index graphs (``preds[i]`` = predecessors of node ``i``): deterministic topological
order, cycle members, happens-before closure. Shared by the cplan verifiers (AB-S-1/2/4/5), the
list scheduler (:mod:`pipeplan.analysis.schedule`) and the simulator."""

from __future__ import annotations

import heapq


def stable_topo_order(n: int, preds: list[list[int]]) -> list[int] | None:
    """Kahn's algorithm with the smallest ready index first; None when the graph has a cycle."""
    indeg = [len(p) for p in preds]
    succ: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p].append(v)
    ready = [v for v in range(n) if indeg[v] == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        out.append(v)
        for s in succ[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, s)
    return out if len(out) == n else None

def cycle_members(n: int, preds: list[list[int]]) -> list[int]:
    """Indices that lie on a dependency cycle, ascending (nodes that Kahn's algorithm cannot
    order, minus those that only lead into or out of a cycle)."""
    done = set(stable_topo_order(n, preds) or [])
    rest = [v for v in range(n) if v not in done]
    # peel, from the back, nodes none of whose remaining successors is left
    succ: dict[int, list[int]] = {v: [] for v in rest}
    for v in rest:
        for p in preds[v]:
            if p in succ:
                succ[p].append(v)
    outdeg = {v: len(succ[v]) for v in rest}
    stack = [v for v in rest if outdeg[v] == 0]
    removed: set[int] = set()
    while stack:
        v = stack.pop()
        removed.add(v)
        for p in preds[v]:
            if p in outdeg and p not in removed:
                outdeg[p] -= 1
                if outdeg[p] == 0:
                    stack.append(p)
    return [v for v in rest if v not in removed]

def ancestor_sets(n: int, preds: list[list[int]], topo: list[int]) -> list[int]:
    """Happens-before closure: bit ``j`` of ``result[i]`` is set iff node ``j`` must complete before
    node ``i`` starts in every execution that respects the edges ``preds`` (``topo`` must be a
    topological order of them). O(E) big-int ORs of n bits."""
    anc = [0] * n
    for v in topo:
        a = 0
        for p in preds[v]:
            a |= anc[p] | (1 << p)
        anc[v] = a
    return anc
