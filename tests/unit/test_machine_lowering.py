"""The IR is the model (issue 13 item 4): convert-cplan-to-vmachine and convert-cplan-to-triton read the cplan
ops and take kernel attributes from the ABI's hyper-parameters (``kernel_attrs``), never from a rebuilt runtime
stage program or a value copy of the plan; yet every kernel instruction is the call of the runtime program
with the same kernel, buffers, attributes and block (1:1, per stage step). The checks the lowering keeps fail
with typed errors naming the command and its lineage (AB-D-1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.dialects import cplan
from pipeplan.dialects import vmachine as vm
from pipeplan.dialects.carriers import string
from pipeplan.dialects.cplan import AllocOp, CommandOp, PlanOp, QueueOp
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.models import stage_program
from pipeplan.models.archs import Arch
from pipeplan.models.stage_program import START_POS, build_stage_program
from pipeplan.plan_types import RuntimeConfig
from pipeplan.transforms import cplan_project_timing
from pipeplan.transforms.convert_cplan_to_triton import lower_plan as lower_triton
from pipeplan.transforms.convert_cplan_to_vmachine import (
    ConvertCplanToVmachinePass,
    UnsupportedPlanError,
    abi_from_facts,
    hparams_of,
    lower_plan,
)
from pipeplan.transforms.cplan_project_timing import find_cplan
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from tests.conftest import REPO

HEAD = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target={target}}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},convert-pplan-to-cplan{{{binder}}}")
MAX_SEQ = 64


def _cplan(d: Path, model: Path, stages: int, target: str = "virtual-queue") -> ModuleOp:
    from tests.unit.test_cplan_pipeline import _pool

    pool = _pool(d / "pool.toml", stages, 1 << 30)
    mod = plan_run(read_model_facts(model), RuntimeConfig(max_seq_len=MAX_SEQ), pool, stages)
    binder = "binder=list-schedule" if target == "virtual-queue" else "binder=reference-queue keep_source=true"
    run_pipeline(register_pipeplan(Context()), mod, HEAD.format(pool=d / "pool.toml", target=target, binder=binder))
    return mod


@pytest.fixture(scope="module")
def models(tmp_path_factory, stories_path) -> dict[str, Path]:
    """stories260K and the recorded random gemma3 (6 blocks: 5 sliding-window layers, 1 global)."""
    from tests.ggufgen import write_random_model

    d = tmp_path_factory.mktemp("mlower")
    case = json.loads((REPO / "tests" / "data" / "arch_cases.json").read_text())["cases"]["gemma3"]
    return {"stories": stories_path, "gemma3": write_random_model(d / "gemma3.gguf", **case["args"])}


@pytest.fixture(scope="module")
def cplans(tmp_path_factory, models) -> dict[str, ModuleOp]:
    """The virtual-queue concrete plans: stories260K on 2 and 3 stages, gemma3 on 2."""
    d = tmp_path_factory.mktemp("mlower_plans")
    return {f"{m}{n}": _cplan(d, models[m], n) for m, n in (("stories", 2), ("stories", 3), ("gemma3", 2))}


def _forbid_program_rebuild(monkeypatch) -> None:
    def boom(*a, **k):
        raise AssertionError("a lowering rebuilt the runtime stage program or the plan (from records or a copy)")

    monkeypatch.setattr(stage_program, "build_stage_program", boom)
    monkeypatch.setattr(Arch, "build", boom)
    monkeypatch.setattr(cplan, "build_plan", boom)
    monkeypatch.setattr(cplan_project_timing, "build_model", boom)


def test_vmachine_lowering_is_the_runtime_program_without_building_it(cplans, models, monkeypatch):
    """AB-M-1 / issue 13.4: with build_stage_program, Arch.build and build_plan raising, the pass lowers each
    plan; afterwards (unpatched) every stage step's kernel instructions are exactly the runtime program's calls
    for the stage's layer range (same kernel, input/output buffer names, attrs, block), one instruction each --
    per layer on gemma3 (sliding-window attention and the local rope table on layers 0-4, global on 5)."""
    lowered, outs = {}, {}
    for name, mod in cplans.items():  # the ABI as the module-level input (reading a GGUF checks its program)
        outs[name] = mod.clone()
        outs[name].body.block.add_op(vm.abi_op(abi_from_facts(read_model_facts(models[name[:-1]]), MAX_SEQ)))
    with monkeypatch.context() as m:
        _forbid_program_rebuild(m)
        for name, out in outs.items():
            ConvertCplanToVmachinePass().apply(register_pipeplan(Context()), out)
            (lowered[name],) = [o for o in out.ops if isinstance(o, vm.ProgramOp)]
            assert not [o for o in out.ops if isinstance(o, cplan.PlanOp | vm.AbiOp)]
    for name, prog in lowered.items():
        hp = hparams_of(vm.abi_of(prog))
        names = {o.id.data: o.name_.data for o in prog.body.block.ops if isinstance(o, vm.BufferOp)}
        names[START_POS] = START_POS
        windows = set()
        for st in (o for o in prog.body.block.ops if isinstance(o, vm.StageOp)):
            for step in st.body.block.ops:
                assert isinstance(step, vm.StepOp)
                kernels = [o for o in step.walk() if isinstance(o, vm.KernelOp)]
                first = any(k.kernel.data == "embedding_gather" for k in kernels)
                last = any(o.name == "vmachine.sample" for o in step.walk()) or any(
                    k.kernel.data == "last_row" for k in kernels)
                calls = build_stage_program(hp, st.layer_start.value.data, st.layer_end.value.data, first, last,
                                            MAX_SEQ)
                got = sorted((k.kernel.data, tuple(names[x] for x in vm.strs(k.ins)),
                              tuple(names[x] for x in vm.strs(k.outs)),
                              {a: vm.attr_value(v) for a, v in k.attrs.data.items()}, k.block.value.data)
                             for k in kernels)
                want = sorted((c.kernel, c.inputs, c.outputs, dict(c.attrs), -1 if c.block is None else c.block)
                              for c in calls)
                assert got == want, (name, st.index.value.data, step.step_name)
                windows |= {(g[4], "window" in g[3]) for g in got if g[0] == "attention"}
        if name == "gemma3":
            assert windows == {(b, b != 5) for b in range(6)}


def test_triton_lowering_takes_attrs_from_the_abi(tmp_path, stories_path, monkeypatch):
    """Issue 13.4: convert-cplan-to-triton with the model ABI lowers without rebuilding the runtime program; the
    launches carry the ABI's eps and rope mode."""
    mod = _cplan(tmp_path, stories_path, 1, target="cuda-triton")
    (cp,) = [o for o in mod.ops if isinstance(o, cplan.PlanOp)]
    (pp,) = [o for o in mod.ops if isinstance(o, PPlanOp)]
    abi = abi_from_facts(read_model_facts(stories_path), MAX_SEQ)
    with monkeypatch.context() as m:
        _forbid_program_rebuild(m)
        prog = lower_triton(cp, pp, abi)
    prog.verify()
    eps = {o.scalars.data["eps"].value.data for o in prog.walk() if o.name == "tmachine.launch" and "eps" in o.scalars.data}
    assert eps == {abi["rms_eps"]}


