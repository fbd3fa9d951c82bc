"""Observers at the pass boundaries (issue 13 item 7; seeds/003 "Checkpoints and diagnostics"): each observer
on a good stories260K module (ok) and on a broken copy (a finding naming the op); the registry and the
PassPipeline hook. AB-D-1 (findings keep the lineage path), AB-D-2 (trace conservation of the projection)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pipeplan.api import (
    Observation,
    Observer,
    ObserverRegistry,
    default_registry,
    observing_callback,
    register_pipeplan,
    run_pipeline,
)
from pipeplan.dialects import cplan, pplan, vmachine
from pipeplan.dialects import triton_machine as tmachine
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.transforms.observers import (
    BOUNDARIES,
    PASS_BOUNDARIES,
    AbiLegality,
    CapabilityCoverage,
    CommandCorrelation,
    CostCoverage,
    ResourceConflicts,
    SimulatedTraceConservation,
    TraceConservation,
)
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
    i32,
    i64,
)

from tests.conftest import REPO, STORIES

_NODE = ('[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
         'link_bandwidth_bytes_per_s = 1.0e9\n')
_COST = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target={target}}},"
         "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}}")


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> dict[str, ModuleOp]:
    """stories260K on one node (max_seq_len 64, prompt 4): the module after each boundary, virtual-queue
    (legalized, costed, cplan, timed, vmachine) and cuda-triton (tmachine)."""
    d: Path = tmp_path_factory.mktemp("observe")
    (d / "pool.toml").write_text(_NODE)
    pool = NodePool((NodeSpec("n0", 1 << 30, 1.0e11, 1.0e12, 1.0e9),))
    facts = read_model_facts(STORIES)
    ctx = register_pipeplan(Context())
    out: dict[str, ModuleOp] = {}
    for target in ("virtual-queue", "cuda-triton"):
        m = plan_run(facts, RuntimeConfig(max_seq_len=64), pool, 1)
        legalize, cost = _COST.format(pool=d / "pool.toml", target=target).split(",pplan-select-implementations,")
        run_pipeline(ctx, m, legalize)
        if target == "virtual-queue":
            out["legalized"] = m.clone()
        run_pipeline(ctx, m, "pplan-select-implementations," + cost)
        if target == "virtual-queue":
            out["costed"] = m.clone()
        run_pipeline(ctx, m, "convert-pplan-to-cplan{binder=reference-queue keep_source=true}")
        if target == "virtual-queue":
            out["cplan"] = m.clone()
            run_pipeline(ctx, m, "cplan-project-timing")
            out["timed"] = m.clone()
            run_pipeline(ctx, m, f'convert-cplan-to-vmachine{{model="{STORIES}"}}')
            out["vmachine"] = m
        else:
            run_pipeline(ctx, m, "convert-cplan-to-triton")
            out["tmachine"] = m
    return out


def _ops(module: ModuleOp, cls: type) -> list:
    return [o for o in module.walk() if isinstance(o, cls)]


def _ok(obs: Observation) -> None:
    assert obs.ok, obs.line()
    assert obs.findings == []


# --------------------------------------------------------------------------- capability coverage
def test_capability_coverage_counts_legal_tasks(stages):
    """AB-L-1 / AB-I-2: every task has a legal candidate on the target (figures per target)."""
    obs = CapabilityCoverage().observe(stages["legalized"])
    _ok(obs)
    n = len(_ops(stages["legalized"], pplan.TaskOp))
    assert obs.figures["targets"]["virtual-queue@1"]["legal_tasks"] == n > 100
    assert obs.line().startswith(f"observe[legalization] capability-coverage: ok, {n}/{n} tasks legal on virtual-queue@1")


def test_capability_coverage_names_the_task_without_candidate(stages):
    """AB-D-1: the finding names the task and its lineage (model op -> stage -> task)."""
    m = stages["legalized"].clone()
    t = _ops(m, pplan.TaskOp)[5]
    task = t.task_id
    del t.attributes[pplan.CANDIDATES_ATTR]
    obs = CapabilityCoverage().observe(m)
    assert not obs.ok
    assert len(obs.findings) == 1 and f"task @{task} has no legal candidate" in obs.findings[0]
    assert "model op " in obs.findings[0]
    assert "FAIL" in obs.line() and f"@{task}" in obs.line()


# --------------------------------------------------------------------------- cost coverage
def test_cost_coverage_reports_evidence_kind(stages):
    """AB-C-1, AB-C-3: every task and candidate has a cost; the evidence kind is counted."""
    obs = CostCoverage().observe(stages["costed"])
    _ok(obs)
    n = obs.figures["tasks"]
    assert obs.figures["costed_tasks"] == n and obs.figures["evidence"] == {"roofline/direct": n}
    assert "(evidence: roofline/direct" in obs.line()


def test_cost_coverage_names_the_uncosted_task_and_candidate(stages):
    m = stages["costed"].clone()
    t = _ops(m, pplan.TaskOp)[3]
    task, cand = t.task_id, pplan.candidate_id(t.task_id, t.costs[0].rule)
    del t.attributes[pplan.COSTS_ATTR]
    obs = CostCoverage().observe(m)
    assert not obs.ok and obs.figures["costed_tasks"] == obs.figures["tasks"] - 1
    assert any(f"task @{task} has no resolved cost" in f for f in obs.findings)
    assert any(f"candidate @{cand}" in f for f in obs.findings)


# --------------------------------------------------------------------------- command correlation
def test_command_correlation_traces_every_command(stages):
    """AB-D-1: every concrete command traces to its portable task via lineage, and back."""
    obs = CommandCorrelation().observe(stages["cplan"])
    _ok(obs)
    assert obs.figures["traced_commands"] == obs.figures["commands"] == obs.figures["tasks"]


def test_command_correlation_names_task_without_command_and_bad_lineage(stages):
    m = stages["cplan"].clone()
    cmds = _ops(m, cplan.CommandOp)
    lost = cmds[7].task.data
    cmds[7].detach()
    lin = cmds[2].lineage
    cmds[2].properties["lineage"] = cplan.LineageAttr(lin.step, lin.stage, lin.block, "elsewhere")
    obs = CommandCorrelation().observe(m)
    assert not obs.ok
    assert any(f"task @{lost} has no concrete command" in f for f in obs.findings)
    assert any(f"command '{cmds[2].id.data}'" in f and "does not agree with its task" in f for f in obs.findings)


# --------------------------------------------------------------------------- resource conflicts
def test_resource_conflicts_none_on_a_bound_plan(stages):
    """AB-S-5, AB-S-2: no allocation overlaps another while live; no queue conflict."""
    obs = ResourceConflicts().observe(stages["cplan"])
    _ok(obs)
    assert obs.figures["allocations"] > 100 and obs.figures["queues"] >= 2


def test_resource_conflicts_names_overlapping_allocation_and_unqueued_command(stages):
    m = stages["cplan"].clone()
    allocs = _ops(m, cplan.AllocOp)
    w = next(a for a in allocs if a.lifetime.data == "weight")
    t = next(a for a in allocs if a.lifetime.data == "transient" and (a.device.data, a.space.data) ==
             (w.device.data, w.space.data))
    t.properties["offset"] = IntegerAttr(w.offset.value.data, i64)
    q = _ops(m, cplan.QueueOp)[0]
    dropped = q.order.data[0].data
    q.operands = q.operands[1:]
    obs = ResourceConflicts().observe(m)
    assert not obs.ok
    assert obs.figures["alloc_conflicts"] >= 1 and obs.figures["queue_conflicts"] >= 1
    assert any("[AB-S-5]" in f and t.id.data in f and w.id.data in f for f in obs.findings)
    assert any("unscheduled_command" in f and dropped in f for f in obs.findings)


# --------------------------------------------------------------------------- trace conservation
def test_trace_conservation_on_the_projection(stages):
    """AB-T-1, AB-D-2: one interval per command, none negative, per-queue busy time <= makespan."""
    obs = TraceConservation().observe(stages["timed"])
    _ok(obs)
    assert obs.figures["intervals"] == obs.figures["commands"] > 100
    assert max(obs.figures["busy_s"].values()) <= obs.figures["makespan_s"]
    assert TraceConservation("simulation").observe(stages["timed"]).boundary == "simulation"


def test_trace_conservation_names_missing_and_negative_intervals(stages):
    m = stages["timed"].clone()
    cmds = _ops(m, cplan.CommandOp)
    del cmds[4].attributes["timing"]
    t = dict(cmds[9].attributes["timing"].data)
    t["end"] = FloatAttr(-1.0, f64)
    cmds[9].attributes["timing"] = DictionaryAttr(t)
    obs = TraceConservation().observe(m)
    assert not obs.ok and obs.figures["intervals"] == obs.figures["commands"] - 1
    assert any(f"command '{cmds[4].id.data}'" in f and "no interval" in f for f in obs.findings)
    assert any(f"command '{cmds[9].id.data}'" in f and "negative duration" in f for f in obs.findings)


def test_trace_conservation_busy_queue_beyond_makespan(stages):
    m = stages["timed"].clone()
    plan = _ops(m, cplan.PlanOp)[0]
    s = dict(plan.attributes["timing"].data)
    s["makespan"] = FloatAttr(1e-12, f64)
    plan.attributes["timing"] = DictionaryAttr(s)
    obs = TraceConservation().observe(m)
    assert not obs.ok and any("more than the makespan" in f for f in obs.findings)


@pytest.fixture(scope="module")
def simulated(stages) -> ModuleOp:
    """The cplan stage after ``cplan-simulate{prompt_chunks=2 decode_tokens=3}``."""
    m = stages["cplan"].clone()
    run_pipeline(register_pipeplan(Context()), m, "cplan-simulate{prompt_chunks=2 decode_tokens=3}")
    return m


def test_cplan_simulate_writes_the_simulated_run_back(stages, simulated):
    """AB-T-2: the pass's ``simulation`` annotation is the event simulation of the run it names (2 prefill
    chunks, 3 decode tokens): the makespan, node and event counts and the last instance end of
    :func:`~pipeplan.analysis.simulate.simulate` on the same plan; the concrete digest is unchanged."""
    from pipeplan.analysis.simulate import build_model, run_schedule, simulate
    from pipeplan.transforms.cplan_project_timing import concrete_digest, confidences_from_module

    plan = _ops(simulated, cplan.PlanOp)[0]
    ann = plan.attributes["simulation"].data
    model = build_model(plan, confidences_from_module(simulated, plan))
    sim = simulate(model, run_schedule(model, 2, 3))
    assert [x.data for x in ann["schedule"].data] == ["prefill"] * 2 + ["decode"] * 3 == list(sim.schedule)
    assert ann["makespan"].value.data == sim.makespan > 0
    assert ann["nodes"].value.data == len(sim.graph.nodes) == ann["starts"].value.data == ann["ends"].value.data
    assert ann["instance_ends"].data[-1].value.data == sim.makespan
    assert concrete_digest(plan) == concrete_digest(_ops(stages["cplan"], cplan.PlanOp)[0])


def test_simulated_trace_conservation_at_the_simulation_boundary(simulated, stages):
    """AB-D-2: after cplan-simulate (the pass that ends ``simulation``) every instance node started and ended
    once and each queue's busy time is within the makespan; a plan without the annotation is not observed."""
    assert PASS_BOUNDARIES["cplan-simulate"] == "simulation"
    obs = SimulatedTraceConservation().observe(simulated)
    _ok(obs)
    assert obs.boundary == "simulation" and obs.figures["instances"] == 5 and obs.figures["nodes"] > 100
    assert max(obs.figures["busy_s"].values()) <= obs.figures["makespan_s"]
    assert not SimulatedTraceConservation().applies(stages["cplan"])


