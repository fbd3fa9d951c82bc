"""tmachine SSA dataflow on the real pipeline (issue 13 items 1, 2): the stories260K 2-stage program lowered by
convert-cplan-to-triton threads !tmachine.buffer / !tmachine.token values through every instruction (no
instruction names a buffer or a waited command by string), and the per-command lowering is a RewritePattern."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.dialects import triton_machine as tm
from pipeplan.dialects.cplan import CommandOp, QueueOp
from pipeplan.dialects.cplan import PlanOp as CPlanOp
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import RuntimeConfig
from pipeplan.transforms.convert_cplan_to_triton import LowerCommand, lower_plan, place_commands
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target=cuda-triton}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},"
        "convert-pplan-to-cplan{{binder=reference-queue keep_source=true}}")


@pytest.fixture(scope="module")
def plans(tmp_path_factory, stories_path) -> tuple[ModuleOp, CPlanOp, PPlanOp]:
    """The cuda-triton concrete and portable plans of stories260K on 2 stages (max_seq_len 64), not lowered."""
    from tests.unit.test_cplan_pipeline import _pool

    d: Path = tmp_path_factory.mktemp("tmssa")
    pool = _pool(d / "pool.toml", 2, 1 << 30)
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 2)
    run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=d / "pool.toml"))
    (cp,) = [o for o in mod.ops if isinstance(o, CPlanOp)]
    (pp,) = [o for o in mod.ops if isinstance(o, PPlanOp)]
    return mod, cp, pp


def test_every_instruction_has_ssa_buffers_and_token_waits(plans):
    """AB-M-1 / AB-M-4: buffers and tokens are program-level values before the streams; every launch takes its
    buffer arguments, every view/copy its source and target, as !tmachine.buffer operands of tmachine.buffer ops
    (no string args/src/dst/waits property); every wait is an SSA use of a token signalled by exactly one
    instruction -- the instruction lowering the waited command, in another stream -- and the waits are exactly
    the plan's dependencies on commands of other queues."""
    _, cp, pp = plans
    queue_of = {c.data: (q.device.data, q.engine.data) for q in cp.walk() if isinstance(q, QueueOp) for c in q.order.data}
    deps = {c.id.data: [d.data for d in c.deps.data] for c in cp.walk() if isinstance(c, CommandOp)}
    prog = lower_plan(cp, pp)
    prog.verify()
    top = list(prog.body.block.ops)
    first_stream = next(i for i, o in enumerate(top) if isinstance(o, tm.StreamOp))
    assert all(isinstance(o, tm.BufferOp | tm.TokenOp) for o in top[:first_stream])
    assert all(isinstance(o, tm.StreamOp) for o in top[first_stream:]) and len({o.device.data for o in top[first_stream:]}) == 2
    insts = [o for o in prog.walk() if isinstance(o, tm.INSTRUCTIONS)]
    assert len(insts) == len(deps) > 100 and {type(o) for o in insts} == {tm.LaunchOp, tm.ViewOp, tm.CopyOp}
    n_waits = 0
    for o in insts:
        assert not {"args", "src", "dst", "waits"} & set(o.properties), o.name
        bufs = list(o.args) if isinstance(o, tm.LaunchOp) else [o.source, o.target]
        assert bufs and all(isinstance(v.type, tm.BufferType) and isinstance(v.owner, tm.BufferOp)
                            and v.owner.parent_op() is prog for v in bufs), o.id.data
        assert [tm.buffer_id(v) for v in bufs] == list(o.arg_ids)
        stream = o.parent_op()
        for t in o.waits:
            assert isinstance(t.type, tm.TokenType) and isinstance(t.owner, tm.TokenOp) and t.owner.parent_op() is prog
            signallers = [u.operation for u in t.uses if u.operation.signal is t]  # type: ignore[attr-defined]
            assert len(signallers) == 1 and signallers[0].parent_op() is not stream
            n_waits += 1
        cross = [d for d in deps[o.cmd.data] if queue_of[d] != queue_of[o.cmd.data]]
        assert list(o.wait_cmds) == cross, o.id.data
    assert n_waits > 0
    tokens = [o for o in top if isinstance(o, tm.TokenOp)]
    assert tokens and all(tm.signaller(t.result) is not None and len(list(t.result.uses)) >= 2 for t in tokens)
    assert any(tm.signaller(t.result).parent_op().device.data != w.operation.parent_op().device.data  # type: ignore[union-attr]
               for t in tokens for w in t.result.uses if w.operation is not tm.signaller(t.result))  # stage 0 -> 1


def test_lowering_is_a_rewrite_pattern_applied_per_command(plans):
    """Issue 13 item 2: the per-command lowering is LowerCommand, an xDSL RewritePattern; applied alone to one
    placed cplan.command it replaces exactly that command by its instruction in the same stream position (the
    other placed commands stay), and the walker over the skeleton gives the same program as lower_plan."""
    _, cp, pp = plans
    assert issubclass(LowerCommand, RewritePattern)
    prog, env = place_commands(cp.clone(), pp)
    placed = [o for o in prog.walk() if isinstance(o, CommandOp)]
    assert placed and not [o for o in prog.walk() if isinstance(o, tm.INSTRUCTIONS)]
    cmd = next(o for o in placed if o.op.data == "rms_norm")
    stream, at = cmd.parent_op(), list(cmd.parent_block().ops).index(cmd)
    LowerCommand(env).match_and_rewrite(cmd, PatternRewriter(cmd))
    ins = list(stream.body.block.ops)[at]
    assert isinstance(ins, tm.LaunchOp) and ins.kernel.data == "rmsnorm:_rms_norm_kernel"
    assert ins.cmd.data == cmd.id.data and all(isinstance(v.owner, tm.BufferOp) for v in ins.args)
    assert sum(isinstance(o, CommandOp) for o in prog.walk()) == len(placed) - 1
    PatternRewriteWalker(LowerCommand(env), apply_recursively=False).rewrite_region(prog.body)
    assert not [o for o in prog.walk() if isinstance(o, CommandOp)]
    prog.verify()
    assert str(prog) == str(lower_plan(cp, pp))
