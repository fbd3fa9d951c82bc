"""The concrete plan IR (``cplan``) on the real pipeline: stories260K (planner -> pplan -> legalize -> select -> costs ->
convert-pplan-to-cplan -> cplan-verify), deterministic replay across processes, memory peak vs lower
bound on stories260K and the 70B-shaped facts, and the 80-block planning budget (seeds/003)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pipeplan.api import parse_module, register_pipeplan, run_pipeline
from pipeplan.dialects.cplan import AllocOp, CommandOp, PlanOp, QueueOp, QueueScheduleOp, SlotDataflowOp
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.transforms.convert_pplan_to_cplan import bind, problem_from_module
from pipeplan.transforms.cplan_verify import op_key, verify_plan
from xdsl.context import Context
from xdsl.printer import Printer

REPO = Path(__file__).resolve().parents[2]
PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target=virtual-queue}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}}")


def _pool(path: Path, n: int, mem: int) -> NodePool:
    nodes = tuple(NodeSpec(f"n{i}", mem, 1.0e11, 1.0e12, 1.0e9) for i in range(n))
    path.write_text("".join(f'[[nodes]]\nid = "{x.id}"\nmemory_bytes = {mem}\nbandwidth_bytes_per_s = 1.0e11\n'
                            f'flops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n' for x in nodes))
    return NodePool(nodes)


def _text(op) -> str:
    import io

    buf = io.StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue()


@pytest.fixture(scope="session")
def stories_pplan(tmp_path_factory, stories_path) -> str:
    """The costed pplan text of stories260K on 2 stages (max_seq_len 64)."""
    d = tmp_path_factory.mktemp("cplan")
    pool = _pool(d / "pool.toml", 2, 1 << 30)
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 2)
    run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=d / "pool.toml"))
    text = _text(mod)
    (d / "pp.mlir").write_text(text)
    return text


def _ctx() -> Context:
    return register_pipeplan(Context())


@pytest.mark.parametrize("binder", ["list-schedule", "reference-queue", "reference-slot"])
def test_stories_binders_pass_commit_gate(stories_pplan, binder):
    """AB-R-1..7, AB-S-1..7: each binder's plan from the real pplan passes cplan-verify with the commit gate."""
    ctx = _ctx()
    mod = parse_module(ctx, stories_pplan)
    problem = problem_from_module(mod)
    run_pipeline(ctx, mod, f"convert-pplan-to-cplan{{binder={binder} keep_source=true}},cplan-verify{{require_source=true}}")
    plans = [o for o in mod.ops if isinstance(o, PlanOp)]
    assert len(plans) == 1
    plan = plans[0]
    assert verify_plan(plan, problem) == []
    cmds = plan.ops_of(CommandOp)
    assert len(cmds) == len(problem.tasks) > 100
    assert isinstance(plan.extension, SlotDataflowOp if binder == "reference-slot" else QueueScheduleOp)
    assert all("-> candidate vq." in c.lineage_text and "model op" in c.lineage_text for c in cmds)


