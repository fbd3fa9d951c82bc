"""Issue 11.8 (cuda half) / 12.4: the cuda-triton legality and convert-cplan-to-triton agree, and the lowering
handles the kernels the contract adds (head_rms_norm, gelu_mul, add_bias, neox rope, windowed attention,
scaled gather).

The tasks are built here as single ``pplan.task`` ops over their own declared operands (the shapes a
stage program gives them) with a ``cplan.command`` each, and lowered with
:func:`pipeplan.transforms.convert_cplan_to_triton.lower_command` -- the function ``lower_plan`` calls per
command -- so every (op, operand, dtype) combination costs microseconds.
"""

from __future__ import annotations

import math

import pytest
import torch
from pipeplan.dialects.cplan import Alloc, Command, alloc_op, command_op
from pipeplan.dialects.pplan import (
    DTYPE_SIZES,
    BufferType,
    EdgeObjectOp,
    KvOp,
    PlanOp,
    StageOp,
    StepOp,
    TableOp,
    TaskOp,
)
from pipeplan.dialects.triton_machine import BufferOp as MachineBufferOp
from pipeplan.dialects.triton_machine import BufferType as MachineBufferType
from pipeplan.dialects.triton_machine import CopyOp, LaunchOp, ViewOp, lifetime_attr
from pipeplan.models.stage_program import KernelCall
from pipeplan.targets import get_target
from pipeplan.targets.triton_formats import DTYPES, OPERANDS, WEIGHT_FORMATS
from pipeplan.transforms.convert_cplan_to_triton import KernelAttrs, Sync, lower_command
from pipeplan.transforms.convert_pplan_to_cplan import task_lineage
from pipeplan.transforms.pplan_legalize import task_requirements
from xdsl.dialects.builtin import DenseArrayBase, StringAttr, i64
from xdsl.utils.exceptions import PassFailedException

T, D, V, S = 3, 256, 300, 64
H, HKV, HD = 4, 1, 256
"""Shapes: tokens, width (a multiple of every block), vocab, cache length; gemma3 270M's heads."""


def _decl(origin: str, dtype: str, shape: tuple[int, ...], stage: int):
    """The declaration op of a read (or in-place written) operand: KV caches and edge objects as such, any
    other operand as a stage table of its shape and dtype (the lowering reads only shapes and dtypes)."""
    if origin.endswith(("cache_k", "cache_v")):
        return KvOp(stage=stage, origin=origin, type=BufferType(shape, dtype, "kv"))
    if origin in ("e0", "e1"):
        return EdgeObjectOp(edge=origin, kind="activation", type=BufferType(shape, dtype, "edge"))
    return TableOp(stage=stage, origin=origin.split(":", 1)[-1], type=BufferType(shape, dtype, "weight"))

CACHES = {"ck": ((S, HKV, HD), "blk.0.cache_k"), "cv": ((S, HKV, HD), "blk.0.cache_v")}

