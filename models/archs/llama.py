"""``llama``: llama.cpp ``llm_build_llama`` (src/llama-model.cpp, ``LLM_ARCH_LLAMA``).

Per block (16 calls): pre-norm attention (``attn_norm`` RMS norm; q/k/v matmuls; NORM-mode rope of q
and k; KV-cache write; causal GQA attention at ``1/sqrt(head_dim)``; ``attn_output`` matmul; residual
add) and pre-norm SwiGLU FFN (``ffn_norm``; gate/up matmuls; ``silu_mul``; ``ffn_down``; residual add).
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
    """llama hyper-parameters: the common keys only (NORM rope, no window, no embedding scale)."""
    return base_hparams(facts)


def block(hp: HParams, b: int, h: str, h_out: str) -> list[KernelCall]:
    """The 16 calls of llama block ``b`` (module docstring)."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    return [
        *attention_half_calls(hp, b, h, qk_norm=False),
        c("add", (h, t("attn_out")), (t("h_mid"),)),
        *gated_ffn_calls(hp, b, t("h_mid"), h_out, "silu_mul"),
    ]


ARCH = Arch(name="llama", source="llama.cpp llm_build_llama", metadata=(), hparams=hparams, block=block,
            block_weights=attention_weights,
            kernels=frozenset(("rms_norm", "matmul", "rope", "kv_cache_write", "attention", "add", "silu_mul")))
"""The llama architecture."""
