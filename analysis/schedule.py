"""Deterministic list scheduling over a costed task DAG (seeds/003 "Joint scheduling and memory planning").

This module is pure Python over small frozen dataclasses: :class:`Problem` is the portable plan as a
binder sees it after legalization, implementation selection and cost resolution (one
:class:`TaskNode` per portable task, already placed on a device/engine by the explicit bindings,
one :class:`BufferNode` per portable buffer). ``convert-pplan-to-cplan`` builds a Problem from
``pplan`` IR; tests and benches build them directly.

Algorithms:

* :func:`stable_topo_order` -- Kahn's algorithm, ties broken by input position (deterministic).
* :func:`upward_ranks` -- critical-path priority: ``rank(t) = d(t) + max(rank(s) for s in succ(t))``
  (the "b-level" of HLFET list scheduling, Adam, Chandy & Dickson 1974; Kwok & Ahmad 1999 survey).
* :func:`list_schedule` -- non-preemptive list scheduling: repeatedly take the ready task with the
  highest rank (ties: input position) and start it on its engine's queue at
  ``max(queue free time, latest finish of its dependencies)``. Each (device, engine) is one queue
  that runs one command at a time.
* :func:`ancestor_sets` -- happens-before closure of a DAG as Python-int bitsets, used by the memory
  planner and by the ``cplan-verify`` checks so both agree on which executions are legal.

Times are seconds; ids are strings; nothing depends on set/dict iteration order or hashing.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from pipeplan.dialects.cplan import RISK_POLICIES, CplanError, Device, Lineage, Link, risk_allows
from pipeplan.dialects.graph import ancestor_sets, cycle_members, stable_topo_order  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class TaskNode:
    """One portable task after binding and costing.

    ``device``/``engine``/``implementation`` come from the explicit bindings; ``deps`` are task ids;
    ``reads``/``writes`` buffer ids; ``duration`` seconds or None when the cost is missing;
    ``status`` one of ``direct|fallback|missing``; ``candidates`` the legal implementations the
    target offered (the selected one must be among them); ``link`` the link a transfer uses; ``lineage``
    the diagnostic path, ``origin`` the task's place in the model (the command's ``#cplan.lineage``; a
    problem is bound only when every task has one).
    """

    id: str
    op: str
    device: str
    engine: str
    implementation: str
    deps: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    duration: float | None
    provider: str
    status: str
    lineage: str
    candidates: tuple[str, ...] = ()
    link: str = ""
    origin: Lineage | None = None


@dataclass(frozen=True)
class BufferNode:
    """One portable buffer: ``size`` bytes, ``alignment`` (power of two), lifetime class, and the
    device and memory space it lives in."""

    id: str
    device: str
    space: str
    size: int
    alignment: int
    lifetime: str
    lineage: str = ""


@dataclass(frozen=True)
class Problem:
    """The binder's input: tasks and buffers in stable (portable) order plus the bindings."""

    tasks: tuple[TaskNode, ...]
    buffers: tuple[BufferNode, ...]
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    target: str
    deployment: str
    evidence: str
    risk: str
    source: str


@dataclass(frozen=True)
class Schedule:
    """A list schedule: ``start``/``finish`` seconds per task index, ``queues`` maps each
    (device, engine) in first-use order to its task indices in run order, ``order`` is the global
    dispatch order."""

    start: tuple[float, ...]
    finish: tuple[float, ...]
    queues: tuple[tuple[tuple[str, str], tuple[int, ...]], ...]
    order: tuple[int, ...]

    @property
    def makespan(self) -> float:
        return max(self.finish, default=0.0)


def task_index(tasks: tuple[TaskNode, ...]) -> dict[str, int]:
    """Map task id -> position. Raises CplanError(invalid_problem) on a duplicate id."""
    idx: dict[str, int] = {}
    for i, t in enumerate(tasks):
        if t.id in idx:
            raise CplanError(f"duplicate task id '{t.id}' ({t.lineage})", code="invalid_problem", where=t.id)
        idx[t.id] = i
    return idx


