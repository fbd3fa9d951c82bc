"""``convert-cplan-to-triton``: lower a ``cuda-triton`` concrete plan to the ``tmachine`` dialect
(seeds/003 "Machine lowering and artifact emission", AB-M-1, AB-M-4, AB-I-2, AB-D-1).

Input: a module holding the ``cplan.plan`` (target ``cuda-triton@...``, queue-schedule extension) and
the ``pplan.plan`` it was built from (``convert-pplan-to-cplan{keep_source=true}``): the portable tasks
give each command's exact shape and dtypes, the portable buffers the KV-cache / rope geometry.

Each concrete allocation becomes one ``tmachine.buffer`` (its id, device and lifetime; dtype, shape and
origin of the portable buffer it holds), and each concrete command one instruction in its queue's
``tmachine.stream``, in queue order, tagged with its portable task's ``step`` (``#tmachine<step ...>``) and
carrying the command's provenance verbatim (``cmd``, ``task``, ``impl``, its ``#cplan.lineage``); a command that a command of
another queue depends on signals a program-level ``tmachine.token``, which that command's instruction waits
for. Two phases: :func:`place_commands` builds the skeleton (buffers, tokens, streams holding the placed
``cplan.command`` ops in queue order), then the :class:`LowerCommand` ``RewritePattern``, driven by a
``PatternRewriteWalker``, rewrites each placed command into its one instruction (1:1). Kernel names are
``module:function`` within the target's kernel package (the IR names no runtime import path):

==================  ==========================================================================
command op          instruction
==================  ==========================================================================
embedding_gather    launch ``embedding:_gather_kernel`` grid ``(T, cdiv(D, BLOCK_D))``, ``FMT`` the
                    table format's ``gather_fmt``, scalar ``scale`` (gemma3: ``sqrt(n_embd)``)
rms_norm            launch ``rmsnorm:_rms_norm_kernel`` grid ``(T,)``, scalar ``eps``
head_rms_norm       launch ``rmsnorm:_head_rms_norm_kernel`` grid ``(T, cdiv(H, BLOCK_H))``, ``HD``
                    from the weight ``[head_dim]``, scalar ``eps``
matmul              launch ``gemv:_gemv_kernel`` (F32 ... Q5_1) or ``gemv:_gemv_kq_kernel`` (Q4_K,
                    Q5_K, Q6_K; ``NSB`` super-blocks per K step) grid ``(cdiv(N, BLOCK_N),
                    cdiv(T, BLOCK_M))``, ``FMT`` from the weight dtype, defaults of
                    ``triton_formats.launch_config`` (autotuned at run)
rope                launch ``rope:_rope_kernel`` grid ``(T, cdiv(H, BLOCK_H))``; ``ROPE_DIM`` from
                    the table it reads (``rope_table`` or ``rope_table_swa``), scalar ``NEOX``
                    (``mode``: 0 norm, 1 neox)
kv_cache_write      launch ``attention:_kv_write_kernel`` grid ``(T,)``, ``WK``/``WV`` from the caches
attention           launch ``attention:_attention_kernel`` grid ``(cdiv(T, BLOCK_M), Hkv)``, ``HD_K``/
                    ``HD_V`` from the caches, scalars ``scale`` (default ``1/sqrt(hd_k)``) and
                    ``WINDOW`` (the sliding window, or the cache length ``S`` for full causal)
silu_mul / add /    launch ``elementwise:_binary_kernel`` grid ``(T, cdiv(F, BLOCK))``, ``OP`` 0 / 1 /
gelu_mul / add_bias 2 / 3 (add_bias reads its ``[F]`` bias with row stride 0)
argmax              launch ``argmax:_argmax_kernel`` grid ``(T,)``
last_row            ``tmachine.view`` (no kernel)
send / recv         ``tmachine.copy`` on the copy engine
==================  ==========================================================================

Kernel-call attributes (kernel contract: ``eps``, rope ``mode``, attention ``scale``/``window``, the
gather's ``scale``) are not in the portable plan. With the model kernel ABI (pass option ``model`` or a
module-level ``vmachine.abi`` op, as for ``convert-cplan-to-vmachine``) they come from the ABI's
hyper-parameters through :func:`pipeplan.models.stage_program.kernel_attrs` (the function the stage-program
builders use) with the task's block and the role of its output (a call the ABI cannot serve fails; the
runtime's stage program is not rebuilt); without it they are recorded as ``"$<attr>"`` scalars, names the
runtime binds from the stage program's call (like ``"$start_pos"``, the step's position).

Legality: the plan must target ``cuda-triton`` and use the queue extension; every command's
implementation must be one the Triton kernels provide, and its dtypes and row length ones they read:
:func:`pipeplan.targets.triton_formats.unsupported`, the same check the ``cuda-triton``
legality makes (activations f32; matmul weights and embedding tables F32, F16, BF16, Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, block formats with a row length that is a multiple of their block).
Anything else fails the pass with the lineage path ``model op -> stage/block -> task -> candidate ->
concrete command`` -- there is no fallback kernel (e.g. q2_k matrices, which the kernels do not read).
The ``cplan.plan`` op is replaced by the ``tmachine.program``; the portable plan stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeplan.dialects.carriers import scalar_attr
from pipeplan.dialects.cplan import AllocOp, CommandOp, PlanOp, QueueOp, QueueScheduleOp
from pipeplan.dialects.pplan import BufferInfo, TaskOp, fingerprint, ints
from pipeplan.dialects.pplan import PlanOp as PPlanOp
from pipeplan.dialects.triton_machine import (
    REVISION,
    BufferType,
    CopyOp,
    LaunchOp,
    ProgramOp,
    StreamOp,
    TokenOp,
    TokenType,
    ViewOp,
    lifetime_attr,
    step_attr,
)
from pipeplan.dialects.triton_machine import BufferOp as MachineBufferOp
from pipeplan.dialects.vmachine import AbiOp
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import HParams, ProgramError
from pipeplan.targets.triton_formats import (
    GEMV_KQ,
    KERNEL_OPS,
    ROPE_MODES,
    attention_config,
    launch_config,
    next_pow2,
    unsupported,
    weight_format,
)
from pipeplan.transforms.machine_lowering import (
    LowerPlacedCommand,
    call_attrs,
    lower_placed,
    stage_layer_range,
)
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

PASS = "convert-cplan-to-triton"

IMPLS = {f"triton.{o}" for o in KERNEL_OPS} | {"triton.matmul_tc", "triton.last_row", "triton.send", "triton.recv"}
"""Implementations this lowering turns into instructions (the ``cuda-triton`` rules)."""

BINARY_OPS = {"silu_mul": 0, "add": 1, "gelu_mul": 2, "add_bias": 3}
"""Elementwise op -> ``OP`` of ``elementwise:_binary_kernel``."""

ATTR_DEFAULTS: dict[str, dict[str, Any]] = {
    "embedding_gather": {"scale": 1.0}, "rope": {"mode": "norm"}, "attention": {"scale": None, "window": 0},
    "rms_norm": {}, "head_rms_norm": {},
}
"""Kernel-call attributes the launches need (kernel contract; omitted from a call when at their default)."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Reject(Exception):
    pass


