"""Issue 7: stories260K end to end on the Triton kernels (interpreter), 1 and 3 stages.

The stage program is the same one the reference kernels run (``build_stage_program``); only the
kernel table (``pipeplan.runtime.kernels.triton``) and the weights (GGUF format, dequantized in the
kernels: ``load_stage_weights_raw``) differ. Greedy decoding must reproduce llama.cpp's EXPECTED
tokens; the interpreter is slow (~0.3-0.9 s per generated token here), so the first 20 tokens of each
prompt are checked.
"""

from __future__ import annotations

import pytest
import torch
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.runtime.kernels import reference as R
from pipeplan.runtime.kernels import triton as TK
from pipeplan.runtime.kernels.triton_weights import GGMLWeight, load_stage_weights_raw
from pipeplan.runtime.loader import load_stage_weights, stage_slices
from pipeplan.runtime.program import LlamaHParams, StageExecutor, build_stage_program

from tests.executor_chain import greedy_generate
from tests.ggufgen import write_variant

MAX_SEQ = 64
N_TOKENS = 20
LAYOUTS = {1: ((0, 5),), 3: ((0, 2), (2, 4), (4, 5))}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _stages(path, ranges, kernels, raw=True):
    facts = read_model_facts(path)
    hp = LlamaHParams.from_facts(facts)
    out, weights = [], []
    n = len(ranges)
    for i, (a, b) in enumerate(ranges):
        sl = stage_slices(facts, a, b, i == 0, i == n - 1)
        w = load_stage_weights_raw(facts.files, sl) if raw else load_stage_weights(facts.files, sl)
        weights.append(w)
        out.append(StageExecutor(hp, build_stage_program(hp, a, b, i == 0, i == n - 1, MAX_SEQ), w, MAX_SEQ,
                                 kernels=kernels))
    return out, weights


@pytest.mark.slow
@pytest.mark.parametrize("n_stages", [1, 3])
def test_stories_expected_tokens(stories_path, expected_cases, n_stages):
    """Issue 7 / WL-L-1: stories260K through Triton-kernel stages (1 and 3 stages, each loading only its own
    byte ranges) generates llama.cpp's EXPECTED greedy tokens (first 20) for every prompt."""
    stages, weights = _stages(stories_path, LAYOUTS[n_stages], TK)
    if n_stages == 3:
        assert all(w.mapped_bytes < stories_path.stat().st_size for w in weights)
        assert not any(n.startswith("blk.0.") or n.startswith("blk.4.") for n in weights[1])
    for case in expected_cases:
        got = greedy_generate(stages, case["prompt_ids"], N_TOKENS)
        assert got == case["greedy_ids"][:N_TOKENS], case["prompt"]


@pytest.fixture(scope="module")
def q8_path(tmp_path_factory, stories_path):
    """stories260K quantized to Q8_0 with the gguf package (ffn_down falls back to F16, as in llama.cpp)."""
    return write_variant(stories_path, tmp_path_factory.mktemp("q8") / "stories-q8_0.gguf", ggml_type="Q8_0")


def test_quantized_stage_matches_reference(q8_path, expected_cases):
    """Issue 7: a Q8_0 model runs with its weights kept quantized (Q8_0 and F16 matrices dequantized inside
    the Triton GEMV and gather); its logits equal the reference kernels' on the gguf-dequantized weights."""
    (tri,), (raw,) = _stages(q8_path, LAYOUTS[1], TK)
    (ref,), _ = _stages(q8_path, LAYOUTS[1], R, raw=False)
    kinds = {w.ggml_type for w in raw.values() if isinstance(w, GGMLWeight)}
    assert kinds == {"Q8_0", "F16"}
    assert raw.tensor_bytes < 0.4 * sum(int(torch.tensor(w.shape).prod()) * 4 for w in raw.values())
    case = expected_cases[0]
    ids = torch.tensor(case["prompt_ids"])
    a = tri.forward(ids, 0, last_only=True).clone()
    b = ref.forward(ids, 0, last_only=True)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    step = torch.tensor([case["greedy_ids"][0]])
    torch.testing.assert_close(tri.forward(step, len(ids)), ref.forward(step, len(ids)), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- lowering
PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\" prompt_len=4}},pplan-legalize{{target=cuda-triton}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}},"
        "convert-pplan-to-cplan{{binder={binder} keep_source=true}}")