def predecessors(tasks: tuple[TaskNode, ...]) -> list[list[int]]:
    """Predecessor index lists (deduplicated, in dep order). Raises CplanError(invalid_problem)
    when a dependency names no task."""
    idx = task_index(tasks)
    preds: list[list[int]] = []
    for t in tasks:
        ps: list[int] = []
        for d in t.deps:
            j = idx.get(d)
            if j is None:
                raise CplanError(f"task '{t.id}' ({t.lineage}) depends on unknown task '{d}'",
                                 code="invalid_problem", where=t.id)
            if j not in ps:
                ps.append(j)
        preds.append(ps)
    return preds






def effective_durations(problem: Problem) -> list[float]:
    """Durations the scheduler optimizes with, under the plan's risk policy (AB-S-7).

    A cost is used only when :func:`~pipeplan.dialects.cplan.risk_allows` covers its status; a
    ``missing`` cost (``accept-missing`` only) is replaced by the largest known duration
    (pessimistic; 1 s when no cost is known). Raises CplanError(cost_not_covered)
    naming the task and its lineage otherwise.
    """
    if problem.risk not in RISK_POLICIES:
        raise CplanError(f"unknown risk policy '{problem.risk}'", code="invalid_problem")
    known = [t.duration for t in problem.tasks if t.duration is not None]
    worst = max(known, default=1.0)
    out = []
    for t in problem.tasks:
        if not risk_allows(problem.risk, t.status) or (t.duration is None) != (t.status == "missing"):
            raise CplanError(
                f"task '{t.id}' ({t.lineage}) has a {t.status} cost that risk policy '{problem.risk}' does not cover",
                code="cost_not_covered", where=t.id)
        out.append(worst if t.duration is None else float(t.duration))
    return out


def upward_ranks(durations: list[float], preds: list[list[int]], topo: list[int]) -> list[float]:
    """Critical-path priority of each task: its duration plus the longest path to any sink (s)."""
    n = len(durations)
    succ: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p].append(v)
    rank = [0.0] * n
    for v in reversed(topo):
        rank[v] = durations[v] + max((rank[s] for s in succ[v]), default=0.0)
    return rank


def list_schedule(problem: Problem) -> Schedule:
    """Critical-path list schedule of ``problem`` (see the module docstring).

    Raises CplanError: ``invalid_problem`` (unknown/duplicate ids, dependency cycle, naming the
    tasks and their lineage), ``cost_not_covered`` (AB-S-7, see :func:`effective_durations`).
    """
    tasks = problem.tasks
    n = len(tasks)
    preds = predecessors(tasks)
    topo = stable_topo_order(n, preds)
    if topo is None:
        cyc = cycle_members(n, preds)
        names = ", ".join(f"'{tasks[i].id}' ({tasks[i].lineage})" for i in cyc[:6])
        raise CplanError(f"task dependencies form a cycle through {names}", code="invalid_problem")
    dur = effective_durations(problem)
    rank = upward_ranks(dur, preds, topo)
    succ: list[list[int]] = [[] for _ in range(n)]
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p].append(v)
    missing = [len(p) for p in preds]
    ready = [(-rank[v], v) for v in range(n) if missing[v] == 0]
    heapq.heapify(ready)
    start = [0.0] * n
    finish = [0.0] * n
    free: dict[tuple[str, str], float] = {}
    qorder: dict[tuple[str, str], list[int]] = {}
    qkeys: list[tuple[str, str]] = []
    order: list[int] = []
    while ready:
        _, v = heapq.heappop(ready)
        t = tasks[v]
        q = (t.device, t.engine)
        if q not in qorder:
            qorder[q] = []
            qkeys.append(q)
            free[q] = 0.0
        s = max([free[q]] + [finish[p] for p in preds[v]])
        start[v] = s
        finish[v] = s + dur[v]
        free[q] = finish[v]
        qorder[q].append(v)
        order.append(v)
        for w in succ[v]:
            missing[w] -= 1
            if missing[w] == 0:
                heapq.heappush(ready, (-rank[w], w))
    return Schedule(tuple(start), tuple(finish), tuple((q, tuple(qorder[q])) for q in qkeys), tuple(order))




