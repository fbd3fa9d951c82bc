"""RunPlan contract (seeds/000_2efbb723d90f824e.txt): one test per bullet, cited by its RP-* ID.

Every assertion reads the emitted ``runplan`` IR (through its ops' accessors, :func:`read_spec`, or by
printing and re-parsing it) or the derived ``ProvisionStage`` values — never planner internals.
The main subject is stories260K (5 blocks) planned over 1..5 stages on a local pool.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import re

import pytest
from pipeplan.errors import GGUFError, RunPlanRejection
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run, plan_run_spec
from pipeplan.frontend.pool import local_pool
from pipeplan.plan_types import DTYPE_WIDTHS, ORCHESTRATOR, NodePool, NodeSpec, RuntimeConfig

from tests.conftest import STORIES, TINY_RANDOM, VOCAB_ONLY
from tests.contract.test_runplan_properties import llama_facts
from tests.unit.runplan_fixtures import read_spec

CONFIG = RuntimeConfig(max_seq_len=256)
STAGE_COUNTS = (1, 2, 3, 4, 5)


def _ops(module, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


def _reparse(module):
    """Print the module and parse it back with a fresh context (what a consumer of the text sees)."""
    from pipeplan.api import parse_module, register_pipeplan
    from xdsl.context import Context

    return parse_module(register_pipeplan(Context()), str(module))


@pytest.fixture(scope="session")
def stories_facts():
    return read_model_facts(STORIES)


@pytest.fixture(scope="session")
def plans(stories_facts):
    """stage count -> (module, spec read back from the re-parsed IR, provisions) for stories260K."""
    from pipeplan.dialects.runplan_build import project_provisions

    out = {}
    for n in STAGE_COUNTS:
        module = plan_run(stories_facts, CONFIG, local_pool(5), n)
        parsed = _reparse(module)
        out[n] = (module, read_spec(parsed), project_provisions(parsed))
    return out


# --------------------------------------------------------------------------- RunPlan formation
def test_rp_f_1_exactly_one_plan_or_typed_rejection(plans, stories_facts):
    """RP-F-1: for valid inputs the planner emits exactly one RunPlan (one runplan.plan op holding
    stage_count stages); for contradictory inputs it raises a typed RunPlanRejection instead."""
    for n, (module, spec, _) in plans.items():
        assert len(_ops(module, "runplan.plan")) == 1
        assert len(_ops(module, "runplan.stage")) == n == len(spec.stages)
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(6), 6)
    assert ei.value.code == "invalid_stage_count"
    assert "5 blocks cannot fill 6 stages" in ei.value.message


def test_rp_f_2_never_a_partial_plan(stories_facts):
    """RP-F-2: a rejection found only at the last stage (its node is too small for the output head)
    yields no module at all, and the emitted plans are complete: every stage and edge present."""
    pool = NodePool((NodeSpec("big0", 1 << 30), NodeSpec("big1", 1 << 30), NodeSpec("small", 200_000)))
    result = None
    with pytest.raises(RunPlanRejection) as ei:
        result = plan_run(stories_facts, CONFIG, pool, 3)
    assert result is None
    assert ei.value.code == "insufficient_memory" and "'small'" in ei.value.message
    module = plan_run(stories_facts, CONFIG, NodePool(pool.nodes[:2]), 2)
    assert len(_ops(module, "runplan.stage")) == 2 and len(_ops(module, "runplan.edge")) == 3


def test_rp_f_3_inputs_unchanged_and_no_hidden_topology(stories_facts):
    """RP-F-3: the pool (and every other input, including the placement list) is unchanged after
    planning, and everything the planner decided is stated in the plan: the spec read back from the
    printed IR equals the planner's decision, and only pool nodes appear."""

    pool = NodePool(tuple(NodeSpec(f"h{i}", 1 << 30, bandwidth_bytes_per_s=1e9 * (i + 1)) for i in range(4)))
    placement = ["h3", "h1", "h0"]
    before = copy.deepcopy((stories_facts, CONFIG, pool, placement))
    module = plan_run(stories_facts, CONFIG, pool, 3, placement)
    assert (stories_facts, CONFIG, pool, placement) == before
    decided = plan_run_spec(stories_facts, CONFIG, pool, 3, placement)
    assert read_spec(_reparse(module)) == decided
    assert {s.node_id for s in decided.stages} <= {n.id for n in pool.nodes}


