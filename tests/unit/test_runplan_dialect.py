"""The runplan dialect: builder/reader round trip, provision derivation, and one typed rejection per
broken invariant of seed 000 (a valid spec with one field changed)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from pipeplan.dialects.runplan import PlanOp, ProvisionStageOp, StageOp
from pipeplan.dialects.runplan_attrs import INVARIANT_CODES, ORCHESTRATOR_NODE
from pipeplan.dialects.runplan_build import (
    build_runplan_module,
    project_provisions,
    provisions_from_module,
    verify_runplan,
)
from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import ORCHESTRATOR, EdgePlan, NodePool, NodeSpec, RunPlanSpec, StagePlan, TensorInfo
from pipeplan.transforms.project_provisioning import project_plan
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from tests.unit.runplan_fixtures import llama_facts, make_spec, read_spec

CONTRACTS = Path(__file__).resolve().parents[3] / "shared" / "CONTRACTS.md"


def nodes(n: int) -> list[str]:
    return [f"node-{i}" for i in range(n)]


@pytest.fixture(scope="session")
def spec3() -> RunPlanSpec:
    return make_spec(llama_facts(5), 3)


@pytest.fixture(scope="session")
def pool3() -> list[str]:
    return nodes(3) + ["spare"]


def printed(op) -> str:
    import io

    buf = io.StringIO()
    Printer(buf).print_op(op)
    return buf.getvalue()


def parse(text: str) -> ModuleOp:
    from pipeplan.dialects.runplan import Runplan

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Runplan)
    return Parser(ctx, text).parse_module()


# --------------------------------------------------------------------------- round trips
def test_spec_round_trip_is_exact(spec3, pool3):
    """RP-AR-7: the IR states the whole plan: reading it back gives the same RunPlanSpec
    (tensor index, block_bytes, weights, stages, edges) and the same node pool."""
    m = build_runplan_module(spec3, pool3)
    verify_runplan(m)
    assert read_spec(m) == spec3
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    assert plan.node_ids() == tuple(pool3)


def test_spec_round_trip_through_text_and_generic_form():
    """RP-AR-7: the printed custom and generic forms parse back to the same spec, including an
    optional sha256, several shards, a tied model and an f32-derived eps."""
    facts = replace(llama_facts(4, tied=True), sha256="cd" * 32, files=("a.gguf", "b.gguf"),
                    rms_norm_eps=9.999999747378752e-06, rope_freq_base=500000.0)
    t = list(facts.tensors)
    t[-1] = replace(t[-1], shard=1)
    facts = replace(facts, tensors=tuple(t))
    spec = replace(make_spec(facts, 2), weights=replace(make_spec(facts, 2).weights, uris=("a.gguf", "b.gguf"),
                                                           sha256=("1" * 64, "2" * 64), sizes=(10, 20)))
    m = build_runplan_module(spec, nodes(2))
    verify_runplan(m)
    text = printed(m)
    assert read_spec(parse(text)) == spec
    import io

    buf = io.StringIO()
    Printer(buf, print_generic_format=True).print_op(m)
    assert "<{" in buf.getvalue()
    again = parse(buf.getvalue())
    assert read_spec(again) == spec
    assert printed(again) == text


# --------------------------------------------------------------------------- provisions
def test_provisions_are_deterministic(spec3, pool3):
    """RP-PP-1: deriving ProvisionStage is deterministic: repeated projection, the pass run twice,
    and a rebuilt module all give equal values and identical IR."""
    m = build_runplan_module(spec3, pool3)
    a, b = project_provisions(m), project_provisions(build_runplan_module(spec3, pool3))
    assert a == b and len(a) == 3
    assert provisions_from_module(m) == []  # project_provisions does not change its input
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    project_plan(plan)
    once = printed(m)
    project_plan(plan)
    assert printed(m) == once
    assert sum(isinstance(op, ProvisionStageOp) for op in plan.body.block.ops) == 3
    assert provisions_from_module(m) == a
    verify_runplan(m)


def test_provisions_hold_own_range_edges_and_specs(spec3, pool3):
    """RP-PP-2, RP-PP-3, RP-PP-4, RP-PP-5, RP-PP-6, RP-OS-4: each stage gets its own range and tensors
    only, exactly one inbound and one outbound edge, the consumer's node id outbound, node ids (never
    addresses) as peers, and the edges' specs copied."""
    ps = project_provisions(build_runplan_module(spec3, pool3))
    edges = {e.edge_id: e for e in spec3.edges}
    node_of = {s.index: s.node_id for s in spec3.stages}
    for p, s in zip(ps, spec3.stages):
        assert (p.run_id, p.stage, p.stage_count, p.node_id) == ("run0", s.index, 3, s.node_id)
        assert (p.layer_start, p.layer_end) == (s.layer_start, s.layer_end)
        blocks = {int(m.group(1)) for t in p.tensors if (m := re.match(r"blk\.(\d+)\.", t.name))}
        assert blocks == set(range(s.layer_start, s.layer_end))
        want = spec3.facts.tensors_for_stage(s.layer_start, s.layer_end, s.index == 0, s.index == 2)
        assert [(t.name, t.offset, t.n_bytes) for t in p.tensors] == [(t.name, t.offset, t.n_bytes) for t in want]
        assert p.has_embedding == (s.index == 0) and p.has_head == (s.index == 2)
        assert p.inbound.direction == "in" and p.outbound.direction == "out"
        ein, eout = edges[p.inbound.edge_id], edges[p.outbound.edge_id]
        assert ein.consumer == s.index and eout.producer == s.index
        assert p.outbound.peer_node_id == (ORCHESTRATOR_NODE if eout.consumer == ORCHESTRATOR else node_of[eout.consumer])
        assert p.inbound.peer_node_id == (ORCHESTRATOR_NODE if ein.producer == ORCHESTRATOR else node_of[ein.producer])
        for ep, e in ((p.inbound, ein), (p.outbound, eout)):
            assert ep.peer_node_id in set(pool3) | {ORCHESTRATOR_NODE}
            assert (ep.object_spec, ep.ring_spec) == (e.object_spec, e.ring_spec)
        assert p.weights == spec3.weights and p.max_seq_len == spec3.config.max_seq_len
    assert ps[0].inbound.kind == "token_in" and ps[-1].outbound.kind == "token_out"
    assert "token_embd.weight" in {t.name for t in ps[0].tensors}
    assert {"output_norm.weight", "output.weight"} <= {t.name for t in ps[-1].tensors}
    assert "token_embd.weight" not in {t.name for t in ps[-1].tensors}


