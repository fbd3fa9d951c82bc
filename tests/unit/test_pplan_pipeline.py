"""PortablePlanIR and the binding gate: conversion, legalization, selection, cost resolution (issue 4)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pipeplan.api import parse_module, register_pipeplan, run_pipeline
from pipeplan.dialects.bindings import DeploymentBinding, EvidencePolicy, TargetBinding, TargetBindingOp
from pipeplan.dialects.pplan import (
    CandidateAttr,
    CandidatesOp,
    CostAttr,
    find_plan,
    portable_digest,
    producer,
)
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run_spec
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.targets import (
    CapabilityRule,
    PreferenceSelector,
    StandardLegality,
    TargetPlugin,
    TaskRequirements,
    UnknownTargetError,
    get_target,
)
from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan, deployment_for
from pipeplan.transforms.pplan_legalize import legalize_task
from pipeplan.transforms.pplan_resolve_costs import costed_task_view
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import PassFailedException

from tests.conftest import REPO, STORIES, bench_module

POOL = NodePool(tuple(NodeSpec(f"n{i}", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(2)))
PROMPT = 4
L = 64


@pytest.fixture(scope="session")
def facts():
    return read_model_facts(STORIES)


@pytest.fixture(scope="session")
def spec2(facts):
    return plan_run_spec(facts, RuntimeConfig(max_seq_len=L), POOL, 2)


@pytest.fixture(scope="session")
def ctx():
    return register_pipeplan(Context())


def _module(spec) -> ModuleOp:
    return ModuleOp([build_portable_plan(spec, prompt_len=PROMPT), deployment_for(spec, POOL).to_op()])


@pytest.fixture(scope="session")
def base2(spec2) -> ModuleOp:
    return _module(spec2)


@pytest.fixture(scope="session")
def measured_table(tmp_path_factory, base2, facts):
    """A measured table of our reference kernels for every compute key of the plan but one:
    the decode-step attn_q matmul shape ``1x64x64`` is left out on purpose."""
    mk = bench_module("measure_kernels")
    from pipeplan.runtime.program import LlamaHParams

    table = mk.measure_plan(find_plan(base2), LlamaHParams.from_facts(facts), L, repeats=3, warmup=1,
                            skip_keys=frozenset({"matmul|f32,f32,f32|1x64x64"}))
    path = tmp_path_factory.mktemp("evidence") / "kernels.json"
    path.write_text(json.dumps(table))
    return path


def _run(ctx, module, spec: str) -> ModuleOp:
    m = module.clone()
    run_pipeline(ctx, m, spec)
    return m


LEGAL = "pplan-legalize{target=virtual-queue},pplan-select-implementations"


# --------------------------------------------------------------------------- digest
def test_portable_digest_unchanged_by_legalize_select_and_costs(ctx, base2, spec2, measured_table):
    """AB-G-2, AB-C-2: the portable digest is the same before and after legalization, selection
    and cost resolution (roofline and measured), and across runs (another build, another process)."""
    d0 = portable_digest(base2)
    m = base2.clone()
    run_pipeline(ctx, m, "pplan-legalize{target=virtual-queue}")
    d1 = portable_digest(m)
    run_pipeline(ctx, m, "pplan-select-implementations")
    d2 = portable_digest(m)
    run_pipeline(ctx, m, "pplan-resolve-costs{evidence=roofline}")
    d3 = portable_digest(m)
    run_pipeline(ctx, m, f'pplan-resolve-costs{{evidence="measured:{measured_table}",roofline}}')
    d4 = portable_digest(m)
    assert d0 == d1 == d2 == d3 == d4
    assert portable_digest(_module(spec2)) == d0
    cands = next(o for o in m.ops if isinstance(o, CandidatesOp))
    assert cands.portable_digest.data == d0
    code = (
        "from pipeplan.frontend.gguf_facts import read_model_facts as r; from pipeplan.frontend.planner import "
        "plan_run_spec as p; from pipeplan.plan_types import RuntimeConfig as C, NodePool as N, NodeSpec as S; "
        "from pipeplan.transforms.convert_runplan_to_pplan import build_portable_plan as b; "
        "from pipeplan.dialects.pplan import portable_digest as d; "
        f"pool = N(tuple(S(f'n{{i}}', 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(2))); "
        f"print(d(b(p(r({str(STORIES)!r}), C(max_seq_len={L}), pool, 2), prompt_len={PROMPT})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == d0


def test_digest_covers_properties_not_annotations(base2):
    """AB-G-2: the digest changes when a task's exact work changes, and ignores discardable
    (analysis) attributes — so the invariance above is a real check."""
    d0 = portable_digest(base2)
    m = base2.clone()
    t = find_plan(m).tasks()[5]
    t.attributes["analysis.note"] = StringAttr("annotation")
    assert portable_digest(m) == d0
    from xdsl.dialects.builtin import IntegerAttr, i64

    t.properties["flops"] = IntegerAttr(t.flops.value.data + 1, i64)
    assert portable_digest(m) != d0


# --------------------------------------------------------------------------- hand calculation
def test_stories_decode_step_task_count_and_work(facts):
    """Hand calculation of one decode step of stories260K on ONE stage, prompt P=4 (decode at position
    4, so attention sees P+1 = 5 keys). D=64, H=8, Hkv=4, hd=8, Dkv=Hkv*hd=32, F=172, V=512, r=8, n=5 blocks,
    f32 everywhere (4 bytes).

    Tasks = recv + embedding + 16*n + last_row + output_norm + head + argmax + send = 2 + 16*5 + 5 = 87.
    Flops = n * (2*4D + 2*(2*D*D) + 2*(2*Dkv*D) + 3*r*(H+Hkv) + H*(P+1)*(4*hd+5) + 2*D + 3*(2*F*D) + 5*F)
            + 4D + 2*V*D + V.
    Bytes read = 4 + (4 + 4D)
               + n * [ 2*(4D+4D) + 2*(4D+4D*D) + 2*(4D+4*Dkv*D) + (4D+4r) + (4*Dkv+4r) + 2*4*Dkv
                       + (4D + 2*4*(P+1)*Dkv) + 2*(2*4D) + 2*(4D+4*F*D) + 2*4F + (4F+4*D*F) ]
               + 4D + 2*4D + (4D+4*V*D) + 4V + 4.
    Bytes written = 4 + 4D + n * [ 9*4D (attn_norm, q, rope q, attention, attn_output, add, ffn_norm, down, add)
                                 + 5*4*Dkv (k, v, rope k, the k and v cache rows) + 3*4F (gate, up, silu_mul) ]
                    + 4D + 4D + 4V + 4 + 4   (last_row, output_norm, head, argmax, send).
    """
    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=L), NodePool(POOL.nodes[:1]), 1)
    plan = build_portable_plan(spec, prompt_len=4)
    dec = [t for t in plan.tasks() if t.step_name == "decode"]
    D, H, Hkv, hd, F, V, r, n, P = 64, 8, 4, 8, 172, 512, 8, 5, 4
    Dkv = Hkv * hd
    assert (facts.embedding_length, facts.head_count, facts.head_count_kv, facts.feed_forward_length,
            facts.vocab_size, facts.rope_dimension_count, facts.block_count) == (D, H, Hkv, F, V, r, n)
    assert len(dec) == 2 + 16 * n + 5 == 87
    flops = n * (2 * 4 * D + 2 * (2 * D * D) + 2 * (2 * Dkv * D) + 3 * r * (H + Hkv) + H * (P + 1) * (4 * hd + 5)
                 + 2 * D + 3 * (2 * F * D) + 5 * F) + 4 * D + 2 * V * D + V
    read = (4 + (4 + 4 * D)
            + n * (2 * (4 * D + 4 * D) + 2 * (4 * D + 4 * D * D) + 2 * (4 * D + 4 * Dkv * D) + (4 * D + 4 * r)
                   + (4 * Dkv + 4 * r) + 2 * 4 * Dkv + (4 * D + 2 * 4 * (P + 1) * Dkv) + 2 * (2 * 4 * D)
                   + 2 * (4 * D + 4 * F * D) + 2 * 4 * F + (4 * F + 4 * D * F))
            + 4 * D + 2 * 4 * D + (4 * D + 4 * V * D) + 4 * V + 4)
    written = 4 + 4 * D + n * (9 * 4 * D + 5 * 4 * Dkv + 3 * 4 * F) + 4 * D + 4 * D + 4 * V + 4 + 4
    assert sum(t.flops.value.data for t in dec) == flops
    assert sum(t.nbytes_read for t in dec) == read
    assert sum(t.nbytes_written for t in dec) == written


def test_task_list_is_the_runtime_program(spec2, base2, facts):
    """Granularity matches the runtime: each stage's compute tasks are build_stage_program's
    kernel calls, in order (plus recv/send and the sampling argmax)."""
    from pipeplan.runtime.program import LlamaHParams, build_stage_program

    hp = LlamaHParams.from_facts(facts)
    tasks = find_plan(base2).tasks()
    for st in spec2.stages:
        prog = build_stage_program(hp, st.layer_start, st.layer_end, st.index == 0, st.index == 1, L)
        for step in ("prefill", "decode"):
            ops = [t.op.data for t in tasks if t.step_name == step and t.stage_index == st.index]
            tail = ["argmax", "send"] if st.index == 1 else ["send"]
            assert ops == ["recv"] + [c.kernel for c in prog] + tail


# --------------------------------------------------------------------------- costs
def test_roofline_and_measured_give_different_views_same_digest(ctx, base2, measured_table):
    """AB-C-1, AB-C-2: the same legal plan costed with roofline and with measured evidence gives two
    different CostedTaskViews and the same portable digest."""
    legal = _run(ctx, base2, LEGAL)
    roof = _run(ctx, legal, "pplan-resolve-costs{evidence=roofline}")
    meas = _run(ctx, legal, f'pplan-resolve-costs{{evidence="measured:{measured_table}",roofline}}')
    vr, vm = costed_task_view(roof), costed_task_view(meas)
    assert vr.keys() == vm.keys() and len(vr) == len(find_plan(base2).tasks())
    assert {e.provider for es in vr.values() for e in es} == {"roofline"}
    assert {e.status for es in vr.values() for e in es} == {"direct"}
    t = "prefill.s0.b0.matmul.attn_q"
    assert vm[t][0].provider == "measured" and vm[t][0].status == "direct"
    assert vm[t][0].duration_s != vr[t][0].duration_s
    assert vr != vm
    assert portable_digest(roof) == portable_digest(meas) == portable_digest(base2)


def test_measured_table_lacking_a_shape_falls_back_explicitly(ctx, base2, measured_table):
    """AB-C-3: the decode attn_q shape is missing from the measured table: its cost comes from the
    roofline with status "fallback" (never as a measurement); edge transfers (not measured) too."""
    m = _run(ctx, base2, LEGAL + f',pplan-resolve-costs{{evidence="measured:{measured_table}",roofline}}')
    v = costed_task_view(m)
    e = v["decode.s0.b0.matmul.attn_q"][0]
    assert (e.provider, e.status, e.key) == ("roofline", "fallback", "matmul|f32,f32,f32|1x64x64")
    assert v["decode.s0.send.e1"][0].status == "fallback"
    assert v["decode.s0.b0.matmul.attn_k"][0].status == "direct"


def test_policy_forbidding_fallback_is_a_diagnostic(ctx, base2, measured_table):
    """AB-C-3, AB-S-7: with fallback=forbid, the missing shape is a diagnostic naming the key and lineage."""
    with pytest.raises(PassFailedException, match=r"forbids fallback.*measured:.* has (no entry|only out-of-domain)"
                                                  r".* for key \S+ \(model op"):
        _run(ctx, base2, LEGAL + f',pplan-resolve-costs{{evidence="measured:{measured_table}",roofline '
                                 f'fallback=forbid}}')


def test_out_of_domain_evidence_is_marked_and_low_confidence(ctx, base2, measured_table):
    """AB-C-3: with measured evidence only, the missing 1x64x64 matmul is scaled from another matmul
    shape: provider measured, status out_of_domain, confidence 0.25 — never a direct measurement."""
    from pipeplan.analysis.evidence import EstimateRequest, MeasuredTable, resolve

    dev = DeploymentBinding.from_pool(POOL, ["n0"]).stage_device(0)
    req = EstimateRequest("t", "c", "vq.matmul", "matmul", ("f32", "f32", "f32"), (1, 64, 64), 8192, 16640, 256,
                          "none", dev, "model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t")
    est, status = resolve(req, [MeasuredTable(measured_table)], EvidencePolicy((f"measured:{measured_table}",)))
    assert (est.provider, status, est.confidence, est.in_domain) == ("measured", "out_of_domain", 0.25, False)
    # in the pass, measured-only evidence cannot price edge transfers at all: a diagnostic, not a guess
    with pytest.raises(PassFailedException, match=r"no_evidence.*key recv\|i32,i32\|4"):
        _run(ctx, base2, LEGAL + f',pplan-resolve-costs{{evidence="measured:{measured_table}"}}')
    with pytest.raises(Exception, match="a measured estimate is either direct or out_of_domain"):
        CostAttr("vq.matmul", 1.0, "measured", "fallback", 0.9)


def test_uncertainty_budget_and_stale_evidence_are_diagnostics(ctx, base2, measured_table, tmp_path):
    """AB-S-7, AB-G-1: an estimate above the policy's uncertainty budget, and a measured table older
    than the policy's freshness, are diagnostics."""
    legal = _run(ctx, base2, LEGAL)
    with pytest.raises(PassFailedException, match="uncertainty 0.50, above the policy's budget 0.20"):
        _run(ctx, legal, "pplan-resolve-costs{evidence=roofline uncertainty_budget=0.2}")
    old = json.loads(measured_table.read_text())
    old["created_unix"] = 1.0
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    with pytest.raises(PassFailedException, match="stale_evidence.*older than the policy's freshness 60 s"):
        _run(ctx, legal, f'pplan-resolve-costs{{evidence="measured:{p}" max_age_s=60}}')
    p.write_text("{not json")
    with pytest.raises(PassFailedException, match="bad_evidence.*cannot read"):
        _run(ctx, legal, f'pplan-resolve-costs{{evidence="measured:{p}"}}')


