"""Triton embedding gather (ggml ``get_rows``, then ``ggml_scale`` when ``scale != 1``): rows of a table in
any format the matmul reads, dequantizing only the gathered rows.

``embedding_gather(ids, table, *, scale=1.0)``: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` (float32
tensor or :class:`~pipeplan.runtime.kernels.triton_weights.GGMLWeight`: F16, BF16, Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) -> float32 ``[T, D]`` = ``dequant(table)[ids] * scale``, the scale a
float32 multiply (gemma3: ``sqrt(n_embd)``, llama.cpp ``ggml_scale(inpL, sqrtf(n_embd))``). The
dequantization is gguf.quants' arithmetic for each format (block layouts in
:mod:`pipeplan.runtime.kernels.triton.gemv`), so the rows equal the reference's exactly under the
interpreter. Grid ``(T, cdiv(D, BLOCK_D))``; the caller (the stage executor) has checked ``0 <= ids < V``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import TritonKernelError, cdiv, interpreting, next_pow2
from pipeplan.runtime.kernels.triton.gemv import _f16_at, _kq_min, _kq_quant, _kq_scale, weight_format
from pipeplan.targets.triton_formats import WEIGHT_FORMATS


@triton.jit
def _gather_kernel(ids_ptr, w_ptr, y_ptr, D, stride_wn, stride_y, scale, FMT: tl.constexpr, BLOCK_D: tl.constexpr):
    """``y[t, :] = dequant(w)[ids[t], :] * scale``; ``FMT`` = the table's ``gather_fmt`` (0..10 = F32, F16,
    BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); grid ``(T, cdiv(D, BLOCK_D))``."""
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    ok = cols < D
    row = tl.load(ids_ptr + t).to(tl.int64)
    base = w_ptr + row * stride_wn
    if FMT <= 2:
        v = tl.load(base + cols, mask=ok, other=0.0).to(tl.float32)
    elif FMT <= 7:
        BS: tl.constexpr = 34 if FMT == 3 else 18 + 2 * (FMT - 4)  # bytes per 32-weight block
        sp = base + (cols // 32) * BS
        d = _f16_at(sp, ok)
        j = cols % 32
        if FMT == 3:
            v = d * tl.load(sp + 2 + j, mask=ok, other=0).to(tl.int8, bitcast=True).to(tl.float32)
        else:
            QS: tl.constexpr = 2 + 2 * (FMT - 4)
            byte = tl.load(sp + QS + (j % 16), mask=ok, other=0).to(tl.int32)
            q = tl.where(j < 16, byte & 15, byte >> 4)
            if FMT >= 6:
                QH: tl.constexpr = 2 if FMT == 6 else 4
                h = tl.load(sp + QH + j // 8, mask=ok, other=0).to(tl.int32)
                q = q | (((h >> (j % 8)) & 1) << 4)
            if FMT % 2 == 1:
                v = d * q.to(tl.float32) + _f16_at(sp + 2, ok)
            else:
                ZP: tl.constexpr = 8.0 if FMT == 4 else 16.0
                v = d * (q.to(tl.float32) - ZP)
    else:
        KQ: tl.constexpr = FMT - 8  # the K-quant code of gemv._gemv_kq_kernel
        BSB: tl.constexpr = 144 if KQ == 0 else (176 if KQ == 1 else 210)
        bp = base + (cols // 256) * BSB
        vv = cols % 256
        q = _kq_quant(bp, vv // 32, vv % 32, ok, KQ)
        v = q * _kq_scale(bp, vv // 16, ok, KQ)
        if KQ != 2:
            v = v - _kq_min(bp, vv // 16, ok)
    tl.store(y_ptr + t * stride_y + cols, v * scale, mask=ok)


def embedding_gather(ids: torch.Tensor, table: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
    """Rows of ``table`` for ``ids``, times ``scale`` (module docstring). Returns float32 ``[T, D]`` on the
    table's device.

    Raises:
        TritonKernelError: ``triton:shape`` (ids not 1-D or table not 2-D), ``triton:dtype`` (ids not integer),
            ``triton:weight_type`` (unsupported table dtype or format).
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
    _gather_kernel[(t, cdiv(d, bd))](ids, w, y, d, w.stride(0), y.stride(0), float(scale),
                                     FMT=WEIGHT_FORMATS[fmt].gather_fmt, BLOCK_D=bd)
    return y


__all__ = ["embedding_gather"]