def test_simulated_trace_conservation_names_broken_runs(simulated):
    m = simulated.clone()
    plan = _ops(m, cplan.PlanOp)[0]
    s = dict(plan.attributes["simulation"].data)
    makespan = s["makespan"].value.data
    s["ends"] = IntegerAttr(s["ends"].value.data - 1, i64)
    s["instance_ends"] = ArrayAttr([FloatAttr(makespan * 2, f64), *s["instance_ends"].data[1:]])
    s["busy"] = DictionaryAttr({"n0/queue.compute": FloatAttr(makespan * 3, f64)})
    plan.attributes["simulation"] = DictionaryAttr(s)
    obs = SimulatedTraceConservation().observe(m)
    assert not obs.ok
    assert any("simulated ends for" in f for f in obs.findings)
    assert any(f.startswith("instance 0 (prefill) ends at") for f in obs.findings)
    assert any("not at the makespan" in f for f in obs.findings)
    assert any("queue n0/queue.compute is busy" in f for f in obs.findings)


# --------------------------------------------------------------------------- ABI legality
def test_abi_legality_vmachine_and_tmachine_ok(stages):
    """AB-M-1: kernel calls match the ABI; reads follow writes or bindings (vmachine and tmachine)."""
    for key in ("vmachine", "tmachine"):
        obs = AbiLegality().observe(stages[key])
        _ok(obs)
        assert obs.figures["instructions"] > 100


