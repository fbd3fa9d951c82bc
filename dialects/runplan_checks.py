"""Whole-plan invariants of seed 000 (tensor index, edge specs, model facts, stage layout, edge
topology) and the provisioning projection (:func:`derive_provisions`, :func:`check_provisions`).

``runplan.plan``'s verifier (:func:`pipeplan.dialects.runplan.check_plan`) runs :func:`check_whole_plan`
on the plan's ops: the facts check reads the ``runplan.tensor`` ops and the plan's attributes, the
layout and topology checks an index of the ``runplan.stage`` / ``runplan.edge`` ops built once
(:data:`StageRow`, :data:`EdgeRow` tuples), which the builder also builds from a planner decision it
cannot state in SSA. A failure is a VerifyException ``[RP-..] <invariant>: <detail>``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipeplan.dialects.ggml_types import GGML_TYPE_SIZES
from pipeplan.dialects.runplan_attrs import (
    ORCHESTRATOR_NODE,
    TOKEN_EDGE_KINDS,
    _endpoint_str,
    _fail,
)
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    EDGE_KINDS,
    ORCHESTRATOR,
    EdgeProvision,
    ModelFacts,
    ObjectSpec,
    ProvisionStage,
    RingSpec,
    TensorInfo,
    TensorSlice,
)

if TYPE_CHECKING:  # the ops call these checks; the checks read the ops
    from pipeplan.dialects.runplan import PlanOp

StageRow = tuple[int, str, int, int]
"""One ``runplan.stage`` as the layout checks read it: (index, node id, layer_start, layer_end)."""

EdgeRow = tuple[str, str, int, int]
"""One ``runplan.edge`` as the topology checks read it: (edge id, kind, producer, consumer); an
endpoint is a stage index or ORCHESTRATOR."""


# --------------------------------------------------------------------------- checks
def check_tensor(t: TensorInfo) -> None:
    """[RP-AR-6] one tensor of the index: non-negative shard/offset, positive dims, ``block`` agrees
    with a ``blk.N.`` name, ``n_bytes`` equals gguf's size for the ggml type and shape."""
    w = f"tensor '{t.name}'"
    inv = "model facts must be consistent with the tensor index"
    if not t.name:
        raise _fail("RP-AR-6", inv, "a tensor has an empty name")
    if t.shard < 0 or t.offset < 0 or t.n_bytes < 0:
        raise _fail("RP-AR-6", inv, f"{w} has a negative shard, offset or size")
    if not t.shape or any(d <= 0 for d in t.shape):
        raise _fail("RP-AR-6", inv, f"{w} has shape {list(t.shape)}; dimensions must be positive")
    m = re.match(r"blk\.(\d+)\.", t.name)
    expect_block = int(m.group(1)) if m else None
    if t.block != expect_block:
        raise _fail("RP-AR-6", inv, f"{w} has block {-1 if t.block is None else t.block} "
                    f"but its name says {-1 if expect_block is None else expect_block}")
    sizes = GGML_TYPE_SIZES.get(t.ggml_type)  # gguf's GGML_QUANT_SIZES by GGMLQuantizationType name
    if sizes is None:
        raise _fail("RP-AR-6", inv, f"{w} has unknown ggml type '{t.ggml_type}'")
    block_size, type_size = sizes
    n = math.prod(t.shape)
    if t.shape[0] % block_size or t.n_bytes != n // block_size * type_size:
        raise _fail("RP-AR-6", inv, f"{w} has {t.n_bytes} bytes but {t.ggml_type} {list(t.shape)} "
                    f"takes {n // block_size * type_size}")