@pytest.mark.parametrize("binder", ["list-schedule", "reference-slot"])
def test_every_command_has_ssa_dataflow(stories_pplan, binder):
    """AB-S-1, AB-S-2, AB-S-4 (issue 13 item 1): in the stories260K pipeline output every cplan.command takes
    the !cplan.alloc values it reads/writes as operands (at least one written) and yields one !cplan.timepoint;
    each dependency is the timepoint of an earlier command (def-before-use, so acyclic); syncs, queue order,
    slots and firing rules name commands only by timepoints; no command names a buffer or a dependency by
    string (no deps/reads/writes property)."""
    from pipeplan.dialects.cplan import (
        AllocOp,
        AllocType,
        CommandOp,
        FireOp,
        QueueOp,
        SlotOp,
        SyncOp,
        TimepointType,
    )

    ctx = _ctx()
    mod = parse_module(ctx, stories_pplan)
    run_pipeline(ctx, mod, f"convert-pplan-to-cplan{{binder={binder}}}")
    (plan,) = [o for o in mod.ops if isinstance(o, PlanOp)]
    ops = list(plan.body.block.ops)
    cmds = [o for o in ops if isinstance(o, CommandOp)]
    assert len(cmds) > 100
    pos = {o: i for i, o in enumerate(ops)}
    for c in cmds:
        assert c.outputs and len(c.results) == 1 and isinstance(c.done.type, TimepointType)
        assert all(isinstance(v.type, AllocType) and isinstance(v.owner, AllocOp) for v in (*c.inputs, *c.outputs))
        assert all(isinstance(v.owner, CommandOp) and pos[v.owner] < pos[c] for v in c.after)
        assert not {"deps", "reads", "writes"} & set(c.properties)
    assert sum(len(c.after) for c in cmds) >= len(cmds) - 2  # only the entry commands wait on nothing
    inner = [o for o in plan.walk() if isinstance(o, SyncOp | QueueOp | SlotOp | FireOp)]
    assert inner and all(o.operands and all(isinstance(v.owner, CommandOp) for v in o.operands) for o in inner)
    placed = [v for o in inner if isinstance(o, QueueOp | SlotOp) for v in o.operands]
    assert sorted(pos[v.owner] for v in placed) == sorted(pos[c] for c in cmds)


def test_conversion_removes_source_and_gate_needs_it(stories_pplan):
    """AB-R-5: by default the pplan ops are replaced; cplan-verify{require_source} then refuses to gate."""
    from xdsl.utils.exceptions import PassFailedException

    ctx = _ctx()
    mod = parse_module(ctx, stories_pplan)
    run_pipeline(ctx, mod, "convert-pplan-to-cplan,cplan-verify")
    assert not any(o.name.startswith("pplan.") for o in mod.ops)
    with pytest.raises(PassFailedException, match="commit gate needs the portable source"):
        run_pipeline(ctx, mod, "cplan-verify{require_source=true}")


def test_missing_binding_is_a_diagnostic(stories_pplan):
    """AB-G-4: without a DeploymentBinding the conversion fails naming it."""
    from xdsl.utils.exceptions import PassFailedException

    ctx = _ctx()
    mod = parse_module(ctx, stories_pplan)
    for o in list(mod.ops):
        if o.name == "pplan.deployment_binding":
            o.detach()
            o.erase()
    with pytest.raises(PassFailedException, match="missing binding: DeploymentBinding"):
        run_pipeline(ctx, mod, "convert-pplan-to-cplan")


def test_capacity_rejection_through_the_pass(stories_pplan):
    """AB-S-6: a deployment too small for the stage's weights is rejected naming device, peak, contributors."""
    import re

    from xdsl.utils.exceptions import PassFailedException

    small = re.sub(r"reserved_bytes = \d+", "reserved_bytes = 0",
                   stories_pplan.replace("memory_bytes = 1073741824", "memory_bytes = 100000"))
    assert small != stories_pplan
    ctx = _ctx()
    mod = parse_module(ctx, small)
    with pytest.raises(PassFailedException) as ei:
        run_pipeline(ctx, mod, "convert-pplan-to-cplan")
    msg = str(ei.value)
    assert "error[capacity_exceeded]" in msg and "device 'n0'" in msg and "peak" in msg and "weight" in msg


def test_deterministic_replay_across_processes(stories_pplan, tmp_path):
    """Deterministic replay: same input gives byte-identical cplan text twice and across processes."""
    src = tmp_path / "pp.mlir"
    src.write_text(stories_pplan)
    opt = str(REPO / ".venv" / "bin" / "pipeplan-opt")
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([opt, str(src), "-p", "convert-pplan-to-cplan{binder=list-schedule}"], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] and "cplan.queue_schedule" in outs[0]
    ctx = _ctx()
    a = bind(problem_from_module(parse_module(ctx, stories_pplan)), "list-schedule").plan
    b = bind(problem_from_module(parse_module(ctx, stories_pplan)), "list-schedule").plan
    assert op_key(a) == op_key(b)