@pytest.fixture(scope="module")
def cuda_plans(tmp_path_factory, stories_path):
    """stories260K on 1 stage bound to cuda-triton: the module text per binder (cplan + kept pplan)."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from xdsl.context import Context

    d = tmp_path_factory.mktemp("tm")
    (d / "pool.toml").write_text('[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\n'
                                 'flops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n')
    pool = NodePool((NodeSpec("n0", 1 << 30, 1.0e11, 1.0e12, 1.0e9),))
    out = {}
    for binder in ("reference-queue", "reference-slot"):
        mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), pool, 1)
        run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=d / "pool.toml", binder=binder))
        out[binder] = str(mod)
    return out


def _parse(text):
    from pipeplan.api import parse_module, register_pipeplan
    from xdsl.context import Context

    return parse_module(register_pipeplan(Context()), text)


def _plans(mod):
    from pipeplan.dialects.cplan import PlanOp
    from pipeplan.dialects.pplan import PlanOp as PPlanOp

    return next(o for o in mod.ops if isinstance(o, PlanOp)), next(o for o in mod.ops if isinstance(o, PPlanOp))


def test_lowering_one_launch_per_command_in_queue_order(cuda_plans):
    """AB-M-1 / AB-M-4: every concrete command becomes exactly one tmachine instruction naming it, streams are
    the plan's queues and instruction order is the queue order (no scheduling decision added)."""
    from pipeplan.dialects.cplan import CommandOp, QueueOp
    from pipeplan.dialects.triton_machine import LaunchOp, StreamOp
    from pipeplan.transforms.convert_cplan_to_triton import lower_plan

    plan, pplan = _plans(_parse(cuda_plans["reference-queue"]))
    queues = [(q.device.data, q.engine.data, [s.data for s in q.order.data]) for q in plan.walk()
              if isinstance(q, QueueOp)]
    n_cmds = len(plan.ops_of(CommandOp))
    prog = lower_plan(plan, pplan)
    prog.verify()
    streams = [(s.device.data, s.engine.data, [i.cmd.data for i in s.body.blocks[0].ops]) for s in prog.walk()
               if isinstance(s, StreamOp)]
    assert streams == queues and sum(len(s[2]) for s in streams) == n_cmds
    launches = [o for o in prog.walk() if isinstance(o, LaunchOp)]
    kernels = {o.kernel.data.rsplit(":", 1)[1] for o in launches}
    assert kernels == {"_gather_kernel", "_rms_norm_kernel", "_gemv_kernel", "_rope_kernel", "_kv_write_kernel",
                       "_attention_kernel", "_binary_kernel", "_argmax_kernel"}
    cmds = {c.id.data: c for c in plan.ops_of(CommandOp)}
    assert all(o.lineage_text == f"{cmds[o.cmd.data].lineage_text} -> concrete command {o.cmd.data}" for o in launches)


def _set_task(pplan, name, dtypes):
    """Re-declare one portable task's read operands with these dtypes (what the lowering reads), in place."""
    from pipeplan.dialects.pplan import BufferType, TableOp

    task = next(t for t in pplan.tasks() if t.task_id == name)
    operands = list(task.operands)
    for i, (v, d) in enumerate(zip(task.ins, dtypes)):
        if v.type.dtype != d:
            decl = TableOp(stage=task.stage_index, origin=f"retyped.{i}",
                           type=BufferType(v.type.shape, d, "weight", v.type.alignment))
            pplan.body.block.insert_op_before(decl, pplan.body.block.first_op)
            operands[i] = decl.result
    task.operands = operands
    assert task.dtypes()[:len(task.ins)] == tuple(dtypes[:len(task.ins)])


FFN_UP = "decode.s0.b2.matmul.ffn_up"
GATHER = "decode.s0.embedding_gather.token_embd"