def check_edge_specs(edge_id: str, kind: str, o: ObjectSpec, r: RingSpec, facts: Mapping[str, Any] | None,
                     config: Mapping[str, Any] | None) -> None:
    """Object/Ring Spec Consistency of one edge (see :class:`EdgeOp`): its id, kind, ObjectSpec and
    RingSpec; ``facts``/``config`` are the plan's dictionaries (checks needing them are skipped when
    they are None)."""
    w = f"edge '{edge_id}'"
    want_kind = "token" if kind in TOKEN_EDGE_KINDS else "activation"
    if o.kind != want_kind:
        raise _fail("RP-OS-3", "token edges use token object specs, activation edges activation object specs",
                    f"{w} ({kind}) has a '{o.kind}' object spec")
    inv5 = "object specs must have a valid extent, alignment, dtype width, shape and layout"
    if facts is not None and config is not None and o.kind == "activation":
        act_w = DTYPE_WIDTHS.get(config["activation_dtype"], 0)
        want = config["max_seq_len"] * facts["embedding_length"] * act_w
        if o.dtype != config["activation_dtype"] or o.max_extent != want:
            raise _fail("RP-OS-2", "activation max_extent must be max_seq_len * hidden_dim * dtype_width_bytes",
                        f"{w} has {o.dtype} max_extent {o.max_extent} but {config['max_seq_len']} * "
                        f"{facts['embedding_length']} * {act_w} ({config['activation_dtype']}) = {want}")
    if facts is not None and config is not None:
        if o.kind == "token":
            want_shape: tuple[int, ...] = (config["max_seq_len"],)
            if o.dtype != config["token_dtype"]:
                raise _fail("RP-OS-5", inv5, f"{w} has token dtype {o.dtype} but the config's is {config['token_dtype']}")
        else:
            want_shape = (config["max_seq_len"], facts["embedding_length"])
        if tuple(o.shape) != want_shape:
            raise _fail("RP-OS-5", inv5, f"{w} has unsupported shape {list(o.shape)}; a {o.kind} object is "
                        f"{list(want_shape)}")
        if o.alignment != config["alignment"]:
            raise _fail("RP-OS-5", inv5, f"{w} has alignment {o.alignment} but the config's is {config['alignment']}")
    inv_ring = "ring specs must hold at least one slot of at least max_extent bytes, aligned"
    if config is not None and r.slots != config["ring_slots"]:
        raise _fail("RP-OS-5", inv_ring, f"{w} has {r.slots} ring slots but the config asks for {config['ring_slots']}")
    if r.slot_bytes < o.max_extent:
        raise _fail("RP-OS-5", inv_ring, f"{w} has slot_bytes {r.slot_bytes} < max_extent {o.max_extent}")
    if r.slot_bytes % o.alignment:
        raise _fail("RP-OS-5", inv_ring, f"{w} has slot_bytes {r.slot_bytes}, not a multiple of alignment {o.alignment}")


def _check_facts(plan: PlanOp) -> None:
    """The ``model`` facts (block_count, block_bytes) against the ``runplan.tensor`` ops and the weight
    source [RP-AR-6] (what the facts state alone is ModelFactsAttr's verifier, the weight source's
    lengths WeightSourceAttr's)."""
    inv = "model facts must be consistent with the requested stage layout"
    tensors = plan.tensor_ops()
    if not tensors:
        return
    m = plan.model.values()
    block_count, block_bytes = m["block_count"], tuple(m["block_bytes"])
    n_uris = len(plan.weights.source().uris)
    sums = [0] * block_count
    names: set[str] = set()
    for t in tensors:
        name, block, shard = t.tensor_name.data, t.block.value.data, t.shard.value.data
        if name in names:
            raise _fail("RP-AR-6", inv, f"tensor '{name}' appears twice in the tensor index")
        names.add(name)
        if block >= 0:
            if block >= block_count:
                raise _fail("RP-AR-6", inv, f"tensor '{name}' is in block {block} but block_count is {block_count}")
            sums[block] += t.n_bytes.value.data
        if n_uris and shard >= n_uris:
            raise _fail("RP-AR-6", inv, f"tensor '{name}' is in shard {shard} but the weight source has {n_uris} uris")
    for b, total in enumerate(sums):
        if total == 0:
            raise _fail("RP-AR-6", inv, f"block {b} has no tensors but block_count is {block_count}")
    if tuple(sums) != block_bytes:
        b = next((i for i in range(block_count) if i >= len(block_bytes) or block_bytes[i] != sums[i]), 0)
        have = block_bytes[b] if b < len(block_bytes) else "nothing"
        raise _fail("RP-AR-6", inv, f"block_bytes[{b}] is {have} but the tensors of block {b} total {sums[b]} bytes")


