"""Triton elementwise kernels: the gated FFN activations, the residual add and the bias add.

float32 ``[T, F]`` -> ``[T, F]`` (references: :mod:`pipeplan.runtime.kernels.reference`):

* ``silu_mul(gate, up)`` = ``silu(gate) * up``, ``silu(g) = g / (1 + exp(-g))`` (llama, ``LLM_FFN_SILU``);
* ``gelu_mul(gate, up)`` = ``gelu_tanh(gate) * up`` (gemma3, ggml ``gelu``, ``LLM_FFN_GELU``), with
  ``gelu_tanh(g) = 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u))``, ``u = sqrt(2/pi) (g + 0.044715 g^3)``
  (the sigmoid form is the same function and cannot overflow to NaN);
* ``add(a, b)`` = ``a + b``;
* ``add_bias(x, bias)`` = ``x + bias`` with ``bias`` ``[F]`` broadcast over rows (qwen2 q/k/v biases).

Inputs may be column views (``split`` after a fused matmul): rows are addressed by stride, columns
must be unit-stride; the bias is read with row stride 0. Grid ``(T, cdiv(F, BLOCK))``; ``OP`` 0 silu_mul,
1 add, 2 gelu_mul, 3 add_bias.
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
    """``OP`` 0: ``y = silu(a) * b``; 1 and 3: ``y = a + b`` (3: ``stride_b = 0``); 2: ``y = gelu_tanh(a) * b``;
    one row chunk per program."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < F
    a = tl.load(a_ptr + row * stride_a + cols, mask=ok, other=0.0)
    b = tl.load(b_ptr + row * stride_b + cols, mask=ok, other=0.0)
    if OP == 0:
        y = a / (1.0 + tl.exp(-a)) * b
    elif OP == 2:
        u = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        y = a / (1.0 + tl.exp(tl.minimum(-2.0 * u, 80.0))) * b  # exp clamped: no float32 overflow
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


def gelu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(gate) * up`` (module docstring). Raises :class:`TritonKernelError` (``dtype``/``shape``)."""
    return _binary(gate, up, 2, "gelu_mul")


def add_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x [T, N] + bias [N]`` (module docstring). Raises :class:`TritonKernelError` (``dtype``; ``shape``
    unless ``x`` is 2-D and ``bias`` is ``[N]``)."""
    check_float(x, "add_bias input")
    check_float(bias, "add_bias bias")
    if x.dim() != 2 or bias.dim() != 1 or bias.shape[0] != x.shape[1]:
        raise TritonKernelError("shape", f"add_bias: x {tuple(x.shape)} and bias {tuple(bias.shape)} must be [T, N] "
                                "and [N]", where="add_bias")
    return _binary(x, bias.contiguous().expand(x.shape[0], -1), 3, "add_bias")


__all__ = ["add", "add_bias", "gelu_mul", "silu_mul"]
