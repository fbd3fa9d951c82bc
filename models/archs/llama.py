"""``llama``: llama.cpp ``llm_build_llama`` (src/llama-model.cpp, ``LLM_ARCH_LLAMA``).

Per block (16 calls): pre-norm attention (``attn_norm`` RMS norm; q/k/v matmuls; NORM-mode rope of q
and k; KV-cache write; causal GQA attention at ``1/sqrt(head_dim)``; ``attn_output`` matmul; residual
add) and pre-norm SwiGLU FFN (``ffn_norm``; gate/up matmuls; ``silu_mul``; ``ffn_down``; residual add).
"""

from __future__ import annotations

from pipeplan.models.archs import Arch
from pipeplan.models.archs.common import (
    attention_call,
    attention_weights,
    base_hparams,
    block_calls,
    block_names,
    rope_call,
)
from pipeplan.models.stage_program import START_POS, HParams, KernelCall
from pipeplan.plan_types import ModelFacts


def hparams(facts: ModelFacts) -> HParams:
    """llama hyper-parameters: the common keys only (NORM rope, no window, no embedding scale)."""
    return base_hparams(facts)


def block(hp: HParams, b: int, h: str, h_out: str) -> list[KernelCall]:
    """The 16 calls of llama block ``b`` (module docstring)."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    ck, cv = t("cache_k"), t("cache_v")
    return [
        c("rms_norm", (h, w("attn_norm")), (t("attn_in"),)),
        c("matmul", (t("attn_in"), w("attn_q")), (t("q_proj"),)),
        c("matmul", (t("attn_in"), w("attn_k")), (t("k_proj"),)),
        c("matmul", (t("attn_in"), w("attn_v")), (t("v"),)),
        rope_call(hp, b, t("q_proj"), t("q")),
        rope_call(hp, b, t("k_proj"), t("k")),
        c("kv_cache_write", (t("k"), t("v"), ck, cv, START_POS), ()),
        attention_call(hp, b, t("q"), ck, cv, t("attn")),
        c("matmul", (t("attn"), w("attn_output")), (t("attn_out"),)),
        c("add", (h, t("attn_out")), (t("h_mid"),)),
        c("rms_norm", (t("h_mid"), w("ffn_norm")), (t("ffn_in"),)),
        c("matmul", (t("ffn_in"), w("ffn_gate")), (t("gate"),)),
        c("matmul", (t("ffn_in"), w("ffn_up")), (t("up"),)),
        c("silu_mul", (t("gate"), t("up")), (t("ffn_act"),)),
        c("matmul", (t("ffn_act"), w("ffn_down")), (t("ffn_out"),)),
        c("add", (t("h_mid"), t("ffn_out")), (h_out,)),
    ]


ARCH = Arch(name="llama", source="llama.cpp llm_build_llama", metadata=(), hparams=hparams, block=block,
            block_weights=attention_weights,
            kernels=frozenset(("rms_norm", "matmul", "rope", "kv_cache_write", "attention", "add", "silu_mul")))
"""The llama architecture."""
