"""Triton elementwise kernels: SiLU-multiply (llama SwiGLU FFN) and the residual add.

``silu_mul(gate, up)`` = ``silu(gate) * up`` with ``silu(g) = g / (1 + exp(-g))`` and
``add(a, b)`` = ``a + b``; float32 ``[T, F]`` -> ``[T, F]`` (references:
:func:`pipeplan.runtime.kernels.reference.silu_mul` / ``add``). Inputs may be column views
(``split`` after a fused matmul): rows are addressed by stride, columns must be unit-stride.
Grid ``(T, cdiv(F, BLOCK))``.
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
def _binary_kernel(a_ptr, b_ptr, y_ptr, F, stride_a, stride_b, stride_y, OP: tl.constexpr, BLOCK: tl.constexpr):
    """``OP`` 0: ``y = silu(a) * b``; 1: ``y = a + b``; one row chunk per program."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < F
    a = tl.load(a_ptr + row * stride_a + cols, mask=ok, other=0.0)
    b = tl.load(b_ptr + row * stride_b + cols, mask=ok, other=0.0)
    if OP == 0:
        y = a / (1.0 + tl.exp(-a)) * b
    else:
        y = a + b
    tl.store(y_ptr + row * stride_y + cols, y, mask=ok)


def _binary(a: torch.Tensor, b: torch.Tensor, op: int, what: str) -> torch.Tensor:
    check_float(a, f"{what} lhs")
    check_float(b, f"{what} rhs")
    if a.dim() != 2 or a.shape != b.shape:
        raise TritonKernelError("shape", f"{what}: operands {tuple(a.shape)} and {tuple(b.shape)} must be equal [T, F]",
                                where=what)
    dev = b.device if b.device.type != "cpu" else a.device
    a, b = a.to(dev), b.to(dev)
    a = a if a.stride(1) == 1 else a.contiguous()
    b = b if b.stride(1) == 1 else b.contiguous()
    t, f = a.shape
    y = torch.empty((t, f), dtype=torch.float32, device=dev)
    if t and f:
        blk = next_pow2(f) if interpreting() else min(next_pow2(f), 1024)
        _binary_kernel[(t, cdiv(f, blk))](a, b, y, f, a.stride(0), b.stride(0), y.stride(0), OP=op, BLOCK=blk)
    return y


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` (module docstring). Raises :class:`TritonKernelError` (``dtype``/``shape``)."""
    return _binary(gate, up, 0, "silu_mul")


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a + b`` (module docstring). Raises :class:`TritonKernelError` (``dtype``/``shape``)."""
    return _binary(a, b, 1, "add")


__all__ = ["add", "silu_mul"]
