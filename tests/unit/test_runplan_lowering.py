"""``convert-runplan-to-pplan`` is a rewrite-pattern lowering (issue 13 item 4): a placement builds the
``pplan.plan`` skeleton, then the ``LowerStage`` pattern, driven by xDSL's ``PatternRewriteWalker``, lowers
each placed ``runplan.stage`` (one per step and stage) to its ``pplan.stage`` region."""

from __future__ import annotations

import pytest
from pipeplan.api import register_pipeplan
from pipeplan.dialects.pplan import StageOp, StepOp, find_plan
from pipeplan.dialects.runplan import StageOp as RunplanStageOp
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.transforms import convert_runplan_to_pplan as c2p
from xdsl.context import Context
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.utils.exceptions import PassFailedException

from tests.conftest import STORIES

POOL = NodePool(tuple(NodeSpec(f"n{i}", 8 * 10**9, 2.0e10, 1.0e11, 1.0e9) for i in range(3)))


@pytest.fixture(scope="module")
def facts():
    return read_model_facts(STORIES)


def _runplan(facts, stages: int):
    return plan_run(facts, RuntimeConfig(max_seq_len=64), POOL, stages)


@pytest.mark.parametrize("stages", [1, 3])
def test_each_placed_stage_is_lowered_once_by_the_pattern_under_the_walker(facts, stages, monkeypatch):
    """AB-S-1: the walker applies LowerStage to every placed stage (2 steps x stages), in program order;
    the output is the one the pass emits (same tasks, dataflow closed)."""
    walked: list[object] = []
    calls: list[tuple[str, int]] = []
    real_rewrite = PatternRewriteWalker.rewrite_region
    real_match = c2p.LowerStage.match_and_rewrite

    def rewrite_region(self, region):
        walked.append(self.pattern)
        return real_rewrite(self, region)

    def match(self, op, rewriter):
        if isinstance(op, RunplanStageOp) and isinstance(op.parent_op(), StepOp):
            calls.append((str(op.parent_op().step.data), op.index.value.data))
        return real_match(self, op, rewriter)

    monkeypatch.setattr(PatternRewriteWalker, "rewrite_region", rewrite_region)
    monkeypatch.setattr(c2p.LowerStage, "match_and_rewrite", match)
    module = _runplan(facts, stages)
    c2p.ConvertRunplanToPplanPass(prompt_len=4).apply(register_pipeplan(Context()), module)
    assert len(walked) == 1 and isinstance(walked[0], c2p.LowerStage)
    assert calls == [(st, s) for st in ("prefill", "decode") for s in range(stages)]
    plan = find_plan(module)
    assert [[so.index.value.data for so in sp.stages()] for sp in plan.steps()] == [list(range(stages))] * 2
    assert not any(o.name.startswith("runplan.") for o in module.walk())
    module.verify()


def test_a_failing_pattern_fails_the_pass(facts, monkeypatch):
    """The per-stage lowering is the pattern's: when LowerStage raises, the pass raises that error."""

    def boom(self, op, step, rewriter):
        raise PassFailedException(f"convert-runplan-to-pplan: no lowering of stage {op.index.value.data}")

    monkeypatch.setattr(c2p.Lowering, "lower_stage", boom)
    with pytest.raises(PassFailedException, match="no lowering of stage 0"):
        c2p.ConvertRunplanToPplanPass(prompt_len=4).apply(register_pipeplan(Context()), _runplan(facts, 2))


def test_pattern_matches_only_placed_stages(facts):
    """A ``runplan.stage`` outside a ``pplan.step`` (the runplan's own) is left alone by LowerStage."""
    module = _runplan(facts, 2)
    rp = next(o for o in module.ops if o.name == "runplan.plan")
    out, env = c2p.place_stages(rp, prompt_len=4)
    PatternRewriteWalker(c2p.LowerStage(env), apply_recursively=False).rewrite_region(rp.body)
    assert env.lowered == 0 and sum(isinstance(o, RunplanStageOp) for o in rp.body.block.ops) == 2
    PatternRewriteWalker(c2p.LowerStage(env), apply_recursively=False).rewrite_region(out.body)
    assert env.lowered == 4
    assert all(isinstance(o, StageOp) for sp in out.steps() for o in sp.body.block.ops if o is not sp.yield_op)


def test_the_pass_reads_the_runplan_ir_not_a_spec(facts, monkeypatch):
    """The pass reads the runplan ops themselves: with the RunPlanSpec readers disabled it still lowers, to
    the plan ``build_portable_plan`` (the spec entry point) gives."""
    from pipeplan.dialects import runplan as rp_dialect
    from pipeplan.dialects import runplan_build
    from pipeplan.dialects.pplan import portable_digest
    from pipeplan.frontend.planner import plan_run_spec

    spec = plan_run_spec(facts, RuntimeConfig(max_seq_len=64), POOL, 2)
    want = portable_digest(c2p.build_portable_plan(spec, prompt_len=4))

    def no_spec(*_a, **_k):
        raise AssertionError("convert-runplan-to-pplan read a RunPlanSpec")

    module = _runplan(facts, 2)
    monkeypatch.setattr(rp_dialect.PlanOp, "spec", no_spec, raising=False)
    monkeypatch.setattr(runplan_build, "runplan_spec_from_module", no_spec, raising=False)
    c2p.ConvertRunplanToPplanPass(prompt_len=4).apply(register_pipeplan(Context()), module)
    assert portable_digest(find_plan(module)) == want