def test_roofline_needs_stated_peaks(ctx, spec2):
    """AB-G-4: a device without peaks is reported, never given a default peak."""
    bare = NodePool(tuple(NodeSpec(f"n{i}", 8 * 10**9) for i in range(2)))
    m = ModuleOp([build_portable_plan(spec2, prompt_len=PROMPT), deployment_for(spec2, bare).to_op()])
    with pytest.raises(PassFailedException, match=r"missing_peak.*needs \w+ of device n0 \(DeploymentBinding\)"):
        run_pipeline(ctx, m, LEGAL + ",pplan-resolve-costs{evidence=roofline}")


def test_costed_view_records_provenance(ctx, base2, measured_table):
    """AB-G-3: the costed view records target, deployment, policy and evidence fingerprints; a
    different evidence table changes the evidence fingerprint only."""
    legal = _run(ctx, base2, LEGAL)
    a = _run(ctx, legal, "pplan-resolve-costs{evidence=roofline}")
    b = _run(ctx, legal, f'pplan-resolve-costs{{evidence="measured:{measured_table}",roofline}}')
    from pipeplan.dialects.pplan import CostedViewOp

    va = next(o for o in a.ops if isinstance(o, CostedViewOp))
    vb = next(o for o in b.ops if isinstance(o, CostedViewOp))
    assert va.target_fingerprint == vb.target_fingerprint and va.deployment_fingerprint == vb.deployment_fingerprint
    assert va.evidence_fingerprint != vb.evidence_fingerprint and va.policy_fingerprint != vb.policy_fingerprint
    assert all(len(getattr(va, f).data) == 64 for f in ("target_fingerprint", "deployment_fingerprint",
                                                         "policy_fingerprint", "evidence_fingerprint"))