OPERAND_SHAPES: dict[str, tuple[list[tuple[str, tuple[int, ...], str]], tuple[int, ...]]] = {
    "embedding_gather": ([("ids", (T,), "decode:input"), ("table", (V, D), "token_embd.weight"),
                          ("h0", (T, D), "decode:h0")], (T, D)),
    "rms_norm": ([("x", (T, D), "decode:h0"), ("w", (D,), "blk.0.attn_norm.weight"),
                  ("y", (T, D), "decode:blk.0.attn_in")], (T, D)),
    "head_rms_norm": ([("x", (T, H * HD), "decode:blk.0.q_proj"), ("w", (HD,), "blk.0.attn_q_norm.weight"),
                       ("y", (T, H * HD), "decode:blk.0.q_norm")], (T, H * HD)),
    "matmul": ([("x", (T, D), "decode:blk.0.attn_in"), ("w", (48, D), "blk.0.attn_q.weight"),
                ("y", (T, 48), "decode:blk.0.q_proj")], (T, 48, D)),
    "rope": ([("x", (T, H * HD), "decode:blk.0.q_norm"), ("tab", (S, HD), "rope_table_swa"),
              ("y", (T, H * HD), "decode:blk.0.q")], (T, H * HD)),
    "kv_cache_write": ([("k", (T, HKV * HD), "decode:blk.0.k"), ("v", (T, HKV * HD), "decode:blk.0.v"),
                        ("ck", *CACHES["ck"]), ("cv", *CACHES["cv"])], (T, HKV * HD)),
    "attention": ([("q", (T, H * HD), "decode:blk.0.q"), ("ck", *CACHES["ck"]), ("cv", *CACHES["cv"]),
                   ("o", (T, H * HD), "decode:blk.0.attn")], (T, H * HD, 10)),
    "silu_mul": ([("a", (T, D), "decode:blk.0.gate"), ("b", (T, D), "decode:blk.0.up"),
                  ("y", (T, D), "decode:blk.0.ffn_act")], (T, D)),
    "gelu_mul": ([("a", (T, D), "decode:blk.0.gate"), ("b", (T, D), "decode:blk.0.up"),
                  ("y", (T, D), "decode:blk.0.ffn_act")], (T, D)),
    "add": ([("a", (T, D), "decode:h0"), ("b", (T, D), "decode:blk.0.attn_out"),
             ("y", (T, D), "decode:blk.0.h_mid")], (T, D)),
    "add_bias": ([("x", (T, 48), "decode:blk.0.q_mm"), ("bias", (48,), "blk.0.attn_q.bias"),
                  ("y", (T, 48), "decode:blk.0.q_proj")], (T, 48)),
    "argmax": ([("logits", (1, V), "decode:output"), ("tok", (1,), "decode:token")], (1,)),
    "last_row": ([("x", (T, D), "decode:h2"), ("y", (1, D), "decode:h_last")], (1, D)),
    "send": ([("x", (1, D), "decode:output"), ("e", (1, D), "e1")], (1, D)),
    "recv": ([("e", (T,), "e0"), ("x", (T,), "decode:input")], (T,)),
}
"""Portable op -> (its operands: local name, shape, origin) and its work shape, as a stage program makes them."""

DEFAULT = {"act": "f32", "ids": "i32", "token": "i32", "weight": "f32", "vec": "f32", "table": "f32", "cache": "f32",
           "any": "f32"}


def _command(op: str, dtypes: tuple[str, ...], impl: str | None = None, stage: int = 0, block: int = 0):
    """(command, task, buffers) of one ``op`` task with these operand dtypes (OPERAND_SHAPES)."""
    operands, shape = OPERAND_SHAPES[op]
    n_reads = len(operands) - (2 if op == "kv_cache_write" else 1)
    inplace = op in ("kv_cache_write", "send")
    decls = {origin: _decl(origin, d, sh, stage) for (_, sh, origin), d in
             zip(operands if inplace else operands[:n_reads], dtypes)}
    for sh, origin in CACHES.values():  # the stage's KV cache (head geometry of rope)
        decls.setdefault(origin, _decl(origin, "f32", sh, stage))
    vals = [decls[origin].results[0] for _, _, origin in operands if origin in decls]
    (_, out_shape, out_origin), out_dt = operands[-1], dtypes[-1]
    task = TaskOp(f"t.{op}", op=op, ins=vals[:n_reads], updates=vals[n_reads:] if inplace else (),
                  out=None if inplace else BufferType(out_shape, out_dt),
                  out_name=None if inplace else out_origin.split(":", 1)[-1], model_op={"send": "edge:e1", "recv": "edge:e0"}.get(op, f"blk.0.{op}"), block=block,
                  flops=1, work=shape, nbytes=[V * 4] * n_reads + [4] * (len(operands) - n_reads))
    step = StepOp("decode", [StageOp(stage, [task], [])], [])
    plan = PlanOp("p", stage_count=stage + 1, prompt_len=1, decode_pos=1, model="m", source="s",
                  ops=[*decls.values(), step])
    bufs = {b.name: b for b in plan.buffers()}
    names = [*task.reads(), *task.writes()]
    allocs = [f"alloc.{n}" for n in names]
    vals = {a: alloc_op(Alloc(a, a, "n0", "device", 0, 1024, 64, "transient")).result for a in allocs}
    cmd = command_op(Command(f"cmd.{op}", task.task_id, op, impl or f"triton.{op}", "n0", "cuda.stream", (),
                             tuple(allocs[:n_reads]), tuple(allocs[n_reads:]),
                             task_lineage(task), "roofline", "missing", None), vals)
    return cmd, task, bufs