@dataclass(frozen=True)
class Sync:
    """The SSA values one instruction takes besides its properties: ``values`` alloc id -> its
    ``!tmachine.buffer``, ``waits`` the tokens of other streams' instructions it waits for, ``signal`` the token
    it completes (None: no other stream waits for it), ``step`` its plan step (None: every step)."""

    values: Mapping[str, SSAValue]
    waits: Sequence[SSAValue] = ()
    signal: SSAValue | None = None
    step: str | None = None

    def buf(self, aid: str) -> SSAValue:
        """The buffer value of alloc ``aid``. Raises _Reject when the program declares no such buffer."""
        v = self.values.get(aid)
        if v is None:
            raise _Reject(f"buffer {aid!r}, which is not an allocation of the plan")
        return v

    def build(self, cls: type[LaunchOp | ViewOp | CopyOp], cmd: CommandOp, buffers: Sequence[SSAValue],
              props: dict[str, Attribute]) -> Operation:
        """The instruction ``cls`` lowering ``cmd`` over ``buffers`` (launch: its args; view/copy: source,
        target): ``props`` plus its id ``i.<cmd>``, its step and the command's provenance (``cmd``, ``task``,
        ``impl``, ``lineage``)."""
        props = {"id": StringAttr(f"i.{cmd.id.data}"), **props, "cmd": cmd.id, "task": cmd.task, "impl": cmd.impl,
                 "lineage": cmd.lineage}
        if self.step is not None:
            props["step"] = step_attr(self.step)
        sync = [list(self.waits), self.signal]
        operands = [list(buffers), *sync] if cls is LaunchOp else [*buffers, *sync]
        return cls.build(operands=operands, properties=props)