def test_abi_legality_vmachine_names_bad_kernel_and_unknown_buffer(stages):
    m = stages["vmachine"].clone()
    k = next(o for o in _ops(m, vmachine.KernelOp) if o.kernel.data == "rms_norm")
    segments = [len(k.reads) - 1, len(k.writes)]  # one read instead of two
    k.operands = k.operands[1:]
    k.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, segments)
    obs = AbiLegality().observe(m)
    assert not obs.ok and any(f"instruction '{k.id.data}'" in f and "takes 2 inputs" in f for f in obs.findings)
    m = stages["vmachine"].clone()
    k = next(o for o in _ops(m, vmachine.KernelOp) if o.kernel.data == "rms_norm")
    nowhere = k.reads[0].owner.clone()  # a buffer op outside the program: not declared there
    nowhere.properties["id"] = StringAttr("alloc.nowhere")
    k.operands = [nowhere.results[0], *k.operands[1:]]
    obs = AbiLegality().observe(m)
    assert not obs.ok and any(f"instruction '{k.id.data}'" in f and "alloc.nowhere" in f for f in obs.findings)


def test_abi_legality_tmachine_names_arg_count_and_unwritten_read(stages):
    m = stages["tmachine"].clone()
    launches = _ops(m, tmachine.LaunchOp)
    a, b = launches[0], launches[3]
    n_args, rest = len(a.args), a.operands[len(a.args):]
    a.operands = [*a.operands[:n_args - 1], *rest]  # one buffer argument fewer
    a.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [n_args - 1, len(a.waits), int(a.signal is not None)])
    late = launches[-1].args[-1]  # written by the last launch, so after b in stream order
    b.operands = [late, *b.operands[1:]]
    obs = AbiLegality().observe(m)
    assert not obs.ok
    assert any(f"instruction '{a.id.data}'" in f and "buffer args" in f for f in obs.findings)
    assert any(f"instruction '{b.id.data}' reads buffer '{tmachine.buffer_id(late)}'" in f
               and f.endswith(f"-> concrete command {b.cmd.data})") for f in obs.findings)