def test_tied_embedding_goes_to_last_stage():
    """RP-PP-2: with no output.weight the last stage also loads token_embd.weight (tied head)."""
    spec = make_spec(llama_facts(3, tied=True), 3)
    ps = project_provisions(build_runplan_module(spec, nodes(3)))
    names = [t.name for t in ps[-1].tensors]  # file order: token_embd comes first in the file
    assert names[0] == "token_embd.weight" and names[-1] == "output_norm.weight"
    assert "output.weight" not in names and all(n.startswith("blk.2.") for n in names[1:-1])
    assert "token_embd.weight" not in {t.name for t in ps[1].tensors}


def test_single_stage_plan():
    """RP-EA-3, RP-EA-5: one stage gets token-in from and token-out to the orchestrator."""
    spec = make_spec(llama_facts(2), 1, nodes=("only",))
    (p,) = project_provisions(build_runplan_module(spec, ["only"]))
    assert (p.inbound.peer_node_id, p.outbound.peer_node_id) == ("orchestrator", "orchestrator")
    assert p.has_embedding and p.has_head and len(p.tensors) == len(spec.facts.tensors)


# --------------------------------------------------------------------------- rejections
def _stage(spec, i, **kw):
    st = list(spec.stages)
    st[i] = replace(st[i], **kw)
    return replace(spec, stages=tuple(st))


def _edge(spec, which, **kw):
    return replace(spec, edges=tuple(replace(e, **kw) if e.edge_id == which else e for e in spec.edges))


def _obj(spec, which, **kw):
    e = next(e for e in spec.edges if e.edge_id == which)
    return _edge(spec, which, object_spec=replace(e.object_spec, **kw))


def _facts(spec, **kw):
    return replace(spec, facts=replace(spec.facts, **kw))


BASE = make_spec(llama_facts(5), 3)
TOK_IN = BASE.edges[0]

