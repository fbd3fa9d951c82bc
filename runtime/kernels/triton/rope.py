"""Triton rotary position embedding, llama.cpp NORM mode (``GGML_ROPE_TYPE_NORM``, ``LLM_ARCH_LLAMA``).

``rope(x, table, start_pos, *, n_heads, head_dim, rope_dim)``: adjacent pairs ``(x[2i], x[2i+1])`` of
each head rotate by angle ``(start_pos + t) * base**(-2i/rope_dim)``; dims ``>= rope_dim`` pass
through. ``x`` float32 ``[T, n_heads * head_dim]``; ``table`` the complex64 ``[S, 1, rope_dim/2]``
table of :func:`pipeplan.runtime.kernels.reference.rope_table` (read as its float32 ``(cos, sin)``
view, no copy); result float32 ``[T, n_heads, head_dim]`` (reference:
:func:`pipeplan.runtime.kernels.reference.rope`). Grid ``(T, cdiv(n_heads, BLOCK_H))``; each program
rotates ``[BLOCK_H, head_dim/2]`` pairs with ``(x0 c - x1 s, x0 s + x1 c)`` -- the complex product
the reference computes.
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

_TABLES: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


@triton.jit
def _rope_kernel(x_ptr, tab_ptr, y_ptr, start_pos, H, HD, ROPE_DIM, stride_x, stride_tab,
                 BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    """Token ``program_id(0)``, heads ``program_id(1) * BLOCK_H + [0, BLOCK_H)``."""
    t = tl.program_id(0)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_P)
    ok = (h[:, None] < H) & (i[None, :] < HD // 2)
    off = h[:, None] * HD + 2 * i[None, :]
    x0 = tl.load(x_ptr + t * stride_x + off, mask=ok, other=0.0)
    x1 = tl.load(x_ptr + t * stride_x + off + 1, mask=ok, other=0.0)
    rot = i < ROPE_DIM // 2
    tp = tab_ptr + (start_pos + t) * stride_tab + 2 * i
    c = tl.load(tp, mask=rot, other=1.0)
    s = tl.load(tp + 1, mask=rot, other=0.0)
    y0 = x0 * c[None, :] - x1 * s[None, :]
    y1 = x0 * s[None, :] + x1 * c[None, :]
    out = y_ptr + t * H * HD + off
    tl.store(out, y0, mask=ok)
    tl.store(out + 1, y1, mask=ok)


def _real_table(table: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The table as float32 ``[S, rope_dim]`` (cos, sin interleaved) on ``device``; a GPU copy is cached
    per table so decode steps do not re-upload it."""
    if table.is_complex():
        real = torch.view_as_real(table).reshape(table.shape[0], -1)
    else:
        real = table.reshape(table.shape[0], -1)
    if real.device == device:
        return real
    key = (id(table), device)
    hit = _TABLES.get(key)
    if hit is None or hit[0] is not table:
        hit = (table, real.to(device).contiguous())
        _TABLES[key] = hit
    return hit[1]


def rope(x: torch.Tensor, table: torch.Tensor, start_pos: int, *, n_heads: int, head_dim: int,
         rope_dim: int) -> torch.Tensor:
    """NORM-mode rope (module docstring). Returns float32 ``[T, n_heads, head_dim]`` on ``x``'s device.

    Raises:
        TritonKernelError: ``triton:dtype`` (x not float32), ``triton:shape`` (x not ``[T, n_heads*head_dim]``,
            odd ``rope_dim`` or ``rope_dim > head_dim``, positions past the table).
    """
    check_float(x, "rope input")
    t = x.shape[0] if x.dim() == 2 else -1
    if x.dim() != 2 or x.shape[1] != n_heads * head_dim or rope_dim % 2 or not 0 < rope_dim <= head_dim or head_dim % 2:
        raise TritonKernelError("shape", f"rope: x {tuple(x.shape)} with n_heads {n_heads}, head_dim {head_dim}, "
                                f"rope_dim {rope_dim} is not a [T, n_heads*head_dim] NORM-mode call", where="rope")
    pairs = table.shape[-1] if table.is_complex() else table[0].numel() // 2
    if start_pos < 0 or start_pos + t > table.shape[0] or pairs != rope_dim // 2:
        raise TritonKernelError("shape", f"rope: positions [{start_pos}, {start_pos + t}) or rope_dim {rope_dim} do not "
                                f"fit table {tuple(table.shape)}", where="rope")
    tab = _real_table(table, x.device)
    if x.stride(1) != 1:
        x = x.contiguous()
    y = torch.empty((t, n_heads, head_dim), dtype=torch.float32, device=x.device)
    if t:
        bh = next_pow2(n_heads) if interpreting() else min(next_pow2(n_heads), 16)
        _rope_kernel[(t, cdiv(n_heads, bh))](x, tab, y, int(start_pos), n_heads, head_dim, rope_dim, x.stride(0),
                                            tab.stride(0), BLOCK_H=bh, BLOCK_P=next_pow2(head_dim // 2))
    return y


__all__ = ["rope"]
