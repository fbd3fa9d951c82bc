"""``qwen2``: llama.cpp ``llm_build_qwen2`` (src/models/qwen2.cpp, ``LLM_ARCH_QWEN2``).

llama's block with q/k/v biases (``attn_q.bias``/``attn_k.bias``/``attn_v.bias``, added right after
their matmuls) and NEOX rope (``LLAMA_ROPE_TYPE_NEOX``); SwiGLU FFN; softmax scale ``1/sqrt(head_dim)``.
19 calls per block.
"""

from __future__ import annotations

from pipeplan.models.archs import Arch
from pipeplan.models.archs.common import (
    attention_weights,
    base_hparams,
    block_calls,
    block_names,
    gated_ffn_calls,
    rope_attention_calls,
)
from pipeplan.models.stage_program import HParams, KernelCall
from pipeplan.plan_types import ModelFacts


def hparams(facts: ModelFacts) -> HParams:
    """qwen2 hyper-parameters: the common keys, NEOX rope."""
    return base_hparams(facts, rope_mode="neox")


def block(hp: HParams, b: int, h: str, h_out: str) -> list[KernelCall]:
    """The 19 calls of qwen2 block ``b`` (module docstring)."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    return [
        c("rms_norm", (h, w("attn_norm")), (t("attn_in"),)),
        c("matmul", (t("attn_in"), w("attn_q")), (t("q_mm"),)),
        c("matmul", (t("attn_in"), w("attn_k")), (t("k_mm"),)),
        c("matmul", (t("attn_in"), w("attn_v")), (t("v_mm"),)),
        c("add_bias", (t("q_mm"), t("attn_q.bias")), (t("q_proj"),)),
        c("add_bias", (t("k_mm"), t("attn_k.bias")), (t("k_proj"),)),
        c("add_bias", (t("v_mm"), t("attn_v.bias")), (t("v"),)),
        *rope_attention_calls(hp, b, t("q_proj"), t("k_proj"), t("v")),
        c("matmul", (t("attn"), w("attn_output")), (t("attn_out"),)),
        c("add", (h, t("attn_out")), (t("h_mid"),)),
        *gated_ffn_calls(hp, b, t("h_mid"), h_out, "silu_mul"),
    ]


def block_weights(hp: HParams) -> dict[str, tuple[int, ...]]:
    """llama's block tensors plus the biases ``attn_q.bias`` ``[H*hd_k]``, ``attn_k.bias`` ``[Hkv*hd_k]``,
    ``attn_v.bias`` ``[Hkv*hd_v]``."""
    return {**attention_weights(hp), "attn_q.bias": (hp.n_head * hp.head_dim,),
            "attn_k.bias": (hp.n_head_kv * hp.head_dim,), "attn_v.bias": (hp.n_head_kv * hp.head_dim_v,)}


ARCH = Arch(name="qwen2", source="llama.cpp llm_build_qwen2", metadata=(), hparams=hparams, block=block,
            block_weights=block_weights,
            kernels=frozenset(("rms_norm", "matmul", "add_bias", "rope", "kv_cache_write", "attention", "add", "silu_mul")))
"""The qwen2 architecture."""
