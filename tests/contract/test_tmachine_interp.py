"""Issue 13 item 5 (cuda): the lowered ``tmachine`` program is what runs -- the interpreter
(:mod:`pipeplan.runtime.tmachine_interp`) launches the program's Triton kernels (Triton's CPU interpreter
here) with the lowered grids, meta-parameters and arguments, step by step.

stories260K is planned on 1 and 3 stages for ``cuda-triton`` (prefill compiled for 4 rows, decode 1 row;
launch configurations for the CPU interpreter: ``convert-cplan-to-triton{interpret=true}``) and lowered
once per module; a prompt of 5 ids runs as one 4-row prefill chunk and one decode step, then decode steps.
The interpreter is slow (~0.3-0.9 s per step on a quiet machine), so few tokens are generated.
"""

from __future__ import annotations

import pytest
import torch
from pipeplan.dialects.triton_machine import LaunchOp, ProgramOp
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.runtime.kernels import triton as TK
from pipeplan.runtime.loader import stage_slices
from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program
from pipeplan.runtime.tmachine_interp import (
    InstructionEvent,
    TMachineError,
    TMachineInterpreter,
    instructions,
    step_of,
)
from xdsl.dialects.builtin import StringAttr

from tests.executor_chain import greedy_generate

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAX_SEQ = 64
PROMPT_LEN = 4
N_TOKENS = 4
LAYOUTS = {1: ((0, 5),), 3: ((0, 2), (2, 4), (4, 5))}
PIPE = ('convert-runplan-to-pplan{{pool="{pool}" prompt_len={p}}},pplan-legalize{{target=cuda-triton}},'
        'pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},'
        'convert-pplan-to-cplan{{binder=reference-queue keep_source=true}},'
        'convert-cplan-to-triton{{model="{model}" interpret=true}}')


def _lower(path, n: int, d) -> ProgramOp:
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from xdsl.context import Context

    nodes = [NodeSpec(f"n{i}", 1 << 30, 1.0e11, 1.0e12, 1.0e9) for i in range(n)]
    pool = d / f"pool{n}.toml"
    pool.write_text("".join(f'[[nodes]]\nid = "{s.id}"\nmemory_bytes = {s.memory_bytes}\n'
                            f'bandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\n'
                            f'link_bandwidth_bytes_per_s = 1.0e9\n' for s in nodes))
    mod = plan_run(read_model_facts(path), RuntimeConfig(max_seq_len=MAX_SEQ), NodePool(tuple(nodes)), n)
    run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=pool, p=PROMPT_LEN, model=path))
    return next(o for o in mod.ops if isinstance(o, ProgramOp))


class Recorder:
    """A listener keeping every executed instruction."""

    def __init__(self):
        self.events: list[InstructionEvent] = []

    def on_instruction(self, event: InstructionEvent) -> None:
        self.events.append(event)


def _stage_interpreters(path, prog: ProgramOp, n: int, listeners=()) -> list[TMachineInterpreter]:
    """One interpreter per stage (the streams of node ``n<i>``), each bound to only its stage's weights."""
    facts = read_model_facts(path)
    hp = HParams.from_facts(facts)
    bases = {"rope_table": hp.rope_base, "rope_table_swa": hp.rope_base_swa}
    out = []
    for i, (a, b) in enumerate(LAYOUTS[n]):
        w = TK.load_stage_weights(facts.files, stage_slices(facts, a, b, i == 0, i == n - 1))
        out.append(TMachineInterpreter(prog, w, rope_bases=bases, devices=[f"n{i}"], listeners=listeners))
    return out


def _generate(stages: list[TMachineInterpreter], prompt: list[int], n_tokens: int) -> list[int]:
    """Greedy ids through the stages' interpreters: each stage's outbound rows are the next one's inbound."""
    x, pos, out = torch.tensor(prompt, dtype=torch.int32), 0, []
    for _ in range(n_tokens):
        h = x
        for st in stages:
            h = st.forward(h, pos)
        pos += int(x.shape[0])
        x = h[-1:]
        out.append(int(x[0]))
    return out


