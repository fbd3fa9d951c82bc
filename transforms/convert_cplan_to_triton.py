"""``convert-cplan-to-triton``: lower a ``cuda-triton`` concrete plan to the ``tmachine`` dialect
(seeds/003 "Machine lowering and artifact emission", AB-M-1, AB-M-4, AB-I-2, AB-D-1).

Input: a module holding the ``cplan.plan`` (target ``cuda-triton@...``, queue-schedule extension) and
the ``pplan.plan`` it was built from (``convert-pplan-to-cplan{keep_source=true}``): the portable tasks
give each command's exact shape and dtypes, the portable buffers the KV-cache / rope geometry.

Each concrete command becomes one instruction in its queue's ``tmachine.stream``, in queue order:

==================  ==========================================================================
command op          instruction
==================  ==========================================================================
embedding_gather    launch ``embedding:_gather_kernel`` grid ``(T, cdiv(D, BLOCK_D))``
rms_norm            launch ``rmsnorm:_rms_norm_kernel`` grid ``(T,)``, ``eps`` = ``$eps`` (model ABI)
matmul              launch ``gemv:_gemv_kernel`` grid ``(cdiv(N, BLOCK_N), cdiv(T, BLOCK_M))``, ``FMT``
                    from the weight dtype, defaults of :func:`gemv.launch_config` (autotuned at run);
                    a q4_k weight: ``gemv:_gemv_q4k_kernel``, meta ``USE_DOT, BLOCK_M, BLOCK_N, NSB``
                    (``NSB`` super-blocks of 256 per K step), same grid
rope                launch ``rope:_rope_kernel`` grid ``(T, cdiv(H, BLOCK_H))``
kv_cache_write      launch ``attention:_kv_write_kernel`` grid ``(T,)``
attention           launch ``attention:_attention_kernel`` grid ``(cdiv(T, BLOCK_M), Hkv)``
silu_mul / add      launch ``elementwise:_binary_kernel`` grid ``(T, cdiv(F, BLOCK))``
argmax              launch ``argmax:_argmax_kernel`` grid ``(T,)``
last_row            ``tmachine.view`` (no kernel)
send / recv         ``tmachine.copy`` on the copy engine
==================  ==========================================================================

Legality: the plan must target ``cuda-triton`` and use the queue extension; every command's
implementation must be one the Triton kernels provide, and its dtypes ones they read (activations
f32; matmul weights f32, f16, bf16, q8_0, q4_0, q4_k; gather tables the same but q4_k). Block formats
need a row length ``K`` that is a multiple of their block (32; 256 for q4_k). Anything else fails the
pass with the lineage path ``model op -> stage/block -> task -> candidate -> concrete command`` -- there
is no fallback kernel (e.g. a q4_k ``token_embd`` gather, or q5_k / q6_k matrices, which the kernels do
not read). The ``cplan.plan`` op is replaced by the ``tmachine.program``; the portable plan stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.dialects.carriers import scalar_attr, strings
from pipeplan.dialects.cplan import CommandOp, PlanOp, QueueOp, QueueScheduleOp, plan_from_ir
from pipeplan.dialects.pplan import BufferOp, TaskOp, fingerprint, ints, str_list
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from pipeplan.dialects.triton_machine import REVISION, CopyOp, LaunchOp, ProgramOp, StreamOp, ViewOp
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

PASS = "convert-cplan-to-triton"
K = "pipeplan.runtime.kernels.triton."
WEIGHT_FORMATS = {"f32": 0, "f16": 1, "bf16": 2, "q8_0": 3, "q4_0": 4}
"""Weight dtypes the Triton ``_gemv_kernel`` and the gather read -> their ``FMT`` code."""
MATMUL_WEIGHTS = (*WEIGHT_FORMATS, "q4_k")
"""Weight dtypes a Triton matmul reads (q4_k on ``gemv:_gemv_q4k_kernel``)."""
BLOCK_K = {"q8_0": 32, "q4_0": 32, "q4_k": 256}
"""Block formats -> weights per block (the row length must be a multiple)."""

KERNEL_OPS = ("embedding_gather", "rms_norm", "matmul", "rope", "kv_cache_write", "attention", "silu_mul", "add",
              "argmax")
IMPLS = {f"triton.{o}" for o in KERNEL_OPS} | {"triton.matmul_tc", "triton.last_row", "triton.send", "triton.recv"}


def _np2(n: int) -> int:
    n = max(int(n), 1)
    return 1 << (n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Reject(Exception):
    pass


def _launch(cmd: CommandOp, kernel: str, grid: tuple[int, ...], meta: dict, args: list[str], scalars: dict,
            waits: list[str], autotune: bool = False) -> LaunchOp:
    g = list(grid) + [1] * (3 - len(grid))
    return LaunchOp.create(properties={
        "id": StringAttr(f"i.{cmd.id.data}"), "cmd": cmd.id, "kernel": StringAttr(K + kernel),
        "grid": DenseArrayBase.from_list(i64, g), "meta": DictionaryAttr({k: scalar_attr(v) for k, v in meta.items()}),
        "args": strings(args),
        "scalars": DictionaryAttr({k: scalar_attr(v) for k, v in scalars.items()}),
        "autotune": IntegerAttr(int(autotune), i1), "waits": strings(waits),
        "lineage": StringAttr(f"{cmd.lineage.data} -> concrete command {cmd.id.data}")})


@dataclass
class _Geometry:
    """Per stage: KV heads and head dim (from the cache buffers), rope dim (from the rope table)."""

    hkv: int
    hd: int
    rope_dim: int


def _geometry(pplan: PPlanOp) -> dict[int, _Geometry]:
    out: dict[int, _Geometry] = {}
    caches: dict[int, tuple[int, ...]] = {}
    ropes: dict[int, tuple[int, ...]] = {}
    for op in pplan.body.walk():
        if isinstance(op, BufferOp):
            st = op.stage.value.data
            if op.origin.data.endswith("cache_k"):
                caches.setdefault(st, ints(op.shape))
            elif op.origin.data == "rope_table":
                ropes.setdefault(st, ints(op.shape))
    for st, shape in caches.items():
        if len(shape) == 3:
            rope = ropes.get(st)
            out[st] = _Geometry(hkv=shape[1], hd=shape[2], rope_dim=rope[1] if rope and len(rope) == 2 else shape[2])
    return out


def _lower_kernel(cmd: CommandOp, task: TaskOp, geo: _Geometry | None, waits: list[str]) -> LaunchOp:
    """One compute command -> its launch (module table); raises _Reject with the reason."""
    from pipeplan.runtime.kernels.triton.attention import attention_config
    from pipeplan.runtime.kernels.triton.gemv import launch_config

    op = task.op.data
    shape = ints(task.shape)
    dtypes = str_list(task.dtypes)
    reads, writes = [a.data for a in cmd.reads.data], [a.data for a in cmd.writes.data]
    args = reads + writes
    acts = [d for i, d in enumerate(dtypes) if not (op in ("matmul", "embedding_gather") and i == 1)]
    if op == "embedding_gather":
        acts = acts[1:]
        if dtypes[0] not in ("i32", "i64"):
            raise _Reject(f"token ids of dtype {dtypes[0]} (the gather reads i32/i64)")
    if op == "argmax":
        acts = acts[:1]
    bad = sorted({d for d in acts if d != "f32"})
    if bad:
        raise _Reject(f"activation dtype {', '.join(bad)} (the Triton kernels compute in f32)")
    readable = MATMUL_WEIGHTS if op == "matmul" else tuple(WEIGHT_FORMATS)
    if op in ("matmul", "embedding_gather") and dtypes[1] not in readable:
        raise _Reject(f"weight dtype {dtypes[1]} (Triton {op} reads {', '.join(readable)})")
    if op == "matmul":
        t, n, k = shape
        if k % BLOCK_K.get(dtypes[1], 1):
            raise _Reject(f"{dtypes[1]} weight with row length {k} (not a multiple of {BLOCK_K[dtypes[1]]})")
        cfg = launch_config(dtypes[1].upper(), t, n, k, interpret=False)
        if dtypes[1] == "q4_k":
            meta = {"USE_DOT": cfg["USE_DOT"], "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"], "NSB": cfg["NSB"]}
            return _launch(cmd, "gemv:_gemv_q4k_kernel", (_cdiv(n, cfg["BLOCK_N"]), _cdiv(t, cfg["BLOCK_M"])), meta,
                           args, {"M": t, "N": n, "K": k}, waits, cfg["autotune"])
        if cmd.impl.data == "triton.matmul_tc":
            cfg.update(USE_DOT=True, BLOCK_M=max(16, cfg["BLOCK_M"]), BLOCK_N=64, BLOCK_K=64)
        meta = {"FMT": WEIGHT_FORMATS[dtypes[1]], "USE_DOT": cfg["USE_DOT"], "BLOCK_M": cfg["BLOCK_M"],
                "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": cfg["BLOCK_K"]}
        grid = (_cdiv(n, cfg["BLOCK_N"]), _cdiv(t, cfg["BLOCK_M"]))
        return _launch(cmd, "gemv:_gemv_kernel", grid, meta, args, {"M": t, "N": n, "K": k}, waits, cfg["autotune"])
    t = shape[0]
    w = shape[1] if len(shape) > 1 else ints(task.read_bytes)[0] // (4 * max(t, 1))  # argmax: [T] -> V from bytes
    if op == "embedding_gather":
        bd = min(_np2(w), 1024)
        return _launch(cmd, "embedding:_gather_kernel", (t, _cdiv(w, bd)),
                       {"FMT": WEIGHT_FORMATS[dtypes[1]], "BLOCK_D": bd}, args, {"D": w}, waits)
    if op == "rms_norm":
        return _launch(cmd, "rmsnorm:_rms_norm_kernel", (t,), {"BLOCK_D": min(_np2(w), 4096)}, args,
                       {"D": w, "eps": "$eps"}, waits)
    if op in ("silu_mul", "add"):
        blk = min(_np2(w), 1024)
        return _launch(cmd, "elementwise:_binary_kernel", (t, _cdiv(w, blk)),
                       {"OP": 0 if op == "silu_mul" else 1, "BLOCK": blk}, args, {"F": w}, waits)
    if op == "argmax":
        return _launch(cmd, "argmax:_argmax_kernel", (t,), {"BLOCK": min(_np2(w), 4096)}, args, {"V": w}, waits)
    if geo is None:
        raise _Reject(f"{op} without a KV cache buffer in its stage (head geometry unknown)")
    if op == "kv_cache_write":
        return _launch(cmd, "attention:_kv_write_kernel", (t,), {"BLOCK": min(_np2(w), 1024)}, args,
                       {"start_pos": "$start_pos", "W": w}, waits)
    if w % geo.hd:
        raise _Reject(f"{op} width {w} is not a multiple of head dim {geo.hd}")
    heads = w // geo.hd
    if op == "rope":
        bh = min(_np2(heads), 16)
        return _launch(cmd, "rope:_rope_kernel", (t, _cdiv(heads, bh)), {"BLOCK_H": bh, "BLOCK_P": _np2(geo.hd // 2)},
                       args, {"start_pos": "$start_pos", "H": heads, "HD": geo.hd, "ROPE_DIM": geo.rope_dim}, waits)
    if op == "attention":
        if heads % geo.hkv:
            raise _Reject(f"attention with {heads} query heads over {geo.hkv} KV heads (not a GQA multiple)")
        cfg = attention_config(t, heads, geo.hkv, geo.hd, shape[2] if len(shape) > 2 else t, interpret=False)
        return _launch(cmd, "attention:_attention_kernel", (_cdiv(t, cfg["BLOCK_M"]), geo.hkv), cfg, args,
                       {"start_pos": "$start_pos", "T": t, "H": heads, "HKV": geo.hkv, "HD": geo.hd,
                        "scale": 1.0 / geo.hd ** 0.5}, waits)
    raise _Reject(f"op {op}")


def lower_plan(plan: PlanOp, pplan: PPlanOp) -> ProgramOp:
    """The ``tmachine.program`` of one concrete plan (module docstring).

    Raises:
        PassFailedException: wrong target or extension, a command whose task is not in the portable
            plan, an implementation or dtype/shape the Triton kernels do not provide (message carries
            the lineage path).
    """
    value = plan_from_ir(plan)
    if not value.target.startswith("cuda-triton"):
        raise PassFailedException(f"{PASS}: the concrete plan targets '{value.target}', not cuda-triton")
    ext = [o for o in plan.body.walk() if isinstance(o, QueueScheduleOp)]
    if not ext:
        raise PassFailedException(f"{PASS}: the cuda-triton target runs queues; this plan has no cplan.queue_schedule "
                                  "extension (bind it with a queue binder)")
    tasks = {o.sym_name.data: o for o in pplan.body.walk() if isinstance(o, TaskOp)}
    geo = _geometry(pplan)
    cmds = {o.id.data: o for o in plan.body.walk() if isinstance(o, CommandOp)}
    sizes = {a.id: a.size for a in value.allocs}
    queue_of = {c: (q.device.data, q.engine.data) for q in ext[0].body.walk() if isinstance(q, QueueOp)
                for c in (s.data for s in q.order.data)}
    streams = []
    for q in (o for o in ext[0].body.walk() if isinstance(o, QueueOp)):
        key = (q.device.data, q.engine.data)
        ops = []
        for cid in (s.data for s in q.order.data):
            cmd = cmds[cid]
            waits = [d.data for d in cmd.deps.data if queue_of.get(d.data) != key]
            where = f"{cmd.lineage.data} -> concrete command {cid}"
            task = tasks.get(cmd.task.data)
            if task is None:
                raise PassFailedException(f"{PASS}: concrete command {cid} names task @{cmd.task.data}, which the "
                                          "portable plan does not hold (run convert-pplan-to-cplan{keep_source=true})")
            impl = cmd.impl.data
            try:
                if impl not in IMPLS:
                    raise _Reject(f"implementation {impl}")
                if impl in ("triton.send", "triton.recv"):
                    src, dst = cmd.reads.data[0].data, cmd.writes.data[0].data
                    ops.append(CopyOp.create(properties={
                        "id": StringAttr(f"i.{cid}"), "cmd": cmd.id, "src": StringAttr(src), "dst": StringAttr(dst),
                        "bytes": IntegerAttr(min(sizes[src], sizes[dst]), i64),
                        "waits": strings(waits), "lineage": StringAttr(where)}))
                elif impl == "triton.last_row":
                    ops.append(ViewOp.create(properties={
                        "id": StringAttr(f"i.{cid}"), "cmd": cmd.id, "kind": StringAttr("last_row"),
                        "args": ArrayAttr([*cmd.reads.data, *cmd.writes.data]),
                        "waits": strings(waits), "lineage": StringAttr(where)}))
                else:
                    if impl.split(".", 1)[1].removesuffix("_tc") != task.op.data:
                        raise _Reject(f"implementation {impl} for op {task.op.data}")
                    ops.append(_lower_kernel(cmd, task, geo.get(task.stage.value.data), waits))
            except _Reject as r:
                raise PassFailedException(f"{PASS}: no Triton kernel for {r} at {where}") from None
        streams.append(StreamOp.create(properties={"device": q.device, "engine": q.engine},
                                       regions=[Region(Block(ops))]))
    return ProgramOp.create(properties={"target": plan.target, "concrete": StringAttr(f"sha256:{fingerprint(plan)}"),
                                        "revision": StringAttr(REVISION)}, regions=[Region(Block(streams))])


@dataclass(frozen=True)
class ConvertCplanToTritonPass(ModulePass):
    """Replace each ``cplan.plan`` by its ``tmachine.program`` (module docstring); fails if none is found."""

    name = "convert-cplan-to-triton"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plans = [o for o in op.ops if isinstance(o, PlanOp)]
        if not plans:
            raise PassFailedException(f"{PASS}: no cplan.plan to lower")
        pplans = [o for o in op.ops if isinstance(o, PPlanOp)]
        if len(pplans) != 1:
            raise PassFailedException(f"{PASS}: needs the portable plan next to the concrete plan (found "
                                      f"{len(pplans)} pplan.plan; run convert-pplan-to-cplan{{keep_source=true}})")
        rewriter = Rewriter()
        for p in plans:
            prog = lower_plan(p, pplans[0])
            rewriter.replace_op(p, prog)
        if any(isinstance(o, PlanOp) for o in op.ops):
            raise PassFailedException(f"{PASS}: a cplan.plan remained after lowering")