def decode_problem(*, blocks: int, stages: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
                   max_seq_len: int, weight_bytes_per_elem: float = 4.0, act_width: int = 4,
                   flops_per_s: float = 1e12, bytes_per_s: float = 1e11, memory_bytes: int = 1 << 40,
                   alignment: int = 64, risk: str = "strict") -> Problem:
    """A llama decode step (one token) as a Problem, for benches and tests that need the
    70B-shaped workload without building pplan IR (the pass builds Problems from IR instead).

    Stage ``s`` runs blocks ``[s*blocks//stages, (s+1)*blocks//stages)`` on device ``d<s>`` with
    engines ``queue.compute`` and ``queue.copy``; per block: attn_norm, q/k/v matmuls, rope,
    kv_cache_write, attention, o matmul, add, ffn_norm, gate/up matmuls, silu_mul, down matmul, add;
    stage 0 starts with embedding_gather, later stages with a recv; the last stage ends with
    output_norm, output matmul and argmax; every other stage ends with a send over ``l<s>``.
    Weights are ``weight_bytes_per_elem`` bytes per element, the KV cache ``max_seq_len`` positions
    at ``act_width`` bytes. Durations are roofline: ``max(flops / flops_per_s, bytes / bytes_per_s)``
    seconds. Sizes in bytes.
    """
    hd = hidden // heads
    kvd = kv_heads * hd
    tasks: list[TaskNode] = []
    bufs: list[BufferNode] = []
    sizes: dict[str, int] = {}

    def buf(bid: str, dev: str, size: int, life: str, lineage: str, space: str = "device") -> str:
        bufs.append(BufferNode(bid, dev, space, size, alignment, life, lineage))
        sizes[bid] = size
        return bid

    def task(tid: str, op: str, dev: str, reads: list[str], writes: list[str], deps: list[str], flops: float,
             lineage: str, origin: Lineage, engine: str = "queue.compute", link: str = "") -> str:
        moved = sum(sizes[b] for b in reads + writes)
        dur = max(flops / flops_per_s, moved / bytes_per_s)
        impl = "vq." + op
        tasks.append(TaskNode(tid, op, dev, engine, impl, tuple(deps), tuple(reads), tuple(writes), dur, "roofline",
                              "direct", lineage, (impl,), link, origin))
        return tid

    act = hidden * act_width
    last_writer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}

    def deps_for(reads: list[str], writes: list[str]) -> list[str]:
        ds: list[str] = []
        for b in reads + writes:
            w = last_writer.get(b)
            if w and w not in ds:
                ds.append(w)
        for b in writes:
            for r in readers.get(b, []):
                if r not in ds:
                    ds.append(r)
        return ds

    def emit(tid: str, op: str, dev: str, reads: list[str], writes: list[str], flops: float, lineage: str,
             engine: str = "queue.compute", link: str = "", *, stage: int, model_op: str, block: int = -1,
             edge: str = "") -> None:
        origin = Lineage("decode", stage, block, model_op, edge)
        task(tid, op, dev, reads, writes, deps_for(reads, writes), flops, lineage, origin, engine, link)
        for b in reads:
            readers.setdefault(b, []).append(tid)
        for b in writes:
            last_writer[b] = tid
            readers[b] = []

    def wbytes(n: int) -> int:
        return int(n * weight_bytes_per_elem)

    edge_prev = ""
    for s in range(stages):
        dev = f"d{s}"
        lo, hi = s * blocks // stages, (s + 1) * blocks // stages
        p = f"s{s}"
        if s == 0:
            tok = buf(f"{p}.token", dev, 4, "edge", "edge token_in", space="link")
            emb = buf(f"{p}.w.token_embd", dev, wbytes(vocab * hidden), "weight", "token_embd.weight")
            x = buf(f"{p}.x.in", dev, act, "transient", "decode:x")
            emit(f"{p}.embed", "embedding_gather", dev, [tok, emb], [x], 0, f"stage {s} embedding", stage=s, model_op="token_embd")
        else:
            x = buf(f"{p}.x.in", dev, act, "transient", "decode:x")
            emit(f"{p}.recv", "recv", dev, [edge_prev], [x], 0, f"stage {s} recv", engine="queue.copy", stage=s,
                 model_op=f"edge:{edge_prev}", edge=edge_prev)
        for blk in range(lo, hi):
            b = f"{p}.b{blk}"
            ln = f"stage {s} block {blk}"
            w = {n: buf(f"{b}.w.{n}", dev, wbytes(k), "weight", f"blk.{blk}.{n}.weight") for n, k in (
                ("attn_norm", hidden), ("attn_q", hidden * hidden), ("attn_k", hidden * kvd),
                ("attn_v", hidden * kvd), ("attn_output", hidden * hidden), ("ffn_norm", hidden),
                ("ffn_gate", hidden * ffn), ("ffn_up", hidden * ffn), ("ffn_down", ffn * hidden))}
            kc = buf(f"{b}.kv.k", dev, max_seq_len * kvd * act_width, "kv", f"kv:{blk}:k")
            vc = buf(f"{b}.kv.v", dev, max_seq_len * kvd * act_width, "kv", f"kv:{blk}:v")
            t = {n: buf(f"{b}.{n}", dev, k * act_width, "transient", f"decode:{b}.{n}") for n, k in (
                ("xn", hidden), ("q", hidden), ("k", kvd), ("v", kvd), ("qr", hidden), ("kr", kvd),
                ("att", hidden), ("o", hidden), ("x1", hidden), ("xn2", hidden), ("g", ffn), ("u", ffn),
                ("h", ffn), ("f", hidden), ("x2", hidden))}
            emit(f"{b}.attn_norm", "rms_norm", dev, [x, w["attn_norm"]], [t["xn"]], 4 * hidden, f"{ln} attn_norm", stage=s, model_op=f"blk.{blk}.attn_norm", block=blk)
            emit(f"{b}.attn_q", "matmul", dev, [t["xn"], w["attn_q"]], [t["q"]], 2 * hidden * hidden, f"{ln} attn_q", stage=s, model_op=f"blk.{blk}.attn_q", block=blk)
            emit(f"{b}.attn_k", "matmul", dev, [t["xn"], w["attn_k"]], [t["k"]], 2 * hidden * kvd, f"{ln} attn_k", stage=s, model_op=f"blk.{blk}.attn_k", block=blk)
            emit(f"{b}.attn_v", "matmul", dev, [t["xn"], w["attn_v"]], [t["v"]], 2 * hidden * kvd, f"{ln} attn_v", stage=s, model_op=f"blk.{blk}.attn_v", block=blk)
            emit(f"{b}.rope", "rope", dev, [t["q"], t["k"]], [t["qr"], t["kr"]], 6 * (hidden + kvd), f"{ln} rope", stage=s, model_op=f"blk.{blk}.rope", block=blk)
            emit(f"{b}.kv_write", "kv_cache_write", dev, [t["kr"], t["v"]], [kc, vc], 0, f"{ln} kv_cache_write", stage=s, model_op=f"blk.{blk}.kv_cache_write", block=blk)
            emit(f"{b}.attention", "attention", dev, [t["qr"], kc, vc], [t["att"]], 4 * max_seq_len * hidden,
                 f"{ln} attention", stage=s, model_op=f"blk.{blk}.attention", block=blk)
            emit(f"{b}.attn_output", "matmul", dev, [t["att"], w["attn_output"]], [t["o"]], 2 * hidden * hidden,
                 f"{ln} attn_output", stage=s, model_op=f"blk.{blk}.attn_output", block=blk)
            emit(f"{b}.add1", "add", dev, [x, t["o"]], [t["x1"]], hidden, f"{ln} add", stage=s, model_op=f"blk.{blk}.add", block=blk)
            emit(f"{b}.ffn_norm", "rms_norm", dev, [t["x1"], w["ffn_norm"]], [t["xn2"]], 4 * hidden, f"{ln} ffn_norm", stage=s, model_op=f"blk.{blk}.ffn_norm", block=blk)
            emit(f"{b}.ffn_gate", "matmul", dev, [t["xn2"], w["ffn_gate"]], [t["g"]], 2 * hidden * ffn, f"{ln} ffn_gate", stage=s, model_op=f"blk.{blk}.ffn_gate", block=blk)
            emit(f"{b}.ffn_up", "matmul", dev, [t["xn2"], w["ffn_up"]], [t["u"]], 2 * hidden * ffn, f"{ln} ffn_up", stage=s, model_op=f"blk.{blk}.ffn_up", block=blk)
            emit(f"{b}.silu_mul", "silu_mul", dev, [t["g"], t["u"]], [t["h"]], 6 * ffn, f"{ln} silu_mul", stage=s, model_op=f"blk.{blk}.silu_mul", block=blk)
            emit(f"{b}.ffn_down", "matmul", dev, [t["h"], w["ffn_down"]], [t["f"]], 2 * hidden * ffn, f"{ln} ffn_down", stage=s, model_op=f"blk.{blk}.ffn_down", block=blk)
            emit(f"{b}.add2", "add", dev, [t["x1"], t["f"]], [t["x2"]], hidden, f"{ln} add", stage=s, model_op=f"blk.{blk}.add", block=blk)
            x = t["x2"]
        if s == stages - 1:
            on = buf(f"{p}.w.output_norm", dev, wbytes(hidden), "weight", "output_norm.weight")
            ow = buf(f"{p}.w.output", dev, wbytes(vocab * hidden), "weight", "output.weight")
            xn = buf(f"{p}.xn.out", dev, act, "transient", "decode:xn_out")
            lg = buf(f"{p}.logits", dev, vocab * act_width, "transient", "decode:logits")
            tok = buf(f"{p}.next_token", dev, 4, "transient", "decode:next_token")
            emit(f"{p}.output_norm", "rms_norm", dev, [x, on], [xn], 4 * hidden, f"stage {s} output_norm", stage=s, model_op="output_norm")
            emit(f"{p}.output", "matmul", dev, [xn, ow], [lg], 2 * hidden * vocab, f"stage {s} output", stage=s, model_op="output")
            emit(f"{p}.argmax", "argmax", dev, [lg], [tok], vocab, f"stage {s} argmax", stage=s, model_op="argmax")
        else:
            edge_prev = buf(f"e{s}", dev, act, "edge", f"edge e{s}", space="link")
            emit(f"{p}.send", "send", dev, [x], [edge_prev], 0, f"stage {s} send", engine="queue.copy", link=f"l{s}",
                 stage=s, model_op=f"edge:{edge_prev}", edge=edge_prev)
    devices = tuple(Device(f"d{s}", (("device", memory_bytes), ("link", memory_bytes)),
                           (("queue.compute", 1), ("queue.copy", 1))) for s in range(stages))
    links = tuple(Link(f"l{s}", f"d{s}", f"d{s + 1}", memory_bytes) for s in range(stages - 1))
    return Problem(tuple(tasks), tuple(bufs), devices, links, "virtual-queue@1", "synthetic", "roofline@r1", risk,
                   f"synthetic:{blocks}x{stages}")
