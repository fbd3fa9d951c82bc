"""``convert-runplan-to-pplan``: RunPlan -> PortablePlanIR (issue 4, item 2).

The pass reads the RunPlan as a :class:`~pipeplan.plan_types.RunPlanSpec`
(``runplan_spec_from_module``), so it does not depend on the runplan IR's op layout, and replaces
the module's ``runplan.*`` ops with one ``pplan.plan`` (plus a ``pplan.deployment_binding`` built
from the ``pool`` option's node-pool TOML file, else from the node specs the RunPlan carries).

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
from dataclasses import dataclass

from pipeplan.dialects.bindings import DeploymentBinding
from pipeplan.dialects.pplan import (
    BufferType,
    EdgeObjectOp,
    KvOp,
    PlanOp,
    StageOp,
    StepOp,
    TableOp,
    TaskOp,
    WeightOp,
    dtype_nbytes,
    gc_paused,
)
from pipeplan.dialects.runplan_build import plan_node_pool, runplan_spec_from_module
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import (
    ROPE_TABLE,
    ROPE_TABLE_SWA,
    HParams,
    ProgramError,
    build_stage_program,
    is_weight,
)
from pipeplan.plan_types import DTYPE_WIDTHS, ORCHESTRATOR, NodePool, RunPlanSpec
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

_SKIP_INPUTS = ("start_pos",)


@dataclass
class _Buf:
    name: str
    dtype: str
    shape: tuple[int, ...]
    type: BufferType
    local: str = ""


class _Builder:
    """Accumulates declarations and tasks as SSA values: each buffer name maps to its current version
    (a declaration's or a task's result); a write of a buffer that has a version is an in-place update
    of it, the first write of a transient a fresh result."""

    def __init__(self) -> None:
        self.decls: list[Operation] = []
        self.bufs: dict[str, _Buf] = {}
        self.current: dict[str, SSAValue] = {}
        self.groups: list[tuple[str, int, list[Operation]]] = []
        self.tokens: dict[str, SSAValue] = {}
        self.task_count = 0

    def group(self, step: str, stage: int) -> None:
        self.groups.append((step, stage, []))

    def buffer(self, name: str, dtype: str, shape: Sequence[int], *, alignment: int, lifetime: str,
               stage: int, origin: str, decl: str = "", nbytes: int | None = None) -> _Buf:
        """A buffer (created once per name): a declaration op when ``decl`` names one
        (``weight | table | kv | edge``), else a transient whose first write defines it."""
        if name in self.bufs:
            return self.bufs[name]
        shape = tuple(int(d) for d in shape)
        n = dtype_nbytes(dtype, shape)
        ty = BufferType(shape, dtype, lifetime, alignment)
        if nbytes is not None and nbytes != n:
            raise ValueError(f"{nbytes} bytes inconsistent with dtype {dtype} and shape {list(shape)} (expected {n})")
        b = _Buf(name, dtype, shape, ty, origin.split(":", 1)[-1])
        op: Operation | None = None
        if decl == "edge":
            eid, kind = origin.removeprefix("edge ").split(" ", 1)
            op = EdgeObjectOp(edge=eid, kind=kind.strip("()"), type=ty)
        elif decl:
            op = {"weight": WeightOp, "table": TableOp, "kv": KvOp}[decl](stage=stage, origin=origin, type=ty)
        if op is not None:
            self.decls.append(op)
            self.current[name] = op.results[0]
        self.bufs[name] = b
        return b

    def task(self, name: str, *, op: str, block: int, model_op: str, flops: int,
             reads: Sequence[tuple[_Buf, int]], writes: Sequence[tuple[_Buf, int]], shape: Sequence[int],
             after: Sequence[str] = (), token: bool = False) -> None:
        """Append one task to the current (step, stage) group: reads are the current versions of
        ``reads``; ``writes`` update the current version in place or define a fresh transient;
        ``after`` names tasks whose token it waits for; ``token`` makes it yield one."""
        step, stage, ops = self.groups[-1]
        ins = [self.current[b.name] for b, _ in reads]
        updates = [self.current[b.name] for b, _ in writes if b.name in self.current]
        fresh = [b for b, _ in writes if b.name not in self.current]
        if updates and fresh or len(fresh) > 1:
            raise PassFailedException(f"convert-runplan-to-pplan: task {name} writes {len(fresh)} new and "
                                      f"{len(updates)} existing buffers (one new, or only existing ones)")
        short = name.removeprefix(f"{step}.s{stage}.")
        t = TaskOp(short, op=op, ins=ins, updates=updates, after=[self.tokens[a] for a in after],
                   out=fresh[0].type if fresh else None, out_name=fresh[0].local if fresh else None,
                   model_op=model_op, block=block, flops=flops, work=shape,
                   nbytes=[n for _, n in reads] + [n for _, n in writes], token=token)
        ops.append(t)
        self.task_count += 1
        for (b, _), r in zip(writes, t.written):
            self.current[b.name] = r
        if token:
            tok = t.token_result
            assert tok is not None
            self.tokens[name] = tok

    def plan_ops(self) -> list[Operation]:
        """The declarations, then one ``pplan.step`` per step holding its ``pplan.stage`` regions; a
        value used outside the region that defines it is yielded (and its outside uses take the
        region's result)."""
        stages: list[tuple[str, StageOp]] = []
        for step, stage, ops in self.groups:
            inner = set(ops)
            escaping = [r for o in ops for r in o.results if any(u.operation not in inner for u in r.uses)]
            st = StageOp(stage, ops, escaping)
            for r, new in zip(escaping, st.results):
                r.replace_uses_with_if(new, _outside(st))
            stages.append((step, st))
        out: list[Operation] = list(self.decls)
        for step in dict.fromkeys(s for s, _ in stages):
            mine = [st for s, st in stages if s == step]
            inner_st = set(mine)
            escaping = [r for st in mine for r in st.results
                        if any(_stage_of(u.operation) not in inner_st for u in r.uses)]
            sp = StepOp(step, mine, escaping)
            for r, new in zip(escaping, sp.results):
                r.replace_uses_with_if(new, _outside(sp))
            out.append(sp)
        return out


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


def token_loop_dependency(spec: RunPlanSpec, steps: Sequence[str]) -> dict[str, str]:
    """The token loop as explicit dependencies: for each step after the first, the name of its stage-0
    ``recv`` task on the token-in edge -> the name of the previous step's last-stage ``send`` task on
    the token-out edge (the sampled token the orchestrator feeds back). Task names follow
    :func:`build_portable_plan` (``<step>.s<stage>.<recv|send>.<edge id>``).

    Source: the runtime's generation loop (the next step's input is the previous step's sampled
    token, seeds/000 "Token-in edge is orchestrator -> stage 0", "Token-out edge is stage N-1 ->
    orchestrator").
    """
    n = len(spec.stages)
    tin = next(e.edge_id for e in spec.edges if e.kind == "token_in")
    tout = next(e.edge_id for e in spec.edges if e.kind == "token_out")
    return {f"{cur}.s0.recv.{tin}": f"{prev}.s{n - 1}.send.{tout}" for prev, cur in zip(steps, steps[1:])}


def build_portable_plan(spec: RunPlanSpec, *, prompt_len: int, decode_pos: int | None = None) -> PlanOp:
    """The ``pplan.plan`` of ``spec``: one prefill step of ``prompt_len`` tokens and one decode step
    at position ``decode_pos`` (default ``prompt_len``), for every stage, with edge transfers.

    Raises:
        PassFailedException: prompt_len < 1, decode_pos < prompt_len, decode_pos >= max_seq_len,
            or model facts the runtime program rejects (message names the stage).
    Source: the task list of each stage is ``models.stage_program.build_stage_program`` (same kernels, same
    order); formulas in the module docstring.
    """
    facts, cfg = spec.facts, spec.config
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
    D, hd, hd_v, V = hp.n_embd, hp.head_dim, hp.head_dim_v, hp.n_vocab
    kv_dt = cfg.kv_dtype
    tensors = {t.name: t for t in facts.tensors}
    n = len(spec.stages)
    inbound = {e.consumer: e for e in spec.edges}
    outbound = {e.producer: e for e in spec.edges}
    bld = _Builder()
    act_align = cfg.alignment
    for edge in spec.edges:
        os = edge.object_spec
        bld.buffer(f"edge.{edge.edge_id}", os.dtype, os.shape, alignment=os.alignment, lifetime="edge",
                   stage=-1, origin=f"edge {edge.edge_id} ({edge.kind})", decl="edge")
    programs = []
    for st in spec.stages:
        first, last = st.index == 0, st.index == n - 1
        try:
            programs.append(build_stage_program(hp, st.layer_start, st.layer_end, first, last, L))
        except ProgramError as e:
            raise PassFailedException(f"convert-runplan-to-pplan: stage {st.index}: {e.message}") from None
    steps = (("prefill", prompt_len, 0), ("decode", 1, pos))
    loop = token_loop_dependency(spec, [x[0] for x in steps])
    looped = set(loop.values())
    for step, T, P in steps:
        for st, program in zip(spec.stages, programs):
            s = st.index
            first, last = s == 0, s == n - 1
            pre = f"{step}.s{s}"
            bld.group(step, s)
            shapes: dict[str, _Buf] = {}

            def transient(local: str, dtype: str, shape: Sequence[int], s=s, pre=pre, step=step, shapes=shapes) -> _Buf:
                b = bld.buffer(f"{pre}.{local}", dtype, shape, alignment=act_align, lifetime="transient",
                               stage=s, origin=f"{step}:{local}")
                shapes[local] = b
                return b

            def weight(local: str, s=s) -> _Buf:
                t = tensors.get(local)
                if t is None:
                    raise PassFailedException(f"convert-runplan-to-pplan: stage {s} needs tensor {local!r}, which "
                                              f"the model facts lack")
                dt = t.ggml_type.lower()
                try:
                    return bld.buffer(f"s{s}.w.{local}", dt, tuple(reversed(t.shape)), alignment=facts.alignment,
                                      lifetime="weight", stage=s, origin=local, nbytes=t.n_bytes, decl="weight")
                except ValueError as err:
                    raise PassFailedException(f"convert-runplan-to-pplan: tensor {local}: {err}") from None

            def lookup(local: str, s=s, shapes=shapes) -> _Buf:
                if is_weight(local):
                    return weight(local)
                if local.endswith(".cache_k") or local.endswith(".cache_v"):
                    dim = hd_v if local.endswith(".cache_v") else hd
                    return bld.buffer(f"s{s}.{local}", kv_dt, (L, hp.n_head_kv, dim), alignment=act_align,
                                      lifetime="kv", stage=s, origin=local, decl="kv")
                if local in (ROPE_TABLE, ROPE_TABLE_SWA):
                    return bld.buffer(f"s{s}.{local}", "f32", (L, hp.rope_dim), alignment=act_align,
                                      lifetime="weight", stage=s, origin=local, decl="table")
                return shapes[local]

            # inbound edge -> stage input
            ein = inbound[s]
            in_buf = transient("input", "i32", (T,)) if first else transient("input", "f32", (T, D))
            eb = bld.bufs[f"edge.{ein.edge_id}"]
            nb = dtype_nbytes(ein.object_spec.dtype, (T,) + tuple(ein.object_spec.shape[1:]))
            recv = f"{pre}.recv.{ein.edge_id}"
            bld.task(recv, op="recv", block=-1, model_op=f"edge:{ein.edge_id}", flops=0,
                     reads=[(eb, nb)], writes=[(in_buf, dtype_nbytes(in_buf.dtype, in_buf.shape))],
                     shape=in_buf.shape,
                     after=[loop[recv]] if recv in loop else [])
            rows = T
            for call in program:
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
                bld.task(tname, op=k, block=blk, model_op=model_op, flops=flops,
                         reads=reads, writes=writes, shape=shape)
            result = shapes["output"]
            eout = outbound[s]
            if last:
                tok = transient("token", "i32", (1,))
                bld.task(f"{pre}.argmax.token", op="argmax", block=-1, model_op="sampling",
                         flops=V, reads=[(result, V * 4)], writes=[(tok, 4)], shape=(1,))
                result = tok
            eb = bld.bufs[f"edge.{eout.edge_id}"]
            rows_out = 1 if last else T
            nb = dtype_nbytes(eout.object_spec.dtype, (rows_out,) + tuple(eout.object_spec.shape[1:]))
            send = f"{pre}.send.{eout.edge_id}"
            bld.task(send, op="send", block=-1,
                     model_op=f"edge:{eout.edge_id}", flops=0,
                     reads=[(result, dtype_nbytes(result.dtype, result.shape))], writes=[(eb, nb)],
                     shape=(rows_out,) + tuple(eout.object_spec.shape[1:]), token=send in looped)
    if any(e.producer != ORCHESTRATOR and e.producer not in range(n) for e in spec.edges):
        raise PassFailedException("convert-runplan-to-pplan: an edge names an unknown producer stage")
    return PlanOp(spec.run_id, stage_count=n, prompt_len=prompt_len, decode_pos=pos, model=facts.name,
                  source=f"runplan @{spec.run_id}", ops=bld.plan_ops())


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


def stage_reservations(spec: RunPlanSpec) -> dict[str, int]:
    """Bytes each node already holds for the plan: its stage's weight bytes plus its KV cache
    (``kv_bytes_per_block(max_seq_len, kv width) * blocks``), keyed by node id."""
    out: dict[str, int] = {}
    n = len(spec.stages)
    kvw = DTYPE_WIDTHS.get(spec.config.kv_dtype, 4)
    for st in spec.stages:
        ts = spec.facts.tensors_for_stage(st.layer_start, st.layer_end, st.index == 0, st.index == n - 1)
        kv = spec.facts.kv_bytes_per_block(spec.config.max_seq_len, kvw) * (st.layer_end - st.layer_start)
        out[st.node_id] = out.get(st.node_id, 0) + sum(t.n_bytes for t in ts) + kv
    return out


def deployment_for(spec: RunPlanSpec, pool: NodePool) -> DeploymentBinding:
    """DeploymentBinding of ``spec`` on ``pool`` (stage devices from the plan, reservations from
    :func:`stage_reservations`). Raises PassFailedException when a stage node is not in the pool."""
    try:
        return DeploymentBinding.from_pool(pool, [s.node_id for s in spec.stages], stage_reservations(spec))
    except KeyError as e:
        raise PassFailedException(f"convert-runplan-to-pplan: {e.args[0]}") from None


@dataclass(frozen=True)
class ConvertRunplanToPplanPass(ModulePass):
    """Replace the module's RunPlan with its PortablePlanIR.

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
            spec = runplan_spec_from_module(op)
        except PipeplanError as e:
            raise PassFailedException(f"convert-runplan-to-pplan: {e.one_line()}") from None
        plan = build_portable_plan(spec, prompt_len=self.prompt_len,
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
                pool = plan_node_pool(op)
            except PipeplanError as e:
                raise PassFailedException(f"convert-runplan-to-pplan: {e.one_line()}") from None
        if pool is not None:
            new_ops.append(deployment_for(spec, pool).to_op())
        for o in list(op.ops):
            if o.name.startswith("runplan."):
                o.detach()
                o.erase()
        for o in new_ops:
            op.body.block.add_op(o)
        left = [o.name for o in op.walk() if o.name.startswith("runplan.")]
        if left:
            raise PassFailedException(f"convert-runplan-to-pplan: runplan ops remain: {left[:3]}")