def _sync(cmd) -> Sync:
    """The buffer values of the command's allocations (``tmachine.buffer`` ops of the same ids, unattached)."""
    props = {"device": StringAttr("n0"), "dtype": StringAttr("f32"), "shape": DenseArrayBase.from_list(i64, [1]),
             "lifetime": lifetime_attr("transient"), "origin": StringAttr("x")}
    ids = [a.data for a in (*cmd.reads.data, *cmd.writes.data)]
    return Sync({a: MachineBufferOp.create(properties={"id": StringAttr(a), **props},
                                           result_types=[MachineBufferType()]).result for a in ids})


def _lower(op, dtypes, impl=None, calls=None, **kw):
    """Lower one ``op`` task; ``calls``: stage 0's kernel calls the attributes come from (None: runtime names)."""
    cmd, task, bufs = _command(op, tuple(dtypes), impl, **kw)
    sizes = {a.data: 1024 for a in (*cmd.reads.data, *cmd.writes.data)}
    attrs = KernelAttrs(bufs, None) if calls is None else KernelAttrs.from_programs(bufs, {0: calls})
    return lower_command(cmd, task, bufs, attrs, _sync(cmd), sizes)


PLUGIN = get_target("cuda-triton")
UNIVERSE = sorted(set(DTYPE_SIZES) | set(DTYPES))
"""Every plan dtype the portable dialect knows (gguf's GGML types, lower-case) and every Triton one."""


def _legal(op: str, dtypes: tuple[str, ...], rule) -> bool:
    cmd, task, _ = _command(op, dtypes, rule.impl)
    req = task_requirements(task)
    if rule.min_alignment > req.alignment:  # the selector's requirement-only alignment rewrite
        req = PLUGIN.selector.alternatives(req)[0]
    return not PLUGIN.legality.check(req, rule, PLUGIN.binding)


def test_every_legal_op_dtype_lowers_and_no_illegal_one_does():
    """Issue 11.8: for every op the target has a rule for, every operand position and every plan dtype, the
    cuda-triton legality accepts the task exactly when convert-cplan-to-triton lowers it (one table both read:
    targets/triton_formats.py); among the accepted: every weight format of the matmul and the gather,
    K-quant embedding tables included (the Q4_K gather that used to legalize and then fail to lower)."""
    legal_pairs = set()
    for op, roles in OPERANDS.items():
        rules = PLUGIN.capability.rules_for(op)
        assert rules, op
        base = tuple(DEFAULT[r] for r in roles)
        for i in range(len(roles)):
            for d in UNIVERSE:
                dtypes = base[:i] + (d,) + base[i + 1:]
                for rule in rules:
                    legal = _legal(op, dtypes, rule)
                    try:
                        instr = _lower(op, dtypes, rule.impl)
                    except PassFailedException as e:
                        assert not legal, f"{rule.impl} {dtypes} legalizes but does not lower: {e}"
                        assert "no Triton kernel for" in str(e) and "-> concrete command cmd." in str(e)
                        continue
                    assert legal, f"{rule.impl} {dtypes} lowers but does not legalize"
                    assert isinstance(instr, LaunchOp | ViewOp | CopyOp)
                    instr.verify()
                    legal_pairs.add((rule.impl, i, d))
    weights = {f.dtype for f in WEIGHT_FORMATS.values()}
    assert {d for impl, i, d in legal_pairs if impl == "triton.matmul" and i == 1} == weights
    assert {d for impl, i, d in legal_pairs if impl == "triton.embedding_gather" and i == 1} == weights
    assert {d for impl, i, d in legal_pairs if impl == "triton.matmul_tc" and i == 1} == {"f32", "f16", "bf16"}
    assert {d for impl, i, d in legal_pairs if impl == "triton.rms_norm"} == {"f32"}
    assert ("triton.matmul", 1, "q2_k") not in legal_pairs and ("triton.attention", 1, "f16") not in legal_pairs


def _kv(launch: LaunchOp, what: str) -> dict:
    return {k: (v.data if isinstance(v, StringAttr) else v.value.data) for k, v in getattr(launch, what).data.items()}


