"""Triton argmax for greedy sampling: ``[T, V]`` float32 logits -> int64 ``[T]``.

Ties resolve to the lowest index, like :func:`torch.argmax` (the reference
:func:`pipeplan.runtime.kernels.reference.argmax`). One program per row walks ``V`` in ``BLOCK``
chunks keeping the best value and its index (a later chunk replaces it only when strictly greater).
NaN logits are not given torch's NaN-is-maximum treatment (a stage never produces them knowingly).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from pipeplan.runtime.kernels.triton._common import TritonKernelError, check_float, interpreting, next_pow2


@triton.jit
def _argmax_kernel(x_ptr, y_ptr, V, stride_x, BLOCK: tl.constexpr):
    """Row ``program_id(0)``: index of its first maximum."""
    row = tl.program_id(0)
    best = tl.full([], -float("inf"), tl.float32)
    best_i = tl.full([], 0, tl.int32)
    for v0 in range(0, V, BLOCK):
        cols = v0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=-float("inf"))
        m = tl.max(x, axis=0)
        i = tl.min(tl.where((x == m) & (cols < V), cols, V), axis=0)
        take = m > best
        best_i = tl.where(take, i, best_i)
        best = tl.where(take, m, best)
    tl.store(y_ptr + row, best_i.to(tl.int64))


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """Greedy token per row (module docstring).

    Raises:
        TritonKernelError: ``triton:dtype`` (not float32), ``triton:shape`` (not ``[T, V]`` with ``V >= 1``).
    """
    check_float(logits, "argmax input")
    if logits.dim() != 2 or logits.shape[1] < 1:
        raise TritonKernelError("shape", f"argmax: logits {tuple(logits.shape)} must be [T, V] with V >= 1",
                                where="argmax")
    x = logits if logits.stride(1) == 1 else logits.contiguous()
    t, v = x.shape
    y = torch.empty((t,), dtype=torch.int64, device=x.device)
    if t:
        blk = next_pow2(v) if interpreting() else min(next_pow2(v), 4096)
        _argmax_kernel[(t,)](x, y, v, x.stride(0), BLOCK=blk)
    return y


__all__ = ["argmax"]