def check_whole_plan(plan: PlanOp, edges: Sequence[EdgeRow]) -> None:
    """Every whole-plan invariant of seed 000 over the ops of ``plan`` (which passed their local checks):
    the model facts against the ``runplan.tensor`` ops [RP-AR-6], then :func:`check_layout` of its
    ``runplan.stage`` ops and :func:`check_edges` of ``edges`` (the rows of its ``runplan.edge`` ops, or
    of the planner's edges when they cannot be stated as ops). Raises VerifyException."""
    _check_facts(plan)
    rows = [(op.number(), op.node_id.data, *op.layers()) for op in plan.stage_ops()]
    check_edges(edges, check_layout(rows, plan.block_count(), plan.node_ids()))


def check_layout(stages: Sequence[StageRow], block_count: int, node_ids: Sequence[str]) -> int:
    """The stage layout: duplicate stage index [RP-AR-2]; missing stage index [RP-AR-3]; stage count
    [RP-AR-4] (at least 1, at most block_count); node ids of the pool [RP-AR-1]; layer ranges in stage
    order: start at 0 [RP-LA-3], contiguous [RP-LA-1], no overlap [RP-LA-2], end at block_count
    [RP-LA-3]. Returns the stage count; raises VerifyException (the first failure, in that order)."""
    counts: dict[int, int] = {}
    for s in stages:
        counts[s[0]] = counts.get(s[0], 0) + 1
    for idx, n in sorted(counts.items()):
        if n > 1:
            raise _fail("RP-AR-2", "each stage index is assigned exactly once", f"stage {idx} is assigned {n} times")
    n_st = len(stages)
    missing = [i for i in range(n_st) if i not in counts]
    if missing:
        extra = sorted(i for i in counts if i >= n_st)
        raise _fail("RP-AR-3", "stage indices must be exactly 0..stage_count-1",
                    f"stage {missing[0]} is missing" + (f" (stage {extra[0]} is out of range)" if extra else ""))
    if n_st == 0:
        raise _fail("RP-AR-4", "the stage count must be between 1 and block_count", "the plan has no stages")
    if n_st > block_count:
        raise _fail("RP-AR-4", "the stage count must be between 1 and block_count",
                    f"{n_st} stages for {block_count} blocks")
    pool = set(node_ids)
    ordered = sorted(stages, key=lambda s: s[0])
    for idx, node, _, _ in ordered:
        if node not in pool:
            raise _fail("RP-AR-1", "every stage must run on a node of the pool",
                        f"stage {idx} is assigned to unknown node '{node}'")
    if ordered[0][2] != 0:
        raise _fail("RP-LA-3", "the union of stage ranges must cover the block range [0, block_count)",
                    f"stage 0 starts at block {ordered[0][2]}")
    for (p_idx, _, _, p_end), (idx, _, start, _) in zip(ordered, ordered[1:]):
        if start > p_end:
            raise _fail("RP-LA-1", "stage ranges must be contiguous",
                        f"stage {idx} starts at block {start} but stage {p_idx} ends at block {p_end}")
        if start < p_end:
            raise _fail("RP-LA-2", "stage ranges must not overlap",
                        f"stage {idx} starts at block {start} but stage {p_idx} ends at block {p_end}")
    last = ordered[-1]
    if last[3] != block_count:
        raise _fail("RP-LA-3", "the union of stage ranges must cover the block range [0, block_count)",
                    f"stage {last[0]} ends at block {last[3]} but the model has {block_count} blocks")
    return n_st