# --------------------------------------------------------------------------- layer assignment
def test_rp_la_1_contiguous(plans):
    """RP-LA-1: stage ranges are contiguous (each starts where the previous ends)."""
    for _, spec, _ in plans.values():
        for a, b in itertools.pairwise(spec.stages):
            assert a.layer_end == b.layer_start


def test_rp_la_2_no_overlap(plans):
    """RP-LA-2: stage ranges do not overlap (every block belongs to at most one stage)."""
    for _, spec, _ in plans.values():
        owners = [b for s in spec.stages for b in range(s.layer_start, s.layer_end)]
        assert len(owners) == len(set(owners))


def test_rp_la_3_union_covers_block_range(plans, stories_facts):
    """RP-LA-3: the union of the ranges is exactly the GGUF block range [0, 5)."""
    for _, spec, _ in plans.values():
        covered = {b for s in spec.stages for b in range(s.layer_start, s.layer_end)}
        assert covered == set(range(stories_facts.block_count)) == set(range(5))


def test_rp_la_4_one_non_empty_range_per_stage(plans):
    """RP-LA-4: every stage has exactly one non-empty range (empty ranges are not allowed here)."""
    for _, spec, _ in plans.values():
        assert all(s.layer_end > s.layer_start for s in spec.stages)
    # the 5-stage plan has one block per stage
    assert [(s.layer_start, s.layer_end) for s in plans[5][1].stages] == [(i, i + 1) for i in range(5)]


def test_rp_la_5_stage_indices(plans):
    """RP-LA-5: stage indices are exactly 0..stage_count-1."""
    for n, (_, spec, provs) in plans.items():
        assert [s.index for s in spec.stages] == list(range(n))
        assert [p.stage for p in provs] == list(range(n)) and all(p.stage_count == n for p in provs)


# --------------------------------------------------------------------------- edge assignment
def test_rp_ea_1_unique_edge_ids(plans):
    """RP-EA-1: every edge id is unique within the run."""
    for n, (_, spec, _) in plans.items():
        ids = [e.edge_id for e in spec.edges]
        assert len(ids) == len(set(ids)) == n + 1


def test_rp_ea_2_one_producer_one_consumer(plans):
    """RP-EA-2: every edge has exactly one producer and one consumer, and each stage produces exactly
    one edge and consumes exactly one."""
    for n, (_, spec, _) in plans.items():
        for e in spec.edges:
            assert e.producer in (ORCHESTRATOR, *range(n)) and e.consumer in (ORCHESTRATOR, *range(n))
            assert e.producer != e.consumer
        for s in range(n):
            assert sum(e.producer == s for e in spec.edges) == 1
            assert sum(e.consumer == s for e in spec.edges) == 1


def test_rp_ea_3_token_in(plans):
    """RP-EA-3: the token-in edge is orchestrator -> stage 0."""
    for _, spec, _ in plans.values():
        (e,) = [e for e in spec.edges if e.kind == "token_in"]
        assert (e.producer, e.consumer) == (ORCHESTRATOR, 0)


def test_rp_ea_4_activation_edges(plans):
    """RP-EA-4: activation edge i is stage i -> stage i+1, for every i in 0..N-2."""
    for n, (_, spec, _) in plans.items():
        acts = [e for e in spec.edges if e.kind == "activation"]
        assert sorted((e.producer, e.consumer) for e in acts) == [(i, i + 1) for i in range(n - 1)]


def test_rp_ea_5_token_out(plans):
    """RP-EA-5: the token-out edge is stage N-1 -> orchestrator."""
    for n, (_, spec, _) in plans.items():
        (e,) = [e for e in spec.edges if e.kind == "token_out"]
        assert (e.producer, e.consumer) == (n - 1, ORCHESTRATOR)


