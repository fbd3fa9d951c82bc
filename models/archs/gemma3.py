"""``gemma3``: llama.cpp ``llm_build_gemma3`` (src/models/gemma3.cpp, ``LLM_ARCH_GEMMA3``; hparams from
``load_hparams``: ``swa_type = LLAMA_SWA_TYPE_STANDARD``, ``set_swa_pattern(6)``,
``rope_freq_base_train_swa = 10000``, ``f_attention_scale``).

Embedding rows scaled by ``sqrt(n_embd)``. Per block (20 calls): ``attn_norm`` RMS norm; q/k/v matmuls;
QK RMS norm per head (``attn_q_norm``/``attn_k_norm``, over ``key_length``) before NEOX rope; KV-cache
write; GQA attention, sliding-window (``attention.sliding_window``) with the local rope base
(``rope.freq_base_swa``, default 10000) on layers ``il % 6 < 5``, global with ``rope.freq_base`` on the
others; ``attn_output`` matmul; ``post_attention_norm``; residual add; ``ffn_norm``; gate/up matmuls;
GELU-tanh gate (``gelu_mul``, LLM_FFN_GELU + LLM_FFN_PAR); ``ffn_down``; ``post_ffw_norm``; residual add.
Attention scale ``1/sqrt(key_length)`` (27B, 62 layers: ``1/sqrt(n_embd / n_head)``), applied to Q
(``ggml_scale(Qcur, f_attention_scale)``; attr ``scale_q``). Tied embedding
when there is no ``output.weight``; no final logit soft-capping (the sliding-window graph has none).
Norm weights are used as stored (llama.cpp's converter already added Gemma's ``1 +``).
"""

from __future__ import annotations

import math
import struct

from pipeplan.models.archs import Arch, MetaKey
from pipeplan.models.archs.common import (
    attention_half_calls,
    attention_weights,
    base_hparams,
    block_calls,
    block_names,
    gated_ffn_calls,
)
from pipeplan.models.stage_program import HParams, InvalidHParamsError, KernelCall
from pipeplan.plan_types import ModelFacts

SWA_PATTERN = 6
"""Every 6th layer (``il % 6 == 5``) is global (llama.cpp ``hparams.set_swa_pattern(6)``)."""
ROPE_BASE_SWA = 10000.0
"""Local rope base when the file states none (llama.cpp ``rope_freq_base_train_swa``)."""
N_LAYER_27B = 62
"""llama.cpp tells Gemma 3 27B by its 62 layers (``LLM_TYPE_27B``): its attention scale differs."""


def hparams(facts: ModelFacts) -> HParams:
    """gemma3 hyper-parameters: the common keys plus ``attention.sliding_window`` (required),
    ``rope.freq_base_swa`` (default 10000); NEOX rope; embedding scale ``sqrt(n_embd)``.

    Raises InvalidHParamsError: no positive sliding window (facts that did not come from a GGUF, whose
    reader requires the key)."""
    if not facts.param("attention.sliding_window"):
        raise InvalidHParamsError(f"gemma3 model {facts.name!r} states no attention.sliding_window (llama.cpp "
                                  "requires it: the local layers attend to that many positions)",
                                  where="attention.sliding_window")
    scale = 0.0
    if facts.block_count == N_LAYER_27B:
        scale = inv_sqrt_f32(facts.embedding_length // facts.head_count)
    return base_hparams(
        facts, rope_mode="neox", n_swa=int(facts.param("attention.sliding_window", 0) or 0),
        swa_pattern=SWA_PATTERN, rope_base_swa=float(facts.param("rope.freq_base_swa", ROPE_BASE_SWA) or 0.0),
        attn_scale=scale, embd_scale=math.sqrt(facts.embedding_length))


def f32(x: float) -> float:
    """``x`` rounded to float32."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def inv_sqrt_f32(n: int) -> float:
    """``1.0f / sqrtf(float(n))`` (llama.cpp's ``f_attention_scale``; each double operation rounded to
    float is the float operation: sqrt and division are correctly rounded)."""
    return f32(1.0 / f32(math.sqrt(n)))


def block(hp: HParams, b: int, h: str, h_out: str) -> list[KernelCall]:
    """The 20 calls of gemma3 block ``b`` (module docstring)."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    return [
        *attention_half_calls(hp, b, h, qk_norm=True),
        c("rms_norm", (t("attn_out"), w("post_attention_norm")), (t("attn_post"),)),
        c("add", (h, t("attn_post")), (t("h_mid"),)),
        *gated_ffn_calls(hp, b, t("h_mid"), h_out, "gelu_mul", post_norm="post_ffw_norm"),
    ]


def block_weights(hp: HParams) -> dict[str, tuple[int, ...]]:
    """llama's block tensors plus ``attn_q_norm``/``attn_k_norm`` ``[key_length]`` and
    ``post_attention_norm``/``post_ffw_norm`` ``[D]``."""
    d = hp.n_embd
    return {**attention_weights(hp), "attn_q_norm.weight": (hp.head_dim,), "attn_k_norm.weight": (hp.head_dim,),
            "post_attention_norm.weight": (d,), "post_ffw_norm.weight": (d,)}


ARCH = Arch(name="gemma3", source="llama.cpp llm_build_gemma3",
            metadata=(MetaKey("attention.sliding_window", "int", required=True),
                      MetaKey("rope.freq_base_swa", "float")),
            hparams=hparams, block=block, block_weights=block_weights,
            kernels=frozenset(("rms_norm", "matmul", "head_rms_norm", "rope", "kv_cache_write", "attention", "add", "gelu_mul")), scale_q=True)
"""The gemma3 architecture."""
