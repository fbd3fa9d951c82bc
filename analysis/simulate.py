"""Execution model of a concrete plan (``cplan.plan``), its timing projection, and a discrete-event simulation.

Seeds/003 "Timing and simulation projection": after the command DAG is verified, timing projection
computes predicted intervals, contention, critical paths and uncertainty (AB-T-1); simulator lowering
maps the *same* commands and resources into discrete events (AB-T-2). Both read one
:class:`ExecModel` built from the ``cplan.plan`` op (an analysis of its ops), so they cannot
disagree about what runs where.

**Steps and instances.** A plan built from a RunPlan describes one ``prefill`` step and one
``decode`` step (each command's ``#cplan.lineage`` names its step and stage). A run repeats
them: ``prefill#0`` (further ``prefill#k`` for prompt chunks) then ``decode#0 … decode#K-1``. Each
*step instance* holds the commands of its step. Its constraints, all "predecessor finishes before
successor starts":

* data dependencies and signal/wait edges of the plan between commands of the same step (same
  instance); to a command of another step: its latest earlier instance;
* queue order: the plan's queue (or slot) order restricted to the step; the first command of a queue
  in an instance follows the last command of that queue in the previous instance (in-order queues);
* the orchestrator loop: commands reading an *input edge* (an edge buffer no command writes: the
  token-in edge) in instance ``i`` wait for the commands writing an *output edge* (no command reads
  it: token-out) in instance ``i - 1`` — the next token exists only after the previous was sampled.

The portable plan states the loop once, explicitly: the decode step's token-in ``recv`` depends on the
prefill step's token-out ``send`` (``convert-runplan-to-pplan``), so every decode command follows
every prefill command and a plan's queues run each step's commands contiguously; the queue order
restricted to a step is then exactly the plan's order. A run repeats steps, so the model applies the
same loop edge between *every* two consecutive instances (found from the edge buffers above); to the
first decode instance it coincides with the plan's own dependency.

**Resources.** Each queue (``device:engine``) or slot runs one command at a time, in order. A link
(a command's ``link``) is a shared resource: a transfer holds it for its duration; the projection orders
a link's users by (instance, command position); the simulation grants it first-come-first-served
(ties: instance, position). Durations are the plan's costs (seconds); a command whose cost is
``missing`` takes 0 s and is reported.

**Uncertainty.** A cost of confidence ``c`` gives the duration interval ``[d * c, d * (2 - c)]``,
i.e. ``d * (1 ∓ u)`` with ``u = 1 - c``; propagating the low and the high durations through the same
(monotone max-plus) constraints gives the low/high bounds of every start and end.

The simulation is our own small event loop (a heap of finish events, in-order queues, FIFO links):
with in-order queues the only dynamic arbitration is the links, which is simpler to state here than
through SimPy processes. Everything is deterministic: ties are broken by instance and plan position.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeplan.dialects.cplan import PlanOp
from pipeplan.dialects.cplan_invariants import PlanIndex
from pipeplan.errors import PipeplanError

STATUS_CONFIDENCE = {"direct": 0.5, "fallback": 0.5, "out_of_domain": 0.25, "missing": 0.0}
"""Confidence used when the CostedTaskView is not at hand: the roofline/out-of-domain constants of
:mod:`pipeplan.analysis.evidence` (a direct *measured* cost without its view is given 0.95, the
measured table's clamp for a 5% spread)."""


class SimulationError(PipeplanError):
    """A plan the timing model cannot run: ``code`` is ``bad_schedule`` (empty or unknown step names) or
    ``deadlock`` (commands that can never start; the message lists them with lineage). Each command's step
    and stage are its ``#cplan.lineage``'s (whose verifier rejects an unknown step at parse)."""

    code = "simulation"


@dataclass(frozen=True)
class ModelCommand:
    """One plan command as the timing model sees it (``duration`` seconds, 0 when missing)."""

    index: int
    id: str
    op: str
    step: str
    stage: int
    device: str
    queue: str
    engine: str
    link: str
    edge: str
    duration: float
    confidence: float
    missing: bool
    lineage: str


@dataclass(frozen=True)
class ExecModel:
    """Commands, queues, dependencies and loop edges of a plan (see the module docstring)."""

    commands: tuple[ModelCommand, ...]
    queues: tuple[tuple[str, tuple[int, ...]], ...]
    deps: tuple[tuple[int, ...], ...]
    syncs: tuple[tuple[int, int], ...]
    steps: tuple[str, ...]
    loop_sources: tuple[int, ...]
    loop_sinks: tuple[int, ...]

    def by_id(self) -> dict[str, int]:
        """Command id -> index."""
        return {c.id: c.index for c in self.commands}


def build_model(plan: PlanOp, confidences: Mapping[str, float] | None = None) -> ExecModel:
    """The execution model of ``plan``.

    Args:
        plan: a verified ``cplan.plan`` op (queue or slot extension).
        confidences: command id -> confidence in [0, 1] (from the CostedTaskView); commands not in
            it get :data:`STATUS_CONFIDENCE` of their status (0.95 for a direct measured cost).
    """
    confidences = confidences or {}
    cx = PlanIndex(plan)
    qof: dict[int, tuple[str, str]] = {}
    queues: list[tuple[str, list[int]]] = []
    for u in cx.units:
        key = f"{u.device.data}:{u.engine.data}" if cx.is_queue else u.id.data
        order = cx.members(u)
        queues.append((key, order))
        for j in order:
            if j >= 0:
                qof.setdefault(j, (key, u.engine.data))
    cmds: list[ModelCommand] = []
    for i, c in enumerate(cx.cmds):
        cid, lin, status = cx.ids[i], c.lineage, c.status.data
        dev, engine = c.device.data, c.engine.data
        key, eng = qof.get(i, (f"{dev}:{engine}", engine))
        if cid in confidences:
            conf = float(confidences[cid])
        elif status == "direct" and c.provider is not None and c.provider.data == "measured":
            conf = 0.95
        else:
            conf = STATUS_CONFIDENCE.get(status, 0.0)
        duration = None if c.duration is None else c.duration.value.data
        cmds.append(ModelCommand(i, cid, c.op.data, lin.step, lin.stage, dev, key, eng,
                                 "" if c.link is None else c.link.data, lin.edge,
                                 0.0 if duration is None else float(duration), min(1.0, max(0.0, conf)),
                                 duration is None, c.lineage_text))
    deps = tuple(tuple(dict.fromkeys(j for j in ds if j >= 0)) for ds in cx.deps)
    pos = cx.cmd_pos
    syncs = tuple((pos[s.signal], pos[s.wait]) for s in cx.syncs if s.signal in pos and s.wait in pos)
    written: set[int] = set()
    read: set[int] = set()
    for i in range(len(cx.cmds)):
        written.update(cx.writes[i])
        read.update(cx.reads[i])
    edge_allocs = {k for k, a in enumerate(cx.allocs) if a.lifetime.data == "edge"}
    inputs, outputs = edge_allocs - written, edge_allocs - read
    sinks = tuple(i for i in range(len(cx.cmds)) if set(cx.reads[i]) & inputs)
    sources = tuple(i for i in range(len(cx.cmds)) if set(cx.writes[i]) & outputs)
    steps = tuple(dict.fromkeys(c.step for c in cmds))
    qs = tuple((k, tuple(j for j in order if j >= 0)) for k, order in queues)
    return ExecModel(tuple(cmds), qs, deps, syncs, steps, sources, sinks)


def run_schedule(model: ExecModel, prompt_chunks: int = 1, decode_tokens: int = 1) -> tuple[str, ...]:
    """Step kinds of a run: ``prompt_chunks`` prefill instances then ``decode_tokens`` decode
    instances (only the steps the plan has). Raises SimulationError(bad_schedule) when empty."""
    out: list[str] = []
    if "prefill" in model.steps:
        out += ["prefill"] * max(0, prompt_chunks)
    if "decode" in model.steps:
        out += ["decode"] * max(0, decode_tokens)
    if not out:
        raise SimulationError(f"empty run: the plan has steps {list(model.steps)}", code="bad_schedule")
    return tuple(out)


# --------------------------------------------------------------------------- instance graph
@dataclass(frozen=True)
class Node:
    """One command in one step instance. ``iteration`` counts instances of the same step."""

    instance: int
    step: str
    iteration: int
    cmd: int


@dataclass(frozen=True)
class InstanceGraph:
    """Nodes in (instance, plan position) order; ``data_preds`` (dependencies, syncs, loop edges),
    ``order_preds`` (queue predecessor), ``link_preds`` (previous user of the link, static order)."""

    nodes: tuple[Node, ...]
    data_preds: tuple[tuple[int, ...], ...]
    order_preds: tuple[tuple[int, ...], ...]
    link_preds: tuple[tuple[int, ...], ...]
    sync_nodes: tuple[tuple[int, int], ...]


def instance_graph(model: ExecModel, schedule: Sequence[str]) -> InstanceGraph:
    """Expand ``model`` over the step instances of ``schedule`` (see the module docstring).

    Raises SimulationError(bad_schedule) for a step the plan does not have.
    """
    for s in schedule:
        if s not in model.steps:
            raise SimulationError(f"step '{s}' is not in the plan (steps: {list(model.steps)})", code="bad_schedule")
    nodes: list[Node] = []
    at: dict[tuple[int, int], int] = {}
    iters: dict[str, int] = {}
    by_step: dict[str, list[int]] = {}
    for c in model.commands:
        by_step.setdefault(c.step, []).append(c.index)
    for inst, step in enumerate(schedule):
        it = iters.get(step, 0)
        iters[step] = it + 1
        for ci in by_step[step]:
            at[(inst, ci)] = len(nodes)
            nodes.append(Node(inst, step, it, ci))
    latest: dict[tuple[int, str], int] = {}
    last_of: dict[str, int] = {}
    for inst, step in enumerate(schedule):
        for s in model.steps:
            if s in last_of:
                latest[(inst, s)] = last_of[s]
        last_of[step] = inst
    cmds = model.commands
    data: list[list[int]] = [[] for _ in nodes]
    order: list[list[int]] = [[] for _ in nodes]
    link: list[list[int]] = [[] for _ in nodes]
    sync_nodes: list[tuple[int, int]] = []

    def ref(inst: int, ci: int) -> int | None:
        s = cmds[ci].step
        if s == schedule[inst]:
            return at[(inst, ci)]
        j = latest.get((inst, s))
        return None if j is None else at[(j, ci)]

    for n_i, n in enumerate(nodes):
        for d in model.deps[n.cmd]:
            r = ref(n.instance, d)
            if r is not None and r not in data[n_i]:
                data[n_i].append(r)
    for sig, wait in model.syncs:
        for inst, step in enumerate(schedule):
            if cmds[wait].step != step:
                continue
            w = at[(inst, wait)]
            r = ref(inst, sig)
            if r is None:
                continue
            if r not in data[w]:
                data[w].append(r)
            if cmds[sig].step == step:
                sync_nodes.append((r, w))
    for inst in range(1, len(schedule)):
        srcs = [at[(inst - 1, s)] for s in model.loop_sources if (inst - 1, s) in at]
        for k in model.loop_sinks:
            if (inst, k) in at:
                for src in srcs:
                    if src not in data[at[(inst, k)]]:
                        data[at[(inst, k)]].append(src)
    last_in_queue: dict[str, int] = {}
    for inst, step in enumerate(schedule):
        for key, q in model.queues:
            for ci in q:
                if cmds[ci].step != step:
                    continue
                me = at[(inst, ci)]
                if key in last_in_queue:
                    order[me].append(last_in_queue[key])
                last_in_queue[key] = me
    last_on_link: dict[str, int] = {}
    for n_i, n in enumerate(nodes):
        ln = cmds[n.cmd].link
        if ln:
            if ln in last_on_link:
                link[n_i].append(last_on_link[ln])
            last_on_link[ln] = n_i
    return InstanceGraph(tuple(nodes), tuple(map(tuple, data)), tuple(map(tuple, order)), tuple(map(tuple, link)),
                         tuple(sync_nodes))


def _topo(g: InstanceGraph, use_link: bool = True) -> list[int] | None:
    """Stable topological order of the instance graph (data, queue order and, with ``use_link``,
    link order), or None when it is cyclic."""
    from pipeplan.analysis.schedule import stable_topo_order

    preds = [sorted(set(g.data_preds[v]) | set(g.order_preds[v]) | (set(g.link_preds[v]) if use_link else set()))
             for v in range(len(g.nodes))]
    return stable_topo_order(len(g.nodes), preds)


def _deadlock(model: ExecModel, g: InstanceGraph, done: set[int]) -> SimulationError:
    stuck = [v for v in range(len(g.nodes)) if v not in done]
    names = "; ".join(f"{g.nodes[v].step}#{g.nodes[v].iteration} '{model.commands[g.nodes[v].cmd].id}' "
                      f"({model.commands[g.nodes[v].cmd].lineage})" for v in stuck[:4])
    return SimulationError(f"{len(stuck)} command instance(s) can never start (queue order, dependencies and "
                           f"signal/wait edges form a cycle): {names}", code="deadlock")


# --------------------------------------------------------------------------- projection
@dataclass(frozen=True)
class Interval:
    """Predicted or simulated interval of one node (seconds). ``lo_*``/``hi_*`` are the uncertainty
    bounds; ``contention`` the seconds it waited for its queue or link after its data was ready."""

    node: Node
    start: float
    end: float
    lo_start: float
    lo_end: float
    hi_start: float
    hi_end: float
    contention: float


@dataclass(frozen=True)
class Projection:
    """Timing projection of a run: intervals in node order, makespan with bounds, critical path
    (node indices, first to last), and the number of contended nodes."""

    model: ExecModel
    graph: InstanceGraph
    intervals: tuple[Interval, ...]
    makespan: float
    lo_makespan: float
    hi_makespan: float
    critical_path: tuple[int, ...]
    contended: int


def project(model: ExecModel, schedule: Sequence[str] = ("prefill", "decode")) -> Projection:
    """Static timing projection (AB-T-1): longest path over the instance graph with queue and link
    order fixed, three times (nominal, low, high durations); contention = start minus the time the
    node's data was ready; the critical path follows, from the last-finishing node, the predecessor
    that finished last (ties: the earlier node).

    Raises SimulationError(deadlock | bad_schedule).
    """
    g = instance_graph(model, [s for s in schedule if s in model.steps])
    topo = _topo(g)
    if topo is None:
        raise _deadlock(model, g, set())
    n = len(g.nodes)
    dur = [model.commands[x.cmd].duration for x in g.nodes]
    unc = [1.0 - model.commands[x.cmd].confidence for x in g.nodes]

    def longest(d: list[float]) -> tuple[list[float], list[float], list[float], list[int]]:
        st, fin, ready, arg = [0.0] * n, [0.0] * n, [0.0] * n, [-1] * n
        for v in topo:
            r = 0.0
            for p in g.data_preds[v]:
                r = max(r, fin[p])
            preds = sorted(set(g.data_preds[v]) | set(g.order_preds[v]) | set(g.link_preds[v]))
            s = max((fin[p] for p in preds), default=0.0)
            a = next((p for p in preds if fin[p] == s), -1)
            st[v], fin[v], ready[v], arg[v] = s, s + d[v], r, a
        return st, fin, ready, arg

    st, fin, ready, arg = longest(dur)
    lst, lfin, _, _ = longest([d * (1.0 - u) for d, u in zip(dur, unc)])
    hst, hfin, _, _ = longest([d * (1.0 + u) for d, u in zip(dur, unc)])
    ivs = tuple(Interval(g.nodes[v], st[v], fin[v], lst[v], lfin[v], hst[v], hfin[v], max(0.0, st[v] - ready[v]))
                for v in range(n))
    end = max(range(n), key=lambda v: (fin[v], -v)) if n else -1
    path: list[int] = []
    v = end
    while v != -1:
        path.append(v)
        v = arg[v]
    return Projection(model, g, ivs, max(fin, default=0.0), max(lfin, default=0.0), max(hfin, default=0.0),
                      tuple(reversed(path)), sum(1 for x in ivs if x.contention > 1e-15))


# --------------------------------------------------------------------------- simulation
@dataclass(frozen=True)
class SimEvent:
    """One discrete event: ``kind`` is ``start`` | ``end`` (a command), ``signal`` (a sync's signal
    side completed) or ``wait`` (a sync's waiting command released); ``node`` the node index
    (for signal/wait: the waiting node; ``peer`` the signalling node, else -1)."""

    time: float
    kind: str
    node: int
    peer: int = -1


@dataclass(frozen=True)
class Simulation:
    """Result of :func:`simulate`: events in time order, per-node intervals, makespan."""

    model: ExecModel
    graph: InstanceGraph
    schedule: tuple[str, ...]
    events: tuple[SimEvent, ...]
    intervals: tuple[Interval, ...]
    makespan: float


def simulate(model: ExecModel, schedule: Sequence[str]) -> Simulation:
    """Discrete-event simulation of ``schedule`` (AB-T-2): in-order queues, FIFO links, nominal
    durations; events for every command start/end and every same-step signal/wait.

    A node is *eligible* when its data predecessors finished and it heads its queue; it then asks
    for its link (if any), granted first-come-first-served (ties: node order); it starts at once
    when granted and finishes ``duration`` later.

    Raises SimulationError(deadlock | bad_schedule).
    """
    g = instance_graph(model, schedule)
    n = len(g.nodes)
    cmds = model.commands
    dur = [cmds[x.cmd].duration for x in g.nodes]
    need = [len(set(g.data_preds[v]) | set(g.order_preds[v])) for v in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for p in set(g.data_preds[v]) | set(g.order_preds[v]):
            succ[p].append(v)
    waits_of: dict[int, list[int]] = {}
    for sig, w in g.sync_nodes:
        waits_of.setdefault(sig, []).append(w)
    ready_t = [0.0] * n
    data_t = [0.0] * n
    start = [0.0] * n
    fin = [0.0] * n
    link_free: dict[str, float] = {}
    link_wait: dict[str, list[tuple[float, int]]] = {}
    heap: list[tuple[float, int, int, int]] = []  # (time, kind 0=finish 1=eligible, node, seq)
    events: list[SimEvent] = []
    done: set[int] = set()
    seq = 0

    def push(t: float, kind: int, v: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, kind, v, seq))
        seq += 1

    def begin(v: int, t: float) -> None:
        start[v] = t
        events.append(SimEvent(t, "start", v))
        push(t + dur[v], 0, v)

    for v in range(n):
        if need[v] == 0:
            push(0.0, 1, v)
    while heap:
        t, kind, v, _ = heapq.heappop(heap)
        if kind == 1:
            ln = cmds[g.nodes[v].cmd].link
            if ln and link_free.get(ln, 0.0) > t + 1e-18:
                link_wait.setdefault(ln, []).append((t, v))
                continue
            if ln:
                link_free[ln] = float("inf")
            begin(v, t)
            continue
        fin[v] = t
        done.add(v)
        events.append(SimEvent(t, "end", v))
        for w in waits_of.get(v, ()):
            events.append(SimEvent(t, "signal", w, v))
        ln = cmds[g.nodes[v].cmd].link
        if ln:
            link_free[ln] = t
            q = link_wait.get(ln)
            if q:
                q.sort()
                _, nxt = q.pop(0)
                link_free[ln] = float("inf")
                begin(nxt, t)
        for s in succ[v]:
            if v in g.data_preds[s]:
                data_t[s] = max(data_t[s], t)
            ready_t[s] = max(ready_t[s], t)
            need[s] -= 1
            if need[s] == 0:
                for sig, w in ((p, s) for p in g.data_preds[s] if s in waits_of.get(p, ())):
                    events.append(SimEvent(t, "wait", w, sig))
                push(ready_t[s], 1, s)
    if len(done) != n:
        raise _deadlock(model, g, done)
    events.sort(key=lambda e: (e.time, 0 if e.kind in ("end", "signal") else 1, e.node, e.kind))
    ivs = tuple(Interval(g.nodes[v], start[v], fin[v], start[v], fin[v], start[v], fin[v],
                         max(0.0, start[v] - data_t[v])) for v in range(n))
    return Simulation(model, g, tuple(schedule), tuple(events), ivs, max(fin, default=0.0))


__all__ = [
    "ExecModel", "InstanceGraph", "Interval", "ModelCommand", "Node", "Projection", "STATUS_CONFIDENCE", "SimEvent",
    "Simulation", "SimulationError", "build_model", "instance_graph", "project", "run_schedule",
    "simulate",
]
