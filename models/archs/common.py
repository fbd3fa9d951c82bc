"""Pieces the architecture modules share: the common hyper-parameter reader and block helpers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pipeplan.models.stage_program import (
    ROPE_TABLE,
    ROPE_TABLE_SWA,
    START_POS,
    HParams,
    KernelCall,
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


def rope_call(hp: HParams, b: int, x: str, out: str, n_heads: int) -> KernelCall:
    """``rope`` of block ``b`` on ``x`` (``n_heads`` heads of ``hp.head_dim``): the ``rope_table_swa``
    table on a sliding-window layer with its own base, ``mode`` when not ``"norm"``."""
    attrs: dict[str, Any] = {"n_heads": n_heads, "head_dim": hp.head_dim, "rope_dim": hp.rope_dim}
    if hp.rope_mode != "norm":
        attrs["mode"] = hp.rope_mode
    table = ROPE_TABLE_SWA if (hp.is_swa(b) and hp.rope_base_swa > 0) else ROPE_TABLE
    return KernelCall("rope", (x, table, START_POS), (out,), attrs, b)


def attention_call(hp: HParams, b: int, q: str, ck: str, cv: str, out: str, *, scale_q: bool = False) -> KernelCall:
    """``attention`` of block ``b``: ``scale`` when it is not ``1/sqrt(head_dim)``, ``scale_q`` when the graph
    scales Q instead of the scores (gemma), ``window`` on a sliding-window layer."""
    attrs: dict[str, Any] = {}
    if hp.attn_scale and hp.attn_scale != 1.0 / math.sqrt(hp.head_dim):
        attrs["scale"] = hp.attn_scale
    if scale_q:
        attrs["scale_q"] = True
    if hp.is_swa(b):
        attrs["window"] = hp.n_swa
    return KernelCall("attention", (q, ck, cv, START_POS), (out,), attrs, b)


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
