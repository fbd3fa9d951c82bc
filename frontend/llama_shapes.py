"""ggml-order tensor shapes of a llama model, apart from :mod:`pipeplan.frontend.gguf_facts` (the GGUF reader,
which imports gguf and numpy) so that :mod:`pipeplan.frontend.facts_toml` loads without them."""

from __future__ import annotations

__all__ = ["llama_tensor_shapes"]


def llama_tensor_shapes(h: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """ggml-order shapes llama.cpp's loader expects for llama tensors (``llm_build_llama`` /
    ``create_tensor`` in llama-model.cpp), keyed by name with ``blk.N.``; with the keys they come from."""
    kv = kv_heads * (h // heads)
    return {
        "token_embd.weight": ((h, vocab), "embedding_length, vocab"),
        "output.weight": ((h, vocab), "embedding_length, vocab"),
        "output_norm.weight": ((h,), "embedding_length"),
        "blk.N.attn_norm.weight": ((h,), "embedding_length"),
        "blk.N.ffn_norm.weight": ((h,), "embedding_length"),
        "blk.N.attn_q.weight": ((h, h), "embedding_length, embedding_length"),
        "blk.N.attn_output.weight": ((h, h), "embedding_length, embedding_length"),
        "blk.N.attn_k.weight": ((h, kv), "embedding_length, head_count_kv * head_dim"),
        "blk.N.attn_v.weight": ((h, kv), "embedding_length, head_count_kv * head_dim"),
        "blk.N.ffn_gate.weight": ((h, ffn), "embedding_length, feed_forward_length"),
        "blk.N.ffn_up.weight": ((h, ffn), "embedding_length, feed_forward_length"),
        "blk.N.ffn_down.weight": ((ffn, h), "feed_forward_length, embedding_length"),
    }