def _launch(cmd: CommandOp, kernel: str, grid: tuple[int, ...], meta: dict, args: list[str], scalars: dict,
            sync: Sync, autotune: bool = False) -> Operation:
    g = list(grid) + [1] * (3 - len(grid))
    return sync.build(LaunchOp, cmd, [sync.buf(a) for a in args], {
        "kernel": StringAttr(kernel), "grid": DenseArrayBase.from_list(i64, g),
        "meta": DictionaryAttr({k: scalar_attr(v) for k, v in sorted(meta.items())}),
        "scalars": DictionaryAttr({k: scalar_attr(v) for k, v in sorted(scalars.items())}),
        "autotune": IntegerAttr(int(autotune), i1)})


class KernelAttrs:
    """Kernel-call attributes per portable task (module docstring): from the model kernel ABI's
    hyper-parameters ``hp`` (:func:`~pipeplan.models.stage_program.kernel_attrs` with the task's block and
    the role of its output), from given stage-program calls (``calls``: ``(stage, kernel, first output) ->
    attrs``), or ``"$<attr>"`` runtime names when neither is given."""

    def __init__(self, bufs: Mapping[str, BufferInfo], calls: Mapping[tuple[int, str, str], Mapping[str, Any]] | None,
                 hp: HParams | None = None):
        self._bufs = bufs
        self.calls = calls
        self.hp = hp

    @classmethod
    def from_programs(cls, bufs: Mapping[str, BufferInfo], programs: Mapping[int, Sequence[Any]]) -> KernelAttrs:
        """From each stage's ordered ``KernelCall`` list (:mod:`pipeplan.models.stage_program`)."""
        return cls(bufs, {(st, c.kernel, c.outputs[0]): c.attrs for st, prog in programs.items() for c in prog
                          if c.outputs})

    @classmethod
    def for_plan(cls, pplan: PPlanOp, bufs: Mapping[str, BufferInfo], abi: Mapping[str, Any] | None) -> KernelAttrs:
        """The attributes the model kernel ABI ``abi`` gives (each stage's layer range, from its portable tasks,
        checked for the ABI), or runtime names when ``abi`` is None.

        Raises:
            PassFailedException: a stage whose layer range the model ABI has no stage program for."""
        if abi is None:
            return cls(bufs, None)
        from pipeplan.transforms.convert_cplan_to_vmachine import hparams_of

        hp = hparams_of(abi)
        per_stage: dict[int, list[TaskOp]] = {}
        for t in pplan.tasks():
            per_stage.setdefault(t.stage_index, []).append(t)
        for st, tasks in per_stage.items():
            try:
                stage_layer_range(hp, st, (t.block.value.data for t in tasks if t.block.value.data >= 0),
                                  any(t.op.data == "embedding_gather" for t in tasks),
                                  any(t.op.data in ("last_row", "argmax") for t in tasks), int(abi["max_seq_len"]))
            except PipeplanError as err:
                raise PassFailedException(f"{PASS}: {err.message}") from None
        return cls(bufs, None, hp)

    def of(self, task: TaskOp) -> dict[str, Any]:
        """The attributes of ``task``'s kernel call (ATTR_DEFAULTS filled in; rms norms: ``eps``), or
        ``"$<attr>"`` names. Raises ``_Reject`` when the ABI cannot serve the call (or the given calls have
        none writing the task's output)."""
        op = task.op.data
        want = dict(ATTR_DEFAULTS.get(op, {}))
        if op in ("rms_norm", "head_rms_norm"):
            want["eps"] = None
        if self.calls is None and self.hp is None:
            return {k: f"${k}" for k in want}
        out = self._bufs[task.writes()[0]].origin.split(":", 1)[-1]
        call: Mapping[str, Any] | None
        if self.hp is not None:
            blk = task.block.value.data
            try:
                call = call_attrs(self.hp, op, None if blk < 0 else blk, out)
            except ProgramError as err:
                raise _Reject(f"{op} -> {out}, which is not a call the model ABI can serve ({err.message})") from None
        else:
            assert self.calls is not None
            call = self.calls.get((task.stage_index, op, out))
            if call is None:
                raise _Reject(f"{op} -> {out}, which is not a call of the runtime stage program for the model ABI")
        got = {k: call.get(k, v) for k, v in want.items()}
        if got.get("eps", 0.0) is None:
            raise _Reject(f"{op} -> {out}: the stage program's call has no eps")
        return got