REJECTIONS = [
    # (contract id, spec, node ids, code, message fragment)
    ("RP-AR-1", _stage(BASE, 1, node_id="ghost"), None, "unknown_node", "unknown node 'ghost'"),
    ("RP-AR-2", _stage(BASE, 2, index=1), None, "duplicate_stage", "stage 1 is assigned 2 times"),
    ("RP-AR-3", replace(BASE, stages=(BASE.stages[0], replace(BASE.stages[2], index=2),
                                      replace(BASE.stages[1], index=3))), None, "missing_stage", "stage 1 is missing"),
    ("RP-AR-4", replace(BASE, stages=(), edges=()), None, "invalid_stage_count", "the plan has no stages"),
    ("RP-AR-4", replace(make_spec(llama_facts(4), 4), stages=make_spec(llama_facts(4), 4).stages
                        + (StagePlan(4, "node-4", 3, 4),)), nodes(5), "invalid_stage_count", "5 stages for 4 blocks"),
    ("RP-LA-1", _stage(_stage(BASE, 1, layer_start=3), 1, layer_end=4), None, "invalid_layer_assignment",
     "stage 1 starts at block 3 but stage 0 ends at block 2"),
    ("RP-LA-2", _stage(BASE, 1, layer_start=1), None, "invalid_layer_assignment", "stage 1 starts at block 1"),
    ("RP-LA-3", _stage(_stage(BASE, 1, layer_end=3), 2, layer_start=3, layer_end=4), None, "inconsistent_model_facts", "stage 2 ends at block 4"),
    ("RP-LA-4", _stage(BASE, 2, layer_start=5), None, "invalid_layer_assignment", "stage 2 has range [5, 5)"),
    ("RP-LA-5", _stage(BASE, 0, index=-1), None, "missing_stage", "stage index -1 is negative"),
    ("RP-EA-1", _edge(BASE, "act.1", edge_id="act.0"), None, "edge_endpoint_mismatch", "edge id 'act.0' is used twice"),
    ("RP-EA-2", _edge(BASE, "act.0", consumer=0), None, "edge_endpoint_mismatch", "same producer and consumer"),
    ("RP-EA-3", _edge(BASE, "tok.in", consumer=1), None, "edge_endpoint_mismatch", "orchestrator -> stage 1"),
    ("RP-EA-4", _edge(BASE, "act.1", producer=0), None, "edge_endpoint_mismatch", "stage 0 -> stage 2"),
    ("RP-EA-4", replace(BASE, edges=tuple(e for e in BASE.edges if e.edge_id != "act.1")), None,
     "edge_endpoint_mismatch", "no activation edge connects stage 1 -> stage 2"),
    ("RP-EA-5", _edge(BASE, "tok.out", producer=1), None, "edge_endpoint_mismatch", "the last stage is 2"),
    ("RP-AR-5", _edge(BASE, "act.0", kind="tensor"), None, "edge_endpoint_mismatch", "has kind 'tensor'"),
    ("RP-OS-2", _obj(BASE, "act.0", shape=(512, 64), max_extent=BASE.edges[1].object_spec.max_extent * 2), None,
     "invalid_object_spec",
     "256 * 64 * 4 (f32) = 65536"),
    ("RP-OS-3", _edge(BASE, "act.0", object_spec=TOK_IN.object_spec), None, "invalid_object_spec",
     "(activation) has a 'token' object spec"),
    ("RP-OS-5", _obj(BASE, "tok.in", alignment=48), None, "invalid_object_spec", "not a positive power of two"),
    ("RP-OS-5", _obj(BASE, "tok.in", dtype_width=8), None, "invalid_object_spec", "dtype_width 8 but i32 is 4"),
    ("RP-OS-5", _obj(BASE, "act.1", layout="tiled"), None, "invalid_object_spec", "unsupported layout 'tiled'"),
    ("RP-OS-5", _obj(BASE, "tok.out", max_extent=2048), None, "invalid_object_spec", "max_extent 2048"),
    ("RP-OS-5", _obj(BASE, "act.0", shape=(64, 256)), None, "invalid_object_spec", "unsupported shape [64, 256]"),
    ("RP-OS-5", _edge(BASE, "act.0", ring_spec=replace(BASE.edges[1].ring_spec, slot_bytes=1024)), None,
     "invalid_object_spec", "slot_bytes 1024 < max_extent 65536"),
    ("RP-OS-5", replace(BASE, config=replace(BASE.config, max_seq_len=0)), None, "invalid_object_spec", "max_seq_len is 0"),
    ("RP-AR-6", _facts(BASE, block_bytes=(1,) + BASE.facts.block_bytes[1:]), None, "inconsistent_model_facts",
     "block_bytes[0] is 1"),
    ("RP-AR-6", _facts(BASE, block_count=6, block_bytes=BASE.facts.block_bytes + (0,)), None,
     "inconsistent_model_facts", "block 5 has no tensors but block_count is 6"),
    ("RP-AR-6", _facts(BASE, tensors=BASE.facts.tensors + (TensorInfo("blk.9.x.weight", "F32", (8,), 0, 9, 32, 9),)),
     None, "inconsistent_model_facts", "is in block 9 but block_count is 5"),
    ("RP-AR-6", _facts(BASE, tensors=BASE.facts.tensors[:-1] + (replace(BASE.facts.tensors[-1], n_bytes=7),)), None,
     "inconsistent_model_facts", "tensor 'output.weight' has 7 bytes"),
]


