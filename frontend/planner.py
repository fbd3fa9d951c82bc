"""The RunPlan planner: model facts + runtime config + node pool + stage count (+ placement) ->
exactly one verified ``runplan`` module, or a typed :class:`~pipeplan.errors.RunPlanRejection`.

Source: seed 000 (RunPlan contract): "the planner either emits exactly one RunPlan or a typed
rejection" (RP-F-1), "never emits a partial plan" (RP-F-2), "never mutates the candidate pool"
(RP-F-3), and "the planner is the only source of stage, layer, edge, and object-spec assignment"
(RP-AR-7). The planner decides; the ``runplan`` dialect's verifiers (run on every plan before it is
returned) check the decision.

Decisions (documented choices the contract leaves open)
-------------------------------------------------------
* **Placement** is a sequence of node ids, one per stage in stage order. A node may hold at most
  one stage: naming the same node for two stages is a *duplicate stage assignment*
  (``duplicate_stage``; list a host twice in the pool under two ids to run two stages on it).
  A placement shorter than ``stage_count``, or an empty/non-string entry, leaves a stage without a
  node (``missing_stage``); a longer one contradicts the stage count (``invalid_stage_count``).
  An id not in the pool is ``unknown_node``. Without a placement, stage ``i`` goes to the ``i``-th
  node of the pool (more stages than nodes: ``invalid_stage_count``).
* **Stage count**: an integer ``1 <= stage_count <= block_count`` (every stage gets >= 1 block;
  empty ranges are not allowed), else ``invalid_stage_count`` ("5 blocks cannot fill 6 stages").
* **max_seq_len > context_length** is a bad *runtime config* for this model:
  ``invalid_runtime_config`` (as are ``max_seq_len < 1``, ``ring_slots < 1``, ``parallel < 1``, an unknown
  ``kv_dtype`` and a bad ``run_id``). Object-spec defects are ``invalid_object_spec``: an
  activation dtype with no known width, a token dtype other than ``i32``, an alignment that is not
  a power of two in ``[1, 2**20]`` or is smaller than the object's dtype width, and an extent or
  ring size beyond ``2**63 - 1`` bytes.
* **Edges** get ids only here: ``e0`` token-in (orchestrator -> stage 0), ``e{i+1}`` activation
  ``i`` (stage i -> stage i+1), ``e{N}`` token-out (stage N-1 -> orchestrator). They depend only on
  the stage count (RP-EA-6). Specs: token edges kind ``token``, dtype ``i32``, shape
  ``(max_seq_len,)``; activation edges kind ``activation``, dtype ``activation_dtype``, shape
  ``(max_seq_len, hidden)``; layout ``row_major``; ``max_extent = prod(shape) * width``;
  ``RingSpec(slots=ring_slots, slot_bytes=max_extent rounded up to alignment)``.
* **Memory model** (bytes, per stage, checked against its node's ``memory_bytes``): the stage's
  tensor bytes (its blocks; ``token_embd`` on stage 0; ``output_norm``/``output`` — or the tied
  ``token_embd`` — on the last stage, as :meth:`ModelFacts.tensors_for_stage`) + KV cache
  (``kv_bytes_per_block(max_seq_len, width(kv_dtype))`` per block and per sequence slot: ``parallel``
  slots) + its inbound and outbound edge rings (``slots * slot_bytes`` each). Any stage that cannot fit:
  ``insufficient_memory`` naming the node and the bytes needed vs available; when the pool would hold
  the model for 1 sequence but not for ``parallel``, the rejection names ``parallel`` and the KV bytes
  (``where="parallel"``).
* **Partition**: contiguous non-empty block ranges minimizing the bottleneck stage time
  ``(bytes a decode step reads + KV bytes) / memory bandwidth``: every block tensor, the last stage's
  ``output_norm``/``output`` (or tied ``token_embd``) whole, but one row of the first stage's gathered
  ``token_embd`` (:func:`_extra_bytes`; memory still counts the whole tensor), subject to every
  stage's memory. Bandwidths are used when some placed node gives one (nodes without one
  count as the slowest given); with none, stages are balanced by bytes. Exact algorithm: bisection
  on the bottleneck ``T`` with an O(blocks x stages) reachability check (for a fixed end block the
  feasible start blocks of a stage form an interval, found with ``searchsorted`` on byte prefix
  sums); the bisection runs to float resolution, so the result is the optimum up to float rounding
  and fully deterministic. Among optimal partitions the boundaries are taken from the last stage
  backwards, each stage starting at the feasible block closest to its bandwidth-proportional
  share of the remaining bytes (ties: the later start), so non-bottleneck stages stay balanced too.
* **run_id** defaults to ``"run-"`` + 16 hex digits of a sha256 over the planning inputs and the
  decision, so planning the same inputs twice gives identical IR.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence

import numpy as np
from pipeplan.errors import RunPlanRejection
from pipeplan.frontend.pool import ORCHESTRATOR_NAME, validate_pool
from pipeplan.models.archs import check_model
from pipeplan.models.stage_program import ProgramError
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    ORCHESTRATOR,
    EdgePlan,
    ModelFacts,
    NodePool,
    NodeSpec,
    ObjectSpec,
    RingSpec,
    RunPlanSpec,
    RuntimeConfig,
    StagePlan,
    TensorInfo,
    WeightSource,
)

MAX_ALIGNMENT = 1 << 20
"""Largest edge-object alignment accepted (1 MiB, a huge page)."""

MAX_EXTENT = (1 << 63) - 1
"""Largest byte count an ObjectSpec/RingSpec may state (the IR carries them as signed i64)."""

TOKEN_DTYPES = ("i32",)
"""Dtypes a token edge may carry (token ids)."""

RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""Allowed explicit run ids."""