def test_rp_ea_6_edge_ids_not_derived(stories_facts):
    """RP-EA-6: edge ids come from the plan, not from node names, hashes, layer ranges or peers:
    plans with the same stage count but different node names, placements, models (so different
    ranges) and run ids carry the same edge ids in the same positions, and a stage learns its edge
    ids only from its provision."""
    from pipeplan.dialects.runplan_build import project_provisions

    def edge_ids(module):
        return [(e.edge_id, e.kind, e.producer, e.consumer) for e in read_spec(module).edges]

    a = plan_run(stories_facts, CONFIG, local_pool(3), 3, run_id="alpha")
    pool = NodePool((NodeSpec("zz-top", 1 << 30), NodeSpec("a.b.c:99", 1 << 30), NodeSpec("m", 1 << 30)))
    b = plan_run(llama_facts(11, ffn=[32] * 10 + [400]), CONFIG, pool, 3, ["m", "zz-top", "a.b.c:99"], run_id="beta")
    ranges_a = [(s.layer_start, s.layer_end) for s in read_spec(a).stages]
    ranges_b = [(s.layer_start, s.layer_end) for s in read_spec(b).stages]
    assert ranges_a != ranges_b
    assert edge_ids(a) == edge_ids(b)
    for module in (a, b):
        spec = read_spec(module)
        for p in project_provisions(module):
            assert p.inbound.edge_id == next(e.edge_id for e in spec.edges if e.consumer == p.stage)
            assert p.outbound.edge_id == next(e.edge_id for e in spec.edges if e.producer == p.stage)
            assert p.node_id not in p.inbound.edge_id + p.outbound.edge_id


# --------------------------------------------------------------------------- provisioning projection
def test_rp_pp_1_projection_deterministic(plans, stories_facts):
    """RP-PP-1: deriving ProvisionStage values is deterministic: projecting the same plan again, from
    its re-parsed text, or from an independently planned identical input gives equal values."""
    from pipeplan.dialects.runplan_build import project_provisions

    for n, (module, _, provs) in plans.items():
        assert project_provisions(module) == provs
        assert project_provisions(_reparse(module)) == provs
        again = plan_run(stories_facts, CONFIG, local_pool(5), n)
        assert str(again) == str(module)
        assert project_provisions(again) == provs


def test_rp_pp_2_only_own_layer_range(plans, stories_facts):
    """RP-PP-2: a stage receives only its own layer range and only its own tensors' byte ranges
    (token_embd on stage 0, output_norm/output on the last stage)."""
    for n, (_, spec, provs) in plans.items():
        for p, s in zip(provs, spec.stages, strict=True):
            assert (p.layer_start, p.layer_end) == (s.layer_start, s.layer_end)
            assert p.block_count == stories_facts.block_count
            names = {t.name for t in p.tensors}
            want = {t.name for t in stories_facts.tensors_for_stage(s.layer_start, s.layer_end, s.index == 0,
                                                                      s.index == n - 1)}
            assert names == want
            for t in p.tensors:
                m = re.match(r"blk\.(\d+)\.", t.name)
                if m:
                    assert s.layer_start <= int(m.group(1)) < s.layer_end
                src = stories_facts.tensor(t.name)
                assert (t.offset, t.n_bytes, t.shard) == (src.offset, src.n_bytes, src.shard)
            assert p.has_embedding == (s.index == 0) and p.has_head == (s.index == n - 1)


def test_rp_pp_3_one_inbound_one_outbound(plans):
    """RP-PP-3: each provision has exactly one inbound and one outbound edge provision, and they are
    the stage's consumed and produced edges."""
    for _, spec, provs in plans.values():
        for p in provs:
            assert p.inbound.direction == "in" and p.outbound.direction == "out"
            (ein,) = [e for e in spec.edges if e.consumer == p.stage]
            (eout,) = [e for e in spec.edges if e.producer == p.stage]
            assert (p.inbound.edge_id, p.inbound.kind) == (ein.edge_id, ein.kind)
            assert (p.outbound.edge_id, p.outbound.kind) == (eout.edge_id, eout.kind)


def test_rp_pp_4_outbound_names_consumer_node(plans):
    """RP-PP-4: the outbound provision contains the consumer's node_id ("orchestrator" for token-out)."""
    for n, (_, spec, provs) in plans.items():
        for p in provs:
            want = spec.stages[p.stage + 1].node_id if p.stage < n - 1 else "orchestrator"
            assert p.outbound.peer_node_id == want


def test_rp_pp_5_inbound_needs_no_producer_address(plans):
    """RP-PP-5: the inbound provision needs no producer actor address: it names only the edge id and
    at most the producer's node id (a pool node id or "orchestrator")."""
    for _, spec, provs in plans.values():
        node_ids = {s.node_id for s in spec.stages} | {"orchestrator"}
        for p in provs:
            assert p.inbound.peer_node_id in node_ids
            fields = {f.name for f in dataclasses.fields(p.inbound)}
            assert not any("addr" in f or "actor" in f or "url" in f for f in fields)


