"""CPU kernel table with weights quantized at rest (``--target cpu``, the default of ``pipeplan run``).

Same kernel names, signatures and semantics as :mod:`pipeplan.runtime.kernels.reference` (the kernel
contract); only the two kernels that read weight matrices differ, the rest are the reference ones:

* ``matmul(x, weight)``: ``weight`` a :class:`~pipeplan.runtime.dequant.QuantTensor` (any type of
  :data:`CPU_TYPES` but F32) runs the ``_qkernels`` C extension on the GGUF bytes in place: each row
  of ``x`` is quantized to the weight type's ``vec_dot_type`` (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
  Q4_1/Q5_1, Q8_K for Q4_K/Q5_K/Q6_K, F16 for F16, BF16 for BF16) and every output is an integer dot
  product per block times the block scales, as ggml's CPU backend computes it
  (``ggml_vec_dot_<type>_q8_<x>``, ggml/src/ggml-cpu/arch/x86/quants.c; ``bench/cpu_routes.py`` compares
  the AVX2 kernels bit for bit with a libggml build). A float32 torch weight runs ``F.linear``.
* ``embedding_gather(ids, table, *, scale=1.0)``: a QuantTensor table dequantizes only the rows it
  reads (exactly ``gguf.quants.dequantize`` of those rows), then multiplies by ``scale`` in float32.

Weights come from :func:`load_stage_weights` (the stage worker's loader hook): matrices stay
QuantTensor views of the mapped file, F32 tensors are zero-copy torch views, 1-D tensors of other
types are dequantized (norms: a few KB). A ggml type outside :data:`CPU_TYPES` (Q2_K, Q3_K, IQ*...)
is a ``bind`` fault naming tensor and type (:class:`~pipeplan.runtime.dequant.WeightTypeError`).

Threads: a matmul uses ``torch.get_num_threads()`` threads (the stage's ``num_threads``; local
stages default to 1, as llama.cpp is compared at 1 thread) when its work is large enough; the C
code releases the GIL, so in-process stages compute concurrently. ``PIPEPLAN_CPU_KERNELS=portable``
forces the portable C kernels instead of the AVX2/FMA/F16C ones (also chosen automatically when the
CPU lacks them; results then differ from the AVX2 ones by float summation order only).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import TensorSlice
from pipeplan.runtime.dequant import QuantTensor
from pipeplan.runtime.kernels import reference
from pipeplan.runtime.loader import QuantizedWeights, load_quantized_weights

try:
    from pipeplan.runtime.kernels import _qkernels  # type: ignore[attr-defined]
except ImportError as _e:  # pragma: no cover - the install builds it; see available()
    _qkernels = None
    _IMPORT_ERROR = str(_e)
else:
    _IMPORT_ERROR = ""
    if os.environ.get("PIPEPLAN_CPU_KERNELS", "").strip().lower() == "portable":
        _qkernels.set_simd(False)

CPU_TYPES: tuple[str, ...] = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
"""ggml types this table executes (llama.cpp's Q4_K_M / Q5_K_M / Q8_0 mixes)."""

VEC_DOT_TYPE: dict[str, str] = {
    "F16": "F16", "BF16": "BF16", "Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q8_0": "Q8_0", "Q4_1": "Q8_1", "Q5_1": "Q8_1",
    "Q4_K": "Q8_K", "Q5_K": "Q8_K", "Q6_K": "Q8_K",
}
"""Weight type -> the type a matmul quantizes its activation rows to (ggml ``type_traits_cpu.vec_dot_type``)."""


class CpuKernelError(PipeplanError):
    """The CPU kernels cannot run: the ``_qkernels`` extension was not built (no C compiler at install),
    or a kernel got an input it does not take. ``kind`` ``"bind"`` (a stage fault before StageReady)."""

    code = "cpu_kernels"
    kind = "bind"


def available() -> bool:
    """Whether the ``_qkernels`` extension is importable."""
    return _qkernels is not None


def simd() -> bool:
    """Whether the AVX2/FMA/F16C kernels are in use (False: the portable C kernels)."""
    return bool(_qkernels is not None and _qkernels.simd())


def _ext():
    if _qkernels is None:
        raise CpuKernelError(f"the CPU kernel extension pipeplan.runtime.kernels._qkernels is not built "
                             f"({_IMPORT_ERROR}); reinstall with a C compiler (pip install -e .) or use "
                             f"--target reference", where="_qkernels")
    return _qkernels


def load_stage_weights(files: Sequence[str | Path], tensors: Sequence[TensorSlice]) -> QuantizedWeights:
    """The stage worker's loader hook: :func:`pipeplan.runtime.loader.load_quantized_weights` with
    :data:`CPU_TYPES`.

    Raises:
        CpuKernelError: the extension is not built.
        WeightTypeError: a tensor of a type outside :data:`CPU_TYPES` (kind ``bind``).
        LoaderError / DequantError: unreadable file, bad byte range or size (kinds ``download``/``parse``).
    """
    _ext()
    return load_quantized_weights(files, tensors, types=CPU_TYPES)


def matmul(x: torch.Tensor, weight: torch.Tensor | QuantTensor) -> torch.Tensor:
    """``x @ weight.T`` (ggml ``mul_mat(weight, x)``).

    Shapes: ``x`` ``[T, K]`` float32, ``weight`` ``[N, K]`` (QuantTensor or float32 tensor) -> ``[T, N]``.
    Raises CpuKernelError when ``x`` is not ``[..., K]``.
    """
    if not isinstance(weight, QuantTensor):
        return F.linear(x, weight)
    n, k = weight.shape[0], weight.shape[-1]
    if x.shape[-1] != k or weight.ndim != 2:
        raise CpuKernelError(f"matmul of x {tuple(x.shape)} with {weight!r}: K differs or the weight is not 2-D",
                             where=weight.name)
    xs = x.reshape(-1, k)
    if xs.dtype != torch.float32 or not xs.is_contiguous():
        xs = xs.to(torch.float32).contiguous()
    out = torch.empty((xs.shape[0], n), dtype=torch.float32)
    _ext().mul_mat(weight.data, weight.type_id, n, k, xs.numpy(), out.numpy(), torch.get_num_threads())
    return out if x.dim() == 2 else out.reshape(*x.shape[:-1], n)


def embedding_gather(ids: torch.Tensor, table: torch.Tensor | QuantTensor, **attrs) -> torch.Tensor:
    """Rows of ``table`` for ``ids`` times ``scale`` (attr, default 1.0; float32 multiply, llama.cpp
    ``ggml_scale``); ggml ``get_rows``. A QuantTensor table dequantizes only the rows read.

    Shapes: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` -> ``[T, D]``. The caller checks ``0 <= ids < V``
    (the extension refuses others with ValueError).
    """
    if not isinstance(table, QuantTensor):
        return reference.embedding_gather(ids, table, **attrs)
    scale = float(attrs.pop("scale", 1.0))
    if attrs:
        raise CpuKernelError(f"embedding_gather: unknown attributes {sorted(attrs)}", where=table.name)
    idx = ids.reshape(-1).to(torch.int64).contiguous()
    out = torch.empty((idx.shape[0], table.shape[-1]), dtype=torch.float32)
    _ext().get_rows(table.data, table.type_id, table.shape[-1], idx.numpy(), out.numpy())
    if scale != 1.0:
        out.mul_(scale)
    return out


def dequantize_rows(table: QuantTensor, ids: Sequence[int]) -> np.ndarray:
    """Rows ``ids`` of ``table`` as float32 numpy ``[len(ids), K]`` (the gather kernel without scale)."""
    idx = np.asarray(ids, dtype=np.int64)
    out = np.empty((idx.size, table.shape[-1]), dtype=np.float32)
    _ext().get_rows(table.data, table.type_id, table.shape[-1], idx, out)
    return out


KERNELS = {**reference.KERNELS, "matmul": matmul, "embedding_gather": embedding_gather}
"""Kernel name -> function: the reference table with the quantized ``matmul`` and ``embedding_gather``."""

__all__ = ["CPU_TYPES", "KERNELS", "VEC_DOT_TYPE", "CpuKernelError", "QuantTensor", "available",
           "dequantize_rows", "embedding_gather", "load_stage_weights", "matmul", "simd"]