@pytest.fixture(scope="module")
def lowered(tmp_path_factory, stories_path):
    d = tmp_path_factory.mktemp("tmi")
    return {n: _lower(stories_path, n, d) for n in (1, 3)}


@pytest.fixture(scope="module")
def one_stage_run(lowered, stories_path, expected_cases):
    """The 1-stage program run on the first llama.cpp case with a recording listener: (ids, events)."""
    rec = Recorder()
    (it,) = _stage_interpreters(stories_path, lowered[1], 1, [rec])
    ids = _generate([it], expected_cases[0]["prompt_ids"], N_TOKENS)
    return ids, rec.events


def test_interpreted_program_greedy_ids_match_llamacpp_and_cuda_path(one_stage_run, stories_path, expected_cases):
    """Issue 13 item 5 / AB-M-1 / WL-L-1: the interpreted tmachine program of stories260K on 1 stage generates
    llama.cpp's greedy ids (first 4) and the ids of the ``--target cuda`` stage program on the Triton kernels."""
    case = expected_cases[0]
    ids, _ = one_stage_run
    assert ids == case["greedy_ids"][:N_TOKENS]
    facts = read_model_facts(stories_path)
    hp = HParams.from_facts(facts)
    w = TK.load_stage_weights(facts.files, stage_slices(facts, 0, 5, True, True))
    ex = StageExecutor(hp, build_stage_program(hp, 0, 5, True, True, MAX_SEQ), w, MAX_SEQ, kernels=TK)
    assert greedy_generate([ex], case["prompt_ids"], N_TOKENS) == ids


def test_interpreted_three_stages_exchange_edges(lowered, stories_path, expected_cases):
    """Issue 13 item 5 / AB-M-1: 3 stage interpreters over the 3-stage program (each running only its node's
    streams, with its own weights) exchange their edge rows (activations, then the token) and generate
    llama.cpp's greedy ids."""
    stages = _stage_interpreters(stories_path, lowered[3], 3)
    assert [sorted(s.inbound) for s in stages] == [["decode", "prefill"]] * 3
    assert [s.rows for s in stages] == [{"prefill": PROMPT_LEN, "decode": 1}] * 3
    case = expected_cases[0]
    assert _generate(stages, case["prompt_ids"], 3) == case["greedy_ids"][:3]


def test_each_launch_runs_once_per_step_in_order_with_its_grid(one_stage_run, lowered, expected_cases):
    """Issue 13 item 5 / AB-M-1, AB-M-4: a listener sees every launch of the lowered program executed exactly
    once per step of its kind, the launches of each stream in the stream's order, after the instructions
    their waits name, with the IR's kernel and grid."""
    _, events = one_stage_run
    prog = lowered[1]
    launches = {o.id.data: o for o in prog.walk() if isinstance(o, LaunchOp)}
    # the run: prefill chunk, decode (the 5th prompt row), then N_TOKENS - 1 decode steps
    runs: list[list[InstructionEvent]] = []
    for ev in events:
        if ev.index == 0:
            runs.append([])
        runs[-1].append(ev)
    assert [r[0].step for r in runs] == ["prefill"] + ["decode"] * N_TOKENS
    assert [r[0].start_pos for r in runs] == [0, 4, 5, 6, 7]
    streams = instructions(prog)
    by_cmd = {o.cmd.data: o.id.data for _, ops in streams for o in ops}
    for run in runs:
        step = run[0].step
        at = {ev.id: k for k, ev in enumerate(run)}
        assert len(at) == len(run)  # once each
        for _, ops in streams:
            mine = [o.id.data for o in ops if step_of(o) == step]
            assert [ev.id for ev in run if ev.id in set(mine)] == mine  # all of them, in stream order
        assert {ev.id for ev in run} == {o.id.data for _, ops in streams for o in ops if step_of(o) == step}
        for ev in run:
            if ev.op == "tmachine.launch":
                op = launches[ev.id]
                assert ev.kernel == op.kernel.data and list(ev.grid) == list(op.grid.get_values())
            op = next(o for _, ops in streams for o in ops if o.id.data == ev.id)
            for w in op.wait_cmds:
                if by_cmd[w] in at:  # a wait on another step's instruction is ordered by the step order
                    assert at[by_cmd[w]] < at[ev.id]
    n_launch = sum(1 for r in runs for ev in r if ev.op == "tmachine.launch")
    per_step = {s: sum(1 for o in launches.values() if step_of(o) == s) for s in ("prefill", "decode")}
    assert n_launch == per_step["prefill"] + N_TOKENS * per_step["decode"] and per_step["decode"] > 80