# --------------------------------------------------------------------------- bindings
@pytest.mark.parametrize("missing, pipeline", [
    ("TargetBinding", "pplan-legalize"),
    ("DeploymentBinding", LEGAL + ",pplan-resolve-costs{evidence=roofline}"),
    ("EvidencePolicy", LEGAL + ",pplan-resolve-costs"),
])
def test_missing_binding_is_a_diagnostic(ctx, spec2, missing, pipeline):
    """AB-G-1, AB-G-4: each missing binding is a diagnostic that names it."""
    ops = [build_portable_plan(spec2, prompt_len=PROMPT)]
    if missing != "DeploymentBinding":
        ops.append(deployment_for(spec2, POOL).to_op())
    with pytest.raises(PassFailedException, match=f"missing binding: {missing} "):
        run_pipeline(ctx, ModuleOp(ops), pipeline)


def test_bindings_round_trip_through_ops():
    """AB-G-1: TargetBinding, DeploymentBinding and EvidencePolicy are IR ops whose to_op/from_op are inverse."""
    tb = get_target("cuda-triton").binding
    assert TargetBinding.from_op(tb.to_op()) == tb
    db = DeploymentBinding.from_pool(POOL, ["n1", "n0"], {"n0": 5})
    assert DeploymentBinding.from_op(db.to_op()) == db and db.stage_device(0).id == "n1"
    ep = EvidencePolicy(("measured:/x.json", "roofline"), 0.3, "forbid", 10, "r7")
    assert EvidencePolicy.from_op(ep.to_op()) == ep
    with pytest.raises(KeyError, match="not in the node pool"):
        DeploymentBinding.from_pool(POOL, ["zz"])