def _lower_broken(mod: ModuleOp, abi, change) -> Exception:
    """Lower a copy of the module's plan after ``change`` edited it in place; the error it fails with."""
    plan = find_cplan(mod).clone()
    change(plan)
    with pytest.raises((vm.MachineVerifyError, UnsupportedPlanError)) as ei:
        lower_plan(plan, abi)
    return ei.value


def _cmd(plan: PlanOp, cid: str) -> CommandOp:
    return next(c for c in plan.ops_of(CommandOp) if c.id.data == cid)


def _with(plan: PlanOp, cid: str, reads: tuple[str, ...] | None = None, **props: str) -> None:
    """Set string properties of command ``cid`` and (``reads``: alloc ids) its read allocations."""
    c = _cmd(plan, cid)
    for k, v in props.items():
        c.properties[k] = string(v)
    if reads is not None:
        allocs = {a.id.data: a.result for a in plan.ops_of(AllocOp)}
        c.set_operands(inputs=[allocs[r] for r in reads])


def _twice(plan: PlanOp, cid: str) -> None:
    """Append a copy of command ``cid`` (id ``<cid>.again``) after the last command, queued right after it."""
    c = _cmd(plan, cid)
    again = c.clone()
    again.properties["id"] = string(cid + ".again")
    plan.body.block.insert_op_after(again, plan.ops_of(CommandOp)[-1])
    for q in plan.ops_of(QueueOp):
        if c.done in q.operands:
            q.operands = [x for v in q.operands for x in ((v, again.done) if v is c.done else (v,))]


