"""Property tests of the RunPlan contract (seed 000) over random models, pools, stage counts and
placements: every plan the planner emits satisfies every invariant, checked here from the emitted
IR and its derived ProvisionStage values; otherwise the planner rejects with a known code. Inputs
are never modified.

:func:`llama_facts` (re-exported here for the contract tests) lives in ``tests/unit/runplan_fixtures.py``.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pipeplan.errors import RunPlanRejection
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    ORCHESTRATOR,
    ModelFacts,
    NodePool,
    NodeSpec,
    RuntimeConfig,
)

from tests.unit.runplan_fixtures import llama_facts, read_spec

KNOWN_CODES = {"unknown_node", "duplicate_stage", "missing_stage", "invalid_stage_count", "edge_endpoint_mismatch",
               "inconsistent_model_facts", "insufficient_memory", "invalid_object_spec", "invalid_pool",
               "invalid_runtime_config"}


def stage_memory(facts: ModelFacts, config: RuntimeConfig, spec, s: int) -> int:
    """Bytes stage ``s`` of ``spec`` needs (the planner's documented memory model, recomputed here):
    its tensors + KV cache of its blocks + its inbound and outbound edge rings."""
    st_ = spec.stages[s]
    n = len(spec.stages)
    tensors = facts.tensors_for_stage(st_.layer_start, st_.layer_end, s == 0, s == n - 1)
    kv = facts.kv_bytes_per_block(config.max_seq_len, DTYPE_WIDTHS[config.kv_dtype]) * (st_.layer_end - st_.layer_start)
    rings = sum(e.ring_spec.slots * e.ring_spec.slot_bytes for e in spec.edges if s in (e.producer, e.consumer))
    return sum(t.n_bytes for t in tensors) + kv + rings


def check_plan_invariants(module, facts: ModelFacts, config: RuntimeConfig, pool: NodePool, stage_count: int,
                          placement: Sequence[str] | None) -> None:
    """Check every seed-000 invariant on an emitted plan, reading it back from the IR only."""
    from pipeplan.dialects.runplan_build import project_provisions

    spec = read_spec(module)
    n = stage_count
    stages = spec.stages
    # Layer assignment (RP-LA-1..5)
    assert [s.index for s in stages] == list(range(n))
    assert stages[0].layer_start == 0 and stages[-1].layer_end == facts.block_count
    for a, b in itertools.pairwise(stages):
        assert a.layer_end == b.layer_start
    assert all(s.layer_end > s.layer_start for s in stages)
    # Nodes: from the pool, distinct, as placed
    ids = [s.node_id for s in stages]
    assert len(set(ids)) == n and all(pool.get(i) is not None for i in ids)
    assert ids == (list(placement) if placement is not None else [x.id for x in pool.nodes[:n]])
    # Edges (RP-EA-1..5) and specs (RP-OS-1..3)
    edges = spec.edges
    assert len({e.edge_id for e in edges}) == len(edges) == n + 1
    ends = sorted((e.producer, e.consumer, e.kind) for e in edges)
    want = sorted([(ORCHESTRATOR, 0, "token_in"), (n - 1, ORCHESTRATOR, "token_out")]
                  + [(i, i + 1, "activation") for i in range(n - 1)])
    assert ends == want
    for e in edges:
        o = e.object_spec
        assert o.max_extent == math.prod(o.shape) * o.dtype_width
        assert o.alignment & (o.alignment - 1) == 0 and o.alignment >= o.dtype_width
        assert e.ring_spec.slots == config.ring_slots
        assert e.ring_spec.slot_bytes >= o.max_extent and e.ring_spec.slot_bytes % o.alignment == 0
        if e.kind == "activation":
            assert o.kind == "activation"
            assert o.max_extent == config.max_seq_len * facts.embedding_length * DTYPE_WIDTHS[config.activation_dtype]
        else:
            assert o.kind == "token" and o.dtype == "i32" and o.shape == (config.max_seq_len,)
    # Memory fit
    for s in range(n):
        assert stage_memory(facts, config, spec, s) <= pool.get(ids[s]).memory_bytes
    # Provisions (RP-PP-2..4, RP-OS-4)
    by_id = {e.edge_id: e for e in edges}
    provs = project_provisions(module)
    assert [p.stage for p in provs] == list(range(n))
    for p in provs:
        s = stages[p.stage]
        assert (p.layer_start, p.layer_end, p.node_id) == (s.layer_start, s.layer_end, s.node_id)
        assert p.inbound.direction == "in" and p.outbound.direction == "out"
        ein, eout = by_id[p.inbound.edge_id], by_id[p.outbound.edge_id]
        assert ein.consumer == p.stage and eout.producer == p.stage
        assert p.inbound.object_spec == ein.object_spec and p.outbound.object_spec == eout.object_spec
        assert p.inbound.ring_spec == ein.ring_spec and p.outbound.ring_spec == eout.ring_spec
        want_peer = "orchestrator" if eout.consumer == ORCHESTRATOR else stages[eout.consumer].node_id
        assert p.outbound.peer_node_id == want_peer
        assert all(t.name.startswith("blk.") is False or
                   s.layer_start <= int(t.name.split(".")[1]) < s.layer_end for t in p.tensors)


# --------------------------------------------------------------------------- strategies
@st.composite
def planning_inputs(draw, valid_layout: bool = False):
    """(facts, config, pool, stage_count, placement). With ``valid_layout`` the stage count and
    placement are always well-formed (only memory can fail); otherwise they are often contradictory."""
    blocks = draw(st.integers(1, 12))
    ffn = draw(st.lists(st.sampled_from([32, 96, 172, 400]), min_size=blocks, max_size=blocks))
    facts = llama_facts(blocks, ffn=ffn, tied=draw(st.booleans()))
    config = RuntimeConfig(max_seq_len=draw(st.sampled_from([1, 16, 256])), ring_slots=draw(st.integers(1, 3)),
                           activation_dtype=draw(st.sampled_from(["f32", "f16"])))
    n_nodes = draw(st.integers(1, 6))
    kv = facts.kv_bytes_per_block(config.max_seq_len, 4)
    total = sum(facts.block_bytes) + blocks * kv + 2 * 131072
    share = total // min(n_nodes, blocks) + 1
    nodes = []
    for i in range(n_nodes):
        kind = draw(st.integers(0, 19))  # mostly ample, sometimes near the limit, rarely tiny
        mem = draw(st.integers(2 * total, 4 * total) if kind < (4 if valid_layout else 14)
                   else st.integers(share // 2, 2 * share)
                   if kind < 19 else st.integers(1, share // 2))
        bw = draw(st.one_of(st.none(), st.floats(1e9, 1e12)))
        nodes.append(NodeSpec(f"n{i}", mem, bandwidth_bytes_per_s=bw))
    pool = NodePool(tuple(nodes))
    good_count = st.integers(1, min(blocks, n_nodes))
    mode = "ok" if valid_layout else draw(st.sampled_from(["ok", "ok", "bad_count", "bad_placement"]))
    stage_count = draw(st.integers(-1, 14) if mode == "bad_count" else good_count)
    ids = [n.id for n in nodes]
    if mode == "ok":
        placement = draw(st.one_of(st.none(), st.permutations(ids).map(lambda p: list(p[:stage_count]))))
    else:
        any_id = st.sampled_from([*ids, "ghost", ""])
        n_ok = max(stage_count, 0)
        placement = draw(st.one_of(st.none(), st.lists(any_id, min_size=n_ok, max_size=n_ok),
                                   st.lists(any_id, min_size=0, max_size=8)))
    return facts, config, pool, stage_count, placement


PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(planning_inputs())
def test_plan_or_known_rejection(inputs):
    """RP-F-1, RP-F-2, RP-F-3, RP-LA-1..5, RP-EA-1..5, RP-OS-1..3, RP-PP-2..4, RP-OS-4: every outcome is
    a plan satisfying all invariants (and memory fit) or a rejection with a known code; inputs unchanged."""
    facts, config, pool, stage_count, placement = inputs
    before = copy.deepcopy((facts, config, pool, stage_count, placement))
    try:
        module = plan_run(facts, config, pool, stage_count, placement)
    except RunPlanRejection as e:
        event(e.code)
        assert e.code in KNOWN_CODES, e.code
        assert e.message and "\n" not in e.one_line()
    else:
        event("planned")
        check_plan_invariants(module, facts, config, pool, stage_count, placement)
    assert (facts, config, pool, stage_count, placement) == before


def _fits(facts, config, nodes, bounds, ring_bytes) -> bool:
    n = len(nodes)
    kv = facts.kv_bytes_per_block(config.max_seq_len, DTYPE_WIDTHS[config.kv_dtype])
    for s in range(n):
        ts = facts.tensors_for_stage(bounds[s], bounds[s + 1], s == 0, s == n - 1)
        need = sum(t.n_bytes for t in ts) + kv * (bounds[s + 1] - bounds[s]) + ring_bytes(s)
        if need > nodes[s].memory_bytes:
            return False
    return True


@PROPS
@given(planning_inputs(valid_layout=True))
def test_memory_rejection_only_when_nothing_fits(inputs):
    """RP-F-1: insufficient_memory is returned only when no contiguous non-empty partition fits the
    placed nodes (checked by brute force over all partitions); a plan is returned whenever one does."""
    from pipeplan.frontend.planner import plan_edges

    facts, config, pool, stage_count, placement = inputs
    nodes = list(pool.nodes[:stage_count]) if placement is None else [pool.get(i) for i in placement]
    edges = plan_edges(facts, config, stage_count)

    def ring_bytes(s: int) -> int:
        return sum(e.ring_spec.slots * e.ring_spec.slot_bytes for e in edges if s in (e.producer, e.consumer))

    nb = facts.block_count
    any_fit = any(_fits(facts, config, nodes, (0, *cuts, nb), ring_bytes)
                  for cuts in itertools.combinations(range(1, nb), stage_count - 1))
    event(f"fits={any_fit}")
    try:
        plan_run(facts, config, pool, stage_count, placement)
        planned = True
    except RunPlanRejection as e:
        assert e.code == "insufficient_memory", e.one_line()
        planned = False
        assert any(n.id in e.message for n in nodes)  # names the node that does not fit
    assert planned == any_fit


@PROPS
@given(st.integers(1, 10).flatmap(lambda b: st.tuples(
    st.just(b), st.integers(1, min(b, 5)),
    st.lists(st.sampled_from([32, 96, 172, 400]), min_size=b, max_size=b),
    st.lists(st.one_of(st.none(), st.sampled_from([1e9, 2e9, 5e9])), min_size=5, max_size=5), st.booleans())))
def test_bottleneck_is_optimal(args):
    """The documented objective: with ample memory the emitted partition minimizes the slowest stage's
    (bytes a decode step reads + KV bytes) / bandwidth over all contiguous partitions (brute force), up to float
    rounding; the first stage's gathered token_embd counts one row (a tied one on the last stage counts whole)."""

    blocks, stages, ffn, bws, tied = args
    facts = llama_facts(blocks, ffn=ffn, tied=tied)
    config = RuntimeConfig(max_seq_len=16)
    given_bw = [b for b in bws[:stages] if b is not None]
    slowest = min(given_bw) if given_bw else 1.0
    pool = NodePool(tuple(NodeSpec(f"n{i}", 1 << 40, bandwidth_bytes_per_s=bws[i]) for i in range(stages)))
    bw = [(b if b is not None else slowest) if given_bw else 1.0 for b in bws[:stages]]
    kv = facts.kv_bytes_per_block(16, 4)

    def cost(bounds) -> float:
        worst = 0.0
        for s in range(stages):
            ts = facts.tensors_for_stage(bounds[s], bounds[s + 1], s == 0, s == stages - 1)
            tied = s == stages - 1 and not any(t.name == "output.weight" for t in facts.tensors)
            read = sum(-(-t.n_bytes // t.shape[1]) if t.name == "token_embd.weight" and not tied else t.n_bytes
                       for t in ts)
            worst = max(worst, (read + kv * (bounds[s + 1] - bounds[s])) / bw[s])
        return worst

    best = min(cost((0, *c, blocks)) for c in itertools.combinations(range(1, blocks), stages - 1))
    spec = read_spec(plan_run(facts, config, pool, stages))
    got = cost(tuple(s.layer_start for s in spec.stages) + (blocks,))
    assert math.isclose(got, best, rel_tol=1e-9)