@pytest.mark.parametrize("cid,spec,node_ids,code,fragment", REJECTIONS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(REJECTIONS)])
def test_rejections(cid, spec, node_ids, code, fragment):
    """RP-F-1, RP-F-2 and the rejection bullets (RP-AR-*, RP-LA-*, RP-EA-*, RP-OS-*): a spec with one
    invariant broken is rejected with a typed RunPlanRejection whose code is INVARIANT_CODES[id] and
    whose message cites the contract ID and names the stage/edge; no provisions can be derived."""
    ids = node_ids or list(nodes(len(spec.stages) or 1))
    with pytest.raises(RunPlanRejection) as ei:  # by an attribute verifier while building, or the plan's
        verify_runplan(build_runplan_module(spec, ids))
    e = ei.value
    assert e.code == code == INVARIANT_CODES[cid]
    assert e.message.startswith(f"[{cid}] "), e.message
    assert fragment in e.message, e.message
    assert e.one_line() == f"error[{code}]: {e.message}"
    with pytest.raises(RunPlanRejection) as ei2:
        project_provisions(build_runplan_module(spec, ids))
    assert ei2.value.code == code


def _projected(spec=BASE, pool=None):
    m = build_runplan_module(spec, pool or nodes(3))
    project_plan(next(op for op in m.walk() if isinstance(op, PlanOp)))
    return m


def _swap_provision(m, stage, **kw):
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    op = next(o for o in plan.provision_ops() if o.provision().stage == stage)
    new = ProvisionStageOp.from_provision(replace(op.provision(), **kw), op.stage)
    plan.body.block.insert_op_before(new, op)
    plan.body.block.erase_op(op)
    return m


@pytest.mark.parametrize("cid,stage,change,fragment", [
    ("RP-PP-2", 1, lambda p: {"layer_start": 1}, "has [1, 4) but the stage owns [2, 4)"),
    ("RP-PP-2", 1, lambda p: {"tensors": p.tensors + (p.tensors[0],)}, "tensor byte ranges differ"),
    ("RP-PP-1", 0, lambda p: {"has_head": True}, "has_head True"),
    ("RP-PP-3", 1, lambda p: {"inbound": replace(p.inbound, edge_id="act.1")}, "inbound edge is 'act.1'"),
    ("RP-PP-4", 0, lambda p: {"outbound": replace(p.outbound, peer_node_id="node-2")}, "but the consumer is 'node-1'"),
    ("RP-PP-5", 1, lambda p: {"inbound": replace(p.inbound, peer_node_id="node-2")}, "but the producer is 'node-0'"),
    ("RP-PP-6", 1, lambda p: {"outbound": replace(p.outbound, peer_node_id="10.1.2.3:6379")}, "not a node id of the pool"),
    ("RP-OS-4", 2, lambda p: {"inbound": replace(p.inbound, ring_spec=replace(p.inbound.ring_spec, slots=3))},
     "specs differ from the edge's"),
])
def test_provision_rejections(cid, stage, change, fragment):
    """RP-PP-1..6, RP-OS-4: a projected plan whose provision of one stage was altered is rejected
    (code inconsistent_provision / invalid_object_spec), and re-projection restores it."""
    m = _projected()
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    p = next(o.provision() for o in plan.provision_ops() if o.provision().stage == stage)
    _swap_provision(m, stage, **change(p))
    with pytest.raises(RunPlanRejection) as ei:
        verify_runplan(m)
    assert ei.value.code == INVARIANT_CODES[cid]
    assert ei.value.message.startswith(f"[{cid}] ") and fragment in ei.value.message, ei.value.message
    project_plan(plan)
    verify_runplan(m)
    assert provisions_from_module(m) == project_provisions(build_runplan_module(BASE, nodes(3)))


