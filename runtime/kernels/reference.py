"""Torch reference kernels of a llama stage program (one function per kernel name).

A stage program (``pipeplan.runtime.program``) is an ordered list of ``KernelCall(kernel, inputs,
outputs, attrs)``; the executor resolves the named buffers to tensors and calls
``KERNELS[kernel](*inputs, **attrs)``; a kernel returns its output tensor (or a tuple, one per
output name) and never keeps state. ``kv_cache_write`` is the one kernel that writes into a buffer
(the KV cache) in place and has no outputs. The Triton kernels use the same names and signatures,
so tests can compare them call by call.

Conventions: float32 everywhere; ``T`` tokens in the call, ``D`` = n_embd, ``H`` query heads,
``Hkv`` KV heads, ``hd`` head dim, ``S`` = max_seq_len, ``V`` vocab; weights are in torch order
``[out_features, in_features]`` (GGUF ggml shapes reversed). Semantics follow llama.cpp's
``build_llama`` graph for ``LLM_ARCH_LLAMA`` (src/llama-model.cpp) and ggml's ops.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def embedding_gather(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` for ``ids`` (ggml ``get_rows`` on ``token_embd.weight``).

    Shapes: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` -> ``[T, D]``. The caller checks ``0 <= ids < V``.
    """
    return F.embedding(ids, table)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` (ggml ``rms_norm`` then ``mul``).

    Shapes: ``x`` ``[T, D]``, ``weight`` ``[D]`` -> ``[T, D]``; ``eps`` from
    ``llama.attention.layer_norm_rms_epsilon``. Written as sum/scale/rsqrt (not ``F.rms_norm``):
    same arithmetic, about half the per-call overhead on CPU for decode-sized rows.
    """
    r = (x * x).sum(-1, keepdim=True).mul_(1.0 / x.shape[-1]).add_(eps).rsqrt_()
    return (x * r).mul_(weight)


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
         rope_dim: int) -> torch.Tensor:
    """Rotary position embedding, ggml NORM mode (``GGML_ROPE_TYPE_NORM``, used by
    ``LLM_ARCH_LLAMA``): adjacent pairs ``(x[2i], x[2i+1])`` of each head rotate by
    ``(start_pos + t) * base**(-2i/rope_dim)``; dims ``>= rope_dim`` pass through. (The GGUF
    converter permutes q/k rows so that NORM pairing is correct; the EXPECTED greedy tokens confirm it.)

    Shapes: ``x`` ``[T, n_heads * head_dim]``, ``table`` from :func:`rope_table` -> ``[T, n_heads, head_dim]``.
    """
    t = x.shape[0]
    xh = x.reshape(t, n_heads, head_dim)
    freqs = table[start_pos : start_pos + t]  # [T, 1, rope_dim/2]
    if rope_dim == head_dim:
        xc = torch.view_as_complex(xh.reshape(t, n_heads, head_dim // 2, 2))
        return torch.view_as_real(xc * freqs).reshape(t, n_heads, head_dim)
    rot = torch.view_as_complex(xh[..., :rope_dim].reshape(t, n_heads, rope_dim // 2, 2))
    return torch.cat([torch.view_as_real(rot * freqs).reshape(t, n_heads, rope_dim), xh[..., rope_dim:]], dim=-1)


def kv_cache_write(k: torch.Tensor, v: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                   start_pos: int) -> None:
    """Store this call's keys and values at positions ``[start_pos, start_pos + T)`` (in place).

    Shapes: ``k`` ``[T, Hkv, hd]``, ``v`` ``[T, Hkv * hd]``; ``cache_k``/``cache_v`` ``[S, Hkv, hd]``
    (position-major, so a write is one contiguous copy).
    """
    t, hkv, hd = k.shape
    cache_k[start_pos : start_pos + t] = k
    cache_v[start_pos : start_pos + t] = v.view(t, hkv, hd)


def attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Causal grouped-query attention of ``T`` queries at positions ``[start_pos, start_pos + T)``
    over the cached keys/values ``[0, start_pos + T)``; query head ``h`` uses KV head
    ``h // (H / Hkv)`` (ggml's broadcast in ``mul_mat``); scale ``1 / sqrt(hd)``; softmax in float32.

    Shapes: ``q`` ``[T, H, hd]``, caches ``[S, Hkv, hd]`` -> ``[T, H * hd]``.
    """
    t, h, hd = q.shape
    hkv = cache_k.shape[1]
    n = start_pos + t
    k = cache_k[:n].transpose(0, 1)  # [Hkv, n, hd] view
    v = cache_v[:n].transpose(0, 1)
    if t == 1:
        # decode: one query sees every cached position; grouped matmuls, no mask
        qg = q.view(hkv, h // hkv, hd)
        s = torch.bmm(qg, k.transpose(1, 2)).mul_(1.0 / math.sqrt(hd))
        return torch.bmm(torch.softmax(s, dim=-1), v).view(1, h * hd)
    qh = q.transpose(0, 1)  # [H, T, hd]
    if start_pos == 0:
        o = F.scaled_dot_product_attention(qh, k, v, is_causal=True, enable_gqa=True)
    else:
        mask = torch.ones(t, n, dtype=torch.bool).tril(diagonal=start_pos)
        o = F.scaled_dot_product_attention(qh, k, v, attn_mask=mask, enable_gqa=True)
    return o.transpose(0, 1).reshape(t, h * hd)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` (llama FFN, ``LLM_FFN_SILU`` + ``LLM_FFN_PAR``). Shapes ``[T, F]`` -> ``[T, F]``."""
    return F.silu(gate).mul_(up)


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
    "matmul": matmul,
    "split": split,
    "rope": rope,
    "kv_cache_write": kv_cache_write,
    "attention": attention,
    "silu_mul": silu_mul,
    "add": add,
    "last_row": last_row,
    "argmax": argmax,
}
"""Kernel name -> function: the table a StageExecutor dispatches through."""