LAYOUT = "row_major"


def _reject(code: str, message: str, where: str | None = None) -> RunPlanRejection:
    return RunPlanRejection(message, code=code, where=where)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------- model facts
def check_model_facts(facts: ModelFacts) -> None:
    """Check that ``facts`` describe a plannable model of a known architecture.

    Raises:
        RunPlanRejection(code="inconsistent_model_facts"): not a ModelFacts; a non-positive or
            non-integer hyperparameter; ``embedding_length`` not divisible by ``head_count``;
            ``head_count`` not divisible by ``head_count_kv``; ``block_bytes`` whose length differs
            from ``block_count`` or whose entries differ from the tensor index totals; a ``blk.N``
            tensor with ``N`` outside ``[0, block_count)``; a block with no tensors; a missing
            ``token_embd.weight`` or ``output_norm.weight``; a ``token_embd.weight`` whose first
            (ggml) dimension is not ``embedding_length``; a tensor with negative size/offset, one
            ending beyond ``2**63 - 1`` bytes, or a shard index outside ``files``. Each message names
            the field or tensor.
        RunPlanRejection(code="unsupported_architecture" | "invalid_hparams" | "missing_tensor" |
            "unexpected_tensor"): the model cannot run as its architecture's stage program
            (:func:`pipeplan.models.archs.check_model`: no builder for ``architecture``, unusable
            hyperparameters, a tensor the program reads is absent (block and tensor named), a tensor
            it would ignore is present).
    Source: seed 000 RP-AR-6 ("model facts inconsistent with requested stage layout reject").
    """
    code = "inconsistent_model_facts"
    if not isinstance(facts, ModelFacts):
        raise _reject(code, f"model facts must be a ModelFacts, got {type(facts).__name__}")
    name = f"model {facts.name!r}"
    for field in ("block_count", "embedding_length", "head_count", "head_count_kv", "feed_forward_length",
                  "vocab_size", "context_length"):
        v = getattr(facts, field)
        if not _is_int(v) or not 1 <= v <= MAX_EXTENT:
            raise _reject(code, f"{name}: {field} must be an integer in [1, 2**63-1], got {v!r}", field)
    if not facts.key_length and facts.embedding_length % facts.head_count:
        raise _reject(code, f"{name}: embedding_length {facts.embedding_length} is not divisible by "
                            f"head_count {facts.head_count}", "embedding_length")
    if facts.head_count % facts.head_count_kv:
        raise _reject(code, f"{name}: head_count {facts.head_count} is not divisible by "
                            f"head_count_kv {facts.head_count_kv}", "head_count_kv")
    n = facts.block_count
    if not isinstance(facts.block_bytes, tuple) or len(facts.block_bytes) != n:
        got = len(facts.block_bytes) if isinstance(facts.block_bytes, tuple) else facts.block_bytes
        raise _reject(code, f"{name}: block_count is {n} but block_bytes has {got} entries", "block_bytes")
    if not isinstance(facts.tensors, tuple) or not facts.tensors:
        raise _reject(code, f"{name}: the tensor index is empty (no weights to place)", "tensors")
    totals = [0] * n
    counts = [0] * n
    names = set()
    for t in facts.tensors:
        if not isinstance(t, TensorInfo):
            raise _reject(code, f"{name}: tensor index entry {t!r} is not a TensorInfo", "tensors")
        if not _is_int(t.n_bytes) or t.n_bytes < 0 or not _is_int(t.offset) or t.offset < 0:
            raise _reject(code, f"{name}: tensor {t.name!r} has a negative or non-integer size/offset "
                                f"(n_bytes={t.n_bytes!r}, offset={t.offset!r})", t.name)
        if any(not _is_int(d) or not 0 <= d <= MAX_EXTENT for d in t.shape):
            raise _reject(code, f"{name}: tensor {t.name!r} has shape {tuple(t.shape)!r}: every dimension must "
                                f"be an integer in [0, 2**63-1]", t.name)
        if t.offset + t.n_bytes > MAX_EXTENT:
            raise _reject(code, f"{name}: tensor {t.name!r} ends at byte {t.offset + t.n_bytes}, beyond the "
                                f"2**63-1 byte limit of the plan's i64 offsets", t.name)
        if facts.files and (not _is_int(t.shard) or not 0 <= t.shard < len(facts.files)):
            raise _reject(code, f"{name}: tensor {t.name!r} is in shard {t.shard!r} but the model has "
                                f"{len(facts.files)} file(s)", t.name)
        if t.name in names:
            raise _reject(code, f"{name}: tensor {t.name!r} appears twice in the tensor index", t.name)
        names.add(t.name)
        if t.block is not None:
            if not _is_int(t.block) or not 0 <= t.block < n:
                raise _reject(code, f"{name}: tensor {t.name!r} belongs to block {t.block!r} but "
                                    f"block_count is {n} (blocks 0..{n - 1})", t.name)
            totals[t.block] += t.n_bytes
            counts[t.block] += 1
    for b in range(n):
        if counts[b] == 0:
            raise _reject(code, f"{name}: block {b} has no tensors (blk.{b}.* missing) but block_count is {n}",
                          f"blk.{b}")
        if facts.block_bytes[b] != totals[b]:
            raise _reject(code, f"{name}: block_bytes[{b}] is {facts.block_bytes[b]!r} but the blk.{b}.* "
                                f"tensors total {totals[b]} bytes", f"blk.{b}")
    embd = facts.tensor("token_embd.weight")
    if embd is None:
        raise _reject(code, f"{name}: tensor 'token_embd.weight' is missing (stage 0 needs it)",
                      "token_embd.weight")
    if not embd.shape or embd.shape[0] != facts.embedding_length:
        raise _reject(code, f"{name}: token_embd.weight has shape {tuple(embd.shape)} (ggml order) but "
                            f"embedding_length is {facts.embedding_length}", "token_embd.weight")
    if facts.tensor("output_norm.weight") is None:
        raise _reject(code, f"{name}: tensor 'output_norm.weight' is missing (the last stage needs it)",
                      "output_norm.weight")

    try:
        check_model(facts)
    except ProgramError as e:
        raise _reject(e.code, e.message, e.where) from None


