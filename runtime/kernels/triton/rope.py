"""Triton rotary position embedding, llama.cpp NORM and NEOX modes.

``rope(x, table, start_pos, *, n_heads, head_dim, rope_dim, mode="norm")``: pair ``i < rope_dim/2`` of
each head rotates by angle ``(start_pos + t) * base**(-2i/rope_dim)``; the pair is ``(x[2i], x[2i+1])``
in ``"norm"`` mode (``GGML_ROPE_TYPE_NORM``: llama) and ``(x[i], x[i + rope_dim/2])`` in ``"neox"`` mode
(``GGML_ROPE_TYPE_NEOX``: gemma3, qwen2, qwen3); dims ``>= rope_dim`` pass through. ``x`` float32
``[T, n_heads * head_dim]``; ``table`` the complex64 ``[S, 1, rope_dim/2]`` table of
:func:`pipeplan.runtime.kernels.reference.rope_table` (read as its float32 ``(cos, sin)`` view, no copy;
``rope_table`` or gemma3's ``rope_table_swa``); result float32 ``[T, n_heads, head_dim]`` (reference:
:func:`pipeplan.runtime.kernels.reference.rope`). Grid ``(T, cdiv(n_heads, BLOCK_H))``; each program
rotates ``[BLOCK_H, head_dim/2]`` pairs with ``(x0 c - x1 s, x0 s + x1 c)`` -- the complex product
the reference computes. ``NEOX`` is a runtime argument (0/1): pair ``i`` reads elements
``(p0, p1) = (i, i + rope_dim/2)`` if NEOX and ``i < rope_dim/2``, else ``(2i, 2i+1)`` (for
``i >= rope_dim/2`` those are the pass-through tail in both modes, rotated by angle 0).
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
from pipeplan.targets.triton_formats import ROPE_MODES

_TABLES: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


@triton.jit
def _rope_kernel(x_ptr, tab_ptr, y_ptr, start_pos, H, HD, ROPE_DIM, NEOX, stride_x, stride_tab,
                 BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    """Token ``program_id(0)``, heads ``program_id(1) * BLOCK_H + [0, BLOCK_H)``; ``NEOX`` 0 (norm) or 1."""
    t = tl.program_id(0)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_P)
    ok = (h[:, None] < H) & (i[None, :] < HD // 2)
    rot = i < ROPE_DIM // 2
    neox = (NEOX != 0) & rot
    p0 = tl.where(neox, i, 2 * i)
    p1 = tl.where(neox, i + ROPE_DIM // 2, 2 * i + 1)
    row = h[:, None] * HD
    x0 = tl.load(x_ptr + t * stride_x + row + p0[None, :], mask=ok, other=0.0)
    x1 = tl.load(x_ptr + t * stride_x + row + p1[None, :], mask=ok, other=0.0)
    tp = tab_ptr + (start_pos + t) * stride_tab + 2 * i
    c = tl.load(tp, mask=rot, other=1.0)
    s = tl.load(tp + 1, mask=rot, other=0.0)
    y0 = x0 * c[None, :] - x1 * s[None, :]
    y1 = x0 * s[None, :] + x1 * c[None, :]
    out = y_ptr + t * H * HD + row
    tl.store(out + p0[None, :], y0, mask=ok)
    tl.store(out + p1[None, :], y1, mask=ok)


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
         rope_dim: int, mode: str = "norm") -> torch.Tensor:
    """NORM- or NEOX-mode rope (module docstring). Returns float32 ``[T, n_heads, head_dim]`` on ``x``'s device.

    Raises:
        TritonKernelError: ``triton:dtype`` (x not float32), ``triton:shape`` (x not ``[T, n_heads*head_dim]``,
            odd ``rope_dim`` or ``rope_dim > head_dim``, positions past the table), ``triton:attr`` (a mode
            other than ``"norm"``/``"neox"``).
    """
    check_float(x, "rope input")
    if mode not in ROPE_MODES:
        raise TritonKernelError("attr", f"rope: mode {mode!r} is not one of {', '.join(ROPE_MODES)}", where="rope")
    t = x.shape[0] if x.dim() == 2 else -1
    if x.dim() != 2 or x.shape[1] != n_heads * head_dim or rope_dim % 2 or not 0 < rope_dim <= head_dim or head_dim % 2:
        raise TritonKernelError("shape", f"rope: x {tuple(x.shape)} with n_heads {n_heads}, head_dim {head_dim}, "
                                f"rope_dim {rope_dim} is not a [T, n_heads*head_dim] rope call", where="rope")
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
        _rope_kernel[(t, cdiv(n_heads, bh))](x, tab, y, int(start_pos), n_heads, head_dim, rope_dim, ROPE_MODES[mode],
                                            x.stride(0), tab.stride(0), BLOCK_H=bh, BLOCK_P=next_pow2(head_dim // 2))
    return y


__all__ = ["ROPE_MODES", "rope"]