GEMMA_CALLS = [
    KernelCall("embedding_gather", ("input", "token_embd.weight"), ("h0",), {"scale": math.sqrt(640)}),
    KernelCall("head_rms_norm", ("blk.0.q_proj", "blk.0.attn_q_norm.weight"), ("blk.0.q_norm",),
               {"eps": 1e-6, "n_heads": H, "head_dim": HD}, 0),
    KernelCall("rope", ("blk.0.q_norm", "rope_table_swa", "start_pos"), ("blk.0.q",),
               {"n_heads": H, "head_dim": HD, "rope_dim": HD, "mode": "neox"}, 0),
    KernelCall("attention", ("blk.0.q", "blk.0.cache_k", "blk.0.cache_v", "start_pos"), ("blk.0.attn",),
               {"scale": 0.0625, "window": 512}, 0),
    KernelCall("gelu_mul", ("blk.0.gate", "blk.0.up"), ("blk.0.ffn_act",), {}, 0),
    KernelCall("add_bias", ("blk.0.q_mm", "blk.0.attn_q.bias"), ("blk.0.q_proj",), {}, 0),
]
"""A gemma3-style stage program's calls for the tasks above (kernel-contract attributes; qwen2's bias too)."""


def test_lowering_gemma3_pieces_with_call_attributes():
    """Issue 12.4 / 11.8: with the stage program's calls, the new kernels lower with the contract's attributes:
    gather scale sqrt(640) on a Q8_0 table; head_rms_norm (4 heads of 256 from the [256] weight, eps); NEOX rope
    on the local-base table rope_table_swa; attention with scale 1/16 and the 512 sliding window; gelu_mul and
    add_bias on the elementwise kernel (OP 2, 3)."""
    _, _, bufs = _command("rope", ("f32",) * 3)
    attrs = KernelAttrs.from_programs(bufs, {0: GEMMA_CALLS})
    assert attrs.calls is not None and len(attrs.calls) == len(GEMMA_CALLS)

    def low(op, dtypes):
        return _lower(op, dtypes, calls=GEMMA_CALLS)

    g = low("embedding_gather", ("i32", "q8_0", "f32"))
    assert g.kernel.data.endswith("embedding:_gather_kernel") and _kv(g, "meta")["FMT"] == 3
    assert _kv(g, "scalars") == {"D": D, "scale": math.sqrt(640)}
    n = low("head_rms_norm", ("f32",) * 3)
    assert n.kernel.data.endswith("rmsnorm:_head_rms_norm_kernel") and list(n.grid.get_values()) == [T, 1, 1]
    assert _kv(n, "scalars") == {"H": H, "HD": HD, "eps": 1e-6} and _kv(n, "meta") == {"BLOCK_H": 4, "BLOCK_D": 256}
    r = low("rope", ("f32",) * 3)
    assert _kv(r, "scalars") == {"start_pos": "$start_pos", "H": H, "HD": HD, "ROPE_DIM": HD, "NEOX": 1}
    assert r.arg_ids[1] == "alloc.s0.rope_table_swa"  # the rope table operand
    a = low("attention", ("f32",) * 4)
    assert _kv(a, "scalars") == {"start_pos": "$start_pos", "T": T, "H": H, "HKV": HKV, "HD_K": HD, "HD_V": HD,
                                 "scale": 0.0625, "WINDOW": 512}
    assert list(a.grid.get_values())[1] == HKV and _kv(a, "meta")["G"] == H // HKV
    for op, code in (("gelu_mul", 2), ("add_bias", 3), ("silu_mul", 0), ("add", 1)):
        e = _lower(op, ("f32",) * 3)
        assert e.kernel.data.endswith("elementwise:_binary_kernel") and _kv(e, "meta")["OP"] == code