def test_missing_provision_rejected():
    """RP-PP-1: when provisions are present there is exactly one per stage."""
    m = _projected()
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    plan.body.block.erase_op(plan.provision_ops()[1])
    with pytest.raises(RunPlanRejection, match=r"^\[RP-PP-1\] .*stage 1 has no provision"):
        verify_runplan(m)


def test_no_plan_is_malformed():
    """RP-F-1: a module without a plan is a typed rejection, not a crash."""
    with pytest.raises(RunPlanRejection) as ei:
        verify_runplan(ModuleOp([]))
    assert ei.value.code == "malformed_runplan"
    with pytest.raises(RunPlanRejection):
        read_spec(ModuleOp([]))
    stray = ModuleOp([StageOp.from_plan(StagePlan(0, "n", 0, 1))])
    with pytest.raises(RunPlanRejection, match="must be directly inside a runplan.plan") as ei:
        verify_runplan(stray)
    assert ei.value.code == "malformed_runplan"


def test_invariant_codes_cover_contract_ids():
    """RP-AR-1..7: every contract ID used by a verifier message exists in CONTRACTS.md and maps to a
    stable rejection code; every rejection code the planner must produce has an ID."""
    text = CONTRACTS.read_text()
    for cid in INVARIANT_CODES:
        assert re.search(rf"^- {cid} ", text, re.M), cid
    src = "".join(p.read_text() for p in (Path(__file__).resolve().parents[2] / "dialects").glob("runplan*.py"))
    used = set(re.findall(r'_fail\(\s*"(RP-[A-Z]{2}-\d+)"', src)) | set(re.findall(r'cid, \w+ = \("(RP-[A-Z]{2}-\d+)"', src))
    assert used <= set(INVARIANT_CODES)
    assert {"unknown_node", "duplicate_stage", "missing_stage", "invalid_stage_count", "edge_endpoint_mismatch",
            "inconsistent_model_facts", "invalid_object_spec"} <= set(INVARIANT_CODES.values())


def test_build_verify_project_80_blocks_8_stages():
    """RP-PP-1: 80 blocks x 8 stages build, verify and project into 8 provisions covering every block
    (the time it takes is measured by bench/plan_scaling.py, not asserted here)."""
    spec = make_spec(llama_facts(80), 8)
    m = build_runplan_module(spec, nodes(8))
    verify_runplan(m)
    ps = project_provisions(m)
    assert len(ps) == 8 and sum(p.layer_end - p.layer_start for p in ps) == 80
    assert [p.layer_start for p in ps] == sorted(p.layer_start for p in ps)


def test_edge_plan_endpoint_values():
    """RP-EA-2: every edge has exactly one producer and one consumer (ints in the IR; -1 is the
    orchestrator), and they survive the round trip."""
    spec = make_spec(llama_facts(3), 3)
    back = read_spec(build_runplan_module(spec, nodes(3)))
    assert [(e.producer, e.consumer) for e in back.edges] == [(-1, 0), (0, 1), (1, 2), (2, -1)]
    assert all(isinstance(e, EdgePlan) for e in back.edges) and all(isinstance(s, StagePlan) for s in back.stages)


# --------------------------------------------------------------------------- node specs in `nodes`
SPEC_POOL = (NodeSpec("node-0", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9), NodeSpec("node-1", 1 << 40, 3.3e10),
             NodeSpec("node-2", 123))


def test_node_specs_round_trip_text_and_generic(spec3):
    """RP-AR-1, RP-F-3: the plan records its pool as node specs (memory and the peaks that are given):
    plan_node_pool reads back the same NodePool from the built op, its custom print and its generic print."""
    import io

    from pipeplan.dialects.runplan_build import plan_node_pool

    pool = NodePool(SPEC_POOL)
    m = build_runplan_module(spec3, pool)
    verify_runplan(m)
    assert plan_node_pool(m) == pool
    text = printed(m)
    assert 'nodes [#runplan.node<id = "node-0", memory_bytes = 8000000000, bandwidth_bytes_per_s = 2.000000e+10' in text
    assert '#runplan.node<id = "node-2", memory_bytes = 123>]' in text
    back = parse(text)
    assert plan_node_pool(back) == pool and printed(back) == text
    buf = io.StringIO()
    Printer(buf, print_generic_format=True).print_op(m)
    assert plan_node_pool(parse(buf.getvalue())) == pool and printed(parse(buf.getvalue())) == text