# --------------------------------------------------------------------------- legalization
def test_q4k_task_fails_on_queue_target_with_lineage(ctx):
    """AB-I-2, AB-D-1: a matmul of a type no target executes (Q2_K) fails on the queue target with the
    lineage path and the rejected candidates; a Q4_K one (which the CPU runtime executes, issue 11
    item 8) is legal on virtual-queue and on cuda-triton."""
    text = (REPO / "tests/filecheck/transforms/pplan-legalize-unsupported-dtype.mlir").read_text()
    with pytest.raises(PassFailedException) as ei:
        run_pipeline(ctx, parse_module(ctx, text), "pplan-legalize{target=virtual-queue}")
    msg = str(ei.value)
    assert ("model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected "
            "candidates: vq.matmul: dtype q2_k unsupported") in msg
    m = parse_module(ctx, (REPO / "tests/filecheck/transforms/pplan-legalize-q4k.mlir").read_text())
    for target, impl in (("virtual-queue", "vq.matmul"), ("cuda-triton", "triton.matmul")):
        ok = m.clone()
        run_pipeline(ctx, ok, f"pplan-legalize{{target={target}}}")
        assert next(o for o in ok.ops if isinstance(o, CandidatesOp)).target.data == target
        (t,) = [t for t in find_plan(ok).tasks() if t.task_id == "decode.s1.b7.matmul.attn_q"]
        assert [c.impl for c in t.candidates] == [impl]