def check_edges(edges: Sequence[EdgeRow], n: int) -> None:
    """The edge topology of a plan of ``n`` stages: edge ids unique [RP-EA-1]; endpoints are stages or
    the orchestrator [RP-EA-2]; exactly one token-in orchestrator -> 0 [RP-EA-3]; one activation edge
    i -> i+1 per boundary [RP-EA-4]; exactly one token-out N-1 -> orchestrator [RP-EA-5]. Raises
    VerifyException (the first failure, in that order)."""
    seen: set[str] = set()
    for edge_id, _, producer, consumer in edges:
        if edge_id in seen:
            raise _fail("RP-EA-1", "every edge id must be unique within the run", f"edge id '{edge_id}' is used twice")
        seen.add(edge_id)
        for role, v in (("producer", producer), ("consumer", consumer)):
            if v != ORCHESTRATOR and not 0 <= v < n:
                raise _fail("RP-EA-2", "every edge has exactly one producer and one consumer",
                            f"edge '{edge_id}' has {role} stage {v} but the plan has {n} stages")
    by_kind: dict[str, list[EdgeRow]] = {k: [] for k in EDGE_KINDS}
    for e in edges:
        by_kind[e[1]].append(e)
    tin, acts, tout = by_kind["token_in"], by_kind["activation"], by_kind["token_out"]
    if len(tin) != 1:
        raise _fail("RP-EA-3", "the token-in edge is orchestrator -> stage 0",
                    f"the plan has {len(tin)} token-in edges, expected exactly one")
    edge_id, _, producer, consumer = tin[0]
    if (producer, consumer) != (ORCHESTRATOR, 0):
        raise _fail("RP-EA-3", "the token-in edge is orchestrator -> stage 0",
                    f"edge '{edge_id}' is {_endpoint_str(producer)} -> {_endpoint_str(consumer)}")
    have: dict[int, str] = {}
    for edge_id, _, producer, consumer in acts:
        if producer == ORCHESTRATOR or consumer != producer + 1:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"edge '{edge_id}' is {_endpoint_str(producer)} -> {_endpoint_str(consumer)}")
        if producer in have:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"edges '{have[producer]}' and '{edge_id}' both connect stage {producer} -> "
                        f"stage {producer + 1}")
        have[producer] = edge_id
    for i in range(n - 1):
        if i not in have:
            raise _fail("RP-EA-4", "activation edge i is stage i -> stage i+1",
                        f"no activation edge connects stage {i} -> stage {i + 1}")
    if len(tout) != 1:
        raise _fail("RP-EA-5", "the token-out edge is stage N-1 -> orchestrator",
                    f"the plan has {len(tout)} token-out edges, expected exactly one")
    edge_id, _, producer, consumer = tout[0]
    if (producer, consumer) != (n - 1, ORCHESTRATOR):
        raise _fail("RP-EA-5", "the token-out edge is stage N-1 -> orchestrator",
                    f"edge '{edge_id}' is {_endpoint_str(producer)} -> {_endpoint_str(consumer)} "
                    f"but the last stage is {n - 1}")


# --------------------------------------------------------------------------- provisions
def derive_provisions(plan: PlanOp, facts: ModelFacts | None = None) -> list[ProvisionStage]:
    """One ProvisionStage per ``runplan.stage`` op of ``plan``, in stage-index order (seed 000
    "Provisioning Projection"); ``facts``: ``plan.facts()`` when the caller has it.

    Deterministic: a pure function of the plan's ops. Stage ``i`` gets its own range ``[start, end)``,
    the tensors of :meth:`ModelFacts.tensors_for_stage` (token_embd on stage 0; output_norm/output on
    the last stage, plus a tied token_embd when output.weight is absent) as byte ranges, the inbound
    edge (consumer ``i``) with its producer's node id (``"orchestrator"`` for token-in) and the
    outbound edge (producer ``i``) with its consumer's node id (``"orchestrator"`` for token-out),
    both with the edge's ObjectSpec/RingSpec copied. Requires a plan that passed
    :func:`check_whole_plan`. Cost: O(stages x tensors).
    """
    facts = plan.facts() if facts is None else facts
    stages = sorted(plan.stage_ops(), key=lambda s: s.number())
    n = len(stages)
    node = {s.number(): s.node_id.data for s in stages}
    inbound, outbound = {}, {}
    for e in plan.edge_ops():
        producer, consumer = e.endpoints()
        obj, ring = e.specs()
        row = (e.edge_id.data, e.kind_name(), producer, consumer, obj.spec(), ring.spec())
        inbound[consumer], outbound[producer] = row, row

    def peer(i: int) -> str:
        return ORCHESTRATOR_NODE if i == ORCHESTRATOR else node[i]

    run_id, max_seq_len, weights = plan.sym_name.data, plan.config.config().max_seq_len, plan.weights.source()
    out = []
    for s in stages:
        i, (start, end) = s.number(), s.layers()
        first, last = i == 0, i == n - 1
        ein, eout = inbound[i], outbound[i]
        tensors = tuple(TensorSlice(t.name, t.ggml_type, t.shape, t.shard, t.offset, t.n_bytes)
                        for t in facts.tensors_for_stage(start, end, first, last))
        out.append(ProvisionStage(
            run_id=run_id, stage=i, stage_count=n, node_id=node[i], layer_start=start, layer_end=end,
            block_count=facts.block_count, has_embedding=first, has_head=last, max_seq_len=max_seq_len,
            weights=weights, tensors=tensors,
            inbound=EdgeProvision(ein[0], ein[1], "in", peer(ein[2]), ein[4], ein[5]),
            outbound=EdgeProvision(eout[0], eout[1], "out", peer(eout[3]), eout[4], eout[5])))
    return out


