"""Triton KV-cache write and causal grouped-query attention (prefill and decode) over the KV cache,
optionally sliding-window.

``kv_cache_write(k, v, cache_k, cache_v, start_pos)`` stores ``k`` ``[T, Hkv, hd_k]`` and ``v``
``[T, Hkv*hd_v]`` at positions ``[start_pos, start_pos + T)`` of the ``[S, Hkv, hd_k]`` /
``[S, Hkv, hd_v]`` caches, in place.

``attention(q, cache_k, cache_v, start_pos, *, scale=None, window=0)``: ``q`` ``[T, H, hd_k]`` at
positions ``p = start_pos + t`` attends to cached keys ``j <= p``, and with ``window = W > 0`` only to
``p - W < j <= p`` (llama.cpp ``LLAMA_SWA_TYPE_STANDARD``: masked when ``p - j >= W``); query head ``h``
uses KV head ``h // (H / Hkv)``; softmax scale ``scale`` (default ``1/sqrt(hd_k)``); result
``[T, H * hd_v]`` (reference: :func:`pipeplan.runtime.kernels.reference.attention`).

One program owns one KV head and ``BLOCK_M`` query positions, i.e. ``BLOCK_M * G`` query rows
(``G = H / Hkv``, the GQA group), so each K/V tile is loaded once for the whole group (the point of
GQA at decode). It walks the keys in ``BLOCK_N`` tiles from the block's first visible key (0, or
``start_pos + m0 - W + 1`` with a window) to its causal limit with an online (flash-attention)
softmax in float32: ``s = q k^T * scale``, masked outside each row's range; running max ``m``, sum
``l``, ``acc = acc * exp(m_old - m) + p v`` (a row with no visible key in a tile so far keeps
``m = -inf`` and contributes nothing). Matrix products are ``tl.dot`` with ``input_precision="ieee"``
(no TF32). Grid ``(cdiv(T, BLOCK_M), Hkv)``. Decode (``T = 1``) is the same kernel with one query
position per program (no split over the keys yet: long-context decode on a GPU would want
flash-decoding's split-K).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import (
    TritonKernelError,
    cdiv,
    check_float,
    interpreting,
    next_pow2,
)
from pipeplan.targets.triton_formats import attention_config


@triton.jit
def _kv_write_kernel(k_ptr, v_ptr, ck_ptr, cv_ptr, start_pos, WK, WV, stride_k, stride_v, BLOCK: tl.constexpr):
    """Row ``program_id(0)`` of k/v -> cache row ``start_pos + t`` (``WK = Hkv * hd_k``, ``WV = Hkv * hd_v``
    floats)."""
    t = tl.program_id(0)
    for c0 in range(0, tl.maximum(WK, WV), BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok_k = cols < WK
        ok_v = cols < WV
        tl.store(ck_ptr + (start_pos + t) * WK + cols, tl.load(k_ptr + t * stride_k + cols, mask=ok_k), mask=ok_k)
        tl.store(cv_ptr + (start_pos + t) * WV + cols, tl.load(v_ptr + t * stride_v + cols, mask=ok_v), mask=ok_v)


def kv_cache_write(k: torch.Tensor, v: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                   start_pos: int) -> None:
    """Store this call's keys/values (module docstring); no output.

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (shapes disagree, caches not
            contiguous, positions past the cache).
    """
    for a, what in ((k, "k"), (v, "v"), (cache_k, "cache_k"), (cache_v, "cache_v")):
        check_float(a, f"kv_cache_write {what}")
    t = k.shape[0]
    s, hkv, hd = cache_k.shape if cache_k.dim() == 3 else (0, 0, 0)
    hd_v = cache_v.shape[2] if cache_v.dim() == 3 else 0
    if (k.dim() != 3 or tuple(k.shape[1:]) != (hkv, hd) or tuple(v.shape) != (t, hkv * hd_v)
            or tuple(cache_v.shape[:2]) != (s, hkv) or not (cache_k.is_contiguous() and cache_v.is_contiguous())):
        raise TritonKernelError("shape", f"kv_cache_write: k {tuple(k.shape)}, v {tuple(v.shape)}, caches "
                                f"{tuple(cache_k.shape)}/{tuple(cache_v.shape)} (contiguous [S, Hkv, hd_k] / [S, Hkv, hd_v]) disagree",
                                where="kv_cache_write")
    if start_pos < 0 or start_pos + t > s:
        raise TritonKernelError("shape", f"kv_cache_write: positions [{start_pos}, {start_pos + t}) exceed the cache "
                                f"({s} positions)", where="kv_cache_write")
    dev = cache_k.device
    k2 = k.to(dev).reshape(t, hkv * hd)
    v2 = v.to(dev)
    k2 = k2 if k2.stride(1) == 1 else k2.contiguous()
    v2 = v2 if v2.stride(1) == 1 else v2.contiguous()
    if t:
        wk, wv = hkv * hd, hkv * hd_v
        blk = next_pow2(max(wk, wv)) if interpreting() else min(next_pow2(max(wk, wv)), 1024)
        _kv_write_kernel[(t,)](k2, v2, cache_k, cache_v, int(start_pos), wk, wv, k2.stride(0), v2.stride(0), BLOCK=blk)


@triton.jit
def _attention_kernel(q_ptr, ck_ptr, cv_ptr, o_ptr, start_pos, T, H, HKV, HD_K, HD_V, stride_qt, scale, WINDOW,
                      G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr):
    """Queries ``[m0, m0 + BLOCK_M)`` of KV head ``program_id(1)`` (rows ``r -> (t, g) = (r // G, r % G)``);
    ``WINDOW`` >= 1: the window, or the cache length ``S`` for full causal attention (the same mask: every
    cached key is closer than ``S``)."""
    m0 = tl.program_id(0) * BLOCK_M
    kvh = tl.program_id(1)
    r = tl.arange(0, BLOCK_R)
    t = m0 + r // G
    h = kvh * G + r % G
    row_ok = (r < BLOCK_M * G) & (t < T)
    dk = tl.arange(0, BLOCK_DK)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + t[:, None] * stride_qt + h[:, None] * HD_K + dk[None, :],
                mask=row_ok[:, None] & (dk[None, :] < HD_K), other=0.0)
    lim = start_pos + t  # each row's position: the last key it may see
    n_keys = tl.minimum(start_pos + m0 + BLOCK_M, start_pos + T)
    lo = tl.maximum(start_pos + m0 - WINDOW + 1, 0)  # first key the block's first row sees
    m_i = tl.full([BLOCK_R], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_DV], dtype=tl.float32)
    for j0 in range(lo, n_keys, BLOCK_N):
        j = j0 + tl.arange(0, BLOCK_N)
        j_ok = j < n_keys
        k = tl.load(ck_ptr + j[:, None] * (HKV * HD_K) + kvh * HD_K + dk[None, :],
                    mask=j_ok[:, None] & (dk[None, :] < HD_K), other=0.0)
        v = tl.load(cv_ptr + j[:, None] * (HKV * HD_V) + kvh * HD_V + dv[None, :],
                    mask=j_ok[:, None] & (dv[None, :] < HD_V), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        seen = (j[None, :] <= lim[:, None]) & j_ok[None, :] & (lim[:, None] - j[None, :] < WINDOW)
        s = tl.where(seen, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # no visible key yet: exp(-inf) = 0, no NaN
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(o_ptr + t[:, None] * (H * HD_V) + h[:, None] * HD_V + dv[None, :], out,
             mask=row_ok[:, None] & (dv[None, :] < HD_V))


def attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, start_pos: int, *,
              scale: float | None = None, window: int = 0, scale_q: bool = False) -> torch.Tensor:
    """Causal (optionally sliding-window) GQA over the cache (module docstring). Returns float32
    ``[T, H * hd_v]`` on the cache's device. ``scale_q`` (the graph scales Q, not the scores) is the same
    float32 product here: ignored.

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (q not ``[T, H, hd_k]`` matching
            the caches, ``Hkv`` not dividing ``H``, positions past the cache), ``triton:attr`` (a negative
            window or a scale that is not a finite number).
    """
    for a, what in ((q, "q"), (cache_k, "cache_k"), (cache_v, "cache_v")):
        check_float(a, f"attention {what}")
    if q.dim() != 3 or cache_k.dim() != 3 or cache_v.dim() != 3 or cache_v.shape[:2] != cache_k.shape[:2] \
            or q.shape[2] != cache_k.shape[2] or q.shape[1] % cache_k.shape[1] or not cache_k.is_contiguous() \
            or not cache_v.is_contiguous():
        raise TritonKernelError("shape", f"attention: q {tuple(q.shape)} and caches {tuple(cache_k.shape)}/"
                                f"{tuple(cache_v.shape)} are not [T, H, hd_k] / contiguous [S, Hkv, hd_k], [S, Hkv, "
                                "hd_v] with Hkv | H", where="attention")
    t, h, hd = q.shape
    s, hkv, _ = cache_k.shape
    hd_v = cache_v.shape[2]
    if start_pos < 0 or start_pos + t > s:
        raise TritonKernelError("shape", f"attention: positions [{start_pos}, {start_pos + t}) exceed the cache "
                                f"({s} positions)", where="attention")
    sm = 1.0 / math.sqrt(hd) if scale is None else float(scale)
    if int(window) < 0 or not math.isfinite(sm):
        raise TritonKernelError("attr", f"attention: window {window} must be >= 0 and scale {scale} finite",
                                where="attention")
    q = q.to(cache_k.device)
    if q.stride(2) != 1 or q.stride(1) != hd:
        q = q.contiguous()
    o = torch.empty((t, h * hd_v), dtype=torch.float32, device=cache_k.device)
    if t:
        n_keys = start_pos + t if not window else min(start_pos + t, int(window) + t - 1)
        cfg = attention_config(t, h, hkv, hd, hd_v, n_keys, interpreting())
        grid = (cdiv(t, cfg["BLOCK_M"]), hkv)
        _attention_kernel[grid](q, cache_k, cache_v, o, int(start_pos), t, h, hkv, hd, hd_v, q.stride(0), sm,
                                int(window) or s, **cfg)
    return o


__all__ = ["attention", "attention_config", "kv_cache_write"]