def test_lowering_checks_are_typed_errors_with_lineage(cplans, models):
    """AB-D-1: an unknown op, wrong read/write counts, a kernel the model ABI cannot serve (gelu_mul in a llama
    program), the same call twice in a step, a stage on two devices, and a stage whose blocks are not contiguous
    fail the lowering with a typed error (MachineVerifyError with the lineage path, or UnsupportedPlanError code
    unsupported_plan) naming the command (or the stage)."""
    mod = cplans["stories2"]
    abi = abi_from_facts(read_model_facts(models["stories"]), MAX_SEQ)
    plan = find_cplan(mod)
    cmds = plan.ops_of(CommandOp)
    silu = next(c for c in cmds if c.op.data == "silu_mul" and ".s1." in c.id.data)
    norm = next(c for c in cmds if c.op.data == "rms_norm" and ".s1." in c.id.data)
    silu_id, silu_lineage, norm_id = silu.id.data, silu.lineage_text, norm.id.data
    silu_reads, norm_reads = [r.data for r in silu.reads], [r.data for r in norm.reads]
    cases = [
        (lambda p: _with(p, silu_id, op="foo"), vm.MachineVerifyError, "op 'foo' has no virtual-target instruction"),
        (lambda p: _with(p, silu_id, reads=tuple(silu_reads[:1])), vm.MachineVerifyError, "needs 2 reads and 1 writes"),
        (lambda p: _with(p, silu_id, op="gelu_mul"), vm.MachineVerifyError, "not a call the model ABI can serve"),
        (lambda p: _with(p, silu_id, device="elsewhere"), UnsupportedPlanError, "has commands on devices"),
    ]
    for change, kind, msg in cases:
        err = _lower_broken(mod, abi, change)
        assert isinstance(err, kind) and msg in err.one_line(), (msg, err.one_line())
        assert silu_id in err.one_line() and silu_lineage in err.one_line()
    err = _lower_broken(mod, abi, lambda p: _twice(p, norm_id))
    assert isinstance(err, vm.MachineVerifyError) and f"is already lowered by '{norm_id}'" in err.one_line()
    s0_blk0 = next(a.id.data for a in plan.ops_of(AllocOp) if a.source.data == "s0.w.blk.0.attn_norm.weight")
    err = _lower_broken(mod, abi, lambda p: _with(p, norm_id, reads=(norm_reads[0], s0_blk0)))
    assert isinstance(err, UnsupportedPlanError) and err.code == "unsupported_plan"
    assert "stage 1 uses blocks [0, " in err.one_line() and "not a contiguous range" in err.one_line()


def test_buffer_outside_the_plan_is_a_typed_error(cplans, models):
    """AB-D-1: a command reading a value that is not an allocation of its plan fails with UnsupportedPlanError
    naming the command, its lineage and the buffer; the plan given to lower_plan is not consumed."""
    mod = cplans["stories2"].clone()
    abi = abi_from_facts(read_model_facts(models["stories"]), MAX_SEQ)
    plan = find_cplan(mod)
    cmd = next(o for o in plan.body.block.ops if isinstance(o, cplan.CommandOp) and o.op.data == "add")
    stray = cplan.alloc_op(cplan.Alloc("alloc.stray", "decode.s0.stray", "n0", "device", 0, 64, 64, "transient"))
    cmd.operands = [stray.result, *cmd.operands[1:]]
    n_ops = len(list(plan.walk()))
    with pytest.raises(UnsupportedPlanError) as ei:
        lower_plan(plan, abi)
    msg = ei.value.one_line()
    assert cmd.id.data in msg and cmd.lineage_text in msg and "'alloc.stray' is not an allocation of the plan" in msg
    assert len(list(plan.walk())) == n_ops


def test_lowerings_do_not_import_the_program_builder():
    """Issue 13.4: neither lowering module (nor their shared one) imports or names build_stage_program, the
    removed plan value model and its reader (:data:`REMOVED`), the plan builder or its records (names in code,
    not prose)."""
    import ast

    from tests.unit.test_no_value_model import REMOVED

    for f in ("convert_cplan_to_vmachine.py", "convert_cplan_to_triton.py", "machine_lowering.py"):
        tree = ast.parse((REPO / "transforms" / f).read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import) for a in n.names}
        assert not used & {"build_stage_program", *REMOVED, "Command", "build_plan"}, f