def test_lowering_without_calls_records_runtime_names_and_defaults():
    """Issue 12.4: without the model ABI the attributes are "$<attr>" runtime names (never a silent llama
    default); with calls that omit an attribute at its default (the contract omits defaults) the default is
    recorded: scale 1, norm rope, 1/sqrt(hd_k), the cache length as the window of full causal attention."""
    assert _kv(_lower("attention", ("f32",) * 4), "scalars")["WINDOW"] == "$window"
    assert _kv(_lower("rope", ("f32",) * 3), "scalars")["NEOX"] == "$mode"
    assert _kv(_lower("embedding_gather", ("i32", "q6_k", "f32")), "scalars")["scale"] == "$scale"
    assert _kv(_lower("head_rms_norm", ("f32",) * 3), "scalars")["eps"] == "$eps"
    plain = [KernelCall("attention", (), ("blk.0.attn",), {}, 0), KernelCall("rope", (), ("blk.0.q",), {}, 0),
             KernelCall("embedding_gather", (), ("h0",), {})]
    sc = _kv(_lower("attention", ("f32",) * 4, calls=plain), "scalars")
    assert sc["scale"] == pytest.approx(1 / 16) and sc["WINDOW"] == S
    assert _kv(_lower("rope", ("f32",) * 3, calls=plain), "scalars")["NEOX"] == 0
    assert _kv(_lower("embedding_gather", ("i32", "f16", "f32"), calls=plain), "scalars")["scale"] == 1.0


@pytest.mark.parametrize("calls,op,dtypes,msg", [
    ([], "attention", ("f32",) * 4, "attention -> blk.0.attn, which is not a call of the runtime stage program"),
    ([KernelCall("rope", (), ("blk.0.q",), {"mode": "gptj"}, 0)], "rope", ("f32",) * 3, "rope mode 'gptj'"),
    ([KernelCall("rms_norm", (), ("blk.0.attn_in",), {}, 0)], "rms_norm", ("f32",) * 3, "has no eps"),
])
def test_lowering_rejects_calls_it_cannot_honour(calls, op, dtypes, msg):
    """AB-I-2 / AB-D-1: a task the stage program has no call for, a rope mode the kernel does not implement and a
    norm call without its eps fail the lowering with the lineage path -- never a default kernel."""
    with pytest.raises(PassFailedException) as ei:
        _lower(op, dtypes, calls=calls)
    assert msg in str(ei.value) and f"task @decode.s0.t.{op} -> candidate triton.{op} -> concrete command" in str(ei.value)


def test_lowered_window_attention_launch_runs_as_recorded():
    """Issue 12.4: the recorded sliding-window attention launch (GPU block sizes, grid, scale, WINDOW) runs as
    recorded under the interpreter and equals masked softmax attention with that window and scale."""
    import importlib

    import torch.nn.functional as F

    calls = [KernelCall("attention", (), ("blk.0.attn",), {"scale": 0.2, "window": 4}, 0)]
    cmd, task, bufs = _command("attention", ("f32",) * 4)
    op = lower_command(cmd, task, bufs, KernelAttrs.from_programs(bufs, {0: calls}), _sync(cmd), {})
    mod, fn = op.kernel.data.split(":")
    kernel = importlib.import_module(f"pipeplan.runtime.kernels.triton.{mod}").__dict__[fn]  # the target's package
    sc, meta = _kv(op, "scalars"), _kv(op, "meta")
    g = torch.Generator().manual_seed(3)
    hd, sp = 16, 7  # a small head dim so the check is quick; the launch's other values as recorded
    ck, cv = torch.randn(S, HKV, hd, generator=g), torch.randn(S, HKV, hd, generator=g)
    q = torch.randn(T, H, hd, generator=g)
    o = torch.empty(T, H * hd)
    meta.update(BLOCK_DK=16, BLOCK_DV=16)
    kernel[tuple(op.grid.get_values())](q, ck, cv, o, sp, sc["T"], sc["H"], sc["HKV"], hd, hd, q.stride(0),
                                        sc["scale"], sc["WINDOW"], **meta)
    p, j = torch.arange(sp, sp + T)[:, None], torch.arange(sp + T)[None, :]
    mask = (j <= p) & (p - j < 4)
    want = F.scaled_dot_product_attention(q.transpose(0, 1), ck[:sp + T].transpose(0, 1), cv[:sp + T].transpose(0, 1),
                                          attn_mask=mask, scale=0.2, enable_gqa=True).transpose(0, 1).reshape(T, -1)
    torch.testing.assert_close(o, want, rtol=1e-5, atol=2e-6)
