"""Triton RMS norms (ggml ``rms_norm`` then ``mul``): ``x / sqrt(mean(x**2) + eps) * weight``.

``rms_norm(x, weight, *, eps)``: ``x`` float32 ``[T, D]``, ``weight`` float32 ``[D]`` -> ``[T, D]``
(reference: :func:`pipeplan.runtime.kernels.reference.rms_norm`). One program per row; the row is
read in ``BLOCK_D`` chunks twice (sum of squares, then scale), so any ``D`` works.

``head_rms_norm(x, weight, *, eps, n_heads, head_dim)``: the same norm over each head's ``head_dim``
values of ``x`` ``[T, n_heads * head_dim]``, times ``weight`` ``[head_dim]`` (QK-norm ``attn_q_norm`` /
``attn_k_norm`` of gemma3 and qwen3: llama.cpp ``build_norm`` on ``Qcur`` reshaped ``[hd, H, T]``).
Grid ``(T, cdiv(n_heads, BLOCK_H))``; a program normalizes a ``[BLOCK_H, BLOCK_D]`` tile
(``BLOCK_D = next_pow2(head_dim)``) in one pass.
"""

from __future__ import annotations

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
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, D, stride_x, stride_y, eps, BLOCK_D: tl.constexpr):
    """Row ``program_id(0)``: ``y = x * rsqrt(sum(x*x)/D + eps) * w``."""
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        cols = d0 + tl.arange(0, BLOCK_D)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < D, other=0.0)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / D + eps)
    for d0 in range(0, D, BLOCK_D):
        cols = d0 + tl.arange(0, BLOCK_D)
        ok = cols < D
        x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0)
        tl.store(y_ptr + row * stride_y + cols, x * r * w, mask=ok)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    """RMS norm of each row of ``x`` (module docstring). Returns float32 ``[T, D]`` on the weight's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (x not ``[T, D]`` or weight not ``[D]``).
    """
    check_float(x, "rms_norm input")
    check_float(weight, "rms_norm weight")
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise TritonKernelError("shape", f"rms_norm: x {tuple(x.shape)} and weight {tuple(weight.shape)} "
                                "must be [T, D] and [D]", where="rms_norm")
    x = x.to(weight.device)
    if x.stride(1) != 1:
        x = x.contiguous()
    t, d = x.shape
    y = torch.empty((t, d), dtype=torch.float32, device=weight.device)
    if t:
        bd = next_pow2(d) if interpreting() else min(next_pow2(d), 4096)
        _rms_norm_kernel[(t,)](x, weight.contiguous(), y, d, x.stride(0), y.stride(0), float(eps), BLOCK_D=bd)
    return y


@triton.jit
def _head_rms_norm_kernel(x_ptr, w_ptr, y_ptr, H, HD, stride_x, stride_y, eps,
                          BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Token ``program_id(0)``, heads ``program_id(1) * BLOCK_H + [0, BLOCK_H)``: each head's ``HD`` values
    ``y = x * rsqrt(sum(x*x)/HD + eps) * w``."""
    t = tl.program_id(0)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    ok = (h[:, None] < H) & (d[None, :] < HD)
    off = h[:, None] * HD + d[None, :]
    x = tl.load(x_ptr + t * stride_x + off, mask=ok, other=0.0)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HD + eps)
    w = tl.load(w_ptr + d, mask=d < HD, other=0.0)
    tl.store(y_ptr + t * stride_y + off, x * r[:, None] * w[None, :], mask=ok)


def head_rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float, n_heads: int, head_dim: int) -> torch.Tensor:
    """RMS norm of each head of each row of ``x`` (module docstring). Returns float32
    ``[T, n_heads * head_dim]`` on the weight's device.

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (x not ``[T, n_heads * head_dim]``
            or weight not ``[head_dim]``).
    """
    check_float(x, "head_rms_norm input")
    check_float(weight, "head_rms_norm weight")
    if x.dim() != 2 or n_heads < 1 or head_dim < 1 or x.shape[1] != n_heads * head_dim \
            or tuple(weight.shape) != (head_dim,):
        raise TritonKernelError("shape", f"head_rms_norm: x {tuple(x.shape)} and weight {tuple(weight.shape)} must be "
                                f"[T, {n_heads} * {head_dim}] and [{head_dim}]", where="head_rms_norm")
    x = x.to(weight.device)
    if x.stride(1) != 1:
        x = x.contiguous()
    t = x.shape[0]
    y = torch.empty((t, n_heads * head_dim), dtype=torch.float32, device=weight.device)
    if t:
        bd = next_pow2(head_dim)
        bh = next_pow2(n_heads) if interpreting() else max(1, min(next_pow2(n_heads), 4096 // bd))
        _head_rms_norm_kernel[(t, cdiv(n_heads, bh))](x, weight.contiguous(), y, n_heads, head_dim, x.stride(0),
                                                      y.stride(0), float(eps), BLOCK_H=bh, BLOCK_D=bd)
    return y


__all__ = ["head_rms_norm", "rms_norm"]