_ADDRESS = re.compile(r"(actor|://|\b\d{1,3}(\.\d{1,3}){3}\b|ipc:|tcp:)", re.I)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _strings(v)


def test_rp_pp_6_no_remote_actor_addresses(plans):
    """RP-PP-6: no provision message (value or printed runplan.provision_stage op) contains a remote
    actor address for data flow: every peer is a node id, and no string looks like an address."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from xdsl.context import Context

    for _, spec, provs in plans.values():
        weight_uris = set(spec.weights.uris)
        for p in provs:
            for s in _strings((p.inbound, p.outbound, p.node_id, p.run_id)):
                assert not _ADDRESS.search(s), s
            assert set(p.weights.uris) == weight_uris  # the only locator is the weight source
        module = _reparse(plans[3][0])
        run_pipeline(register_pipeplan(Context()), module, "runplan-project-provisioning")
        text = "\n".join(str(op) for op in _ops(module, "runplan.provision_stage"))
        assert text.count("runplan.provision_stage") == 3
        assert "actor" not in text.lower() and "://" not in text


# --------------------------------------------------------------------------- object / ring specs
def test_rp_os_1_every_edge_has_specs(plans):
    """RP-OS-1: every edge has an ObjectSpec and a RingSpec with positive sizes."""
    for _, spec, _ in plans.values():
        for e in spec.edges:
            assert e.object_spec.max_extent > 0 and e.ring_spec.slots == CONFIG.ring_slots
            assert e.ring_spec.slot_bytes >= e.object_spec.max_extent


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_rp_os_2_activation_max_extent(stories_facts, dtype):
    """RP-OS-2: activation max_extent = max_seq_len * hidden_dim * dtype_width_bytes (64 x 256 x w)."""

    config = RuntimeConfig(max_seq_len=256, activation_dtype=dtype)
    spec = read_spec(_reparse(plan_run(stories_facts, config, local_pool(3), 3)))
    acts = [e for e in spec.edges if e.kind == "activation"]
    assert len(acts) == 2
    for e in acts:
        assert e.object_spec.max_extent == 256 * stories_facts.embedding_length * DTYPE_WIDTHS[dtype]
        assert e.object_spec.shape == (256, 64) and e.object_spec.dtype == dtype


def test_rp_os_3_token_vs_activation_specs(plans):
    """RP-OS-3: token edges carry token object specs (i32 ids, shape (max_seq_len,)), activation
    edges activation specs."""
    for _, spec, _ in plans.values():
        for e in spec.edges:
            o = e.object_spec
            if e.kind == "activation":
                assert o.kind == "activation" and o.shape == (CONFIG.max_seq_len, 64)
            else:
                assert o.kind == "token" and o.dtype == "i32" and o.shape == (CONFIG.max_seq_len,)
                assert o.max_extent == CONFIG.max_seq_len * 4


def test_rp_os_4_specs_copied_into_provisions(plans):
    """RP-OS-4: the object and ring specs of both edge provisions equal the plan's edge specs."""
    for _, spec, provs in plans.values():
        by_id = {e.edge_id: e for e in spec.edges}
        for p in provs:
            for ep in (p.inbound, p.outbound):
                assert ep.object_spec == by_id[ep.edge_id].object_spec
                assert ep.ring_spec == by_id[ep.edge_id].ring_spec


@pytest.mark.parametrize("config, fragment", [
    (RuntimeConfig(alignment=48), "power of two"),
    (RuntimeConfig(alignment=2), "alignment 2 is smaller than the i32 width 4"),
    (RuntimeConfig(activation_dtype="f8"), "no known width"),
    (RuntimeConfig(token_dtype="f32"), "token objects hold token ids"),
])
def test_rp_os_5_invalid_spec_rejects(stories_facts, config, fragment):
    """RP-OS-5: an invalid alignment, dtype width or token layout rejects the plan (invalid_object_spec)."""
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, config, local_pool(2), 2)
    assert ei.value.code == "invalid_object_spec" and fragment in ei.value.message


# --------------------------------------------------------------------------- authority / rejection
def test_rp_ar_1_unknown_node(stories_facts):
    """RP-AR-1: a placement naming a node outside the pool rejects (unknown_node)."""
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(2), 2, ["local0", "gpu7"])
    assert ei.value.code == "unknown_node" and "'gpu7'" in ei.value.message