def test_plain_id_nodes_still_parse(spec3):
    """RP-AR-1: plans written before node specs (``nodes ["a", "b"]``) and mixed lists still parse and
    verify; such a plan carries no NodePool (no capacities or peaks are invented)."""
    from pipeplan.dialects.runplan_build import plan_node_pool

    m = build_runplan_module(spec3, ["node-0", SPEC_POOL[1], "node-2"])
    verify_runplan(m)
    text = printed(m)
    assert 'nodes ["node-0", #runplan.node<id = "node-1"' in text
    back = parse(text)
    verify_runplan(back)
    assert plan_node_pool(back) is None and next(o for o in back.walk() if isinstance(o, PlanOp)).node_ids() == \
        ("node-0", "node-1", "node-2")
    assert plan_node_pool(parse(printed(build_runplan_module(spec3, nodes(3))))) is None


@pytest.mark.parametrize("entry, fragment", [
    ('#runplan.node<id = "node-1">', "node spec lacks key 'memory_bytes'"),
    ('#runplan.node<id = "node-1", memory_bytes = 0>', "node 'node-1': 'memory_bytes' must be > 0, got 0"),
    ('#runplan.node<id = "node-1", memory_bytes = 5, flops_per_s = -1.0>', "'flops_per_s' must be a finite number > 0"),
    ('#runplan.node<id = "node-1", memory_bytes = 5, speed = 1.0>', "node spec has unexpected key 'speed'"),
    ('#runplan.node<id = "", memory_bytes = 5>', "a node spec has an empty 'id'"),
    ('"node-0"', "nodes[1] repeats node id 'node-0' of nodes[0]"),
    ('array<i64: 1>', "nodes[1] is array<i64: 1>, neither a string nor a node spec"),
])
def test_malformed_node_spec_rejected(spec3, entry, fragment):
    """RP-AR-1: a malformed node spec (missing/unknown key, non-positive memory or peak, empty id:
    refused by the node spec attribute's verifier when the text is parsed; a duplicate id or an
    entry that is no node: by the plan's verifier) is rejected with code unknown_node, naming the
    node and the key."""
    from pipeplan.dialects.runplan import rejection_from
    from xdsl.utils.exceptions import ParseError

    text = printed(build_runplan_module(spec3, nodes(3)))
    bad = text.replace('nodes ["node-0", "node-1", "node-2"]', f'nodes ["node-0", {entry}, "node-2"]')
    assert bad != text
    with pytest.raises((RunPlanRejection, ParseError)) as ei:
        verify_runplan(parse(bad))
    e = ei.value if isinstance(ei.value, RunPlanRejection) else rejection_from(ei.value)
    assert e.code == "unknown_node" and "[RP-AR-1]" in e.message and fragment in e.message, e.message



# --------------------------------------------------------------------------- SSA stage values, typed attributes
def test_edges_and_provisions_use_stage_values(spec3, pool3):
    """RP-EA-2, RP-EA-3, RP-EA-5, RP-PP-3: every edge takes its producer and consumer as
    ``!runplan.stage`` values of this plan (a ``runplan.stage`` or the one ``runplan.orchestrator``)
    and every provision the value of its own stage; the indices read back are the spec's."""
    from pipeplan.dialects.runplan import EdgeOp, OrchestratorOp
    from pipeplan.dialects.runplan_attrs import StageType

    m = build_runplan_module(spec3, pool3)
    project_plan(next(op for op in m.walk() if isinstance(op, PlanOp)))
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    orch = [op for op in plan.body.block.ops if isinstance(op, OrchestratorOp)]
    stages = {op.index.value.data: op for op in plan.body.block.ops if isinstance(op, StageOp)}
    assert len(orch) == 1 and isinstance(orch[0].stage.type, StageType)
    owner = {ORCHESTRATOR: orch[0], **stages}
    edges = [op for op in plan.body.block.ops if isinstance(op, EdgeOp)]
    assert [(e.producer.owner, e.consumer.owner) for e in edges] == \
        [(owner[e.producer], owner[e.consumer]) for e in spec3.edges]
    for p in plan.provision_ops():
        assert isinstance(p.stage.owner, StageOp) and p.provision().stage == p.stage.owner.index.value.data
    assert len({p.stage for p in plan.provision_ops()}) == 3
    text = printed(m)
    assert '%s0 = runplan.stage 0 on "node-0" layers [0, 2) : !runplan.stage' in text
    assert 'runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token,' in text
    assert "runplan.provision_stage %s2 of 3" in text


