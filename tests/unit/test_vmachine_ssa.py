"""vmachine SSA dataflow on the real pipeline (issue 13 item 1): the stories260K 2-stage program lowered by
convert-cplan-to-vmachine threads !vmachine.buffer / !vmachine.edge / !vmachine.token values through every
instruction; no instruction names a buffer, edge or token by string."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.dialects import vmachine as vm
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.plan_types import RuntimeConfig
from xdsl.context import Context

PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target=virtual-queue}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},"
        "convert-pplan-to-cplan{{binder=list-schedule}},convert-cplan-to-vmachine{{model=\"{model}\"}}")


@pytest.fixture(scope="module")
def program(tmp_path_factory, stories_path) -> vm.ProgramOp:
    """The vmachine program of stories260K on 2 stages (max_seq_len 64)."""
    from tests.unit.test_cplan_pipeline import _pool

    d: Path = tmp_path_factory.mktemp("vmssa")
    pool = _pool(d / "pool.toml", 2, 1 << 30)
    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 2)
    run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=d / "pool.toml", model=stories_path))
    (prog,) = [o for o in mod.ops if isinstance(o, vm.ProgramOp)]
    return prog


def test_every_instruction_has_ssa_dataflow(program):
    """AB-M-1: buffers and edges are program-level values; every kernel takes the buffers it reads and writes
    (at least one of each), recv/send/sample take their buffer and
    edge values, signal/wait take a token defined in their own step; no instruction carries a string buffer,
    edge or token property; each token is one signal's, shared with its waits."""
    top = list(program.body.block.ops)
    stages = [o for o in top if isinstance(o, vm.StageOp)]
    assert len(stages) == 2
    insts = [o for o in program.walk() if isinstance(o, vm.INSTRUCTIONS)]
    assert len(insts) > 100
    kinds = {type(o) for o in insts}
    assert {vm.KernelOp, vm.RecvOp, vm.SendOp, vm.SampleOp} <= kinds
    for o in insts:
        assert o.operands, f"{o.name} {o.id.data} has no operands"
        assert not {"ins", "outs", "src", "dst", "edge", "token", "buffer"} & set(o.properties), o.name
        for v in o.operands:
            owner = v.owner
            assert isinstance(owner, vm.BufferOp | vm.EdgeOp | vm.TokenOp), (o.id.data, owner)
            if isinstance(owner, vm.BufferOp | vm.EdgeOp):
                assert owner.parent_op() is program  # dominates every stage
            else:  # the instruction's step, or the program for a signal/wait pair across stages
                assert owner.parent_op() in (o.parent_op().parent_op(), program)
        if isinstance(o, vm.KernelOp):
            assert o.reads and o.writes and all(isinstance(v.type, vm.BufferType) for v in o.operands)
        elif isinstance(o, vm.RecvOp):
            assert isinstance(o.channel.type, vm.EdgeType) and o.edge.data and o.dst.data
        elif isinstance(o, vm.SendOp):
            assert isinstance(o.channel.type, vm.EdgeType) and o.edge.data and o.src.data
        elif isinstance(o, vm.SignalOp | vm.WaitOp):
            assert isinstance(o.event.type, vm.TokenType) and o.token.data.startswith("sync.")
    tokens = [o for o in program.walk() if isinstance(o, vm.TokenOp)]
    assert tokens and len({t.id.data for t in tokens}) == len(tokens)
    for t in tokens:  # one signal and its waits share the token value
        users = [u.operation for u in t.result.uses]
        assert sum(isinstance(u, vm.SignalOp) for u in users) == 1 and any(isinstance(u, vm.WaitOp) for u in users)
    assert any(isinstance(t.parent_op(), vm.ProgramOp) for t in tokens)  # stage 0 -> stage 1 syncs
    edges = [o for o in top if isinstance(o, vm.EdgeOp)]
    assert edges and all(isinstance(e.allocation.owner, vm.BufferOp) for e in edges)
    # the string accessors the runtime reads are derived from the operands
    k = next(o for o in insts if isinstance(o, vm.KernelOp) and o.start_pos is not None)
    assert vm.strs(k.ins)[-1] == vm.START_POS and vm.strs(k.ins)[0] == vm.buffer_id(k.reads[0])
    kv = next(o for o in insts if isinstance(o, vm.KernelOp) and o.kernel.data == "kv_cache_write")
    assert not vm.strs(kv.outs) and len(vm.strs(kv.ins)) == 5  # in-place: reads, writes, start_pos