@pytest.mark.parametrize("task,dtypes,reason,lineage", [
    (FFN_UP, ("f32", "q2_k", "f32"), "no Triton kernel for weight dtype q2_k",
     "model op blk.2.ffn_up -> stage 0 block 2 (decode) -> task @decode.s0.b2.matmul.ffn_up -> candidate "
     "triton.matmul -> concrete command cmd.decode.s0.b2.matmul.ffn_up"),
    (FFN_UP, ("f32", "q6_k", "f32"), "no Triton kernel for q6_k weight with row length 64 (not a multiple of 256)",
     "-> task @decode.s0.b2.matmul.ffn_up -> candidate triton.matmul -> concrete command cmd.decode.s0.b2.matmul.ffn_up"),
    (GATHER, ("i32", "q3_k", "f32"), "no Triton kernel for weight dtype q3_k (Triton embedding_gather reads f32, f16, "
     "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)", "-> task @decode.s0.embedding_gather.token_embd -> "
     "candidate triton.embedding_gather -> concrete command cmd.decode.s0.embedding_gather.token_embd"),
    (GATHER, ("i32", "q4_k", "f32"), "no Triton kernel for q4_k weight with row length 64 (not a multiple of 256)",
     "-> task @decode.s0.embedding_gather.token_embd -> candidate triton.embedding_gather"),
    (FFN_UP, ("f16", "f32", "f32"), "no Triton kernel for activation dtype f16 (Triton matmul reads f32)",
     "-> task @decode.s0.b2.matmul.ffn_up -> candidate triton.matmul"),
], ids=["q2_k-matmul", "q6_k-row-64", "q3_k-gather", "q4_k-gather-row-64", "f16-activation"])
def test_lowering_rejects_weight_without_kernel(cuda_plans, task, dtypes, reason, lineage):
    """AB-I-2 / AB-D-1: a matmul whose weight dtype has no Triton kernel (q2_k), a K-quant weight or table whose
    row length (stories260K's K = D = 64) is not a whole number of 256-weight super-blocks, an embedding table
    of a type the gather does not read (q3_k) and a non-f32 activation each fail the lowering with the lineage
    path through the concrete command -- never a fallback kernel."""
    from pipeplan.transforms.convert_cplan_to_triton import lower_plan
    from xdsl.utils.exceptions import PassFailedException

    plan, pplan = _plans(_parse(cuda_plans["reference-queue"]))
    _set_task(pplan, task, dtypes)
    with pytest.raises(PassFailedException) as ei:
        lower_plan(plan, pplan)
    msg = str(ei.value)
    assert reason in msg and lineage in msg


