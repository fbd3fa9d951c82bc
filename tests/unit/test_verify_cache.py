"""The verification cache (:func:`pipeplan.dialects.diagnostics.verify_cached`): a module verified after every
pass re-runs only the verifiers of what changed, and any change an op's verifier reads -- its properties, its
operands, its parent op's properties, its nested ops -- makes it verify again (RP-LA-3, RP-LA-4, RP-AR-1, RP-EA-2)."""

from __future__ import annotations

import pytest
from pipeplan.dialects import runplan
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.utils.exceptions import VerifyException


@pytest.fixture
def module(stories_path):
    pool = NodePool(tuple(NodeSpec(f"n{i}", 1 << 30, 1.0e11, 1.0e12, 1.0e9) for i in range(2)))
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=16), pool, 2)
    mod.verify()
    return mod


def _ops(mod, cls):
    return [o for o in mod.walk() if isinstance(o, cls)]


@pytest.fixture
def stage_verifies(monkeypatch) -> list[runplan.StageOp]:
    """The ``runplan.stage`` ops whose ``verify_`` ran, in order."""
    ran: list[runplan.StageOp] = []
    inner = runplan.StageOp.verify_

    def counting(self):
        ran.append(self)
        inner(self)

    monkeypatch.setattr(runplan.StageOp, "verify_", counting)
    return ran


def test_unchanged_module_runs_no_verifier(module, stage_verifies):
    module.verify()
    assert stage_verifies == []


def test_changed_op_alone_verifies_again(module, stage_verifies):
    s0, s1 = _ops(module, runplan.StageOp)
    s1.properties["node_id"] = s1.properties["node_id"]  # same value: still cached
    module.verify()
    assert stage_verifies == []
    s1.properties["layer_end"] = IntegerAttr(s1.layer_end.value.data, i64)  # equal, new object
    module.verify()
    assert stage_verifies == []
    s1.properties["node_id"] = StringAttr("n9")
    with pytest.raises(VerifyException, match=r"RP-AR-1"):  # the plan's check of the stage's node
        module.verify()
    assert stage_verifies == [s1]


def test_in_place_property_change_is_rejected(module):
    s0 = _ops(module, runplan.StageOp)[0]
    s0.properties["layer_end"] = s0.properties["layer_start"]
    with pytest.raises(VerifyException, match=r"RP-LA-4"):
        module.verify()


def test_parent_property_change_reverifies_children(module):
    """A stage's range check reads its plan's block count; shrinking the plan's model re-checks the stages."""
    plan = _ops(module, runplan.PlanOp)[0]
    last = max(_ops(module, runplan.StageOp), key=lambda s: s.layer_end.value.data)
    model = plan.model
    names = [n for n, _ in type(model).get_irdl_definition().parameters]
    params = list(model.parameters)
    n = last.layer_end.value.data - 1
    params[names.index("block_count")] = IntegerAttr(n, i64)
    params[names.index("block_bytes")] = DenseArrayBase.from_list(i64, model.block_bytes.get_values()[:n])
    plan.properties["model"] = type(model).new(params)
    with pytest.raises(VerifyException, match=r"RP-LA-3"):
        module.verify()


def test_replaced_operand_is_rejected(module):
    edge = _ops(module, runplan.EdgeOp)[0]
    edge.operands = [edge.operands[1], edge.operands[1]]
    with pytest.raises(VerifyException, match=r"RP-EA-2"):
        module.verify()


def test_removed_op_reverifies_its_container(module):
    """A plan without one of its stages fails the plan's own checks again after a passing verify."""
    plan = _ops(module, runplan.PlanOp)[0]
    stage = _ops(module, runplan.StageOp)[-1]
    for use in list(stage.results[0].uses):
        use.operation.detach()
        use.operation.erase(safe_erase=False)
    stage.detach()
    stage.erase(safe_erase=False)
    with pytest.raises(VerifyException):
        plan.verify()


