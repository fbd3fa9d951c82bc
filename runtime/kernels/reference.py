"""Torch reference kernels of a stage program (one function per kernel name).

A stage program (``pipeplan.runtime.program``) is an ordered list of ``KernelCall(kernel, inputs,
outputs, attrs)``; the executor resolves the named buffers to tensors and calls
``KERNELS[kernel](*inputs, **attrs)``; a kernel returns its output tensor (or a tuple, one per
output name) and never keeps state. ``kv_cache_write`` is the one kernel that writes into a buffer
(the KV cache) in place and has no outputs. The Triton kernels use the same names and signatures,
so tests can compare them call by call.

Conventions: float32 everywhere; ``T`` tokens in the call, ``D`` = n_embd, ``H`` query heads,
``Hkv`` KV heads, ``hd_k``/``hd_v`` key/value head dims, ``S`` = max_seq_len, ``V`` vocab; weights are
in torch order ``[out_features, in_features]`` (GGUF ggml shapes reversed). Semantics follow ggml's ops
as llama.cpp's graphs use them (``llm_build_llama``, ``llm_build_gemma3``, ``llm_build_qwen2``,
``llm_build_qwen3``); names, signatures and attribute defaults are the kernel contract every table
(reference, CPU-quantized, Triton) implements. An attribute at its default is omitted by the programs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def embedding_gather(ids: torch.Tensor, table: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
    """Rows of ``table`` for ``ids`` (ggml ``get_rows`` on ``token_embd.weight``), times ``scale``
    (gemma: ``sqrt(n_embd)``, llama.cpp ``ggml_scale(inpL, sqrtf(n_embd))``; float32 product).

    Shapes: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` -> ``[T, D]``. The caller checks ``0 <= ids < V``.
    """
    rows = F.embedding(ids, table)
    return rows if scale == 1.0 else rows * scale


def rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` (ggml ``rms_norm`` then ``mul``).

    Shapes: ``x`` ``[T, D]``, ``weight`` ``[D]`` -> ``[T, D]``; ``eps`` from
    ``llama.attention.layer_norm_rms_epsilon``. Written as sum/scale/rsqrt (not ``F.rms_norm``):
    same arithmetic, about half the per-call overhead on CPU for decode-sized rows.
    """
    r = (x * x).sum(-1, keepdim=True).mul_(1.0 / x.shape[-1]).add_(eps).rsqrt_()
    return (x * r).mul_(weight)


def head_rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float, n_heads: int, head_dim: int
                  ) -> torch.Tensor:
    """RMS norm over each head's ``head_dim`` values, times ``weight`` (QK-norm: ``attn_q_norm`` /
    ``attn_k_norm``; llama.cpp ``build_norm`` on Q reshaped ``[hd, H, T]``, ``LLM_NORM_RMS``).

    Shapes: ``x`` ``[T, n_heads * head_dim]``, ``weight`` ``[head_dim]`` -> ``[T, n_heads * head_dim]``.
    """
    t = x.shape[0]
    return rms_norm(x.reshape(t, n_heads, head_dim), weight, eps=eps).reshape(t, n_heads * head_dim)


def add_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x + bias`` broadcast over rows (qwen2 ``attn_q.bias``/``attn_k.bias``/``attn_v.bias``).

    Shapes: ``x`` ``[T, N]``, ``bias`` ``[N]`` -> ``[T, N]``.
    """
    return x + bias


def matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` (ggml ``mul_mat(weight, x)``).

    Shapes: ``x`` ``[T, K]``, ``weight`` ``[N, K]`` -> ``[T, N]``.
    """
    return F.linear(x, weight)


def split(x: torch.Tensor, *, sizes: tuple[int, ...]):
    """Column views of ``x`` (used after a fused q/k/v or gate/up matmul; no copy).

    Shapes: ``x`` ``[T, sum(sizes)]`` -> a tuple of ``[T, sizes[i]]`` views.
    """
    return tuple(torch.split(x, list(sizes), dim=-1))


def rope_table(max_seq_len: int, rope_dim: int, base: float) -> torch.Tensor:
    """Complex rotation table for :func:`rope`: ``table[p, i] = exp(1j * p * base**(-2i/rope_dim))``.

    Shape ``[max_seq_len, 1, rope_dim // 2]`` complex64 (the 1 broadcasts over heads). The angles are computed in float64 and
    rounded once (ggml computes ``theta = p * base**(-2i/n_dims)`` in float32 per row).
    """
    inv = base ** (-torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    ang = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.polar(torch.ones_like(ang), ang).to(torch.complex64).unsqueeze(1)


def rope(x: torch.Tensor, table: torch.Tensor, start_pos: int, *, n_heads: int, head_dim: int,
         rope_dim: int, mode: str = "norm") -> torch.Tensor:
    """Rotary position embedding of each head's first ``rope_dim`` dims by
    ``(start_pos + t) * base**(-2i/rope_dim)``; dims ``>= rope_dim`` pass through.

    ``mode="norm"`` (``GGML_ROPE_TYPE_NORM``, llama): adjacent pairs ``(x[2i], x[2i+1])`` (the GGUF
    converter permutes llama's q/k rows so that this pairing is right). ``mode="neox"``
    (``GGML_ROPE_TYPE_NEOX``: gemma3, qwen2, qwen3): pairs ``(x[i], x[i + rope_dim/2])``.

    Shapes: ``x`` ``[T, n_heads * head_dim]``, ``table`` from :func:`rope_table` -> ``[T, n_heads, head_dim]``.
    Raises ValueError for another ``mode``.
    """
    t = x.shape[0]
    xh = x.reshape(t, n_heads, head_dim)
    freqs = table[start_pos : start_pos + t]  # [T, 1, rope_dim/2]
    if mode == "neox":
        half = rope_dim // 2
        rot = torch.complex(xh[..., :half], xh[..., half:rope_dim]) * freqs
        parts = [rot.real, rot.imag] + ([xh[..., rope_dim:]] if rope_dim < head_dim else [])
        return torch.cat(parts, dim=-1)
    if mode != "norm":
        raise ValueError(f"rope mode {mode!r} is not 'norm' or 'neox'")
    if rope_dim == head_dim:
        xc = torch.view_as_complex(xh.reshape(t, n_heads, head_dim // 2, 2))
        return torch.view_as_real(xc * freqs).reshape(t, n_heads, head_dim)
    rot = torch.view_as_complex(xh[..., :rope_dim].reshape(t, n_heads, rope_dim // 2, 2))
    return torch.cat([torch.view_as_real(rot * freqs).reshape(t, n_heads, rope_dim), xh[..., rope_dim:]], dim=-1)


def kv_cache_write(k: torch.Tensor, v: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                   start_pos: int) -> None:
    """Store this call's keys and values at positions ``[start_pos, start_pos + T)`` (in place).

    Shapes: ``k`` ``[T, Hkv, hd_k]``, ``v`` ``[T, Hkv * hd_v]``; ``cache_k`` ``[S, Hkv, hd_k]``,
    ``cache_v`` ``[S, Hkv, hd_v]`` (position-major, so a write is one contiguous copy).
    """
    t, hkv = k.shape[0], k.shape[1]
    cache_k[start_pos : start_pos + t] = k
    cache_v[start_pos : start_pos + t] = v.view(t, hkv, cache_v.shape[2])


def attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, start_pos: int, *,
              scale: float | None = None, window: int = 0, scale_q: bool = False) -> torch.Tensor:
    """Causal grouped-query attention of ``T`` queries at positions ``[start_pos, start_pos + T)``
    over the cached keys/values ``[0, start_pos + T)``; query head ``h`` uses KV head
    ``h // (H / Hkv)`` (ggml's broadcast in ``mul_mat``); softmax in float32 at ``scale`` (None:
    ``1 / sqrt(hd_k)``). ``scale_q``: the graph multiplies Q by the scale instead of the scores (gemma:
    llama.cpp's ``ggml_scale(Qcur, f_attention_scale)``, softmax scale 1); the same product in float32,
    so this table ignores it (the CPU table, whose Q is rounded to F16 after the scale, does not).

    ``window`` W > 0: the query at position p sees keys ``j`` with ``p - W < j <= p`` (llama.cpp
    ``LLAMA_SWA_TYPE_STANDARD``: masked when ``p - j >= W``); 0: every earlier position.

    Shapes: ``q`` ``[T, H, hd_k]``, ``cache_k`` ``[S, Hkv, hd_k]``, ``cache_v`` ``[S, Hkv, hd_v]`` -> ``[T, H * hd_v]``.
    """
    t, h, hd = q.shape
    hkv, hdv = cache_k.shape[1], cache_v.shape[2]
    n = start_pos + t
    sc = 1.0 / math.sqrt(hd) if scale is None else float(scale)
    lo = max(0, n - t - window + 1) if window > 0 else 0  # first key any query of the call can see
    k = cache_k[lo:n].transpose(0, 1)  # [Hkv, n - lo, hd] view
    v = cache_v[lo:n].transpose(0, 1)
    if t == 1:
        # decode: one query sees every kept position; grouped matmuls, no mask
        qg = q.view(hkv, h // hkv, hd)
        s = torch.bmm(qg, k.transpose(1, 2)).mul_(sc)
        return torch.bmm(torch.softmax(s, dim=-1), v).view(1, h * hdv)
    qh = q.transpose(0, 1)  # [H, T, hd]
    sdpa_scale = None if scale is None else sc  # None: SDPA's own 1/sqrt(hd), as before the attribute existed
    if start_pos == 0 and window <= 0:
        o = F.scaled_dot_product_attention(qh, k, v, is_causal=True, enable_gqa=True, scale=sdpa_scale)
    else:
        qpos = torch.arange(start_pos, n)[:, None]
        kpos = torch.arange(lo, n)[None, :]
        mask = kpos <= qpos
        if window > 0:
            mask &= qpos - kpos < window
        o = F.scaled_dot_product_attention(qh, k, v, attn_mask=mask, enable_gqa=True, scale=sdpa_scale)
    return o.transpose(0, 1).reshape(t, h * hdv)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` (llama FFN, ``LLM_FFN_SILU`` + ``LLM_FFN_PAR``). Shapes ``[T, F]`` -> ``[T, F]``."""
    return F.silu(gate).mul_(up)


def gelu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(gate) * up`` (ggml ``gelu``: the tanh approximation; gemma3 FFN, ``LLM_FFN_GELU`` +
    ``LLM_FFN_PAR``). Shapes ``[T, F]`` -> ``[T, F]``."""
    return F.gelu(gate, approximate="tanh").mul_(up)


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise ``a + b`` (residual). Shapes ``[T, D]`` -> ``[T, D]``."""
    return a + b


def last_row(x: torch.Tensor) -> torch.Tensor:
    """The last row as a ``[1, D]`` view (prefill needs only the last position's logits)."""
    return x[-1:]


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """Greedy token per row. Shapes ``[T, V]`` -> int64 ``[T]`` (ties: lowest id, like ``torch.argmax``)."""
    return torch.argmax(logits, dim=-1)


KERNELS = {
    "embedding_gather": embedding_gather,
    "rms_norm": rms_norm,
    "head_rms_norm": head_rms_norm,
    "matmul": matmul,
    "split": split,
    "rope": rope,
    "kv_cache_write": kv_cache_write,
    "attention": attention,
    "silu_mul": silu_mul,
    "gelu_mul": gelu_mul,
    "add": add,
    "add_bias": add_bias,
    "last_row": last_row,
    "argmax": argmax,
}
"""Kernel name -> function: the table a StageExecutor dispatches through."""
