"""Hand-made llama-shaped ModelFacts and RunPlanSpec values for the runplan dialect tests.

Shapes follow llama.cpp's GGUF tensor names (ggml order, ``ne0`` first); all tensors are F32 so
``n_bytes = 4 * prod(shape)``; offsets are consecutive, aligned to 32 bytes like GGUF data.
"""

from __future__ import annotations

import math
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


def llama_facts(n_blocks: int, *, hidden: int = 64, heads: int = 8, kv_heads: int = 4, ffn: int = 172,
                vocab: int = 512, tied: bool = False) -> ModelFacts:
    """Facts of a llama model with ``n_blocks`` blocks (stories260K-like dims by default)."""
    kv = hidden // heads * kv_heads
    shapes: list[tuple[str, tuple[int, ...], int | None]] = [("token_embd.weight", (hidden, vocab), None)]
    for b in range(n_blocks):
        for name, shape in (("attn_norm", (hidden,)), ("attn_q", (hidden, hidden)), ("attn_k", (hidden, kv)),
                            ("attn_v", (hidden, kv)), ("attn_output", (hidden, hidden)), ("ffn_norm", (hidden,)),
                            ("ffn_gate", (hidden, ffn)), ("ffn_down", (ffn, hidden)), ("ffn_up", (hidden, ffn))):
            shapes.append((f"blk.{b}.{name}.weight", shape, b))
    shapes.append(("output_norm.weight", (hidden,), None))
    if not tied:
        shapes.append(("output.weight", (hidden, vocab), None))
    tensors, off, block_bytes = [], 736, [0] * n_blocks
    for name, shape, b in shapes:
        n = 4 * math.prod(shape)
        tensors.append(TensorInfo(name, "F32", shape, 0, off, n, b))
        if b is not None:
            block_bytes[b] += n
        off += (n + 31) // 32 * 32
    return ModelFacts("llama", f"tiny-{n_blocks}", n_blocks, hidden, heads, kv_heads, ffn, vocab, 2048, hidden // heads,
                      10000.0, 1e-5, 32, tuple(tensors), tuple(block_bytes), ("model.gguf",), None)


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