def test_stories_legalizes_on_every_target_with_provenance(ctx, base2):
    """AB-I-1: on each target every task gets candidates recording task, rule, plugin revision,
    resources and rejection reasons; virtual-slot's 64-byte rule is reached through a
    requirement-only alignment rewrite (recorded), and no task is left without a candidate."""
    n_tasks = len(find_plan(base2).tasks())
    for target in ("virtual-queue", "virtual-slot", "cuda-triton"):
        m = _run(ctx, base2, f"pplan-legalize{{target={target}}}")
        plugin = get_target(target)
        assert next(o for o in m.ops if isinstance(o, CandidatesOp)).target.data == target
        (tb,) = [o for o in m.ops if isinstance(o, TargetBindingOp)]
        assert tb.plugin_revision.data == plugin.revision  # the revision, once for every candidate
        tasks = find_plan(m).tasks()
        assert all(t.candidates for t in tasks) and sum(len(t.candidates) for t in tasks) >= n_tasks
        for t in tasks:
            for c in t.candidates:
                assert isinstance(c, CandidateAttr) and c.engine and c.rank == -1
                assert c.rule in {r.name for r in plugin.capability.rules_for(str(t.op.data))}
    slot = _run(ctx, base2, "pplan-legalize{target=virtual-slot}")
    (mm,) = [t for t in find_plan(slot).tasks() if t.task_id == "decode.s0.b0.matmul.attn_q"]
    assert mm.candidates[0].rewrite == "align 64" and mm.candidates[0].resources()["rewrite"] == "align 64"


