"""Triton embedding gather (ggml ``get_rows``): rows of a table in any format the GEMV reads.

``embedding_gather(ids, table)``: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` (float32 tensor or
:class:`~pipeplan.runtime.kernels.triton_weights.GGMLWeight` F16/BF16/Q8_0/Q4_0) -> float32 ``[T, D]``,
the same as :func:`pipeplan.runtime.kernels.reference.embedding_gather` (exactly, for every format:
the dequantization is ``d * q`` in float32 as in ggml). Grid ``(T, cdiv(D, BLOCK_D))``; the caller
(the stage executor) has checked ``0 <= ids < V``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import TritonKernelError, cdiv, interpreting, next_pow2
from pipeplan.runtime.kernels.triton.gemv import FORMATS, weight_format


@triton.jit
def _gather_kernel(ids_ptr, w_ptr, y_ptr, D, stride_wn, stride_y, FMT: tl.constexpr, BLOCK_D: tl.constexpr):
    """``y[t, :] = dequant(w)[ids[t], :]``; grid ``(T, cdiv(D, BLOCK_D))``."""
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    ok = cols < D
    row = tl.load(ids_ptr + t).to(tl.int64)
    base = w_ptr + row * stride_wn
    if FMT <= 2:
        v = tl.load(base + cols, mask=ok, other=0.0).to(tl.float32)
    else:
        BS: tl.constexpr = 34 if FMT == 3 else 18  # bytes per 32-weight block: Q8_0 34, Q4_0 18
        sp = base + (cols // 32) * BS
        d = (tl.load(sp, mask=ok, other=0).to(tl.uint16) | (tl.load(sp + 1, mask=ok, other=0).to(tl.uint16) << 8))
        d = d.to(tl.float16, bitcast=True).to(tl.float32)
        j = cols % 32
        if FMT == 3:
            q = tl.load(sp + 2 + j, mask=ok, other=0).to(tl.int8, bitcast=True).to(tl.float32)
        else:
            byte = tl.load(sp + 2 + (j % 16), mask=ok, other=0)
            q = tl.where(j < 16, byte & 15, byte >> 4).to(tl.float32) - 8.0
        v = q * d
    tl.store(y_ptr + t * stride_y + cols, v, mask=ok)


def embedding_gather(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` for ``ids`` (module docstring). Returns float32 ``[T, D]`` on the table's device.

    Raises:
        TritonKernelError: ``triton:shape`` (ids not 1-D or table not 2-D), ``triton:dtype`` (ids not integer),
            ``triton:weight_type`` (unsupported table dtype).
    """
    if ids.dim() != 1 or table.dim() != 2:
        raise TritonKernelError("shape", f"embedding_gather: ids {tuple(ids.shape)} must be [T] and table "
                                f"{tuple(table.shape)} [V, D]", where="embedding_gather")
    if ids.dtype not in (torch.int64, torch.int32):
        raise TritonKernelError("dtype", f"embedding_gather: ids must be integer, got {ids.dtype}", where="ids")
    fmt, w = weight_format(table)
    ids = ids.to(w.device).contiguous()
    t, d = ids.shape[0], int(table.shape[1])
    y = torch.empty((t, d), dtype=torch.float32, device=w.device)
    if t == 0:
        return y
    bd = next_pow2(d) if interpreting() else min(next_pow2(d), 1024)
    _gather_kernel[(t, cdiv(d, bd))](ids, w, y, d, w.stride(0), y.stride(0), FMT=FORMATS[fmt], BLOCK_D=bd)
    return y


__all__ = ["embedding_gather"]