def test_portable_digest_follows_in_place_changes(module, tmp_path):
    """AB-G-2: the digest's per-op text is cached on the op, yet an in-place property change changes the
    digest, and the digest equals that of a fresh copy of the plan (nothing cached)."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.dialects import pplan
    from xdsl.context import Context

    (tmp_path / "pool.toml").write_text("".join(
        f'[[nodes]]\nid = "n{i}"\nmemory_bytes = {1 << 30}\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
        f'link_bandwidth_bytes_per_s = 1.0e9\n' for i in range(2)))
    run_pipeline(register_pipeplan(Context()), module, f'convert-runplan-to-pplan{{pool="{tmp_path / "pool.toml"}"}}')
    plan = pplan.find_plan(module)
    before = pplan.portable_digest(plan)
    assert pplan.portable_digest(plan) == before == pplan.portable_digest(plan.clone())
    task = next(o for o in plan.walk() if isinstance(o, pplan.TaskOp))
    task.properties["block"] = IntegerAttr(task.properties["block"].value.data + 1, i64)
    after = pplan.portable_digest(plan)
    assert after != before
    assert after == pplan.portable_digest(plan.clone())


@pytest.fixture
def pplan_module(module, tmp_path):
    from pipeplan.api import register_pipeplan, run_pipeline
    from xdsl.context import Context

    (tmp_path / "pool.toml").write_text("".join(
        f'[[nodes]]\nid = "n{i}"\nmemory_bytes = {1 << 30}\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
        f'link_bandwidth_bytes_per_s = 1.0e9\n' for i in range(2)))
    run_pipeline(register_pipeplan(Context()), module,
                 f'convert-runplan-to-pplan{{pool="{tmp_path / "pool.toml"}"}},pplan-legalize{{target=virtual-queue}}')
    module.verify()
    return module


def test_attribute_change_reruns_only_the_attribute_checks(pplan_module, monkeypatch):
    """AB-I-1: a task whose candidates alone changed re-runs its candidate checks, not its structural
    verifier nor its containers' (they read no task's discardable attributes); a bad candidate list is
    still rejected, naming the task."""
    from pipeplan.dialects import pplan
    from xdsl.dialects.builtin import ArrayAttr

    ran: list[str] = []
    for cls in (pplan.TaskOp, pplan.StageOp, pplan.PlanOp):
        inner = cls.verify_
        monkeypatch.setattr(cls, "verify_", lambda self, inner=inner: (ran.append(self.name), inner(self)))
    task = next(o for o in pplan_module.walk() if isinstance(o, pplan.TaskOp))
    (cand,) = task.candidates[:1]
    task.set_candidates([cand])
    pplan_module.verify()
    assert ran == []
    task.attributes[pplan.CANDIDATES_ATTR] = ArrayAttr((cand, cand))
    with pytest.raises(VerifyException, match=r"AB-I-1.*two candidates share rule") as e:
        pplan_module.verify()
    assert e.value.op is task
    task.set_candidates([cand])
    pplan_module.verify()
    task.attributes["pplan.costs"] = StringAttr("x")
    with pytest.raises(VerifyException, match=r"AB-C-1"):
        pplan_module.verify()
    del task.attributes["pplan.costs"]
    pplan_module.verify()
    task.properties["flops"] = IntegerAttr(-1, i64)  # a property change: the whole task verifies again
    ran.clear()
    with pytest.raises(VerifyException, match=r"AB-R-6"):
        pplan_module.verify()
    assert ran == ["pplan.task"]


def test_module_verifier_reruns_only_after_a_change(module, monkeypatch):
    """``pipeplan-opt``'s verify between passes (verify_module): the module's own verifier (IsolatedFromAbove
    walks every operand) is skipped while nothing in it changed, and a changed stage still fails (RP-AR-1)."""
    from pipeplan.dialects.diagnostics import verify_module
    from xdsl.dialects.builtin import ModuleOp

    ran: list[ModuleOp] = []
    inner = ModuleOp.verify_
    monkeypatch.setattr(ModuleOp, "verify_", lambda self: (ran.append(self), inner(self))[1])
    verify_module(module)
    verify_module(module)
    assert len(ran) == 1
    s1 = _ops(module, runplan.StageOp)[1]
    s1.properties["node_id"] = StringAttr("n9")
    with pytest.raises(VerifyException, match=r"RP-AR-1"):
        verify_module(module)


def test_portable_digest_follows_operand_result_and_key_changes(pplan_module):
    """AB-G-2: the per-op texts kept on the ops never hide a change: replacing an operand, retyping a
    result, renaming a property (same value object) or replacing a value by an equal new object gives the
    digest of a fresh copy of the plan (nothing kept); an unchanged plan keeps its digest."""
    from pipeplan.dialects import pplan

    plan = pplan.find_plan(pplan_module)
    before = pplan.portable_digest(plan)
    assert pplan.portable_digest(plan) == before == pplan.portable_digest(plan.clone())
    tasks = [o for o in plan.walk() if isinstance(o, pplan.TaskOp) and o.ins]
    t = next(x for x in tasks if any(y.ins and y.ins[0] is not x.ins[0] and y.ins[0].type == x.ins[0].type
                                     for y in tasks))
    other = next(y.ins[0] for y in tasks if y.ins and y.ins[0] is not t.ins[0] and y.ins[0].type == t.ins[0].type)
    saved = t.operands[0]
    t.operands = [other, *t.operands[1:]]
    changed = pplan.portable_digest(plan)
    assert changed != before and changed == pplan.portable_digest(plan.clone())
    t.operands = [saved, *t.operands[1:]]
    assert pplan.portable_digest(plan) == before
    w = next(o for o in plan.walk() if isinstance(o, pplan.WeightOp))
    r = w.results[0]
    old_type = r.type
    r._type = pplan.BufferType(old_type.shape, "f16" if old_type.dtype != "f16" else "f32", old_type.lifetime,
                               old_type.alignment)
    changed = pplan.portable_digest(plan)
    assert changed != before and changed == pplan.portable_digest(plan.clone())
    r._type = old_type
    assert pplan.portable_digest(plan) == before
    name = next(iter(t.properties))
    props = dict(t.properties)
    t.properties.clear()
    t.properties.update({("z" + k if k == name else k): v for k, v in props.items()})
    changed = pplan.portable_digest(plan)
    assert changed != before and changed == pplan.portable_digest(plan.clone())
    t.properties.clear()
    t.properties.update(props)
    assert pplan.portable_digest(plan) == before
    t.properties["block"] = IntegerAttr(t.properties["block"].value.data, i64)  # equal, new object
    assert pplan.portable_digest(plan) == before