# --------------------------------------------------------------------------- runtime config / specs
def _check_runtime_config(facts: ModelFacts, config: RuntimeConfig) -> None:
    code = "invalid_runtime_config"
    if not isinstance(config, RuntimeConfig):
        raise _reject(code, f"runtime config must be a RuntimeConfig, got {type(config).__name__}")
    if not _is_int(config.max_seq_len) or config.max_seq_len < 1:
        raise _reject(code, f"max_seq_len must be an integer >= 1, got {config.max_seq_len!r}", "max_seq_len")
    if config.max_seq_len > facts.context_length:
        raise _reject(code, f"max_seq_len {config.max_seq_len} exceeds the model's context length "
                            f"{facts.context_length}", "max_seq_len")
    if not _is_int(config.ring_slots) or config.ring_slots < 1:
        raise _reject(code, f"ring_slots must be an integer >= 1, got {config.ring_slots!r}", "ring_slots")
    if not _is_int(config.parallel) or config.parallel < 1:
        raise _reject(code, f"parallel must be an integer >= 1, got {config.parallel!r}", "parallel")
    if config.kv_dtype not in DTYPE_WIDTHS or config.kv_dtype == "i32":
        raise _reject(code, f"kv_dtype {config.kv_dtype!r} is not a float dtype with a known width "
                            f"(known: f32, f16, bf16)", "kv_dtype")