def test_rp_ar_2_duplicate_stage_assignment(stories_facts):
    """RP-AR-2: the same node assigned to two stages rejects (duplicate_stage)."""
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(3), 3, ["local1", "local0", "local1"])
    assert ei.value.code == "duplicate_stage" and "stages 0 and 2" in ei.value.message


def test_rp_ar_3_missing_stage(stories_facts):
    """RP-AR-3: a stage left without a node (short placement) rejects (missing_stage)."""
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(3), 3, ["local0", "local1"])
    assert ei.value.code == "missing_stage" and "stage 2 has no node" in ei.value.message


@pytest.mark.parametrize("count", [0, -1, 6])
def test_rp_ar_4_invalid_stage_count(stories_facts, count):
    """RP-AR-4: a stage count outside 1..block_count rejects (invalid_stage_count)."""
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(6), count)
    assert ei.value.code == "invalid_stage_count"


def test_rp_ar_5_edge_endpoint_mismatch(plans):
    """RP-AR-5: a plan whose edge endpoints contradict the topology (activation edge 0 -> 2 in a
    3-stage plan) is rejected by verification (edge_endpoint_mismatch)."""
    from pipeplan.dialects.runplan import verify_runplan
    from pipeplan.dialects.runplan_build import build_runplan_module

    spec = plans[3][1]
    edges = tuple(dataclasses.replace(e, consumer=2) if (e.producer, e.consumer) == (0, 1) else e
                  for e in spec.edges)
    bad = build_runplan_module(dataclasses.replace(spec, edges=edges), ["local0", "local1", "local2"])
    with pytest.raises(RunPlanRejection) as ei:
        verify_runplan(bad)
    assert ei.value.code == "edge_endpoint_mismatch"


def test_rp_ar_6_inconsistent_model_facts(stories_facts):
    """RP-AR-6: model facts that contradict the stage layout reject: block_count larger than the
    tensor index (blocks with no tensors), and a 5-block model asked for 6 stages; the vocab-only
    parser input (0 tensors, claims 32 blocks) is rejected before planning (vocab_only)."""
    bad = dataclasses.replace(stories_facts, block_count=7, block_bytes=stories_facts.block_bytes + (0, 0))
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(bad, CONFIG, local_pool(2), 2)
    assert ei.value.code == "inconsistent_model_facts" and "block 5 has no tensors" in ei.value.message
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(stories_facts, CONFIG, local_pool(6), 6)
    assert ei.value.code == "invalid_stage_count"
    with pytest.raises(GGUFError) as eg:
        read_model_facts(VOCAB_ONLY)
    assert eg.value.code == "vocab_only"


def test_rp_ar_6_random_one_block_model_plans():
    """RP-AR-6 (positive side): the 1-block random model (norms stored after matrices) plans as one
    stage owning block 0, and 2 stages are rejected."""
    from pipeplan.dialects.runplan_build import project_provisions

    facts = read_model_facts(TINY_RANDOM)
    assert facts.block_count == 1
    module = plan_run(facts, CONFIG, local_pool(2), 1)
    spec = read_spec(module)
    assert [(s.layer_start, s.layer_end) for s in spec.stages] == [(0, 1)]
    (prov,) = project_provisions(module)
    assert prov.has_embedding and prov.has_head
    with pytest.raises(RunPlanRejection) as ei:
        plan_run(facts, CONFIG, local_pool(2), 2)
    assert ei.value.code == "invalid_stage_count"


def test_rp_ar_7_planner_is_only_source(plans, stories_facts):
    """RP-AR-7: the planner is the only source of stage, layer, edge and object-spec assignment: its
    inputs have no way to state them (no such parameter), the IR states exactly the planner's
    decision, and the provisions are derived from that IR alone (equal when projected from text)."""
    from pipeplan.dialects.runplan_build import project_provisions

    params = set(inspect.signature(plan_run).parameters)
    assert params == {"model_facts", "runtime_config", "node_pool", "stage_count", "placement", "run_id"}
    for n, (module, spec, provs) in plans.items():
        decided = plan_run_spec(stories_facts, CONFIG, local_pool(5), n)
        assert spec == decided
        assert project_provisions(_reparse(module)) == provs