def test_abi_legality_tmachine_names_instruction_of_unknown_task(stages):
    """AB-D-1: an instruction's ``task`` (the typed provenance, not its lineage text) links it to its portable
    task; one the portable plan does not hold is a finding naming the instruction and the task (the buffers it
    writes then count as unwritten for the instructions after it)."""
    m = stages["tmachine"].clone()
    a = _ops(m, tmachine.LaunchOp)[2]
    a.properties["task"] = StringAttr("decode.s9.nowhere")
    obs = AbiLegality().observe(m)
    assert not obs.ok and obs.findings[0] == (f"instruction '{a.id.data}' lowers task @decode.s9.nowhere, which "
                                              "the portable plan does not hold")


# --------------------------------------------------------------------------- registry and hook
class _Count(Observer):
    name = "count-tasks"
    boundary = "legalization"

    def observe(self, module: ModuleOp) -> Observation:
        n = len(_ops(module, pplan.TaskOp))
        return self.result(n > 0, {"tasks": n}, [], f"{n} tasks")


class _Raises(Observer):
    name = "raises"
    boundary = "construction"

    def observe(self, module: ModuleOp) -> Observation:
        raise RuntimeError("broken observer")


def test_hook_runs_the_observers_of_the_boundary_a_pass_ends(stages):
    """An embedder's observer (pipeplan.api) runs after pplan-legalize; one that raises is a failed
    observation, not a crash; passes not in PASS_BOUNDARIES end no boundary."""
    reg = ObserverRegistry([_Count(), _Raises()])
    seen: list[Observation] = []
    cb = observing_callback(reg, seen.append)

    class _P:
        def __init__(self, name: str):
            self.name = name

    m = stages["cplan"]
    cb(None, m, _P("pplan-legalize"))  # type: ignore[arg-type]
    cb(_P("pplan-select-implementations"), m, None)  # type: ignore[arg-type]
    assert seen == []
    cb(_P("pplan-legalize"), m, None)  # type: ignore[arg-type]
    cb(_P("convert-pplan-to-cplan"), m, None)  # type: ignore[arg-type]
    assert [(o.name, o.boundary, o.after, o.ok) for o in seen] == [
        ("count-tasks", "legalization", "pplan-legalize", True),
        ("raises", "construction", "convert-pplan-to-cplan", False)]
    assert "observer raised RuntimeError: broken observer" in seen[1].findings[0]
    assert seen[0].to_json()["figures"] == {"tasks": seen[0].figures["tasks"]}


def test_registry_rejects_unknown_boundary_and_duplicates():
    reg = default_registry()
    assert {o.boundary for o in reg.observers()} == set(BOUNDARIES)
    assert set(PASS_BOUNDARIES.values()) <= set(BOUNDARIES)

    class _Bad(_Count):
        boundary = "lunch"

    with pytest.raises(ValueError, match="unknown boundary 'lunch'"):
        reg.register(_Bad())
    with pytest.raises(ValueError, match="already registered"):
        reg.register(CapabilityCoverage())


def test_observers_read_the_ir_only():
    """The observers import only pipeplan.dialects and xdsl (never the runtime or the lowerings)."""
    tree = ast.parse((REPO / "transforms" / "observers.py").read_text())
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ours = {m for m in names if m.startswith("pipeplan")}
    assert ours and all(m.startswith("pipeplan.dialects") for m in ours), ours