def _q4k_facts_toml() -> str:
    """A tiny llama (hidden 256, 4/2 heads, ffn 512, vocab 300, 2 blocks) whose matrices are all Q4_K (every row
    length is a multiple of 256) except token_embd, which is Q8_0 (the gather has no Q4_K path)."""
    from pipeplan.frontend.facts_toml import synthesize_llama_tensors

    ts = synthesize_llama_tensors(block_count=2, hidden=256, heads=4, kv_heads=2, ffn=512, vocab=300, weight_type="Q4_K")
    lines = ['[model]', 'name = "tiny-q4k"', "block_count = 2", "embedding_length = 256", "head_count = 4",
             "head_count_kv = 2", "feed_forward_length = 512", "vocab_size = 300", "context_length = 128",
             "rms_norm_eps = 1e-5"]
    for t in ts:
        ty = "Q8_0" if t.name == "token_embd.weight" else t.ggml_type
        lines += ["[[tensors]]", f'name = "{t.name}"', f'ggml_type = "{ty}"', f"shape = {list(t.shape)}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def q4k_module(tmp_path_factory):
    """The tiny Q4_K model planned on 1 stage, bound to cuda-triton (reference-queue), then lowered."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.frontend.facts_toml import loads_facts_toml
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from xdsl.context import Context

    d = tmp_path_factory.mktemp("q4k")
    (d / "pool.toml").write_text('[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\n'
                                 'flops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n')
    facts = loads_facts_toml(_q4k_facts_toml(), "tiny-q4k.toml")
    assert {t.ggml_type for t in facts.tensors if len(t.shape) == 2} == {"Q4_K", "Q8_0"}
    pool = NodePool((NodeSpec("n0", 1 << 30, 1.0e11, 1.0e12, 1.0e9),))
    mod = plan_run(facts, RuntimeConfig(max_seq_len=64), pool, 1)
    ctx = register_pipeplan(Context())
    run_pipeline(ctx, mod, PIPE.format(pool=d / "pool.toml", binder="reference-queue") + ",convert-cplan-to-triton")
    return mod


def test_lowering_q4k_matmuls_launch_the_q4k_kernel(q4k_module):
    """Issue 7 (Q4_K) / AB-M-1: a model with Q4_K matrices lowers for cuda-triton: every Q4_K matmul becomes a
    launch of the K-quant kernel gemv:_gemv_kq_kernel (meta FMT = 0 (Q4_K)/USE_DOT/BLOCK_M/BLOCK_N/NSB, grid
    (cdiv(N, BLOCK_N), cdiv(T, BLOCK_M)), scalars M/N/K, autotuned at run) with its lineage; the Q8_0 embedding
    gather keeps its kernel."""
    from pipeplan.dialects.pplan import PlanOp as PPlanOp
    from pipeplan.dialects.pplan import ints
    from pipeplan.dialects.triton_machine import LaunchOp

    pplan = next(o for o in q4k_module.ops if isinstance(o, PPlanOp))
    tasks = {t.task_id: t for t in pplan.tasks()}
    launches = {o.cmd.data: o for o in q4k_module.walk() if isinstance(o, LaunchOp)}
    q4k = {c: o for c, o in launches.items() if tasks[c.removeprefix("cmd.")].dtypes()[1:2] == ("q4_k",)}
    # 2 blocks x 7 matrices + output, in prefill and decode
    assert len(q4k) == 2 * (2 * 7 + 1)
    for cid, op in q4k.items():
        t, n, k = ints(tasks[cid.removeprefix("cmd.")].work)
        meta = {key: attr.value.data for key, attr in op.meta.data.items()}
        assert op.kernel.data == "gemv:_gemv_kq_kernel"
        assert set(meta) == {"FMT", "USE_DOT", "BLOCK_M", "BLOCK_N", "NSB"} and meta["FMT"] == 0 and k % 256 == 0
        assert list(op.grid.get_values()) == [-(-n // meta["BLOCK_N"]), -(-t // meta["BLOCK_M"]), 1]
        assert {key: a.value.data for key, a in op.scalars.data.items()} == {"M": t, "N": n, "K": k}
        assert bool(op.autotune.value.data) and op.lineage_text.endswith(f"-> concrete command {cid}")
    down = launches["cmd.decode.s0.b1.matmul.ffn_down"]
    assert {key: a.value.data for key, a in down.meta.data.items()} == {"FMT": 0, "USE_DOT": 0, "BLOCK_M": 1,
                                                                        "BLOCK_N": 16, "NSB": 1}
    assert list(down.grid.get_values()) == [16, 1, 1]
    gather = launches["cmd.decode.s0.embedding_gather.token_embd"]
    assert gather.kernel.data.endswith("embedding:_gather_kernel") and gather.meta.data["FMT"].value.data == 3


def test_lowered_q4k_launch_runs_with_its_meta(q4k_module):
    """Issue 7 (Q4_K): the recorded launch of a Q4_K matmul (kernel, grid, meta, M/N/K) runs as recorded (under
    the interpreter) on Q4_K bytes and computes x @ dequant(W).T (gguf.quants reference, float64 product,
    the unit tests' bound)."""
    import importlib

    import numpy as np
    from pipeplan.dialects.triton_machine import LaunchOp
    from pipeplan.runtime.kernels.triton_weights import weight_from_bytes

    op = next(o for o in q4k_module.walk() if isinstance(o, LaunchOp) and o.cmd.data == "cmd.decode.s0.b1.matmul.ffn_down")
    mod_name, fn = op.kernel.data.split(":")
    kernel = importlib.import_module(f"pipeplan.runtime.kernels.triton.{mod_name}").__dict__[fn]  # the target's package
    sc = {key: a.value.data for key, a in op.scalars.data.items()}
    meta = {key: a.value.data for key, a in op.meta.data.items()}
    m, n, k = sc["M"], sc["N"], sc["K"]
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (n * k // 256, 144), dtype=np.uint8)
    blocks[:, 0:4] = rng.uniform(1e-3, 1e-2, (blocks.shape[0], 2)).astype(np.float16).view(np.uint8)
    w = weight_from_bytes(blocks.reshape(-1), "Q4_K", (k, n))
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(5))
    y = torch.empty(m, n)
    kernel[tuple(op.grid.get_values())](x, w.raw, y, m, n, k, x.stride(0), w.raw.stride(0), y.stride(0),
                                         FMT=meta["FMT"], USE_DOT=bool(meta["USE_DOT"]), BLOCK_M=meta["BLOCK_M"],
                                         BLOCK_N=meta["BLOCK_N"], NSB=meta["NSB"])
    dense = w.dequantized().double()
    err = (y.double() - x.double() @ dense.T).abs()
    assert bool((err <= 1e-6 * (x.abs().double() @ dense.abs().T)).all())


def test_lowering_rejects_slot_extension_and_missing_source(cuda_plans):
    """AB-I-2: the CUDA target runs queues: a slot-dataflow plan is a diagnostic; so is a module without the
    portable plan the shapes come from."""
    from pipeplan.api import register_pipeplan, run_pipeline
    from pipeplan.dialects.pplan import PlanOp as PPlanOp
    from pipeplan.transforms.convert_cplan_to_triton import lower_plan
    from xdsl.context import Context
    from xdsl.utils.exceptions import PassFailedException

    plan, pplan = _plans(_parse(cuda_plans["reference-slot"]))
    with pytest.raises(PassFailedException, match="no cplan.queue_schedule extension"):
        lower_plan(plan, pplan)
    mod = _parse(cuda_plans["reference-queue"])
    next(o for o in mod.ops if isinstance(o, PPlanOp)).detach()
    with pytest.raises(PassFailedException, match="needs the portable plan"):
        run_pipeline(register_pipeplan(Context()), mod, "convert-cplan-to-triton")


@pytest.mark.parametrize("bad,msg", [
    ('grid = array<i64: 0, 1, 1>', "grid must be 3 positive integers"),
    ('kernel = "nomodule"', "is not 'module:function'"),
    ('scalars = {start_pos = "start_pos"}', "must be a number or a '$runtime' name"),
])
def test_tmachine_launch_verifier(bad, msg):
    """AB-M-1: the tmachine verifier rejects malformed launches (grid, kernel reference, scalar kinds)."""
    from xdsl.utils.exceptions import VerifyException

    props = {"grid": 'array<i64: 1, 1, 1>', "kernel": '"m:f"', "scalars": "{}"}
    key, val = bad.split(" = ", 1)
    props[key] = val
    text = ('tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {\n'
            ' tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {\n'
            f'  tmachine.launch "i" {props["kernel"]} () {{cmd = "c", grid = {props["grid"]}, meta = {{}}, '
            f'scalars = {props["scalars"]}, autotune = false, task = "decode.s0.t", impl = "triton.rms_norm", '
            'lineage = #cplan.lineage<decode, stage 0, "m">}\n }\n}')
    with pytest.raises(VerifyException, match=msg.replace("$", r"\$").replace("(", r"\(")):
        _parse(text).verify()


def test_stage_hooks_load_raw_weights_on_the_kernel_device(stories_path):
    """WL-L-1 / WL-R-3: the package's stage hooks load only the stage's tensors, kept in GGUF format on the
    device the kernels run on (CPU here), and allocate the KV cache there; a stage bound with them runs."""
    facts = read_model_facts(stories_path)
    hp = LlamaHParams.from_facts(facts)
    w = TK.load_stage_weights(facts.files, stage_slices(facts, 2, 4, False, False))
    assert sorted({n.split(".")[1] for n in w}) == ["2", "3"] and w.mapped_bytes < stories_path.stat().st_size
    assert all(t.device == TK.device() for t in w.values())
    ex = StageExecutor(hp, build_stage_program(hp, 2, 4, False, False, 8), w, 8, kernels=TK, allocate=TK.allocate)
    x = torch.randn(3, hp.n_embd, generator=torch.Generator().manual_seed(0))
    ref = StageExecutor(hp, build_stage_program(hp, 2, 4, False, False, 8), w, 8, kernels=R)
    torch.testing.assert_close(ex.forward(x, 0), ref.forward(x, 0), rtol=1e-4, atol=1e-5)
