"""Triton KV-cache write and causal grouped-query attention (prefill and decode) over the KV cache.

``kv_cache_write(k, v, cache_k, cache_v, start_pos)`` stores ``k`` ``[T, Hkv, hd]`` and ``v``
``[T, Hkv*hd]`` at positions ``[start_pos, start_pos + T)`` of the ``[S, Hkv, hd]`` caches, in place.

``attention(q, cache_k, cache_v, start_pos)``: ``q`` ``[T, H, hd]`` at positions
``[start_pos, start_pos + T)`` attends causally to cached positions ``[0, start_pos + t]``; query
head ``h`` uses KV head ``h // (H / Hkv)``; scale ``1/sqrt(hd)``; result ``[T, H * hd]`` (reference:
:func:`pipeplan.runtime.kernels.reference.attention`).

One program owns one KV head and ``BLOCK_M`` query positions, i.e. ``BLOCK_M * G`` query rows
(``G = H / Hkv``, the GQA group), so each K/V tile is loaded once for the whole group (the point of
GQA at decode). It walks the keys in ``BLOCK_N`` tiles up to the block's causal limit with an online
(flash-attention) softmax in float32: ``s = q k^T * scale``, masked where ``key > start_pos + t``;
running max ``m``, sum ``l``, ``acc = acc * exp(m_old - m) + p v``. Matrix products are ``tl.dot``
with ``input_precision="ieee"`` (no TF32). Grid ``(cdiv(T, BLOCK_M), Hkv)``. Decode (``T = 1``) is
the same kernel with one query position per program (no split over the keys yet: long-context
decode on a GPU would want flash-decoding's split-K; see the closing note).
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


@triton.jit
def _kv_write_kernel(k_ptr, v_ptr, ck_ptr, cv_ptr, start_pos, W, stride_k, stride_v, BLOCK: tl.constexpr):
    """Row ``program_id(0)`` of k/v -> cache row ``start_pos + t`` (``W = Hkv * hd`` floats)."""
    t = tl.program_id(0)
    for c0 in range(0, W, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < W
        dst = (start_pos + t) * W + cols
        tl.store(ck_ptr + dst, tl.load(k_ptr + t * stride_k + cols, mask=ok), mask=ok)
        tl.store(cv_ptr + dst, tl.load(v_ptr + t * stride_v + cols, mask=ok), mask=ok)


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
    if (k.dim() != 3 or tuple(k.shape[1:]) != (hkv, hd) or tuple(v.shape) != (t, hkv * hd)
            or cache_v.shape != cache_k.shape or not (cache_k.is_contiguous() and cache_v.is_contiguous())):
        raise TritonKernelError("shape", f"kv_cache_write: k {tuple(k.shape)}, v {tuple(v.shape)}, caches "
                                f"{tuple(cache_k.shape)}/{tuple(cache_v.shape)} (contiguous [S, Hkv, hd]) disagree",
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
        w = hkv * hd
        blk = next_pow2(w) if interpreting() else min(next_pow2(w), 1024)
        _kv_write_kernel[(t,)](k2, v2, cache_k, cache_v, int(start_pos), w, k2.stride(0), v2.stride(0), BLOCK=blk)


@triton.jit
def _attention_kernel(q_ptr, ck_ptr, cv_ptr, o_ptr, start_pos, T, H, HKV, HD, stride_qt, scale,
                      G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_D: tl.constexpr):
    """Queries ``[m0, m0 + BLOCK_M)`` of KV head ``program_id(1)`` (rows ``r -> (t, g) = (r // G, r % G)``)."""
    m0 = tl.program_id(0) * BLOCK_M
    kvh = tl.program_id(1)
    r = tl.arange(0, BLOCK_R)
    t = m0 + r // G
    h = kvh * G + r % G
    row_ok = (r < BLOCK_M * G) & (t < T)
    d = tl.arange(0, BLOCK_D)
    d_ok = d < HD
    q = tl.load(q_ptr + t[:, None] * stride_qt + h[:, None] * HD + d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    lim = start_pos + t  # last key each row may see
    n_keys = tl.minimum(start_pos + m0 + BLOCK_M, start_pos + T)
    m_i = tl.full([BLOCK_R], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    kv_stride = HKV * HD
    for j0 in range(0, n_keys, BLOCK_N):
        j = j0 + tl.arange(0, BLOCK_N)
        j_ok = j < n_keys
        kv_off = j[:, None] * kv_stride + kvh * HD + d[None, :]
        kv_mask = j_ok[:, None] & d_ok[None, :]
        k = tl.load(ck_ptr + kv_off, mask=kv_mask, other=0.0)
        v = tl.load(cv_ptr + kv_off, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        s = tl.where((j[None, :] <= lim[:, None]) & j_ok[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + t[:, None] * (H * HD) + h[:, None] * HD + d[None, :], out, mask=row_ok[:, None] & d_ok[None, :])


def attention_config(t: int, h: int, hkv: int, hd: int, n_keys: int, interpret: bool | None = None) -> dict:
    """Block sizes of an attention launch (exposed for the lowering and tests): ``BLOCK_M`` query
    positions per program, ``BLOCK_R`` padded rows (``>= 16`` for ``tl.dot``), ``BLOCK_N`` keys per
    tile, ``BLOCK_D`` padded head dim; under the interpreter one program per KV head."""
    g = h // hkv
    if interpreting() if interpret is None else interpret:
        bm = min(next_pow2(t), 64)
        bn = min(max(next_pow2(n_keys), 16), 256)
    else:
        bm = max(1, min(next_pow2(t), max(1, 64 // next_pow2(g))))
        bn = 64
    return {"G": g, "BLOCK_M": bm, "BLOCK_R": max(16, next_pow2(bm * g)), "BLOCK_N": bn,
            "BLOCK_D": max(16, next_pow2(hd))}


def attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Causal GQA over the cache (module docstring). Returns float32 ``[T, H * hd]`` on the cache's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (q not ``[T, H, hd]`` matching
            the caches, ``Hkv`` not dividing ``H``, positions past the cache).
    """
    for a, what in ((q, "q"), (cache_k, "cache_k"), (cache_v, "cache_v")):
        check_float(a, f"attention {what}")
    if q.dim() != 3 or cache_k.dim() != 3 or cache_v.shape != cache_k.shape or q.shape[2] != cache_k.shape[2] \
            or q.shape[1] % cache_k.shape[1] or not cache_k.is_contiguous() or not cache_v.is_contiguous():
        raise TritonKernelError("shape", f"attention: q {tuple(q.shape)} and caches {tuple(cache_k.shape)}/"
                                f"{tuple(cache_v.shape)} are not [T, H, hd] / contiguous [S, Hkv, hd] with Hkv | H",
                                where="attention")
    t, h, hd = q.shape
    s, hkv, _ = cache_k.shape
    if start_pos < 0 or start_pos + t > s:
        raise TritonKernelError("shape", f"attention: positions [{start_pos}, {start_pos + t}) exceed the cache "
                                f"({s} positions)", where="attention")
    q = q.to(cache_k.device)
    if q.stride(2) != 1 or q.stride(1) != hd:
        q = q.contiguous()
    o = torch.empty((t, h * hd), dtype=torch.float32, device=cache_k.device)
    if t:
        cfg = attention_config(t, h, hkv, hd, start_pos + t)
        grid = (cdiv(t, cfg["BLOCK_M"]), hkv)
        _attention_kernel[grid](q, cache_k, cache_v, o, int(start_pos), t, h, hkv, hd, q.stride(0),
                                1.0 / math.sqrt(hd), **cfg)
    return o


__all__ = ["attention", "attention_config", "kv_cache_write"]