def _object_spec(kind: str, dtype: str, shape: tuple[int, ...], alignment: object, edge: str) -> ObjectSpec:
    code = "invalid_object_spec"
    width = DTYPE_WIDTHS.get(dtype) if isinstance(dtype, str) else None
    if width is None:
        raise _reject(code, f"edge {edge}: dtype {dtype!r} has no known width (known: {sorted(DTYPE_WIDTHS)})", edge)
    if kind == "token" and dtype not in TOKEN_DTYPES:
        raise _reject(code, f"edge {edge}: token objects hold token ids; dtype must be one of {TOKEN_DTYPES}, "
                            f"got {dtype!r}", edge)
    if kind == "activation" and dtype in TOKEN_DTYPES:
        raise _reject(code, f"edge {edge}: activation dtype must be a float dtype, got {dtype!r}", edge)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1 \
            or alignment & (alignment - 1) or alignment > MAX_ALIGNMENT:
        raise _reject(code, f"edge {edge}: alignment must be a power of two in [1, {MAX_ALIGNMENT}], "
                            f"got {alignment!r}", edge)
    if alignment < width:
        raise _reject(code, f"edge {edge}: alignment {alignment} is smaller than the {dtype} width {width}", edge)
    if not shape or any(not _is_int(d) or d < 1 for d in shape):
        raise _reject(code, f"edge {edge}: unsupported shape {shape!r} (every dimension must be >= 1)", edge)
    extent = math.prod(shape) * width
    if extent > MAX_EXTENT:
        raise _reject(code, f"edge {edge}: max_extent {extent} bytes ({'x'.join(map(str, shape))} x {width}) "
                            f"exceeds the 2**63-1 byte limit", edge)
    return ObjectSpec(kind=kind, dtype=dtype, dtype_width=width, shape=shape, layout=LAYOUT,
                      alignment=alignment, max_extent=extent)


