"""``qwen3``: llama.cpp ``llm_build_qwen3`` (src/models/qwen3.cpp, ``LLM_ARCH_QWEN3``).

llama's block with QK RMS norm per head (``attn_q_norm``/``attn_k_norm`` ``[key_length]``, before rope),
NEOX rope, head dim from ``attention.key_length`` (Qwen3 heads are wider than ``n_embd / n_head``);
no biases; SwiGLU FFN; softmax scale ``1/sqrt(head_dim)``. 18 calls per block.
"""

from __future__ import annotations

from pipeplan.models.archs import Arch
from pipeplan.models.archs.common import (
    attention_half_calls,
    attention_weights,
    base_hparams,
    block_calls,
    block_names,
    gated_ffn_calls,
)
from pipeplan.models.stage_program import HParams, KernelCall
from pipeplan.plan_types import ModelFacts


def hparams(facts: ModelFacts) -> HParams:
    """qwen3 hyper-parameters: the common keys (``key_length`` included), NEOX rope."""
    return base_hparams(facts, rope_mode="neox")


def block(hp: HParams, b: int, h: str, h_out: str) -> list[KernelCall]:
    """The 18 calls of qwen3 block ``b`` (module docstring)."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    return [
        *attention_half_calls(hp, b, h, qk_norm=True),
        c("add", (h, t("attn_out")), (t("h_mid"),)),
        *gated_ffn_calls(hp, b, t("h_mid"), h_out, "silu_mul"),
    ]


def block_weights(hp: HParams) -> dict[str, tuple[int, ...]]:
    """llama's block tensors plus ``attn_q_norm``/``attn_k_norm`` ``[key_length]``."""
    return {**attention_weights(hp), "attn_q_norm.weight": (hp.head_dim,), "attn_k_norm.weight": (hp.head_dim,)}


ARCH = Arch(name="qwen3", source="llama.cpp llm_build_qwen3", metadata=(), hparams=hparams, block=block,
            block_weights=block_weights,
            kernels=frozenset(("rms_norm", "matmul", "head_rms_norm", "rope", "kv_cache_write", "attention", "add", "silu_mul")))
"""The qwen3 architecture."""