def test_stories_decode_peak_within_10pct_of_bound(stories_pplan):
    """Memory planner peak per device vs the max-live-bytes lower bound on stories260K (<= 10% over)."""
    r = bind(problem_from_module(parse_module(_ctx(), stories_pplan)), "list-schedule")
    dev = [x for x in r.reports if x.space == "device"]
    assert len(dev) == 2
    for x in dev:
        assert x.lower_bound <= x.peak <= 1.10 * x.lower_bound, x
        assert x.transient_lower_bound <= x.transient_peak <= 1.10 * x.transient_lower_bound + 64 * 8, x


@pytest.mark.slow
def test_70b_80_blocks_8_stages_peak_within_10pct(tmp_path):
    """70B-shaped facts, 80 blocks, 8 stages: list scheduling + memory planning verify and keep each device's
    peak within 10% of its lower bound. The < 3 s target is measured by bench/plan_scaling.py (a timed
    assertion here failed CI at 3.009 s on a loaded 2-core runner)."""
    from pipeplan.frontend.facts_toml import loads_facts_toml

    text = (REPO / "examples" / "llama3-70b.toml").read_text().replace('"Q4_K"', '"Q4_0"')
    pool = _pool(tmp_path / "pool.toml", 8, 80 << 30)
    mod = plan_run(loads_facts_toml(text), RuntimeConfig(max_seq_len=1024), pool, 8)
    run_pipeline(_ctx(), mod, PIPE.format(pool=tmp_path / "pool.toml"))
    prob = problem_from_module(mod)
    t = time.perf_counter()
    r = bind(prob, "list-schedule")
    elapsed = time.perf_counter() - t
    print(f"70B 80 blocks: {len(prob.tasks)} tasks, schedule+memplan {elapsed:.3f} s", file=sys.stderr)
    assert verify_plan(r.plan) == []
    for x in r.reports:
        if x.space == "device":
            assert x.lower_bound <= x.peak <= 1.10 * x.lower_bound, x
            assert x.transient_peak <= 1.10 * x.transient_lower_bound + 64 * 8, x


# --------------------------------------------------------------------------- list-schedule on 1..5 stages
@pytest.fixture(scope="session")
def stories_facts(stories_path):
    return read_model_facts(stories_path)


