"""Hand-made llama-shaped ModelFacts and RunPlanSpec values for the runplan dialect tests, and
:func:`read_spec` (what a plan's ops state, as the planner's decision record, for comparisons).

Shapes follow llama.cpp's GGUF tensor names (ggml order, ``ne0`` first); all tensors are F32 so
``n_bytes = 4 * prod(shape)``; offsets are consecutive, aligned to 32 bytes like GGUF data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pipeplan.plan_types import (
    DTYPE_WIDTHS,
    ORCHESTRATOR,
    EdgePlan,
    ModelFacts,
    ObjectSpec,
    RingSpec,
    RunPlanSpec,
    RuntimeConfig,
    StagePlan,
    TensorInfo,
    WeightSource,
)


def llama_facts(blocks: int, *, hidden: int = 64, heads: int = 8, kv_heads: int = 4,
                ffn: int | Sequence[int] = 172, vocab: int = 512, ctx: int = 2048, tied: bool = False,
                name: str = "synth", files: tuple[str, ...] = ()) -> ModelFacts:
    """Llama-layout ModelFacts with F32 tensors in llama.cpp order (stories260K's shapes by default).

    The one synthesizer the runplan dialect, planner, contract and property tests share.
    ``ffn`` may be a per-block list to make blocks of different sizes; ``tied`` drops output.weight.
    Tensors are F32 (``n_bytes = 4 * prod(shape)``, ggml order), offsets consecutive from 0 and
    aligned to 32 bytes like GGUF data, all in shard 0.
    """
    ffns = [ffn] * blocks if isinstance(ffn, int) else list(ffn)
    assert len(ffns) == blocks
    tensors: list[TensorInfo] = []
    off = 0
    hd = hidden // heads

    def add(tname: str, shape: tuple[int, ...], block: int | None = None) -> None:
        nonlocal off
        nb = math.prod(shape) * 4
        tensors.append(TensorInfo(tname, "F32", shape, 0, off, nb, block))
        off += -(-nb // 32) * 32

    add("token_embd.weight", (hidden, vocab))
    for b in range(blocks):
        add(f"blk.{b}.attn_norm.weight", (hidden,), b)
        add(f"blk.{b}.attn_q.weight", (hidden, hidden), b)
        add(f"blk.{b}.attn_k.weight", (hidden, kv_heads * hd), b)
        add(f"blk.{b}.attn_v.weight", (hidden, kv_heads * hd), b)
        add(f"blk.{b}.attn_output.weight", (hidden, hidden), b)
        add(f"blk.{b}.ffn_norm.weight", (hidden,), b)
        add(f"blk.{b}.ffn_gate.weight", (hidden, ffns[b]), b)
        add(f"blk.{b}.ffn_up.weight", (hidden, ffns[b]), b)
        add(f"blk.{b}.ffn_down.weight", (ffns[b], hidden), b)
    add("output_norm.weight", (hidden,))
    if not tied:
        add("output.weight", (hidden, vocab))
    bb = [0] * blocks
    for t in tensors:
        if t.block is not None:
            bb[t.block] += t.n_bytes
    return ModelFacts("llama", name, blocks, hidden, heads, kv_heads, max(ffns), vocab, ctx, hd, 10000.0, 1e-5, 32,
                      tuple(tensors), tuple(bb), files)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def make_spec(facts: ModelFacts, n_stages: int, *, config: RuntimeConfig | None = None,
              nodes: tuple[str, ...] | None = None, run_id: str = "run0") -> RunPlanSpec:
    """A valid RunPlanSpec: blocks split evenly (earlier stages take the remainder), stage i on
    ``nodes[i]`` (default ``node-i``), edges ``tok.in``, ``act.i``, ``tok.out``."""
    c = config or RuntimeConfig()
    nodes = nodes or tuple(f"node-{i}" for i in range(n_stages))
    base, extra = divmod(facts.block_count, n_stages)
    stages, start = [], 0
    for i in range(n_stages):
        end = start + base + (1 if i < extra else 0)
        stages.append(StagePlan(i, nodes[i], start, end))
        start = end
    tw, aw = DTYPE_WIDTHS[c.token_dtype], DTYPE_WIDTHS[c.activation_dtype]
    tok = ObjectSpec("token", c.token_dtype, tw, (c.max_seq_len,), "row_major", c.alignment, c.max_seq_len * tw)
    act = ObjectSpec("activation", c.activation_dtype, aw, (c.max_seq_len, facts.embedding_length), "row_major",
                     c.alignment, c.max_seq_len * facts.embedding_length * aw)

    def ring(o: ObjectSpec) -> RingSpec:
        return RingSpec(c.ring_slots, _align(o.max_extent, c.alignment))

    edges = [EdgePlan("tok.in", "token_in", ORCHESTRATOR, 0, tok, ring(tok))]
    edges += [EdgePlan(f"act.{i}", "activation", i, i + 1, act, ring(act)) for i in range(n_stages - 1)]
    edges.append(EdgePlan("tok.out", "token_out", n_stages - 1, ORCHESTRATOR, tok, ring(tok)))
    return RunPlanSpec(run_id, facts, c, WeightSource(("model.gguf",), ("ab" * 32,), (123456,)), tuple(stages),
                       tuple(edges))


__all__ = ["llama_facts", "make_spec", "replace"]


def read_spec(module) -> RunPlanSpec:
    """The RunPlanSpec the single ``runplan.plan`` of ``module`` states, read through the ops' accessors
    (tests only: product code reads the ops). Raises RunPlanRejection when there is not exactly one plan
    or an edge lacks a spec or names a non-stage endpoint."""
    from pipeplan.dialects.runplan import rejection_from
    from pipeplan.dialects.runplan_build import single_plan
    from xdsl.utils.exceptions import VerifyException

    plan = single_plan(module)
    try:
        stages = tuple(StagePlan(op.number(), op.node_id.data, *op.layers()) for op in plan.stage_ops())
        edges = []
        for op in plan.edge_ops():
            edge_id, kind, producer, consumer = op.row()
            obj, ring = op.specs()
            edges.append(EdgePlan(edge_id, kind, producer, consumer, obj.spec(), ring.spec()))
        return RunPlanSpec(plan.sym_name.data, plan.facts(), plan.config.config(), plan.weights.source(), stages,
                           tuple(edges))
    except VerifyException as e:
        raise rejection_from(e, plan.sym_name.data) from None