def _ring_spec(spec: ObjectSpec, slots: int, edge: str) -> RingSpec:
    slot = -(-spec.max_extent // spec.alignment) * spec.alignment
    if slot * slots > MAX_EXTENT:
        raise _reject("invalid_object_spec", f"edge {edge}: ring of {slots} slots x {slot} bytes exceeds the "
                                             f"2**63-1 byte limit", edge)
    return RingSpec(slots=slots, slot_bytes=slot)


def plan_edges(facts: ModelFacts, config: RuntimeConfig, stage_count: int) -> tuple[EdgePlan, ...]:
    """The run's edges, in id order: ``e0`` token-in, ``e1..e{N-1}`` activations, ``e{N}`` token-out.

    Shapes/units: token objects ``(max_seq_len,)`` i32; activation objects ``(max_seq_len, hidden)``
    of ``activation_dtype``; extents and slot sizes in bytes.
    Raises: RunPlanRejection(code="invalid_object_spec") for a bad dtype/alignment/extent (see the
    module docstring). Source: seed 000 "Edge Assignment" and "Object/Ring Spec Consistency".
    """
    n = stage_count
    token = _object_spec("token", config.token_dtype, (config.max_seq_len,), config.alignment, "e0")
    act = (_object_spec("activation", config.activation_dtype, (config.max_seq_len, facts.embedding_length),
                        config.alignment, "e1") if n > 1 else None)
    token_ring = _ring_spec(token, config.ring_slots, "e0")
    edges = [EdgePlan("e0", "token_in", ORCHESTRATOR, 0, token, token_ring)]
    if act is not None:
        act_ring = _ring_spec(act, config.ring_slots, "e1")
        edges += [EdgePlan(f"e{i + 1}", "activation", i, i + 1, act, act_ring) for i in range(n - 1)]
    edges.append(EdgePlan(f"e{n}", "token_out", n - 1, ORCHESTRATOR, token, token_ring))
    return tuple(edges)


# --------------------------------------------------------------------------- placement
def _resolve_placement(pool: NodePool, stage_count: object, placement: Sequence[str] | None,
                       block_count: int) -> list[NodeSpec]:
    if not _is_int(stage_count):
        raise _reject("invalid_stage_count", f"stage count must be an integer, got {stage_count!r}")
    assert isinstance(stage_count, int)
    if stage_count < 1:
        raise _reject("invalid_stage_count", f"stage count must be >= 1, got {stage_count}")
    if stage_count > block_count:
        raise _reject("invalid_stage_count", f"{block_count} blocks cannot fill {stage_count} stages "
                                             f"(every stage needs at least one block)")
    if placement is None:
        if stage_count > len(pool.nodes):
            raise _reject("invalid_stage_count", f"{stage_count} stages need {stage_count} distinct nodes but the "
                                                 f"pool has {len(pool.nodes)}")
        return list(pool.nodes[:stage_count])
    if isinstance(placement, str | bytes) or not isinstance(placement, Sequence):
        raise _reject("missing_stage", f"placement must be a sequence of node ids (one per stage), got "
                                       f"{type(placement).__name__}")
    ids = list(placement)  # a private copy: the caller's list is never touched
    if len(ids) > stage_count:
        raise _reject("invalid_stage_count", f"placement names {len(ids)} nodes but the stage count is {stage_count}")
    if len(ids) < stage_count:
        raise _reject("missing_stage", f"stage {len(ids)} has no node: placement names {len(ids)} nodes for "
                                       f"{stage_count} stages", f"stage {len(ids)}")
    first: dict[str, int] = {}
    nodes = []
    for i, nid in enumerate(ids):
        if not isinstance(nid, str) or not nid:
            raise _reject("missing_stage", f"stage {i} has no node: placement entry {nid!r} is not a node id",
                          f"stage {i}")
        node = pool.get(nid)
        if node is None:
            raise _reject("unknown_node", f"stage {i} is placed on unknown node {nid!r} (pool: "
                                          f"{', '.join(n.id for n in pool.nodes)})", f"stage {i}")
        if nid in first:
            raise _reject("duplicate_stage", f"node {nid!r} is assigned to stages {first[nid]} and {i}: a node "
                                             f"holds at most one stage", f"stage {i}")
        first[nid] = i
        nodes.append(node)
    return nodes


# --------------------------------------------------------------------------- partition
def _extra_bytes(facts: ModelFacts, stage_count: int) -> tuple[list[int], list[int]]:
    """Per stage, the non-block tensor bytes it holds (token_embd first; output_norm/output or tied embd last)
    and the bytes one decode step of it reads: a gathered ``token_embd.weight`` (the first stage's embedding
    lookup, llama.cpp ``ggml_get_rows``) reads one row per token, not the tensor; the last stage's
    ``output_norm``/``output`` (or the tied ``token_embd`` used as the output matrix) are read whole."""
    has_output = any(t.name == "output.weight" for t in facts.tensors)
    by_role: dict[tuple[bool, bool], tuple[int, int]] = {}
    held, read = [], []
    for s in range(stage_count):
        role = first, last = (s == 0, s == stage_count - 1)
        if role not in by_role:  # at most 4 scans of the tensor index, whatever the stage count
            h = r = 0
            for t in facts.tensors_for_stage(0, 0, first, last):
                if t.block is not None:
                    continue
                h += t.n_bytes
                if t.name == "token_embd.weight" and not (last and not has_output):
                    rows = math.prod(t.shape[1:]) if len(t.shape) > 1 else 1
                    r += -(-t.n_bytes // max(rows, 1))
                else:
                    r += t.n_bytes
            by_role[role] = (h, r)
        held.append(by_role[role][0])
        read.append(by_role[role][1])
    return held, read


def _partition(block_cost: np.ndarray, caps: np.ndarray, extra: np.ndarray, bw: np.ndarray) -> list[int] | None:
    """Exact min-bottleneck contiguous partition; returns the S+1 boundaries or None if infeasible.

    Stage s may hold blocks [b, e) iff ``P[e]-P[b] <= min(caps[s], T*bw[s] - extra[s])`` (all bytes; ``extra``:
    the non-block bytes a decode step of stage s reads);
    the optimal T is found by bisection (the check is monotone in T). O(S*n) numpy work per check.
    """
    n = len(block_cost)
    S = len(caps)
    P = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(block_cost, out=P[1:])
    idx = np.arange(n + 1)

    def reach_tables(limits: np.ndarray) -> list[np.ndarray] | None:
        reach = np.zeros(n + 1, dtype=bool)
        reach[0] = True
        tables = [reach]
        for s in range(S):
            if limits[s] < 0:
                return None
            c = np.zeros(n + 2, dtype=np.int64)
            np.cumsum(reach, out=c[1:])
            lo = np.searchsorted(P, P - limits[s], side="left")  # first start b with P[e]-P[b] <= L
            # exists reachable b in [lo(e), e-1]  <=>  c[e] - c[lo(e)] > 0
            ok = (c[idx] - c[np.minimum(lo, idx)]) > 0
            ok[0] = False
            reach = ok
            if not reach.any():
                return None
            tables.append(reach)
        return tables if tables[-1][n] else None

    def limits_at(t: float) -> np.ndarray:
        lim = np.minimum(caps.astype(np.float64), np.floor(t * bw - extra))
        return np.where(np.isfinite(lim), lim, -1).astype(np.int64)

    if reach_tables(caps.astype(np.int64)) is None:
        return None
    hi = float(np.max((P[n] + extra) / bw)) * (1 + 1e-12) + 1.0
    lo = 0.0
    best = reach_tables(limits_at(hi))
    if best is None:  # float guard: fall back to memory limits alone
        hi = math.inf
        best = reach_tables(caps.astype(np.int64))
    else:
        for _ in range(200):
            mid = (lo + hi) / 2
            if not lo < mid < hi:
                break
            t = reach_tables(limits_at(mid))
            if t is None:
                lo = mid
            else:
                hi, best = mid, t
    assert best is not None
    limits = limits_at(hi) if math.isfinite(hi) else caps.astype(np.int64)
    bounds = [n]
    e = n
    for s in range(S - 1, -1, -1):
        prev = best[s]
        b_min = max(int(np.searchsorted(P, P[e] - limits[s], side="left")), 0)
        cand = b_min + np.nonzero(prev[b_min:e])[0]  # feasible starts keeping the optimum T
        # among them, the start closest to this stage's bandwidth-proportional share of what is left
        left = P[e] + extra[: s + 1].sum()
        target = left * bw[s] / bw[: s + 1].sum() - extra[s]
        dev = np.abs((P[e] - P[cand]) - target)
        b = int(cand[len(cand) - 1 - int(np.argmin(dev[::-1]))])  # ties: the later start
        bounds.append(b)
        e = b
    bounds.reverse()
    return bounds


def _memory_diagnosis(nodes: list[NodeSpec], block_cost: np.ndarray, fixed: list[int], kv_block: int,
                      max_seq_len: int) -> RunPlanRejection:
    """Name the node that cannot hold its share (forward greedy: each stage takes what fits)."""
    n, S = len(block_cost), len(nodes)
    start = 0
    for s, node in enumerate(nodes):
        must_leave = S - 1 - s
        end = start
        used = fixed[s]
        last = s == S - 1
        limit = n if last else n - must_leave
        while end < limit and used + int(block_cost[end]) <= node.memory_bytes:
            used += int(block_cost[end])
            end += 1
        if end == start or (last and end < n):
            need_end = n if last else start + 1
            need = fixed[s] + int(block_cost[start:need_end].sum())
            what = f"blocks [{start}, {need_end})" if need_end - start > 1 else f"block {start}"
            return _reject("insufficient_memory",
                           f"node {node.id!r} (stage {s}) needs {need} bytes but has {node.memory_bytes} bytes: "
                           f"{what} (weights + KV cache at max_seq_len {max_seq_len}, {kv_block} bytes/block) + "
                           f"{fixed[s]} bytes of embedding/head tensors and edge rings", node.id)
        start = end
    total = sum(fixed) + int(block_cost.sum())
    return _reject("insufficient_memory", f"the {S} placed nodes cannot hold the model's {total} bytes "
                                          f"(weights + KV + rings)")


# --------------------------------------------------------------------------- the planner
def _absolute_uri(uri: str) -> str:
    """A URL (``scheme://...``) as given; a local path made absolute against the current directory,
    so a plan stays usable from any directory (``os.path.abspath``: normalized, symlinks kept)."""
    return uri if "://" in uri else os.path.abspath(uri)


def _weight_source(facts: ModelFacts) -> WeightSource:
    """The plan's weight source: ``facts.files`` with local paths made absolute (URLs kept as given),
    the file sha256 when known, and the local file sizes in bytes when every file exists."""
    uris = tuple(_absolute_uri(u) for u in facts.files)
    sha = (facts.sha256,) if facts.sha256 and len(uris) == 1 else ()
    sizes: tuple[int, ...] = ()
    if uris and all("://" not in u and os.path.isfile(u) for u in uris):
        sizes = tuple(os.path.getsize(u) for u in uris)
    return WeightSource(uris=uris, sha256=sha, sizes=sizes)


def _default_run_id(facts: ModelFacts, config: RuntimeConfig, stages: Sequence[StagePlan]) -> str:
    h = hashlib.sha256()
    extra = () if config.parallel == 1 else (("parallel", config.parallel),)  # plans for 1 keep their ids
    h.update(repr((facts.architecture, facts.name, facts.sha256, facts.files, facts.block_bytes, config,
                   tuple(stages)) + extra).encode())
    return "run-" + h.hexdigest()[:16]


def plan_run_spec(model_facts: ModelFacts, runtime_config: RuntimeConfig, node_pool: NodePool, stage_count: int,
                  placement: Sequence[str] | None = None, *, run_id: str | None = None) -> RunPlanSpec:
    """Decide a RunPlan (as a :class:`RunPlanSpec`, before IR). See the module docstring for every rule.

    Args:
        model_facts: header facts of the model (GGUF or TOML); ``block_count`` blocks.
        runtime_config: max_seq_len (positions), dtypes, ring slots, alignment (bytes), parallel (sequences).
        node_pool: the candidate nodes (ids, memory in bytes, optional bandwidths in bytes/s).
        stage_count: number of pipeline stages, ``1 <= stage_count <= block_count``.
        placement: node id per stage (stage order), or None for the first ``stage_count`` pool nodes.
        run_id: explicit run id (``[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}``) or None for a deterministic one.
    Returns: the complete spec: ``stage_count`` stages covering ``[0, block_count)`` contiguously with
        non-empty ranges, ``stage_count + 1`` edges, the weight source.
    Raises:
        RunPlanRejection: codes invalid_pool, inconsistent_model_facts, invalid_runtime_config,
            invalid_stage_count, missing_stage, unknown_node, duplicate_stage, invalid_object_spec,
            insufficient_memory (checked in that order). No input is modified.
    Source: seed 000 (RunPlan Formation, Layer Assignment, Edge Assignment, Object/Ring Spec).
    """
    validate_pool(node_pool)
    check_model_facts(model_facts)
    _check_runtime_config(model_facts, runtime_config)
    if run_id is not None and (not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id)):
        raise _reject("invalid_runtime_config", f"run_id {run_id!r} is not a valid run id "
                                                f"(allowed: {RUN_ID_RE.pattern})", "run_id")
    facts, config = model_facts, runtime_config
    nodes = _resolve_placement(node_pool, stage_count, placement, facts.block_count)
    S = len(nodes)
    edges = plan_edges(facts, config, S)

    kv_one = facts.kv_bytes_per_block(config.max_seq_len, DTYPE_WIDTHS[config.kv_dtype])
    kv_block = kv_one * config.parallel
    block_cost = np.asarray(facts.block_bytes, dtype=np.int64) + kv_block
    extra, read_bytes = _extra_bytes(facts, S)
    ring = [e.ring_spec.slots * e.ring_spec.slot_bytes for e in edges]  # edge i feeds stage i
    fixed = [extra[s] + ring[s] + ring[s + 1] for s in range(S)]
    caps = np.asarray([node.memory_bytes - fixed[s] for s, node in enumerate(nodes)], dtype=np.int64)
    given = [node.bandwidth_bytes_per_s for node in nodes if node.bandwidth_bytes_per_s is not None]
    if given:
        slowest = min(given)
        bw = np.asarray([node.bandwidth_bytes_per_s or slowest for node in nodes], dtype=np.float64)
    else:
        bw = np.ones(S, dtype=np.float64)
    read = np.asarray(read_bytes, dtype=np.float64)
    bounds = None if (caps < 0).any() else _partition(block_cost, caps, read, bw)
    if bounds is None:
        if config.parallel > 1:
            one = np.asarray(facts.block_bytes, dtype=np.int64) + kv_one
            if not (caps < 0).any() and _partition(one, caps, read, bw) is not None:
                inner = _memory_diagnosis(nodes, block_cost, fixed, kv_block, config.max_seq_len)
                raise _reject("insufficient_memory",
                              f"parallel {config.parallel}: the pool holds the model for 1 sequence but not for "
                              f"{config.parallel}: the KV cache needs {kv_one} bytes per block per sequence, "
                              f"{kv_one * facts.block_count * config.parallel} bytes in all for {config.parallel} "
                              f"sequences ({inner.message})", "parallel")
        raise _memory_diagnosis(nodes, block_cost, fixed, kv_block, config.max_seq_len)
    stages = tuple(StagePlan(index=s, node_id=nodes[s].id, layer_start=bounds[s], layer_end=bounds[s + 1])
                   for s in range(S))
    if any(st.layer_end <= st.layer_start for st in stages) or bounds[0] != 0 or bounds[-1] != facts.block_count:
        raise _reject("insufficient_memory", f"no contiguous partition of {facts.block_count} blocks fits the "
                                             f"{S} placed nodes")  # unreachable by construction; never partial
    rid = run_id if run_id is not None else _default_run_id(facts, config, stages)
    return RunPlanSpec(run_id=rid, facts=facts, config=config, weights=_weight_source(facts), stages=stages,
                       edges=edges)


def plan_run(model_facts: ModelFacts, runtime_config: RuntimeConfig, node_pool: NodePool, stage_count: int,
             placement: Sequence[str] | None = None, *, run_id: str | None = None):
    """Plan a run and return its VERIFIED ``runplan`` IR (a ``builtin.module`` with one ``runplan.plan``).

    Same arguments, rules and rejections as :func:`plan_run_spec`; the spec is then built with
    ``runplan_build.build_runplan_module(spec, node_pool)`` (the pool's node specs are recorded in the plan) and checked with
    ``runplan.verify_runplan`` (the dialect's contract verifiers), whose RunPlanRejection (code from
    the violated invariant) propagates: either exactly one verified plan or a typed rejection. Only
    the builder's ``VerifyException`` (an attribute verifier refusing a value) is turned into a
    rejection (same mapping as the verifier); any other exception is a bug and propagates as is.

    Returns: ``xdsl.dialects.builtin.ModuleOp``.
    Raises: RunPlanRejection (see :func:`plan_run_spec` plus the verifier's codes).
    """
    from pipeplan.dialects.runplan import rejection_from, verify_runplan
    from pipeplan.dialects.runplan_build import build_runplan_module
    from xdsl.utils.exceptions import VerifyException

    spec = plan_run_spec(model_facts, runtime_config, node_pool, stage_count, placement, run_id=run_id)
    try:
        module = build_runplan_module(spec, node_pool)
    except VerifyException as e:  # an attribute verifier rejects a value the checks above let through
        raise rejection_from(e, spec.run_id) from None
    verify_runplan(module)
    return module


__all__ = ["plan_run", "plan_run_spec", "plan_edges", "check_model_facts", "MAX_ALIGNMENT", "MAX_EXTENT",
           "TOKEN_DTYPES", "ORCHESTRATOR_NAME"]
