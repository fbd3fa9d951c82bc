"""Pieces the architecture modules share: the common hyper-parameter reader and block helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeplan.models.stage_program import (
    START_POS,
    HParams,
    KernelCall,
    kernel_call,
    rope_table,
)
from pipeplan.plan_types import ModelFacts


def base_hparams(facts: ModelFacts, **extra: Any) -> HParams:
    """:class:`HParams` from the keys every architecture shares (``embedding_length``, head counts,
    ``feed_forward_length``, vocab, ``context_length``, ``rope.dimension_count`` (default: the key head
    dim), ``rope.freq_base``, the RMS epsilon, ``attention.key_length``/``value_length``), plus the
    architecture's ``extra`` fields; ``tied_embedding`` when ``output.weight`` is absent.

    Raises InvalidHParamsError (:meth:`HParams.check`)."""
    hp = HParams(
        n_embd=facts.embedding_length,
        n_head=facts.head_count,
        n_head_kv=facts.head_count_kv,
        n_ff=facts.feed_forward_length,
        n_vocab=facts.vocab_size,
        n_ctx=facts.context_length,
        rope_dim=facts.rope_dimension_count or facts.head_dim,
        rope_base=float(facts.rope_freq_base),
        rms_eps=float(facts.rms_norm_eps),
        n_layer=facts.block_count,
        tied_embedding=facts.tensor("output.weight") is None,
        arch=facts.architecture,
        n_embd_head_k=facts.key_length,
        n_embd_head_v=facts.value_length,
        **extra,
    )
    hp.check()
    return hp


def block_names(b: int) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """``(w, t)`` for block ``b``: ``w("attn_q")`` = ``blk.b.attn_q.weight``, ``t("q")`` = ``blk.b.q``."""
    p = f"blk.{b}."
    return (lambda n: f"{p}{n}.weight"), (lambda n: f"{p}{n}")


def block_calls(hp: HParams, b: int) -> Callable[[str, tuple[str, ...], tuple[str, ...]], KernelCall]:
    """``c(kernel, inputs, outputs)``: the call of block ``b``, its attributes from
    :func:`~pipeplan.models.stage_program.kernel_attrs` (the one source the lowerings read too)."""
    return lambda kernel, ins, outs: kernel_call(hp, kernel, ins, outs, b)


def rope_call(hp: HParams, b: int, x: str, out: str) -> KernelCall:
    """``rope`` of block ``b`` on ``x`` writing ``out`` (``blk.b.q`` or ``blk.b.k``: the heads it acts on), reading
    the table of :func:`~pipeplan.models.stage_program.rope_table`."""
    return kernel_call(hp, "rope", (x, rope_table(hp, b), START_POS), (out,), b)


def attention_call(hp: HParams, b: int, q: str, ck: str, cv: str, out: str) -> KernelCall:
    """``attention`` of block ``b`` (attributes: :func:`~pipeplan.models.stage_program.kernel_attrs`)."""
    return kernel_call(hp, "attention", (q, ck, cv, START_POS), (out,), b)


def rope_attention_calls(hp: HParams, b: int, q: str, k: str, v: str) -> list[KernelCall]:
    """The calls from the projected heads to ``blk.b.attn``: rope of ``q`` and ``k`` (into ``blk.b.q``/``blk.b.k``),
    the KV-cache write of ``blk.b.k`` and ``v``, and attention (llama.cpp's ``build_attn`` after the projections)."""
    _, t = block_names(b)
    ck, cv = t("cache_k"), t("cache_v")
    return [rope_call(hp, b, q, t("q")), rope_call(hp, b, k, t("k")),
            kernel_call(hp, "kv_cache_write", (t("k"), v, ck, cv, START_POS), (), b),
            attention_call(hp, b, t("q"), ck, cv, t("attn"))]


def attention_half_calls(hp: HParams, b: int, h: str, *, qk_norm: bool) -> list[KernelCall]:
    """The attention half of a llama-layout block ``b`` from the residual ``h`` to ``blk.b.attn_out``: ``attn_norm``,
    the q/k/v matmuls, with ``qk_norm`` the per-head RMS norms of q and k (qwen3, gemma3), then
    :func:`rope_attention_calls` and the output matmul."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    out = [c("rms_norm", (h, w("attn_norm")), (t("attn_in"),)),
           c("matmul", (t("attn_in"), w("attn_q")), (t("q_proj"),)),
           c("matmul", (t("attn_in"), w("attn_k")), (t("k_proj"),)),
           c("matmul", (t("attn_in"), w("attn_v")), (t("v"),))]
    q, k = t("q_proj"), t("k_proj")
    if qk_norm:
        out += [c("head_rms_norm", (q, w("attn_q_norm")), (t("q_norm"),)),
                c("head_rms_norm", (k, w("attn_k_norm")), (t("k_norm"),))]
        q, k = t("q_norm"), t("k_norm")
    return out + [*rope_attention_calls(hp, b, q, k, t("v")), c("matmul", (t("attn"), w("attn_output")), (t("attn_out"),))]


def gated_ffn_calls(hp: HParams, b: int, h_mid: str, h_out: str, act: str, post_norm: str | None = None
                    ) -> list[KernelCall]:
    """The feed-forward half of block ``b`` from the residual ``h_mid`` to ``h_out``: ``ffn_norm``, gate and up
    matmuls, the gated activation ``act`` (``silu_mul``/``gelu_mul``), the down matmul, the optional post norm
    (gemma3's ``post_ffw_norm``) and the residual add."""
    w, t = block_names(b)
    c = block_calls(hp, b)
    out = [c("rms_norm", (h_mid, w("ffn_norm")), (t("ffn_in"),)),
           c("matmul", (t("ffn_in"), w("ffn_gate")), (t("gate"),)),
           c("matmul", (t("ffn_in"), w("ffn_up")), (t("up"),)),
           c(act, (t("gate"), t("up")), (t("ffn_act"),)),
           c("matmul", (t("ffn_act"), w("ffn_down")), (t("ffn_out"),))]
    if post_norm is not None:
        out.append(c("rms_norm", (t("ffn_out"), w(post_norm)), (t("ffn_post"),)))
    return out + [c("add", (h_mid, t("ffn_post" if post_norm is not None else "ffn_out")), (h_out,))]


def attention_weights(hp: HParams) -> dict[str, tuple[int, ...]]:
    """Torch-order shapes of the llama-layout block tensors: norms ``[D]``, ``attn_q`` ``[H*hd_k, D]``,
    ``attn_k`` ``[Hkv*hd_k, D]``, ``attn_v`` ``[Hkv*hd_v, D]``, ``attn_output`` ``[D, H*hd_v]``,
    ``ffn_gate``/``ffn_up`` ``[F, D]``, ``ffn_down`` ``[D, F]``."""
    d, f, hk, hv = hp.n_embd, hp.n_ff, hp.head_dim, hp.head_dim_v
    return {
        "attn_norm.weight": (d,),
        "ffn_norm.weight": (d,),
        "attn_q.weight": (hp.n_head * hk, d),
        "attn_k.weight": (hp.n_head_kv * hk, d),
        "attn_v.weight": (hp.n_head_kv * hv, d),
        "attn_output.weight": (d, hp.n_head * hv),
        "ffn_gate.weight": (f, d),
        "ffn_up.weight": (f, d),
        "ffn_down.weight": (d, f),
    }