def test_select_keeps_several_candidates_ranked(ctx, base2):
    """AB-I-1: keep=2 keeps two ranked candidates where two are legal (cuda-triton: dequant matmul and the
    tensor-core matmul via an alignment rewrite) and records why others were not selected."""
    m = _run(ctx, base2, "pplan-legalize{target=cuda-triton},pplan-select-implementations{keep=2}")
    (t,) = [t for t in find_plan(m).tasks() if t.task_id == "decode.s0.b0.matmul.attn_q"]
    assert [(c.rank, c.rule) for c in t.candidates] == [(0, "triton.matmul"), (1, "triton.matmul_tc")]
    one = _run(ctx, base2, "pplan-legalize{target=cuda-triton},pplan-select-implementations{keep=1}")
    (t,) = [t for t in find_plan(one).tasks() if t.task_id == "decode.s0.b0.matmul.attn_q"]
    assert len(t.candidates) == 1 and any("not selected" in s for s in t.candidates[0].rejected)
    with pytest.raises(PassFailedException, match="keep must be >= 1"):
        _run(ctx, base2, "pplan-legalize{target=cuda-triton},pplan-select-implementations{keep=0}")
    with pytest.raises(PassFailedException, match="run pplan-legalize first"):
        _run(ctx, base2, "pplan-select-implementations")


def _req(**kw) -> TaskRequirements:
    base = dict(task="t", op="matmul", dtypes=("f32", "f32", "f32"), shape=(1, 64, 64), layout="row_major",
                alignment=64, memspace="device", collective="none", flops=8192, bytes_read=16640,
                bytes_written=256, lineage="model op m -> stage 0 (decode) -> task @t")
    base.update(kw)
    return TaskRequirements(**base)


def test_legality_checks_every_constraint_kind():
    """AB-L-1: dtype, shape, layout, alignment, memory space, collective, runtime, library and ABI each
    produce their own rejection reason."""
    b = TargetBinding("x", "x", "rt", ("dtype:f32", "memspace:device"), "lib", "1", "abi", "x@1")
    rule = CapabilityRule("x.mm", "x.mm", "matmul", frozenset({"f32"}), "rt", "lib", "abi", min_alignment=64,
                          shape_multiple=16)
    leg = StandardLegality()
    assert leg.check(_req(), rule, b) == ()
    cases = {
        "dtype q4_0 unsupported": _req(dtypes=("f32", "q4_0", "f32")),
        "shape [1, 64, 60] unsupported": _req(shape=(1, 64, 60)),
        "layout col_major unsupported": _req(layout="col_major"),
        "alignment 32 below required 64": _req(alignment=32),
        "memory space host unsupported": _req(memspace="host"),
        "collective send does not match": _req(collective="send"),
    }
    for reason, req in cases.items():
        got = leg.check(req, rule, b)
        assert len(got) == 1 and got[0].startswith(reason), (reason, got)
    for field, reason in (("runtime", "runtime other"), ("library", "library other"), ("abi", "ABI other")):
        got = leg.check(_req(), rule, TargetBinding(**{**b.__dict__, field: "other"}))
        assert len(got) == 1 and got[0].startswith(reason)


def test_plugin_rewrite_cannot_change_semantics():
    """AB-L-2: a plugin rewrite that changes a task's bytes is refused by legalization."""
    from dataclasses import replace

    class Cheat(PreferenceSelector):
        def alternatives(self, task):
            return [replace(task, bytes_read=1, rewrite="compress")]

    good = get_target("virtual-queue")
    bad = TargetPlugin("cheat", "cheat@1", good.binding, good.capability, good.legality, Cheat(), good.resources)
    with pytest.raises(PassFailedException, match="rewrite 'compress' of model op m .* changes its op, bytes"):
        legalize_task(bad, good.binding, _req())
    legal, _ = legalize_task(good, good.binding, _req())
    assert [c.rule.name for c in legal] == ["vq.matmul"]