def test_use_before_def_is_rejected(spec3, pool3):
    """RP-AR-7: stage values are defined before they are used: an edge moved above the stage whose
    value it takes is rejected by the plan verifier (code malformed_runplan)."""
    from pipeplan.dialects.runplan import EdgeOp

    m = build_runplan_module(spec3, pool3)
    plan = next(op for op in m.walk() if isinstance(op, PlanOp))
    act = next(op for op in plan.body.block.ops if isinstance(op, EdgeOp) and op.kind.data.value == "activation")
    s1 = next(op for op in plan.body.block.ops if isinstance(op, StageOp) and op.index.value.data == 1)
    act.detach()
    plan.body.block.insert_op_before(act, s1)
    with pytest.raises(RunPlanRejection, match=r"^\[RP-AR-7\] stage values are defined before they are used") as ei:
        verify_runplan(m)
    assert ei.value.code == "malformed_runplan"


def test_record_attributes_round_trip_and_verify():
    """RP-OS-1, RP-OS-5, RP-AR-1, RP-AR-6: the typed attributes print as ``#runplan.<name><...>``
    and parse back equal; their own verifiers refuse what the record states wrongly alone (with the
    contract ID), and a wrong value kind or an unknown key is a parse error."""
    from pipeplan.dialects.runplan import Runplan
    from pipeplan.dialects.runplan_attrs import (
        ObjectSpecAttr,
        RuntimeConfigAttr,
        config_attr,
        node_entry_attr,
        object_spec_attr,
        ring_spec_attr,
        weights_attr,
    )
    from pipeplan.plan_types import ObjectSpec, RingSpec, RuntimeConfig, WeightSource
    from xdsl.utils.exceptions import ParseError, VerifyException

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Runplan)
    obj = ObjectSpec("activation", "f32", 4, (4, 8), "row_major", 16, 128)
    attrs = [object_spec_attr(obj), ring_spec_attr(RingSpec(2, 128)), config_attr(RuntimeConfig()),
             weights_attr(WeightSource(("a.gguf",), (), (10,))), node_entry_attr(SPEC_POOL[0])]
    for a in attrs:
        text = str(a)
        assert text.startswith("#runplan.") and Parser(ctx, text).parse_attribute() == a
    assert isinstance(attrs[0], ObjectSpecAttr) and attrs[0].spec() == obj
    assert isinstance(attrs[2], RuntimeConfigAttr) and attrs[2].config() == RuntimeConfig()
    with pytest.raises(VerifyException, match=r"^\[RP-OS-5\] .*alignment 24, which is not a positive power of two"):
        object_spec_attr(replace(obj, alignment=24))
    with pytest.raises(VerifyException, match=r"^\[RP-OS-5\] .*ring spec has 0 slots"):
        ring_spec_attr(RingSpec(0, 128))
    with pytest.raises(VerifyException, match=r"^\[RP-AR-1\] .*'memory_bytes' must be > 0"):
        node_entry_attr(NodeSpec("n", 0))
    for bad, msg in (("#runplan.ring<slots = 2>", r"\[RP-OS-1\] .*ring spec lacks key 'slot_bytes'"),
                     ("#runplan.ring<slots = 2, slot_bytes = 8, actor = 1>", r"\[RP-OS-1\] .*unexpected key 'actor'"),
                     ("#runplan.ring<slots = 2, slot_bytes = \"8\">", "Expected integer literal"),
                     ("#runplan.config<max_seq_len = 4, activation_dtype = f8, token_dtype = i32, kv_dtype = f32, "
                      "ring_slots = 2, alignment = 16>", r"\[RP-OS-5\] dtypes must have a known width: unknown dtype 'f8'")):
        with pytest.raises(ParseError, match=msg):
            Parser(ctx, bad).parse_attribute()