def _shape(bufs: Mapping[str, BufferInfo], ref: str) -> tuple[int, ...]:
    return bufs[ref].type.shape


def _lower_kernel(cmd: CommandOp, task: TaskOp, bufs: Mapping[str, BufferInfo], attrs: KernelAttrs,
                  waits: Sync, interpret: bool = False) -> Operation:
    """One compute command -> its launch (module table); raises _Reject with the reason."""
    op = task.op.data
    shape = ints(task.work)
    dtypes = task.dtypes()
    reads, writes = [a.data for a in cmd.reads.data], [a.data for a in cmd.writes.data]
    args = reads + writes
    rd = task.reads()
    if op == "matmul":
        t, n, k = shape
        fmt = weight_format(dtypes[1])
        assert fmt is not None  # checked by unsupported()
        cfg = launch_config(fmt.ggml_type, t, n, k, interpret=interpret)
        if fmt.kernel == GEMV_KQ:
            meta = {"FMT": fmt.fmt, "USE_DOT": cfg["USE_DOT"], "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"],
                    "NSB": cfg["NSB"]}
        else:
            if cmd.impl.data == "triton.matmul_tc":
                cfg.update(USE_DOT=True, BLOCK_M=max(16, cfg["BLOCK_M"]), BLOCK_N=64, BLOCK_K=64)
            meta = {"FMT": fmt.fmt, "USE_DOT": cfg["USE_DOT"], "BLOCK_M": cfg["BLOCK_M"],
                    "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": cfg["BLOCK_K"]}
        grid = (_cdiv(n, cfg["BLOCK_N"]), _cdiv(t, cfg["BLOCK_M"]))
        return _launch(cmd, fmt.kernel, grid, meta, args, {"M": t, "N": n, "K": k}, waits, cfg["autotune"])
    t = shape[0]
    w = shape[1] if len(shape) > 1 else task.read_bytes()[0] // (4 * max(t, 1))  # argmax: [T] -> V from bytes
    if op == "embedding_gather":
        fmt = weight_format(dtypes[1])
        assert fmt is not None
        bd = next_pow2(w) if interpret else min(next_pow2(w), 1024)
        return _launch(cmd, "embedding:_gather_kernel", (t, _cdiv(w, bd)), {"FMT": fmt.gather_fmt, "BLOCK_D": bd},
                       args, {"D": w, "scale": attrs.of(task)["scale"]}, waits)
    if op == "rms_norm":
        return _launch(cmd, "rmsnorm:_rms_norm_kernel", (t,), {"BLOCK_D": min(next_pow2(w), 4096)}, args,
                       {"D": w, "eps": attrs.of(task)["eps"]}, waits)
    if op == "head_rms_norm":
        hd = _shape(bufs, rd[1])[0]
        if w % hd:
            raise _Reject(f"head_rms_norm width {w} is not a multiple of its weight's head dim {hd}")
        bd = next_pow2(hd)
        bh = max(1, min(next_pow2(w // hd), 4096 // bd))
        return _launch(cmd, "rmsnorm:_head_rms_norm_kernel", (t, _cdiv(w // hd, bh)), {"BLOCK_H": bh, "BLOCK_D": bd},
                       args, {"H": w // hd, "HD": hd, "eps": attrs.of(task)["eps"]}, waits)
    if op in BINARY_OPS:
        blk = next_pow2(w) if interpret else min(next_pow2(w), 1024)
        return _launch(cmd, "elementwise:_binary_kernel", (t, _cdiv(w, blk)), {"OP": BINARY_OPS[op], "BLOCK": blk},
                       args, {"F": w}, waits)
    if op == "argmax":
        return _launch(cmd, "argmax:_argmax_kernel", (t,), {"BLOCK": min(next_pow2(w), 4096)}, args, {"V": w}, waits)
    if op == "kv_cache_write":
        ck, cv = (_shape(bufs, r) for r in task.writes())
        wk, wv = ck[1] * ck[2], cv[1] * cv[2]
        return _launch(cmd, "attention:_kv_write_kernel", (t,), {"BLOCK": next_pow2(max(wk, wv)) if interpret else min(next_pow2(max(wk, wv)), 1024)}, args,
                       {"start_pos": "$start_pos", "WK": wk, "WV": wv}, waits)
    if op == "rope":
        table = _shape(bufs, rd[1])
        geo = _stage_cache(bufs, task)
        if geo is None:
            raise _Reject("rope without a KV cache buffer in its stage (head geometry unknown)")
        hd = geo[2]
        rope_dim = table[1] if len(table) == 2 else hd
        if w % hd or rope_dim % 2 or rope_dim > hd:
            raise _Reject(f"rope width {w} with head dim {hd} and rope dim {rope_dim}")
        heads = w // hd
        mode = attrs.of(task)["mode"]
        neox = mode if isinstance(mode, str) and mode.startswith("$") else ROPE_MODES.get(mode)
        if neox is None:
            raise _Reject(f"rope mode {mode!r}")
        bh = next_pow2(heads) if interpret else min(next_pow2(heads), 16)
        return _launch(cmd, "rope:_rope_kernel", (t, _cdiv(heads, bh)), {"BLOCK_H": bh, "BLOCK_P": next_pow2(hd // 2)},
                       args, {"start_pos": "$start_pos", "H": heads, "HD": hd, "ROPE_DIM": rope_dim, "NEOX": neox},
                       waits)
    if op == "attention":
        ck, cv = _shape(bufs, rd[1]), _shape(bufs, rd[2])
        s_len, hkv, hd_k = ck
        hd_v = cv[2]
        q = _shape(bufs, rd[0])
        if q[1] % hd_k or (q[1] // hd_k) % hkv:
            raise _Reject(f"attention with q width {q[1]} over {hkv} KV heads of dim {hd_k} (not a GQA multiple)")
        heads = q[1] // hd_k
        a = attrs.of(task)
        scale = 1.0 / hd_k ** 0.5 if a["scale"] is None else a["scale"]
        window = a["window"] if isinstance(a["window"], str) else (int(a["window"]) or s_len)
        cfg = attention_config(t, heads, hkv, hd_k, hd_v, shape[2] if len(shape) > 2 else t, interpret=interpret)
        return _launch(cmd, "attention:_attention_kernel", (_cdiv(t, cfg["BLOCK_M"]), hkv), cfg, args,
                       {"start_pos": "$start_pos", "T": t, "H": heads, "HKV": hkv, "HD_K": hd_k, "HD_V": hd_v,
                        "scale": scale, "WINDOW": window}, waits)
    raise _Reject(f"op {op}")


def _stage_cache(bufs: Mapping[str, BufferInfo], task: TaskOp) -> tuple[int, ...] | None:
    """Shape ``[S, Hkv, hd_k]`` of a ``cache_k`` buffer of the task's stage (and block, when it has one)."""
    st, blk = task.stage_index, task.block.value.data
    best = None
    for b in bufs.values():
        if b.stage == st and b.origin.endswith("cache_k") and len(b.type.shape) == 3:
            if b.origin == f"blk.{blk}.cache_k":
                return b.type.shape
            best = best or b.type.shape
    return best


def lower_command(cmd: CommandOp, task: TaskOp, bufs: Mapping[str, BufferInfo], attrs: KernelAttrs, sync: Sync,
                  sizes: Mapping[str, int], interpret: bool = False) -> Operation:
    """One concrete command -> its instruction (module table).

    Args:
        cmd: the command. task: its portable task. bufs: the portable buffers by name. attrs: where kernel-call
            attributes come from (:class:`KernelAttrs`). sync: the buffer values, the tokens it waits for and
            signals, its step (:class:`Sync`). sizes: alloc id -> bytes (copy sizes). interpret: block sizes for
            Triton's CPU interpreter (the kernels' ``interpreting()`` choice: fewest programs) instead of the GPU's.

    Raises:
        PassFailedException: ``no Triton kernel for <reason> at <lineage> -> concrete command <id>``.
    """
    cid = cmd.id.data
    where = f"{cmd.lineage_text} -> concrete command {cid}"
    impl = cmd.impl.data
    try:
        if impl not in IMPLS:
            raise _Reject(f"implementation {impl}")
        why = unsupported(str(task.op.data), task.dtypes(), ints(task.work), impl)
        if why is not None:
            raise _Reject(why)
        reads, writes = [a.data for a in cmd.reads.data], [a.data for a in cmd.writes.data]
        if impl in ("triton.send", "triton.recv", "triton.last_row"):
            if len(reads) != 1 or len(writes) != 1:
                raise _Reject(f"{impl} reading {len(reads)} and writing {len(writes)} buffers (one each)")
            ends = [sync.buf(reads[0]), sync.buf(writes[0])]
            if impl == "triton.last_row":
                return sync.build(ViewOp, cmd, ends, {"kind": StringAttr("last_row")})
            return sync.build(CopyOp, cmd, ends, {"bytes": IntegerAttr(min(sizes[reads[0]], sizes[writes[0]]), i64)})
        if impl.split(".", 1)[1].removesuffix("_tc") != task.op.data:
            raise _Reject(f"implementation {impl} for op {task.op.data}")
        return _lower_kernel(cmd, task, bufs, attrs, sync, interpret)
    except _Reject as r:
        raise PassFailedException(f"{PASS}: no Triton kernel for {r} at {where}") from None


@dataclass
class Lowering:
    """What :class:`LowerCommand` needs beyond the command (built by :func:`place_commands`): the portable
    ``tasks`` by id and ``bufs`` by name, kernel-call ``attrs``, alloc ``sizes`` (bytes), ``interpret``, and the
    program's SSA values: ``values`` alloc id -> ``!tmachine.buffer``; ``waits`` command id -> the tokens of
    the commands of other streams it depends on; ``signal`` command id -> the token it completes."""

    tasks: Mapping[str, TaskOp]
    bufs: Mapping[str, BufferInfo]
    attrs: KernelAttrs
    sizes: Mapping[str, int]
    interpret: bool = False
    values: dict[str, SSAValue] = field(default_factory=dict)
    waits: dict[str, list[SSAValue]] = field(default_factory=dict)
    signal: dict[str, SSAValue] = field(default_factory=dict)


class LowerCommand(LowerPlacedCommand):
    """``cplan.command`` placed in its ``tmachine.stream`` -> its one instruction (module table), 1:1: the
    command's alloc operands become the program's buffer values, its dependencies on commands of other streams
    ``waits`` tokens, and it signals its own token when another stream waits for it. Commands outside a
    stream do not match.

    Raises PassFailedException (from :func:`lower_command`, or a command whose task the portable plan lacks)."""

    container = StreamOp

    def __init__(self, env: Lowering):
        super().__init__()
        self.env = env

    def lower(self, op: CommandOp) -> Operation:
        env, cid = self.env, op.id.data
        task = env.tasks.get(op.task.data)
        if task is None:
            raise PassFailedException(f"{PASS}: concrete command {cid} names task @{op.task.data}, which the "
                                      "portable plan does not hold (run convert-pplan-to-cplan{keep_source=true})")
        sync = Sync(env.values, env.waits.get(cid, ()), env.signal.get(cid), task.step_name)
        return lower_command(op, task, env.bufs, env.attrs, sync, env.sizes, env.interpret)


def place_commands(plan: PlanOp, pplan: PPlanOp, abi: Mapping[str, Any] | None = None, interpret: bool = False
                   ) -> tuple[ProgramOp, Lowering]:
    """The skeleton of the ``tmachine.program`` of ``plan`` (which it consumes: pass a clone to keep it):
    one ``tmachine.buffer`` per allocation, one ``tmachine.token`` per command that a command of another
    queue depends on, and one ``tmachine.stream`` per queue holding that queue's ``cplan.command`` ops in
    queue order, their dependencies recorded in the returned :class:`Lowering` (the plan keeps only its
    allocations: the queue extension and syncs are dropped, and each placed command's ``after`` operands). :class:`LowerCommand` then rewrites each
    placed command into its instruction.

    Raises:
        PassFailedException: wrong target or extension, an allocation whose buffer the portable plan lacks.
    """
    if not plan.target.data.startswith("cuda-triton"):
        raise PassFailedException(f"{PASS}: the concrete plan targets '{plan.target.data}', not cuda-triton")
    ext = [o for o in plan.body.walk() if isinstance(o, QueueScheduleOp)]
    if not ext:
        raise PassFailedException(f"{PASS}: the cuda-triton target runs queues; this plan has no cplan.queue_schedule "
                                  "extension (bind it with a queue binder)")
    bufs = {b.name: b for b in pplan.buffers()}
    env = Lowering({t.task_id: t for t in pplan.tasks()}, bufs, KernelAttrs.for_plan(pplan, bufs, abi),
                   {a.id.data: a.size.value.data for a in plan.body.block.ops if isinstance(a, AllocOp)}, interpret)
    concrete = StringAttr(f"sha256:{fingerprint(plan)}")
    cmds = {o.id.data: o for o in plan.body.walk() if isinstance(o, CommandOp)}
    queues = [(q.device, q.engine, [s.data for s in q.order.data]) for q in ext[0].body.walk() if isinstance(q, QueueOp)]
    queue_of = {c: k for k, (_, _, order) in enumerate(queues) for c in order}
    decls: list[Operation] = []
    for a in (o for o in plan.body.walk() if isinstance(o, AllocOp)):
        b = _buffer(a, bufs).name_result()
        env.values[a.id.data] = b.result
        decls.append(b)
    tokens: list[TokenOp] = []
    for _, _, order in queues:
        for cid in order:
            for d in cmds[cid].deps.data:
                dep = d.data
                if queue_of.get(dep) == queue_of[cid]:
                    continue
                if dep not in env.signal:
                    t = TokenOp.create(properties={"id": StringAttr(f"done.{dep}")}, result_types=[TokenType()])
                    env.signal[dep] = t.result
                    tokens.append(t)
                env.waits.setdefault(cid, []).append(env.signal[dep])
    pos = {c: (k, i) for k, (_, _, order) in enumerate(queues) for i, c in enumerate(order)}
    tokens.sort(key=lambda t: pos.get(t.id.data.removeprefix("done."), (len(queues), 0)))  # signaller order
    for o in [o for o in plan.body.block.ops if not isinstance(o, AllocOp | CommandOp)]:
        o.detach()  # the queue extension and the syncs: their order is the streams', their edges the tokens
        o.erase()
    streams = []
    for device, engine, order in queues:
        placed = []
        for cid in order:
            c = cmds[cid]
            c.detach()
            n_in, n_out = len(c.reads.data), len(c.writes.data)
            c.operands = c.operands[:n_in + n_out]  # dependencies: now env.waits / env.signal
            c.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [n_in, n_out, 0])
            placed.append(c)
        streams.append(StreamOp.create(properties={"device": device, "engine": engine},
                                       regions=[Region(Block(placed))]))
    prog = ProgramOp.create(properties={"target": plan.target, "concrete": concrete, "revision": StringAttr(REVISION)},
                            regions=[Region(Block([*decls, *tokens, *streams]))])
    return prog, env


def lower_plan(plan: PlanOp, pplan: PPlanOp, abi: Mapping[str, Any] | None = None, interpret: bool = False
               ) -> ProgramOp:
    """The ``tmachine.program`` of one concrete plan (module docstring; ``plan`` is not changed): the skeleton
    of :func:`place_commands` on a clone of ``plan``, then :class:`LowerCommand` applied by a
    ``PatternRewriteWalker`` to every placed command. ``abi`` the model kernel ABI
    (:func:`pipeplan.transforms.convert_cplan_to_vmachine.abi_for_module`) the call attributes come from,
    or None (they are then ``"$<attr>"`` runtime names); ``interpret``: launch configurations for Triton's
    CPU interpreter (:func:`lower_command`).

    Raises:
        PassFailedException: wrong target or extension, a command whose task is not in the portable
            plan, an implementation or dtype/shape the Triton kernels do not provide (message carries
            the lineage path).
    """
    prog, env = place_commands(plan.clone(), pplan, abi, interpret)
    left = lower_placed(prog.body, LowerCommand(env))
    if left is not None:
        raise PassFailedException(f"{PASS}: concrete command {left.id.data} was not lowered")
    return prog


def _buffer(alloc: AllocOp, bufs: Mapping[str, BufferInfo]) -> MachineBufferOp:
    """The ``tmachine.buffer`` of one concrete allocation (dtype, shape, origin of its portable buffer).

    Raises:
        PassFailedException: the allocation's source is not a buffer of the portable plan."""
    src = bufs.get(alloc.source.data)
    if src is None:
        raise PassFailedException(f"{PASS}: allocation {alloc.id.data} holds buffer @{alloc.source.data}, which the "
                                  "portable plan does not hold")
    return MachineBufferOp.create(properties={"id": alloc.id, "device": alloc.device,
                                              "dtype": StringAttr(src.type.dtype),
                                              "shape": DenseArrayBase.from_list(i64, src.type.shape),
                                              "lifetime": lifetime_attr(alloc.lifetime.data), "origin": StringAttr(src.origin)},
                                  result_types=[BufferType()])


@dataclass(frozen=True)
class ConvertCplanToTritonPass(ModulePass):
    """Replace each ``cplan.plan`` by its ``tmachine.program`` (module docstring); fails if none is found.

    Option ``model``: a GGUF file or model-facts TOML giving the model kernel ABI (as for
    ``convert-cplan-to-vmachine``; a module-level ``vmachine.abi`` op serves too, and stays in the module);
    without either, kernel-call attributes are recorded as ``"$<attr>"`` runtime names. Option
    ``interpret``: block sizes and grids for Triton's CPU interpreter (``TRITON_INTERPRET=1``: fewest
    programs, as the kernels choose when interpreting) instead of the GPU's."""

    name = "convert-cplan-to-triton"

    model: str = ""
    interpret: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pipeplan.transforms.convert_cplan_to_vmachine import abi_for_module

        plans = [o for o in op.ops if isinstance(o, PlanOp)]
        if not plans:
            raise PassFailedException(f"{PASS}: no cplan.plan to lower")
        pplans = [o for o in op.ops if isinstance(o, PPlanOp)]
        if len(pplans) != 1:
            raise PassFailedException(f"{PASS}: needs the portable plan next to the concrete plan (found "
                                      f"{len(pplans)} pplan.plan; run convert-pplan-to-cplan{{keep_source=true}})")
        rewriter = Rewriter()
        for p in plans:
            abi = None
            if self.model or any(isinstance(o, AbiOp) for o in op.ops):
                try:
                    abi, _ = abi_for_module(op, p, self.model)
                except PipeplanError as e:
                    raise PassFailedException(f"{PASS}: {e.one_line()}") from None
            prog = lower_plan(p, pplans[0], abi, self.interpret)
            rewriter.replace_op(p, prog)
        if any(isinstance(o, PlanOp) for o in op.ops):
            raise PassFailedException(f"{PASS}: a cplan.plan remained after lowering")