def test_unknown_target_and_contradicting_binding(ctx, base2):
    """AB-G-1: an unknown target is a typed error; a module binding that contradicts the option is a diagnostic."""
    with pytest.raises(UnknownTargetError, match="known targets: cuda-triton, virtual-queue, virtual-slot"):
        get_target("tpu")
    m = _run(ctx, base2, "pplan-legalize{target=virtual-queue}")
    with pytest.raises(PassFailedException, match="does not match target plugin virtual-slot"):
        run_pipeline(ctx, m, "pplan-legalize{target=virtual-slot}")


def test_conversion_rejects_bad_step_options(ctx, spec2):
    """Conversion options are checked: a decode position outside [prompt_len, max_seq_len) is a diagnostic."""
    with pytest.raises(PassFailedException, match=r"decode position 64 must be in \[prompt_len 4, max_seq_len 64\)"):
        build_portable_plan(spec2, prompt_len=4, decode_pos=64)
    with pytest.raises(PassFailedException, match="prompt_len must be >= 1"):
        build_portable_plan(spec2, prompt_len=0)


def test_convert_pass_imports_without_torch():
    """Tooling (no contract bullet): ``convert-runplan-to-pplan`` builds its tasks from the torch-free
    ``models.stage_program`` (``runtime.program`` re-exports it; the executor is torch-free too since the
    CPU target runs on numpy), so importing the pass does not import torch (``pipeplan-opt -p
    convert-runplan-to-pplan`` stays fast)."""
    import subprocess
    import sys

    code = ("import sys, pipeplan.transforms.convert_runplan_to_pplan as m; "
            "from pipeplan.runtime.program import build_stage_program as a; "
            "assert 'torch' not in sys.modules; "
            "from pipeplan.models.stage_program import build_stage_program as b; assert a is b")
    probe = ("import sys, pipeplan.transforms.convert_runplan_to_pplan; "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- token loop (explicit dependency)
def _closure(plan) -> dict[str, set[str]]:
    """Task name -> names of all its (transitive) dependencies."""
    anc: dict[str, set[str]] = {}
    for t, deps in plan.dependencies().items():  # program order is a topological order
        a: set[str] = set()
        for n in deps:
            a |= anc[n] | {n}
        anc[t] = a
    return anc


@pytest.mark.parametrize("stages", [1, 3])
def test_token_loop_dependency_is_explicit(facts, stages):
    """AB-S-1, AB-S-2: the decode step's token-in recv depends on the prefill step's token-out send (the
    sampled token the orchestrator feeds back), so every decode task depends on every prefill task and
    no scheduler can interleave the two steps on a queue."""
    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=L), NodePool(tuple(
        NodeSpec(f"n{i}", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(stages))), stages)
    plan = build_portable_plan(spec, prompt_len=PROMPT)
    tin = next(e.edge_id for e in spec.edges if e.kind == "token_in")
    tout = next(e.edge_id for e in spec.edges if e.kind == "token_out")
    recv = next(t for t in plan.tasks() if t.task_id == f"decode.s0.recv.{tin}")
    assert plan.dependencies()[recv.task_id] == (f"prefill.s{stages - 1}.send.{tout}",)
    (tok,) = recv.after  # the token loop is an SSA !pplan.token value
    assert producer(tok) is not None and producer(tok).task_id == f"prefill.s{stages - 1}.send.{tout}"
    anc = _closure(plan)
    prefill = {t.task_id for t in plan.tasks() if t.step_name == "prefill"}
    decode = [t.task_id for t in plan.tasks() if t.step_name == "decode"]
    assert prefill and decode and all(prefill <= anc[d] for d in decode)
    assert not any(anc[p] & set(decode) for p in prefill)