def _mutated(prog: ProgramOp, cmd: str, **props) -> ProgramOp:
    p = prog.clone()
    op = next(o for o in p.walk() if isinstance(o, LaunchOp) and o.cmd.data == cmd)
    for k, v in props.items():
        if k == "arg1":  # the second buffer argument: a tmachine.buffer op of that id outside the program
            ghost = op.args[1].owner.clone()
            ghost.properties["id"] = v
            op.operands = [op.operands[0], ghost.results[0], *op.operands[2:]]
        else:
            op.properties[k] = v
    return p


RMS = "cmd.decode.s0.b0.rms_norm.attn_norm"


@pytest.mark.parametrize("props,code,needle", [
    ({"kernel": StringAttr("rmsnorm:_no_such_kernel")}, "tmachine:unknown_kernel",
     "launch 'i.cmd.decode.s0.b0.rms_norm.attn_norm': kernel 'rmsnorm:_no_such_kernel' is not a function of "
     "pipeplan.runtime.kernels.triton"),
    ({"kernel": StringAttr("nomodule:_rms_norm_kernel")}, "tmachine:unknown_kernel", "kernel 'nomodule:_rms_norm_kernel'"),
    ({"arg1": StringAttr("alloc.nowhere")}, "tmachine:unknown_buffer",
     "instruction argument 'alloc.nowhere' names no tmachine.buffer of the program"),
], ids=["unknown-kernel", "unknown-module", "unknown-alloc"])
def test_interpreter_rejects_unknown_kernel_and_alloc(lowered, stories_path, props, code, needle):
    """Issue 13 item 5 / AB-M-1: a launch naming a kernel the target's package lacks, or an argument naming no
    declared buffer (a program built in memory, not re-verified), is a typed error at bind time naming the
    instruction or buffer -- before any kernel runs."""
    prog = _mutated(lowered[1], RMS, **props)
    with pytest.raises(TMachineError) as ei:
        _stage_interpreters(stories_path, prog, 1)
    assert ei.value.code == code and needle in ei.value.message


def test_interpreter_rejects_unbound_scalar(lowered, stories_path):
    """Issue 13 item 5 / AB-M-1: a ``"$x"`` scalar without a binding is a typed error naming the launch and the
    scalar; given in ``attrs`` it binds."""
    from xdsl.dialects.builtin import DictionaryAttr

    op = next(o for o in lowered[1].walk() if isinstance(o, LaunchOp) and o.cmd.data == RMS)
    scalars = DictionaryAttr({**op.scalars.data, "eps": StringAttr("$x")})
    prog = _mutated(lowered[1], RMS, scalars=scalars)
    with pytest.raises(TMachineError) as ei:
        _stage_interpreters(stories_path, prog, 1)
    assert ei.value.code == "tmachine:unbound_scalar"
    assert "launch 'i.cmd.decode.s0.b0.rms_norm.attn_norm': scalar eps = \"$x\" has no binding" in ei.value.message
    facts = read_model_facts(stories_path)
    w = TK.load_stage_weights(facts.files, stage_slices(facts, 0, 5, True, True))
    hp = HParams.from_facts(facts)
    it = TMachineInterpreter(prog, w, rope_bases={"rope_table": hp.rope_base}, attrs={"x": 1e-5})
    with pytest.raises(TMachineError, match="step 'decode' takes 1 inbound rows, got 2"):
        it.run_step("decode", 0, torch.zeros(2, dtype=torch.int32))
