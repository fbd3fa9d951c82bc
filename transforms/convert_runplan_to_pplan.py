"""``convert-runplan-to-pplan``: RunPlan -> PortablePlanIR (issue 4, item 2).

The pass reads the ``runplan.plan`` ops (model facts, tensor ops, stage ops, edge ops; no RunPlanSpec) and
lowers in two phases, as the machine lowerings do (:mod:`pipeplan.transforms.machine_lowering`):
:func:`place_stages` builds the ``pplan.plan`` skeleton (edge objects, then one ``pplan.step`` per step holding
a copy of each ``runplan.stage``), then the :class:`LowerStage` ``RewritePattern``, driven by a
``PatternRewriteWalker``, replaces each placed stage by its ``pplan.stage`` region of tasks (inserting the
weight, table and KV declarations it first uses), and each step gets its yields. The module's ``runplan.*``
ops are replaced by that ``pplan.plan`` (plus a ``pplan.deployment_binding`` built from the ``pool``
option's node-pool TOML file, else from the node specs the RunPlan carries).

Task granularity is the runtime's by construction: each stage's tasks are the
:class:`~pipeplan.models.stage_program.KernelCall` list of ``build_stage_program``, the builder of the
model's architecture (llama: 16 calls per block: attn_norm, q/k/v matmuls, two ropes, kv_cache_write,
attention, attn_output matmul, residual add, ffn_norm, gate/up matmuls, silu_mul, down matmul, residual
add; gemma3, qwen2, qwen3 add QK norms, post norms, biases, GELU; embedding on the first stage;
last_row, output norm and head on the last), wrapped by the edge transfers (``recv`` of the
inbound edge, ``send`` of the outbound one) and, on the last stage, the sampling ``argmax``
(llama.cpp greedy sampling; the runtime's Sampler at temperature 0). Two steps are described: a
prefill of ``prompt_len`` tokens at position 0 and a decode of one token at ``decode_pos``
(default ``prompt_len``).

Work formulas (R rows in the call, D hidden, F ffn, H/Hkv heads, hd/hd_v key/value head dims, r rope
dims, P = start position, L = P + R keys, W sliding window, w = element bytes; all activations f32):

* ``matmul`` [R,K]x[N,K]^T: flops ``2*R*N*K``; reads ``R*K*4 + bytes(W)``; writes ``R*N*4``.
* ``rms_norm`` / ``head_rms_norm`` (per head): flops ``4*R*N`` (square, sum, scale, weight) over the
  ``N`` values of a row; reads ``R*N*4 + bytes(w)``.
* ``add_bias``: flops ``R*N``; reads ``R*N*4 + bytes(bias)``.
* ``rope``: flops ``3*R*n_heads*r`` (6 per rotated pair); reads x and ``R*r*4`` of the table
  (``rope_table``, or ``rope_table_swa`` on sliding-window layers).
* ``kv_cache_write``: reads k and v; writes ``R*Hkv*hd*w_kv`` / ``R*Hkv*hd_v*w_kv`` into the caches.
* ``attention``: flops ``H*S*(2*hd + 2*hd_v + 5)`` with ``S = R*P + R*(R+1)/2`` causal scores (each
  query at most ``W`` with a window); QK^T 2*hd, PV 2*hd_v, softmax 5; reads q and the keys/values
  any query sees (``L``, or ``min(L, W + R - 1)`` with a window) of each cache (caches are
  ``[max_seq_len, Hkv, hd]`` / ``[.., hd_v]``, position-major like the runtime's); work shape ``[R, H*hd, L]``.
* ``add``: ``R*D`` flops; ``silu_mul``: ``5*R*F``; ``gelu_mul``: ``10*R*F`` (tanh form); ``argmax``: ``V``
  (compares); ``embedding_gather``: ``R*D`` with a ``scale`` (else 0); ``last_row``/``send``/``recv``:
  0 flops, bytes of the rows moved.
* ``send``/``recv`` move the step's rows of the edge object (``T*D*w`` activations, ``T*4`` token
  ids, 4 bytes for the sampled token) — at most the ObjectSpec's ``max_extent``.

Dataflow is SSA (:mod:`pipeplan.dialects.pplan`): weights, tables, KV caches and edge objects are
declarations, a task reads the current version of each buffer it reads and yields what it writes (a
fresh transient, or the next version of a buffer it updates in place), and each ``pplan.stage`` /
``pplan.step`` yields the versions later regions read, so the read-after-write, write-after-read and
write-after-write order of the old hazard lists is in the uses (``PlanOp.dependencies``). One order is
not dataflow and is stated explicitly: the **token loop**. The orchestrator feeds the token sampled by a
step (the last stage's ``send`` on the token-out edge) back as the next step's input (stage 0's ``recv``
on the token-in edge), so that ``send`` yields a ``!pplan.token`` the next step's token-in ``recv`` takes
(:func:`token_loop_dependency`). With it, every task of a step happens-before every task of the next one,
and no scheduler can interleave the two steps on a queue (a token loop could not run such an order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pipeplan.dialects.bindings import DeploymentBinding
from pipeplan.dialects.carriers import i64_attr, int_array, string
from pipeplan.dialects.diagnostics import gc_paused
from pipeplan.dialects.pplan import (
    BufferType,
    EdgeObjectOp,
    KvOp,
    PlanOp,
    PortableOp,
    PortableOpAttr,
    StageOp,
    StepOp,
    TableOp,
    TaskOp,
    TokenType,
    WeightOp,
    dtype_nbytes,
)
from pipeplan.dialects.runplan import EdgeOp as RunplanEdgeOp
from pipeplan.dialects.runplan import PlanOp as RunplanPlanOp
from pipeplan.dialects.runplan import StageOp as RunplanStageOp
from pipeplan.dialects.runplan import TensorOp, rejection_from
from pipeplan.dialects.runplan_attrs import _int_of
from pipeplan.dialects.runplan_build import build_plan_op, plan_node_pool, single_plan
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import (
    ROPE_TABLE,
    ROPE_TABLE_SWA,
    HParams,
    KernelCall,
    ProgramError,
    build_stage_program,
    is_weight,
)
from pipeplan.plan_types import DTYPE_WIDTHS, ORCHESTRATOR, ModelFacts, NodePool, RunPlanSpec
from pipeplan.transforms.machine_lowering import new_op
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, UnitAttr, i32
from xdsl.ir import Attribute, Operation, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException, VerifyException

_SKIP_INPUTS = ("start_pos",)
_PERSISTENT = ("edge", "kv")
"""Lifetimes of the buffers several (step, stage) regions access (weights and tables are only read)."""
_TOKEN = TokenType()
_DECLS: dict[str, type[WeightOp | TableOp | KvOp]] = {"weight": WeightOp, "table": TableOp, "kv": KvOp}
_UNIT = UnitAttr()
_OPS = {k.value: PortableOpAttr(k) for k in PortableOp}


@lru_cache(maxsize=1024)
def _segments(n_ins: int, n_upd: int, n_after: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, (n_ins, n_upd, n_after))


@dataclass
class _Buf:
    name: str
    dtype: str
    shape: tuple[int, ...]
    type: BufferType
    local: str = ""


@dataclass
class _Edge:
    """A runplan edge as the lowering reads it from its ``runplan.edge`` op."""

    edge_id: str
    kind: str
    producer: int
    consumer: int
    dtype: str
    shape: tuple[int, ...]
    alignment: int


@dataclass
class Lowering:
    """What the :class:`LowerStage` pattern reads and updates while it lowers the placed stages in program
    order: the model ABI, each stage's kernel calls, the edges, the buffers (name -> current version: a
    declaration's, a task's or a region's result) and the token-loop tokens.

    ``later[(step, stage)]`` names the persistent buffers (edge objects, KV caches) a region after
    ``(step, stage)`` accesses: a region yields the last version of each of those it writes."""

    hp: HParams
    facts: ModelFacts
    max_seq_len: int
    kv_dtype: str
    act_align: int
    steps: dict[str, tuple[int, int]]
    programs: dict[int, list[KernelCall]]
    tensors: dict[str, TensorOp]
    inbound: dict[int, _Edge]
    outbound: dict[int, _Edge]
    n_stages: int
    loop: dict[str, str]
    later: dict[tuple[str, int], frozenset[str]]
    decl_point: Operation
    bufs: dict[str, _Buf] = field(default_factory=dict)
    current: dict[str, SSAValue] = field(default_factory=dict)
    tokens: dict[str, SSAValue] = field(default_factory=dict)
    types: dict[tuple, BufferType] = field(default_factory=dict)
    lowered: int = 0

    # ---- buffers
    def buffer(self, name: str, dtype: str, shape: Sequence[int], *, alignment: int, lifetime: str,
               stage: int, origin: str, decl: str = "", nbytes: int | None = None,
               rewriter: PatternRewriter | None = None) -> _Buf:
        """A buffer (created once per name): a declaration op when ``decl`` names one
        (``weight | table | kv | edge``; inserted before the first step), else a transient whose first
        write defines it."""
        b = self.bufs.get(name)
        if b is not None:
            return b
        shape = tuple(int(d) for d in shape)
        n = dtype_nbytes(dtype, shape)
        key = (shape, dtype, lifetime, alignment)
        ty = self.types.get(key)
        if ty is None:
            ty = self.types[key] = BufferType(shape, dtype, lifetime, alignment)
        if nbytes is not None and nbytes != n:
            raise ValueError(f"{nbytes} bytes inconsistent with dtype {dtype} and shape {list(shape)} (expected {n})")
        b = _Buf(name, dtype, shape, ty, origin.split(":", 1)[-1])
        op: Operation | None = None
        if decl == "edge":  # as EdgeObjectOp(edge=, kind=, type=) / WeightOp(stage=, origin=, type=) store them
            eid, kind = origin.removeprefix("edge ").split(" ", 1)
            op = new_op(EdgeObjectOp, (), {"edge": string(eid), "kind": string(kind.strip("()"))}, (ty,))
        elif decl:
            op = new_op(_DECLS[decl], (), {"stage": i64_attr(stage), "origin": string(origin)}, (ty,))
        if op is not None:
            if rewriter is not None:
                rewriter.insert(op, InsertPoint.before(self.decl_point))
            else:
                self.decl_point.parent_block().insert_op_before(op, self.decl_point)  # type: ignore[union-attr]
            self.current[name] = op.results[0]
        self.bufs[name] = b
        return b

    # ---- one (step, stage) region
    def lower_stage(self, stage_op: RunplanStageOp, step: str, rewriter: PatternRewriter) -> StageOp:
        """The ``pplan.stage`` of runplan stage ``stage_op`` in ``step``: the edge ``recv``, the stage program's
        kernel calls (work formulas: module docstring), the sampling ``argmax`` on the last stage, the edge
        ``send``; it yields the versions later regions read (the current versions then name its results).

        Raises PassFailedException: a tensor the facts lack or inconsistent with its bytes, a kernel without a
        portable work model, a task writing new and existing buffers."""
        s = _int_of(stage_op.index)
        T, P = self.steps[step]
        hp, L, kv_dt, act_align = self.hp, self.max_seq_len, self.kv_dtype, self.act_align
        D, hd, hd_v, V = hp.n_embd, hp.head_dim, hp.head_dim_v, hp.n_vocab
        first, last = s == 0, s == self.n_stages - 1
        pre = f"{step}.s{s}"
        shapes: dict[str, _Buf] = {}
        ops: list[TaskOp] = []
        persistent: dict[str, SSAValue] = {}
        owner: dict[SSAValue, str] = {}
        tok_owner: dict[SSAValue, str] = {}
        bld = self

        def transient(local: str, dtype: str, shape: Sequence[int]) -> _Buf:
            b = bld.buffer(f"{pre}.{local}", dtype, shape, alignment=act_align, lifetime="transient",
                           stage=s, origin=f"{step}:{local}")
            shapes[local] = b
            return b

        def weight(local: str) -> _Buf:
            t = self.tensors.get(local)
            if t is None:
                raise PassFailedException(f"convert-runplan-to-pplan: stage {s} needs tensor {local!r}, which "
                                          f"the model facts lack")
            info = t.info()
            try:
                return bld.buffer(f"s{s}.w.{local}", info.ggml_type.lower(), tuple(reversed(info.shape)),
                                  alignment=self.facts.alignment, lifetime="weight", stage=s, origin=local,
                                  nbytes=info.n_bytes, decl="weight", rewriter=rewriter)
            except ValueError as err:
                raise PassFailedException(f"convert-runplan-to-pplan: tensor {local}: {err}") from None

        def lookup(local: str) -> _Buf:
            b = bld.bufs.get(f"s{s}.{local}")
            if b is not None:
                return b
            if is_weight(local):
                return bld.bufs.get(f"s{s}.w.{local}") or weight(local)
            if local.endswith(".cache_k") or local.endswith(".cache_v"):
                dim = hd_v if local.endswith(".cache_v") else hd
                return bld.buffer(f"s{s}.{local}", kv_dt, (L, hp.n_head_kv, dim), alignment=act_align,
                                  lifetime="kv", stage=s, origin=local, decl="kv", rewriter=rewriter)
            if local in (ROPE_TABLE, ROPE_TABLE_SWA):
                return bld.buffer(f"s{s}.{local}", "f32", (L, hp.rope_dim), alignment=act_align,
                                  lifetime="weight", stage=s, origin=local, decl="table", rewriter=rewriter)
            return shapes[local]

        def task(name: str, *, op: str, block: int, model_op: str, flops: int,
                 reads: Sequence[tuple[_Buf, int]], writes: Sequence[tuple[_Buf, int]], shape: Sequence[int],
                 after: Sequence[str] = (), token: bool = False) -> None:
            cur = bld.current
            ins = [cur[b.name] for b, _ in reads]
            updates = [cur[b.name] for b, _ in writes if b.name in cur]
            fresh = [b for b, _ in writes if b.name not in cur]
            if updates and fresh or len(fresh) > 1:
                raise PassFailedException(f"convert-runplan-to-pplan: task {name} writes {len(fresh)} new and "
                                          f"{len(updates)} existing buffers (one new, or only existing ones)")
            results: list[Attribute] = [v.type for v in updates] if updates else [fresh[0].type] if fresh else []
            if token:
                results.append(_TOKEN)
            props: dict[str, Attribute] = {
                "task": string(name.removeprefix(f"{pre}.")), "op": _OPS[op], "model_op": string(model_op),
                "block": i64_attr(block), "flops": i64_attr(flops), "work": int_array(shape),
                "bytes": int_array([n for _, n in reads] + [n for _, n in writes])}
            if fresh:
                props["out"] = string(fresh[0].local)
            if token:
                props["token"] = _UNIT
            after_v = [bld.tokens[a] for a in after]
            props["operandSegmentSizes"] = _segments(len(ins), len(updates), len(after_v))
            t = new_op(TaskOp, [*ins, *updates, *after_v], props, results)  # TaskOp(..)'s property order
            ops.append(t)
            for (b, _), r in zip(writes, t.results):
                cur[b.name] = r
                if b.type.lifetime in _PERSISTENT:
                    persistent[b.name] = r
                    owner[r] = b.name
            if token:
                bld.tokens[name] = t.results[-1]
                tok_owner[t.results[-1]] = name

        # inbound edge -> stage input
        ein = self.inbound[s]
        in_buf = transient("input", "i32", (T,)) if first else transient("input", "f32", (T, D))
        eb = self.bufs[f"edge.{ein.edge_id}"]
        nb = dtype_nbytes(ein.dtype, (T,) + ein.shape[1:])
        recv = f"{pre}.recv.{ein.edge_id}"
        task(recv, op="recv", block=-1, model_op=f"edge:{ein.edge_id}", flops=0,
             reads=[(eb, nb)], writes=[(in_buf, dtype_nbytes(in_buf.dtype, in_buf.shape))], shape=in_buf.shape,
             after=[self.loop[recv]] if recv in self.loop else [])
        rows = T
        for call in self.programs[s]:
            k = call.kernel
            ins = [lookup(x) for x in call.inputs if x not in _SKIP_INPUTS]
            blk = -1 if call.block is None else call.block
            wname = next((x for x in call.inputs if is_weight(x)), None)
            label = _short(wname) if wname else (_short(call.outputs[0]) if call.outputs else "")
            tname = f"{pre}." + (f"b{blk}." if blk >= 0 else "") + k + (f".{label}" if label else "")
            model_op = (_model_op(wname) if wname else
                        (f"blk.{blk}.{k}({label})" if blk >= 0 else f"{k}({label})"))
            x = ins[0]
            R = x.shape[0] if x.shape else rows
            f32 = 4
            writes: list[tuple[_Buf, int]] = []
            if k == "embedding_gather":
                w = ins[1]
                out = transient(call.outputs[0], "f32", (T, D))
                reads = [(x, T * 4), (w, T * dtype_nbytes(w.dtype, (1, w.shape[-1])))]
                flops, shape = (T * D if "scale" in call.attrs else 0), out.shape
            elif k in ("rms_norm", "head_rms_norm"):
                w = ins[1]
                out = transient(call.outputs[0], "f32", x.shape)
                reads = [(x, R * x.shape[1] * f32), (w, dtype_nbytes(w.dtype, w.shape))]
                flops, shape = 4 * R * x.shape[1], out.shape
            elif k == "add_bias":
                w = ins[1]
                out = transient(call.outputs[0], "f32", x.shape)
                reads = [(x, R * x.shape[1] * f32), (w, dtype_nbytes(w.dtype, w.shape))]
                flops, shape = R * x.shape[1], out.shape
            elif k == "matmul":
                w = ins[1]
                N, K = w.shape
                out = transient(call.outputs[0], "f32", (R, N))
                reads = [(x, R * K * f32), (w, dtype_nbytes(w.dtype, w.shape))]
                flops, shape = 2 * R * N * K, (R, N, K)
            elif k == "rope":
                nh = int(call.attrs["n_heads"])
                out = transient(call.outputs[0], "f32", x.shape)
                reads = [(x, R * x.shape[1] * f32), (ins[1], R * hp.rope_dim * f32)]
                flops, shape = 3 * R * nh * hp.rope_dim, out.shape
            elif k == "kv_cache_write":
                kx, vx, ck, cv = ins
                out = None
                reads = [(kx, R * kx.shape[1] * f32), (vx, R * vx.shape[1] * f32)]
                per_k = dtype_nbytes(kv_dt, (R, hp.n_head_kv * hd))
                per_v = dtype_nbytes(kv_dt, (R, hp.n_head_kv * hd_v))
                writes = [(ck, per_k), (cv, per_v)]
                flops, shape = 0, (R, hp.n_head_kv * hd)
            elif k == "attention":
                q, ck, cv = ins
                ctx = P + R
                W = int(call.attrs.get("window", 0))
                seen = min(ctx, W + R - 1) if W > 0 else ctx  # keys [max(0, P - W + 1), P + R) are read
                S = _scores(R, P, W)
                out = transient(call.outputs[0], "f32", (R, hp.n_head * hd_v))
                reads = [(q, R * q.shape[1] * f32), (ck, dtype_nbytes(kv_dt, (seen, hp.n_head_kv, hd))),
                         (cv, dtype_nbytes(kv_dt, (seen, hp.n_head_kv, hd_v)))]
                flops, shape = hp.n_head * S * (2 * hd + 2 * hd_v + 5), (R, q.shape[1], ctx)
            elif k in ("add", "silu_mul", "gelu_mul"):
                y = ins[1]
                out = transient(call.outputs[0], "f32", x.shape)
                nel = R * x.shape[1]
                reads = [(x, nel * f32), (y, nel * f32)]
                flops, shape = ({"add": 1, "silu_mul": 5, "gelu_mul": 10}[k] * nel), out.shape
            elif k == "last_row":
                out = transient(call.outputs[0], "f32", (1, x.shape[1]))
                reads = [(x, x.shape[1] * f32)]
                flops, shape = 0, out.shape
                rows = 1
            else:
                raise PassFailedException(f"convert-runplan-to-pplan: stage {s}: runtime kernel {k!r} has no "
                                          f"portable work model")
            if out is not None:
                writes = [(out, dtype_nbytes("f32", out.shape))]
            task(tname, op=k, block=blk, model_op=model_op, flops=flops, reads=reads, writes=writes, shape=shape)
        result = shapes["output"]
        eout = self.outbound[s]
        if last:
            tok = transient("token", "i32", (1,))
            task(f"{pre}.argmax.token", op="argmax", block=-1, model_op="sampling",
                 flops=V, reads=[(result, V * 4)], writes=[(tok, 4)], shape=(1,))
            result = tok
        eb = self.bufs[f"edge.{eout.edge_id}"]
        rows_out = 1 if last else T
        nb = dtype_nbytes(eout.dtype, (rows_out,) + eout.shape[1:])
        send = f"{pre}.send.{eout.edge_id}"
        task(send, op="send", block=-1, model_op=f"edge:{eout.edge_id}", flops=0,
             reads=[(result, dtype_nbytes(result.dtype, result.shape))], writes=[(eb, nb)],
             shape=(rows_out,) + eout.shape[1:], token=send in self.loop.values())
        # yields: the last version of each persistent buffer a later region accesses, and the loop token
        later = self.later[(step, s)]
        escaping = [r for o in ops for r in o.results
                    if r in tok_owner or (r in owner and owner[r] in later and persistent[owner[r]] is r)]
        st = StageOp(s, ops, escaping)
        for r, new in zip(escaping, st.results):
            if r in owner:
                self.current[owner[r]] = new
            else:
                self.tokens[tok_owner[r]] = new
        self.lowered += 1
        return st


class LowerStage(RewritePattern):
    """A ``runplan.stage`` the placement put in a ``pplan.step`` (a copy per step) -> that step's
    ``pplan.stage`` region (:meth:`Lowering.lower_stage`); stages elsewhere do not match. The copy's stage
    value has no uses."""

    def __init__(self, env: Lowering):
        super().__init__()
        self.env = env

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: RunplanStageOp, rewriter: PatternRewriter) -> None:
        parent = op.parent_op()
        if not isinstance(parent, StepOp):
            return
        rewriter.replace(op, self.env.lower_stage(op, str(parent.step.data), rewriter), new_results=[None])


def _outside(region_op: Operation) -> Callable[[Use], bool]:
    """A use predicate: the use is not inside ``region_op``."""
    return lambda u: not region_op.is_ancestor(u.operation)


def _stage_of(o: Operation) -> Operation | None:
    """The ``pplan.stage`` holding ``o`` (None when it is in none)."""
    p = o.parent_op()
    while p is not None and not isinstance(p, StageOp):
        p = p.parent_op()
    return p


def _short(name: str) -> str:
    """``blk.3.attn_q.weight`` -> ``attn_q``; ``blk.3.q_proj`` -> ``q_proj``; ``output.weight`` -> ``output``."""
    if name.endswith(".weight"):
        name = name[: -len(".weight")]
    if name.startswith("blk."):
        name = name.split(".", 2)[2]
    return name


def token_loop_dependency(spec: RunPlanSpec | Sequence[_Edge], steps: Sequence[str],
                          n_stages: int | None = None) -> dict[str, str]:
    """The token loop as explicit dependencies: for each step after the first, the name of its stage-0
    ``recv`` task on the token-in edge -> the name of the previous step's last-stage ``send`` task on
    the token-out edge (the sampled token the orchestrator feeds back). Task names follow
    :func:`build_portable_plan` (``<step>.s<stage>.<recv|send>.<edge id>``). ``spec``: a RunPlanSpec, or
    the edges (with ``n_stages``).

    Source: the runtime's generation loop (the next step's input is the previous step's sampled
    token, seeds/000 "Token-in edge is orchestrator -> stage 0", "Token-out edge is stage N-1 ->
    orchestrator").
    """
    if isinstance(spec, RunPlanSpec):
        edges: Sequence[Any] = spec.edges
        n = len(spec.stages)
    else:
        edges, n = spec, int(n_stages or 0)
    tin = next(e.edge_id for e in edges if e.kind == "token_in")
    tout = next(e.edge_id for e in edges if e.kind == "token_out")
    return {f"{cur}.s0.recv.{tin}": f"{prev}.s{n - 1}.send.{tout}" for prev, cur in zip(steps, steps[1:])}


def place_stages(plan: RunplanPlanOp, *, prompt_len: int, decode_pos: int | None = None
                 ) -> tuple[PlanOp, Lowering]:
    """The skeleton of the ``pplan.plan`` of runplan ``plan``: the edge-object declarations, then one
    ``pplan.step`` per step (prefill of ``prompt_len`` tokens at 0, decode of one token at ``decode_pos``,
    default ``prompt_len``) holding a copy of every ``runplan.stage`` (stage order) for :class:`LowerStage`
    to lower; and the :class:`Lowering` state that pattern reads (stage programs built here, once).

    Raises:
        PassFailedException: prompt_len < 1, decode_pos < prompt_len, decode_pos >= max_seq_len, a malformed
            edge, an edge naming an unknown producer stage, or model facts the runtime program rejects
            (message names the stage).
    """
    try:
        facts = plan.facts()
        cfg = plan.config.config()
        stage_ops = [o for o in plan.body.block.ops if isinstance(o, RunplanStageOp)]
        edges: list[_Edge] = []
        for o in plan.body.block.ops:
            if isinstance(o, RunplanEdgeOp):
                os_ = o.specs()[0].spec()
                producer, consumer = o.endpoints()
                edges.append(_Edge(o.edge_id.data, o.kind_name(), producer, consumer, os_.dtype, tuple(os_.shape),
                                   os_.alignment))
    except VerifyException as e:
        raise PassFailedException(f"convert-runplan-to-pplan: {rejection_from(e, plan.sym_name.data).one_line()}"
                                  ) from None
    L = cfg.max_seq_len
    pos = prompt_len if decode_pos is None else decode_pos
    if prompt_len < 1:
        raise PassFailedException(f"convert-runplan-to-pplan: prompt_len must be >= 1, got {prompt_len}")
    if not prompt_len <= pos < L:
        raise PassFailedException(f"convert-runplan-to-pplan: decode position {pos} must be in [prompt_len "
                                  f"{prompt_len}, max_seq_len {L})")
    try:
        hp = HParams.from_facts(facts)
    except ProgramError as e:
        raise PassFailedException(f"convert-runplan-to-pplan: model {facts.name}: {e.message}") from None
    n = len(stage_ops)
    programs: dict[int, list[KernelCall]] = {}
    for so in stage_ops:
        i = _int_of(so.index)
        try:
            programs[i] = build_stage_program(hp, _int_of(so.layer_start), _int_of(so.layer_end), i == 0,
                                              i == n - 1, L)
        except ProgramError as e:
            raise PassFailedException(f"convert-runplan-to-pplan: stage {i}: {e.message}") from None
    if any(e.producer != ORCHESTRATOR and e.producer not in range(n) for e in edges):
        raise PassFailedException("convert-runplan-to-pplan: an edge names an unknown producer stage")
    inbound = {e.consumer: e for e in edges}
    outbound = {e.producer: e for e in edges}
    steps = {"prefill": (prompt_len, 0), "decode": (1, pos)}
    loop = token_loop_dependency(edges, list(steps), n)
    # persistent buffers each region accesses: its edges and the KV caches of its program
    access: dict[int, set[str]] = {}
    for so in stage_ops:
        i = _int_of(so.index)
        acc = {f"edge.{e.edge_id}" for e in (inbound.get(i), outbound.get(i)) if e is not None}
        acc.update(f"s{i}.{x}" for c in programs[i] for x in c.inputs
                   if x.endswith(".cache_k") or x.endswith(".cache_v"))
        access[i] = acc
    order = [(st, _int_of(so.index)) for st in steps for so in stage_ops]
    later: dict[tuple[str, int], frozenset[str]] = {}
    seen: set[str] = set()
    for st, i in reversed(order):
        later[(st, i)] = frozenset(seen)
        seen |= access[i]
    step_ops = [StepOp(st, [so.clone() for so in stage_ops], []) for st in steps]
    out = PlanOp(plan.sym_name.data, stage_count=n, prompt_len=prompt_len, decode_pos=pos, model=facts.name,
                 source=f"runplan @{plan.sym_name.data}", ops=step_ops)
    env = Lowering(hp=hp, facts=facts, max_seq_len=L, kv_dtype=cfg.kv_dtype, act_align=cfg.alignment, steps=steps,
                   programs=programs, tensors={o.tensor_name.data: o for o in plan.body.block.ops
                                               if isinstance(o, TensorOp)},
                   inbound=inbound, outbound=outbound, n_stages=n, loop=loop, later=later, decl_point=step_ops[0])
    for ed in edges:
        env.buffer(f"edge.{ed.edge_id}", ed.dtype, ed.shape, alignment=ed.alignment, lifetime="edge", stage=-1,
                   origin=f"edge {ed.edge_id} ({ed.kind})", decl="edge")
    return out, env


def _close_steps(plan: PlanOp) -> None:
    """Rebuild each placed ``pplan.step`` with its yields: the results of its stages used outside the step
    (whose outside uses then take the step's results)."""
    for placed in plan.steps():
        mine = placed.stages()
        inner_st = set(mine)
        escaping = [r for st in mine for r in st.results
                    if any(_stage_of(u.operation) not in inner_st for u in r.uses)]
        for st in mine:
            st.detach()
        sp = StepOp(str(placed.step.data), mine, escaping)
        plan.body.block.insert_op_before(sp, placed)
        placed.detach()
        placed.erase()
        for r, new in zip(escaping, sp.results):
            r.replace_uses_with_if(new, _outside(sp))


def lower_runplan(plan: RunplanPlanOp, *, prompt_len: int, decode_pos: int | None = None) -> PlanOp:
    """The ``pplan.plan`` of runplan ``plan``: :func:`place_stages`, then :class:`LowerStage` driven by a
    ``PatternRewriteWalker`` over the skeleton (one forward walk: each placed stage lowered once, in program
    order), then each step's yields. Raises PassFailedException (see :func:`place_stages` and
    :meth:`Lowering.lower_stage`)."""
    out, env = place_stages(plan, prompt_len=prompt_len, decode_pos=decode_pos)
    PatternRewriteWalker(LowerStage(env), apply_recursively=False).rewrite_region(out.body)
    _close_steps(out)
    return out


def build_portable_plan(spec: RunPlanSpec, *, prompt_len: int, decode_pos: int | None = None) -> PlanOp:
    """The ``pplan.plan`` of ``spec`` (:func:`lower_runplan` of its ``runplan.plan``): one prefill step of
    ``prompt_len`` tokens and one decode step at position ``decode_pos`` (default ``prompt_len``), for every
    stage, with edge transfers.

    Raises:
        PassFailedException: prompt_len < 1, decode_pos < prompt_len, decode_pos >= max_seq_len,
            or model facts the runtime program rejects (message names the stage).
    Source: the task list of each stage is ``models.stage_program.build_stage_program`` (same kernels, same
    order); formulas in the module docstring.
    """
    try:
        plan = build_plan_op(spec, list(dict.fromkeys(s.node_id for s in spec.stages)))
    except PipeplanError as e:
        raise PassFailedException(f"convert-runplan-to-pplan: {e.one_line()}") from None
    return lower_runplan(plan, prompt_len=prompt_len, decode_pos=decode_pos)


def _scores(R: int, P: int, W: int) -> int:
    """Attention scores of ``R`` queries at positions ``P..P+R-1`` over causal keys (query ``P+i`` sees
    ``P+i+1`` keys), at most ``W`` each when ``W > 0`` (sliding window)."""
    if W <= 0:
        return R * P + R * (R + 1) // 2
    return sum(min(P + i + 1, W) for i in range(R))


def _model_op(tensor: str) -> str:
    """The model op of a task reading GGUF tensor ``tensor``: the name without ``.weight``
    (``blk.3.attn_q``); a bias keeps its suffix (``blk.3.attn_q.bias``)."""
    return tensor[: -len(".weight")] if tensor.endswith(".weight") else tensor


def _reservations(facts: ModelFacts, max_seq_len: int, kv_dtype: str,
                  stages: Sequence[tuple[int, str, int, int]]) -> dict[str, int]:
    """Bytes per node id of ``stages`` (index, node id, layer start, layer end): weights plus KV cache."""
    out: dict[str, int] = {}
    n = len(stages)
    kvw = DTYPE_WIDTHS.get(kv_dtype, 4)
    per_block = facts.kv_bytes_per_block(max_seq_len, kvw)
    for index, node, ls, le in stages:
        ts = facts.tensors_for_stage(ls, le, index == 0, index == n - 1)
        out[node] = out.get(node, 0) + sum(t.n_bytes for t in ts) + per_block * (le - ls)
    return out


def stage_reservations(spec: RunPlanSpec) -> dict[str, int]:
    """Bytes each node already holds for the plan: its stage's weight bytes plus its KV cache
    (``kv_bytes_per_block(max_seq_len, kv width) * blocks``), keyed by node id."""
    return _reservations(spec.facts, spec.config.max_seq_len, spec.config.kv_dtype,
                         [(s.index, s.node_id, s.layer_start, s.layer_end) for s in spec.stages])


def _deployment(pool: NodePool, stage_nodes: Sequence[str], reservations: dict[str, int]) -> DeploymentBinding:
    try:
        return DeploymentBinding.from_pool(pool, list(stage_nodes), reservations)
    except KeyError as e:
        raise PassFailedException(f"convert-runplan-to-pplan: {e.args[0]}") from None


def deployment_for(spec: RunPlanSpec, pool: NodePool) -> DeploymentBinding:
    """DeploymentBinding of ``spec`` on ``pool`` (stage devices from the plan, reservations from
    :func:`stage_reservations`). Raises PassFailedException when a stage node is not in the pool."""
    return _deployment(pool, [s.node_id for s in spec.stages], stage_reservations(spec))


def plan_deployment(plan: RunplanPlanOp, facts: ModelFacts, pool: NodePool) -> DeploymentBinding:
    """:func:`deployment_for` read from the ``runplan.stage`` ops of ``plan`` (``facts``: ``plan.facts()``)."""
    cfg = plan.config.config()
    stages = [(_int_of(o.index), o.node_id.data, _int_of(o.layer_start), _int_of(o.layer_end))
              for o in plan.body.block.ops if isinstance(o, RunplanStageOp)]
    return _deployment(pool, [s[1] for s in stages], _reservations(facts, cfg.max_seq_len, cfg.kv_dtype, stages))


@dataclass(frozen=True)
class ConvertRunplanToPplanPass(ModulePass):
    """Replace the module's RunPlan with its PortablePlanIR.

    Lowering: :func:`lower_runplan` (placement, then the :class:`LowerStage` pattern under a
    ``PatternRewriteWalker``).

    Options: ``prompt_len`` (tokens of the prefill step, default 8), ``decode_pos`` (position of the
    decode step; -1 = prompt_len), ``pool`` (node-pool TOML).

    DeploymentBinding: a ``pplan.deployment_binding`` is emitted from the ``pool`` file when given,
    else from the node specs the RunPlan itself carries in its ``nodes`` (``pipeplan plan`` records
    the pool it planned with, peaks included). A plan that names its nodes by id only, without
    ``pool``, gets no binding, and the passes that need one report it missing: the binding is always
    an explicit input in the IR, never a process default (AB-G-4).

    Errors (PassFailedException): no RunPlan in the module, an unreadable pool or malformed node spec,
    bad step options, a runplan op left behind.
    """

    name = "convert-runplan-to-pplan"

    prompt_len: int = 8
    decode_pos: int = -1
    pool: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with gc_paused():
            self._apply(op)

    def _apply(self, op: ModuleOp) -> None:
        if not any(o.name.startswith("runplan.") for o in op.ops):
            raise PassFailedException("convert-runplan-to-pplan: the module holds no runplan.plan")
        try:
            rp = single_plan(op)
        except PipeplanError as e:
            raise PassFailedException(f"convert-runplan-to-pplan: {e.one_line()}") from None
        plan = lower_runplan(rp, prompt_len=self.prompt_len,
                             decode_pos=None if self.decode_pos < 0 else self.decode_pos)
        new_ops: list[Operation] = [plan]
        pool = None
        if self.pool:
            from pipeplan.frontend.pool import load_pool_toml

            try:
                pool = load_pool_toml(self.pool)
            except PipeplanError as e:
                raise PassFailedException(f"convert-runplan-to-pplan: pool: {e.one_line()}") from None
        else:
            try:
                pool = plan_node_pool(rp)
            except PipeplanError as e:
                raise PassFailedException(f"convert-runplan-to-pplan: {e.one_line()}") from None
        if pool is not None:
            new_ops.append(plan_deployment(rp, rp.facts(), pool).to_op())
        for o in list(op.ops):
            if o.name.startswith("runplan."):
                o.detach()
                o.erase()
        for o in new_ops:
            op.body.block.add_op(o)
        left = [o.name for o in op.walk() if o.name.startswith("runplan.")]
        if left:
            raise PassFailedException(f"convert-runplan-to-pplan: runplan ops remain: {left[:3]}")