def check_provisions(have: Sequence[ProvisionStage], want: Sequence[ProvisionStage], node_ids: Sequence[str]) -> None:
    """Provisions present in a plan against the derivation (seed 000 Provisioning Projection).

    [RP-PP-1] exactly one provision per stage, and every non-range field equals the derivation;
    [RP-PP-2] own layer range and own tensors only; [RP-PP-3] the inbound/outbound edges are the
    stage's; [RP-PP-5]/[RP-PP-6] peers are node ids of the pool or "orchestrator" (never addresses);
    [RP-PP-4] the outbound peer is the consumer's node id; [RP-OS-4] specs equal the edge's.
    """
    by_stage: dict[int, ProvisionStage] = {}
    for p in have:
        if p.stage in by_stage:
            raise _fail("RP-PP-1", "exactly one provision per stage", f"stage {p.stage} has two provisions")
        by_stage[p.stage] = p
    for w in want:
        if w.stage not in by_stage:
            raise _fail("RP-PP-1", "exactly one provision per stage", f"stage {w.stage} has no provision")
    pool = set(node_ids) | {ORCHESTRATOR_NODE}
    for w in want:
        p = by_stage[w.stage]
        where = f"provision of stage {w.stage}"
        if (p.layer_start, p.layer_end) != (w.layer_start, w.layer_end):
            raise _fail("RP-PP-2", "a stage receives only its own layer range",
                        f"{where} has [{p.layer_start}, {p.layer_end}) but the stage owns [{w.layer_start}, {w.layer_end})")
        if p.tensors != w.tensors:
            bad = sorted({t.name for t in p.tensors} ^ {t.name for t in w.tensors})
            detail = f"tensor '{bad[0]}' differs" if bad else "tensor byte ranges differ from the tensor index"
            raise _fail("RP-PP-2", "a stage receives only its own tensors", f"{where}: {detail}")
        for field in ("stage_count", "node_id", "block_count", "has_embedding", "has_head", "max_seq_len", "weights"):
            if getattr(p, field) != getattr(w, field):
                raise _fail("RP-PP-1", "provisions are the deterministic projection of the plan",
                            f"{where} has {field} {getattr(p, field)!r} but the plan gives {getattr(w, field)!r}")
        for direction, pe, we in (("in", p.inbound, w.inbound), ("out", p.outbound, w.outbound)):
            if (pe.edge_id, pe.kind) != (we.edge_id, we.kind):
                raise _fail("RP-PP-3", "a stage receives exactly its one inbound and one outbound edge",
                            f"{where} {direction}bound edge is '{pe.edge_id}' ({pe.kind}) but the plan's is "
                            f"'{we.edge_id}' ({we.kind})")
            if pe.peer_node_id not in pool:
                cid = "RP-PP-5" if direction == "in" else "RP-PP-6"
                raise _fail(cid, "edge provisions name peer node ids, never actor addresses",
                            f"{where} {direction}bound edge '{pe.edge_id}' names peer '{pe.peer_node_id}', which is "
                            "not a node id of the pool")
            if pe.peer_node_id != we.peer_node_id:
                cid, who = ("RP-PP-4", "consumer") if direction == "out" else ("RP-PP-5", "producer")
                raise _fail(cid, f"the {direction}bound provision names the {who} node_id",
                            f"{where} {direction}bound edge '{pe.edge_id}' names '{pe.peer_node_id}' but the {who} "
                            f"is '{we.peer_node_id}'")
            if (pe.object_spec, pe.ring_spec) != (we.object_spec, we.ring_spec):
                raise _fail("RP-OS-4", "specs are copied consistently into stage provisions",
                            f"{where} {direction}bound edge '{pe.edge_id}' specs differ from the edge's")