def _costed(facts, stages: int, prompt_len: int):
    """stories260K planned on ``stages`` nodes (peaks stated: the plan carries them) and costed."""
    pool = NodePool(tuple(NodeSpec(f"n{i}", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(stages)))
    mod = plan_run(facts, RuntimeConfig(max_seq_len=64), pool, stages)
    run_pipeline(_ctx(), mod, f"convert-runplan-to-pplan{{prompt_len={prompt_len}}},pplan-legalize{{target=virtual-queue}},"
                              "pplan-select-implementations,pplan-resolve-costs{evidence=roofline}")
    return mod


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("prompt_len", [1, 8])
def test_list_schedule_passes_cplan_verify_on_stories(stories_facts, stages, prompt_len):
    """AB-S-1..7, AB-R-5, AB-R-6: convert-pplan-to-cplan{binder=list-schedule} then cplan-verify (with
    the commit gate) accepts stories260K over 1..5 stages — no AB-S-5 unsafe_reuse — and the memory
    plan reuses transient bytes (peak below the sum of all buffers)."""
    mod = _costed(stories_facts, stages, prompt_len)
    problem = problem_from_module(mod)
    run_pipeline(_ctx(), mod, "convert-pplan-to-cplan{binder=list-schedule keep_source=true},"
                              "cplan-verify{require_source=true}")
    (plan_op,) = [o for o in mod.ops if isinstance(o, PlanOp)]
    assert verify_plan(plan_op, problem) == []
    allocs = plan_op.ops_of(AllocOp)
    for dev in {a.device.data for a in allocs}:
        mine = [a for a in allocs if a.device.data == dev and a.space.data == "device"]
        assert max(a.offset.value.data + a.size.value.data for a in mine) < sum(a.size.value.data for a in mine)


@pytest.mark.parametrize("binder", ["list-schedule", "reference-queue"])
def test_steps_never_interleave_on_a_queue(stories_facts, binder):
    """AB-S-2 with the explicit token loop (prefill token-out send -> decode token-in recv): on every
    queue all prefill commands come before all decode commands, the order a token loop runs."""
    mod = _costed(stories_facts, 3, 8)
    plan = bind(problem_from_module(mod), binder).plan
    assert isinstance(plan.extension, QueueScheduleOp)
    for q in plan.ops_of(QueueOp):
        steps = [c.data.split(".")[1] for c in q.order]
        assert steps == sorted(steps, key=("prefill", "decode").index), (q.device, q.engine)
        assert "decode" in steps and "prefill" in steps


def test_list_schedule_package_on_three_stages(stories_path, tmp_path, expected_cases):
    """AB-M-2, AB-M-3 with the production binder: a 3-stage stories260K package compiled with
    list-schedule (commit gate inside) verifies with verify_package and replays to EXPECTED's tokens."""
    from pipeplan.compiler.replay_package import compile_plan_to_package, print_module, verify_package
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.runtime.replay import replay_package

    _pool(tmp_path / "pool.toml", 3, 1 << 30)
    plan = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), load_pool_toml(tmp_path / "pool.toml"), 3)
    (tmp_path / "plan.mlir").write_text(print_module(plan))
    pkg = compile_plan_to_package(tmp_path / "plan.mlir", "virtual-queue", None, tmp_path / "pkg",
                                  pool=tmp_path / "pool.toml", binder="list-schedule", decode_tokens=4)
    m = verify_package(pkg)
    assert m["deployment"]["identity"] == "deployment:n0,n1,n2"
    assert m["revisions"]["binder"] == "list-schedule"
    case = expected_cases[0]
    r = replay_package(pkg, stories_path, case["prompt"], len(case["greedy_ids"]))
    assert r.token_ids == case["greedy_ids"]


def test_plan_checks_follow_in_place_changes(stories_pplan, monkeypatch):
    """AB-S-1: the invariant checks of a verified, unchanged plan are what its verifier found (not run again),
    and an in-place change after that is checked again (the same violations as a fresh parse of the changed
    plan's text)."""
    from pipeplan.dialects import cplan_invariants
    from pipeplan.dialects.cplan_invariants import check_invariants, check_ir_invariants
    from pipeplan.dialects.diagnostics import parse_located
    from xdsl.dialects.builtin import StringAttr

    ctx = _ctx()
    mod = parse_module(ctx, stories_pplan)
    run_pipeline(ctx, mod, "convert-pplan-to-cplan")
    plan = next(o for o in mod.ops if isinstance(o, PlanOp))
    core = cplan_invariants._core

    def boom(cx):
        raise AssertionError("an unchanged, verified plan was checked again")

    monkeypatch.setattr(cplan_invariants, "_core", boom)
    assert check_ir_invariants(plan) == [] and check_invariants(plan) == []
    monkeypatch.setattr(cplan_invariants, "_core", core)
    cmd = next(o for o in plan.walk() if isinstance(o, CommandOp))
    cmd.properties["impl"] = StringAttr("generic")
    after = check_invariants(plan)
    assert [v.code for v in after] == ["no_implementation"] and cmd.id.data in after[0].message
    fresh = next(o for o in parse_located(ctx, _text(mod)).ops if isinstance(o, PlanOp))
    assert after == check_invariants(fresh)
