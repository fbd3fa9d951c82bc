"""Triton RMS norm (ggml ``rms_norm`` then ``mul``): ``x / sqrt(mean(x**2) + eps) * weight``.

``rms_norm(x, weight, *, eps)``: ``x`` float32 ``[T, D]``, ``weight`` float32 ``[D]`` -> ``[T, D]``
(reference: :func:`pipeplan.runtime.kernels.reference.rms_norm`). One program per row; the row is
read in ``BLOCK_D`` chunks twice (sum of squares, then scale), so any ``D`` works.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import TritonKernelError, check_float, interpreting, next_pow2


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


__all__ = ["rms_norm"]