# --------------------------------------------------------------------------- DeploymentBinding from the RunPlan IR
def test_binding_built_from_the_plans_node_specs(ctx, facts):
    """AB-G-1, AB-G-4: a RunPlan carries its pool's node specs, so convert-runplan-to-pplan without
    `pool=` emits the DeploymentBinding from the IR (capacity, peaks, reservations) — the same one the
    pool file gives — and roofline costing runs."""
    from pipeplan.dialects.bindings import DeploymentBindingOp
    from pipeplan.frontend.planner import plan_run

    mod = plan_run(facts, RuntimeConfig(max_seq_len=L), POOL, 2)
    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=L), POOL, 2)
    run_pipeline(ctx, mod, "convert-runplan-to-pplan{prompt_len=4}," + LEGAL + ",pplan-resolve-costs{evidence=roofline}")
    (op,) = [o for o in mod.ops if isinstance(o, DeploymentBindingOp)]
    assert DeploymentBinding.from_op(op) == deployment_for(spec, POOL)
    assert sum(len(t.costs) for t in find_plan(mod).tasks()) == len(find_plan(mod).tasks())


def test_id_only_plan_gets_no_binding(ctx, facts):
    """AB-G-4: a plan that names its nodes by id only (the pre-node-spec form) states no capacity or
    peaks: no binding is invented, and costing reports the DeploymentBinding missing."""
    from pipeplan.dialects.runplan_build import build_runplan_module, plan_node_pool

    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=L), POOL, 2)
    mod = build_runplan_module(spec, [n.id for n in POOL.nodes])
    assert plan_node_pool(mod) is None
    with pytest.raises(PassFailedException, match="missing binding: DeploymentBinding "):
        run_pipeline(ctx, mod, "convert-runplan-to-pplan{prompt_len=4}," + LEGAL + ",pplan-resolve-costs{evidence=roofline}")


# --------------------------------------------------------------------------- SSA dataflow (issue 13)
def test_every_task_has_ssa_dataflow(ctx, base2):
    """AB-S-1, AB-S-4 (issue 13 item 1): in the stories260K pipeline output every pplan.task takes the buffers
    it reads as operands and yields the buffers it writes; kv_cache_write and send yield the next version of
    the buffer they update; every producer of an operand is a dependency; the printed plan names no buffer
    or task by symbol (no @ reference inside pplan.plan)."""
    m = _run(ctx, base2, LEGAL + ",pplan-resolve-costs{evidence=roofline}")
    plan = find_plan(m)
    tasks = plan.tasks()
    assert len(tasks) == 178 and all(t.ins and t.written for t in tasks)
    for t in tasks:
        assert bool(t.updates) == (t.op.data in ("kv_cache_write", "send"))
        assert not t.updates or [v.type for v in t.updates] == [r.type for r in t.written]
    deps = plan.dependencies()
    assert all(p.task_id in deps[t.task_id] for t in tasks for v in t.ins if (p := producer(v)) is not None)
    body = str(plan)
    assert "@" not in body.split("\n", 1)[1]


def test_plan_task_requirements_equal_each_tasks_requirements(base2):
    """AB-L-1: the one-walk reader the passes use gives, per task in program order, its stage and exactly
    ``task_requirements(task)`` (the normalized requirements legality checks)."""
    from pipeplan.transforms.pplan_legalize import plan_task_requirements, task_requirements

    plan = find_plan(base2)
    got = plan_task_requirements(plan)
    assert [t for t, _, _ in got] == plan.tasks()
    assert [(s, r) for _, s, r in got] == [(t.stage_index, task_requirements(t)) for t in plan.tasks()]


def test_read_plan_equals_the_plan_accessors(base2, ctx):
    """AB-S-1, AB-S-4: the adapter's one-walk reader of convert-pplan-to-cplan gives each task's id, stage,
    read/written buffer names, dependencies and lineage, and the plan's buffers, exactly as the pplan
    accessors do (built and parsed plans)."""
    from pipeplan.transforms.convert_pplan_to_cplan import read_plan

    for module in (base2, parse_module(ctx, str(base2))):
        plan = find_plan(module)
        tasks, buffers = read_plan(plan)
        deps = plan.dependencies()
        assert [(p.op, p.id, p.stage, p.reads, p.writes, p.deps, p.lineage) for p in tasks] == [
            (t, t.task_id, t.stage_index, t.reads(), t.writes(), deps[t.task_id], t.lineage) for t in plan.tasks()]
        assert buffers == plan.buffers()
