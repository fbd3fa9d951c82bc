"""CPU kernel table with weights quantized at rest (``--target cpu``, the default of ``pipeplan run``):
llama.cpp's CPU arithmetic, bit for bit.

Same kernel names, signatures and semantics as :mod:`pipeplan.runtime.kernels.reference` (the kernel
contract); the kernels whose float operations ggml's CPU backend (AVX2 build) does differently from a
plain float32 implementation reproduce ggml's, in its order, so a model's numbers are llama.cpp's
(``bench/ggml_parity.py`` compares every buffer with llama.cpp's tensors; tests/contract/test_gemma3.py
checks Gemma 3's greedy ids):

* ``matmul(x, weight)``: ``weight`` a :class:`~pipeplan.runtime.dequant.QuantTensor` (any type of
  :data:`CPU_TYPES` but F32) runs the ``_qkernels`` C extension on the GGUF bytes in place: each row
  of ``x`` is quantized to the weight type's ``vec_dot_type`` (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
  Q4_1/Q5_1, Q8_K for Q4_K/Q5_K/Q6_K, F16 for F16, BF16 for BF16) and every output is an integer dot
  product per block times the block scales, by the kernel llama.cpp runs for the micro-batch
  (:func:`ubatches`): vec_dot (``ggml_vec_dot_<type>_q8_<x>``; ``bench/cpu_routes.py`` compares it with a
  libggml build), the repacked Q4_K gemv/gemm (``ggml_gemv/gemm_q4_K_8x8_q8_K``, weights with N % 8 == 0)
  or the tiled K-quant kernel (``ggml_compute_forward_mul_mat_tiled``, 8+ rows). A float32 torch weight
  runs ``F.linear``.
* ``embedding_gather(ids, table, *, scale=1.0)``: a QuantTensor table dequantizes only the rows it
  reads (exactly ``gguf.quants.dequantize`` of those rows), then multiplies by ``scale`` in float32.
* ``rms_norm``, ``head_rms_norm``, ``rope`` (with :func:`rope_table`), ``gelu_mul`` (F16 GELU table),
  ``kv_cache_write`` into float16 caches (:func:`allocate`; llama.cpp's default KV type) and
  ``attention`` over them (F16 dot products in the lane order of ggml_vec_dot_f16 for decode and of
  llamafile's tinyBLAS for prefill, ggml's softmax): ``runtime/kernels/csrc/ops.c``.
* ``silu_mul`` (ggml_vec_swiglu_f32, ops.c); ``add``, ``add_bias``, ``split``, ``last_row``, ``argmax`` in numpy
  (exact float32 elementwise sums, column/row views).

Buffers are numpy arrays (:data:`ARRAYS` ``"numpy"``): activations float32, token ids int64, the KV cache
float16; neither this table nor the executor running it imports torch (kernels accept any array that
``numpy.asarray`` takes, e.g. a CPU torch tensor, and return numpy).

Executor hooks: :func:`allocate` (KV caches), :func:`rope_table`, :func:`begin_step` (the step's rows and
first position, from which :func:`ubatches` derives llama.cpp's micro-batches of ``UBATCH`` positions:
prompt frames whose rows are multiples of 4 dividing ``UBATCH`` follow llama.cpp's kernel routes row for
row; a one-row prompt frame runs as a decode step; ``rows_alone``: a micro-batch of one-row decode steps of
several sequences, :data:`BATCH_ROWS`) and :data:`OUTPUT_ROWS_ONLY`.

Weights come from :func:`load_stage_weights` (the stage worker's loader hook): matrices stay
QuantTensor views of the mapped file, F32 tensors are zero-copy numpy views, 1-D tensors of other
types are dequantized (norms: a few KB). A ggml type outside :data:`CPU_TYPES` (Q2_K, Q3_K, IQ*...)
is a ``bind`` fault naming tensor and type (:class:`~pipeplan.runtime.dequant.WeightTypeError`).

Threads: a matmul uses :func:`get_num_threads` threads (the stage's ``num_threads``, set by the executor
through :func:`set_num_threads`; default the usable cores; local
stages default to 1, as llama.cpp is compared at 1 thread) when its work is large enough; the C
code releases the GIL, so in-process stages compute concurrently; the thread count does not change a
number. ``PIPEPLAN_CPU_KERNELS=portable`` forces the portable C kernels instead of the AVX2/FMA/F16C ones
(also chosen automatically when the CPU lacks them): the ops of ops.c and the repack/tiled routes give
the same bits, the vec_dot matmuls differ from the AVX2 ones (and llama.cpp) by float summation order.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import TensorSlice
from pipeplan.runtime.dequant import QuantTensor
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

KERNEL_CHOICES = ("auto", "portable")
"""Values of ``$PIPEPLAN_CPU_KERNELS`` (unset or empty = ``auto``: AVX2/FMA/F16C when the CPU has them)."""


def check_kernel_env(environ=None) -> str:
    """The ``$PIPEPLAN_CPU_KERNELS`` choice (``auto`` when unset or empty). Raises CpuKernelError
    (code ``invalid_env``) naming the variable and :data:`KERNEL_CHOICES` for any other value."""
    raw = (os.environ if environ is None else environ).get("PIPEPLAN_CPU_KERNELS", "")
    value = raw.strip().lower() or "auto"
    if value not in KERNEL_CHOICES:
        raise CpuKernelError(f"PIPEPLAN_CPU_KERNELS={raw!r} is not one of {', '.join(KERNEL_CHOICES)} "
                             f"(or unset)", code="invalid_env", where="PIPEPLAN_CPU_KERNELS")
    return value

ARRAYS = "numpy"
"""The executor's buffers for this table are numpy arrays (no torch)."""

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


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


_threads = _usable_cores()


def set_num_threads(n: int) -> None:
    """Threads a large matmul of this process uses (process-wide, like ``torch.set_num_threads``).
    Raises ValueError for ``n < 1``."""
    global _threads
    if int(n) < 1:
        raise ValueError(f"num_threads must be >= 1, got {n}")
    _threads = int(n)


def get_num_threads() -> int:
    """Threads a large matmul of this process uses (default: the usable cores)."""
    return _threads


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


UBATCH = 512
"""llama.cpp's micro-batch (``n_ubatch``; llama-cpp-python's default ``n_batch``): prompt rows are
processed in batches of this many positions, and some kernel routes depend on a batch's size."""

OUTPUT_ROWS_ONLY = True
"""The executor computes only the output row after the last block's attention output projection when
the last position's logits are asked for (llama.cpp ``inp_out_ids``): the row-count dependent kernel
routes then see the row count llama.cpp's do."""

BATCH_ROWS = True
"""The executor may run a micro-batch of one-row segments (decode steps of several sequences) through this
table's row-wise kernels at once (:func:`begin_step` with ``rows_alone``): every row's numbers are those of its
sequence's step alone (each activation row is quantized by itself and takes the one-row matmul route)."""

_step = threading.local()


def begin_step(start_pos: int, rows: int, rows_alone: bool = False) -> None:
    """Executor hook, called before each forward with the call's first position and row count, and with
    ``rows = 0`` after it: this thread's kernels read them to pick llama.cpp's routes (:func:`ubatches`).
    ``rows_alone``: the ``rows`` rows are one-row decode steps of different sequences (a micro-batch)."""
    _step.start = int(start_pos)
    _step.rows = int(rows)
    _step.alone = bool(rows_alone)


def ubatches(rows: int, start_pos: int | None = None) -> list[tuple[int, int, int]]:
    """The llama.cpp micro-batches that ``rows`` activation rows fall into: ``(row0, row1, batch_rows)``
    slices of the rows with the size of the micro-batch each slice ends (``UBATCH``-aligned positions
    of the step begun by :func:`begin_step`). A call with another row count than the step's (the output
    row of the last block), or a one-row step (decode), is one batch of its own rows; in a step of rows
    alone (a micro-batch of decode steps) every row is a micro-batch of 1: ``[(0, rows, 1)]``."""
    if getattr(_step, "alone", False):
        return [(0, rows, 1)]
    t = getattr(_step, "rows", 0) or rows
    s = (getattr(_step, "start", 0) if getattr(_step, "rows", 0) else 0) if start_pos is None else start_pos
    if rows != t or rows <= 1:
        return [(0, rows, rows)]
    out = []
    r = 0
    while r < rows:
        p = s + r
        base = p - p % UBATCH
        end = min(s + rows, base + UBATCH)
        out.append((r, end - s, end - base))
        r = end - s
    return out


def _f32(x: Any) -> np.ndarray:
    """``x`` as a C-contiguous float32 numpy array (no copy when it is one)."""
    if type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float32)


def matmul(x: Any, weight: Any) -> np.ndarray:
    """``x @ weight.T`` (ggml ``mul_mat(weight, x)``), by llama.cpp's kernel route (module docstring): a
    QuantTensor on its GGUF bytes, a float weight (made contiguous float32) by ggml's F32 arithmetic
    (vec_dot_f32, or llamafile's tinyBLAS for a prompt).

    Shapes: ``x`` ``[T, K]`` float32, ``weight`` ``[N, K]`` -> ``[T, N]``.
    Raises CpuKernelError when ``x`` is not ``[..., K]`` or the weight is not 2-D.
    """
    if isinstance(weight, QuantTensor):
        data, type_id, name = weight.data, weight.type_id, weight.name
    else:
        data, type_id, name = _f32(weight), 0, "float32 weight"
    shape = weight.shape
    k = shape[-1]
    if len(shape) != 2 or x.shape[-1] != k:
        raise CpuKernelError(f"matmul of x {tuple(x.shape)} with {weight!r}: K differs or the weight is not 2-D",
                             where=name)
    n = shape[0]
    xs = _f32(x).reshape(-1, k)
    t = xs.shape[0]
    out = np.empty((t, n), dtype=np.float32)
    mul_mat = _ext().mul_mat
    if t == 1:
        mul_mat(data, type_id, n, k, xs, out, _threads, 1)  # (ubatch 1 with t > 1 rows: each row alone)
    else:
        for r0, r1, ub in ubatches(t):
            mul_mat(data, type_id, n, k, xs[r0:r1], out[r0:r1], _threads, ub)
    return out if x.ndim == 2 else out.reshape(*x.shape[:-1], n)


def embedding_gather(ids: Any, table: Any, **attrs) -> np.ndarray:
    """Rows of ``table`` for ``ids`` times ``scale`` (attr, default 1.0; float32 multiply, llama.cpp
    ``ggml_scale``); ggml ``get_rows``. A QuantTensor table dequantizes only the rows read.

    Shapes: ``ids`` int64 ``[T]``, ``table`` ``[V, D]`` -> ``[T, D]``. The caller checks ``0 <= ids < V``
    (the extension refuses others with ValueError).
    """
    scale = float(attrs.pop("scale", 1.0))
    if attrs:
        raise CpuKernelError(f"embedding_gather: unknown attributes {sorted(attrs)}",
                             where=getattr(table, "name", "embedding"))
    idx = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    if isinstance(table, QuantTensor):
        out = np.empty((idx.shape[0], table.shape[-1]), dtype=np.float32)
        _ext().get_rows(table.data, table.type_id, table.shape[-1], idx, out)
    else:
        out = np.asarray(table, dtype=np.float32)[idx]
    if scale != 1.0:
        np.multiply(out, np.float32(scale), out=out)
    return out


def dequantize_rows(table: QuantTensor, ids: Sequence[int]) -> np.ndarray:
    """Rows ``ids`` of ``table`` as float32 numpy ``[len(ids), K]`` (the gather kernel without scale)."""
    idx = np.asarray(ids, dtype=np.int64)
    out = np.empty((idx.size, table.shape[-1]), dtype=np.float32)
    _ext().get_rows(table.data, table.type_id, table.shape[-1], idx, out)
    return out


def rms_norm(x: Any, weight: Any, *, eps: float) -> np.ndarray:
    """ggml ``rms_norm`` then ``mul`` (sum of squares in double; ops.c). Shapes ``[T, D]``, ``[D]`` -> ``[T, D]``."""
    x = _f32(x)
    out = np.empty_like(x)
    _ext().rms_norm(x, _f32(weight), out, x.shape[-1], eps)
    return out


def head_rms_norm(x: Any, weight: Any, *, eps: float, n_heads: int, head_dim: int) -> np.ndarray:
    """RMS norm of each head's ``head_dim`` values times ``weight`` (ggml, per row of ``head_dim``).
    Shapes ``[T, n_heads * head_dim]``, ``[head_dim]`` -> ``[T, n_heads * head_dim]``."""
    x = _f32(x)
    out = np.empty_like(x)
    _ext().rms_norm(x, _f32(weight), out, head_dim, eps)
    return out


def rope_table(max_seq_len: int, rope_dim: int, base: float) -> np.ndarray:
    """The rotation table of :func:`rope` as ggml computes it (``ggml_rope_cache_init``: theta in float32
    by repeated multiplication with ``powf(base, -2 / rope_dim)``, ``cosf``/``sinf``): float32
    ``[max_seq_len, rope_dim // 2, 2]`` (cos, sin) pairs, i.e. the real view of the complex table of
    :func:`pipeplan.runtime.kernels.reference.rope_table`."""
    cs = np.empty((max_seq_len, rope_dim // 2, 2), dtype=np.float32)
    _ext().rope_cache(int(max_seq_len), int(rope_dim), float(base), cs)
    return cs


def _rope_cs(table: Any) -> np.ndarray:
    """A rope table as float32 ``[S, rope_dim]`` (cos, sin) pairs: this table's, or a complex one
    ``[S, 1, rope_dim // 2]`` (the reference's)."""
    a = np.asarray(table)
    if np.iscomplexobj(a):
        a = np.ascontiguousarray(a.reshape(a.shape[0], -1), dtype=np.complex64).view(np.float32)
    return _f32(a).reshape(a.shape[0], -1)


def rope(x: Any, table: Any, start_pos: int, *, n_heads: int, head_dim: int, rope_dim: int,
         mode: str = "norm") -> np.ndarray:
    """ggml ``rope`` (``rotate_pairs``; ``mode`` ``"norm"`` or ``"neox"``) with the cos/sin of ``table``.
    Shapes ``[T, n_heads * head_dim]`` -> ``[T, n_heads, head_dim]``. Raises ValueError for another mode."""
    if mode != "neox" and mode != "norm":
        raise ValueError(f"rope mode {mode!r} is not 'norm' or 'neox'")
    x = _f32(x)
    out = np.empty((x.shape[0], n_heads, head_dim), dtype=np.float32)
    cs = table if type(table) is np.ndarray and table.dtype == np.float32 and table.ndim == 3 else _rope_cs(table)
    _ext().rope(x, out, cs, n_heads, head_dim, rope_dim, start_pos, mode == "neox")
    return out


def allocate(shape: tuple[int, ...]) -> np.ndarray:
    """KV-cache arrays of this table: float16 zeros (llama.cpp's default ``type_k``/``type_v``)."""
    return np.zeros(shape, dtype=np.float16)


def kv_cache_write(k: Any, v: Any, cache_k: Any, cache_v: Any, start_pos: int) -> None:
    """Store this call's keys and values, rounded to the cache's float16 (ggml ``cpy`` f32 -> f16), at
    positions ``[start_pos, start_pos + T)``. A float32 cache takes them as they are."""
    if cache_k.dtype != np.float16 or cache_v.dtype != np.float16:
        t = k.shape[0]
        cache_k[start_pos:start_pos + t] = np.asarray(k).reshape(t, *cache_k.shape[1:])
        cache_v[start_pos:start_pos + t] = np.asarray(v).reshape(t, *cache_v.shape[1:])
        return
    ext = _ext()
    ext.kv_store_rows(_f32(k), cache_k, cache_k.shape[1] * cache_k.shape[2], start_pos)
    ext.kv_store_rows(_f32(v), cache_v, cache_v.shape[1] * cache_v.shape[2], start_pos)


def _f32s(x: float) -> float:
    return float(np.float32(x))


def attention(q: Any, cache_k: Any, cache_v: Any, start_pos: int, *,
              scale: float | None = None, window: int = 0, scale_q: bool = False) -> np.ndarray:
    """llama.cpp's attention over the float16 KV cache (``build_attn_mha`` without flash attention; ops.c):
    the softmax scale ``scale`` (None: ``1.0f / sqrtf(hd_k)``) multiplies the scores, or with ``scale_q``
    multiplies Q before its F16 rounding (gemma's ``ggml_scale(Qcur, ...)``; softmax scale 1).
    A float32 cache (another allocator) runs the reference attention (torch, imported then).

    Shapes ``q`` ``[T, H, hd_k]``, caches ``[S, Hkv, hd_k|hd_v]`` -> ``[T, H * hd_v]``."""
    if cache_k.dtype != np.float16:
        import torch
        from pipeplan.runtime.kernels import reference

        def tt(a: Any) -> Any:
            return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))

        with torch.inference_mode():
            o = reference.attention(tt(q), tt(cache_k), tt(cache_v), start_pos, scale=scale, window=window)
        return o.numpy()
    q = _f32(q)
    t, h, hd = q.shape
    hkv, hd_v = cache_v.shape[1], cache_v.shape[2]
    out = np.empty((t, h * hd_v), dtype=np.float32)
    sc = float(scale) if scale is not None else _f32s(1.0 / _f32s(math.sqrt(hd)))
    kq_scale, q_scale = (1.0, sc) if scale_q else (sc, 1.0)
    ext = _ext()
    for r0, r1, ub in ubatches(t, start_pos):
        ext.attention(q[r0:r1], cache_k, cache_v, out[r0:r1], h, hkv, hd, hd_v, int(start_pos) + r0,
                      kq_scale, q_scale, int(window), ub)
    return out


def silu_mul(gate: Any, up: Any) -> np.ndarray:
    """``silu(gate) * up`` as ggml computes it (``ggml_vec_swiglu_f32``: ggml_v_silu in groups of 8, libm
    ``expf`` for the rest of a row). Shapes ``[T, F]`` -> ``[T, F]``."""
    gate, up = _f32(gate), _f32(up)
    out = np.empty_like(gate)
    _ext().swiglu(gate, up, out, gate.shape[-1])
    return out


def gelu_mul(gate: Any, up: Any) -> np.ndarray:
    """``gelu_tanh(gate) * up`` as ggml computes it (``ggml_vec_geglu_f32``, F16 GELU table). Shapes ``[T, F]``."""
    gate, up = _f32(gate), _f32(up)
    out = np.empty_like(gate)
    _ext().geglu(gate, up, out)
    return out


def add(a: Any, b: Any) -> np.ndarray:
    """Elementwise ``a + b`` in float32 (residual; ggml ``add``). Shapes ``[T, D]`` -> ``[T, D]``."""
    return np.add(a, b, dtype=np.float32)


def add_bias(x: Any, bias: Any) -> np.ndarray:
    """``x + bias`` broadcast over rows (float32). Shapes ``[T, N]``, ``[N]`` -> ``[T, N]``."""
    return np.add(x, bias, dtype=np.float32)


def split(x: Any, *, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Column views of ``x`` (after a fused matmul; no copy). Shapes ``[T, sum(sizes)]`` -> ``[T, sizes[i]]``."""
    x = np.asarray(x)
    if sum(sizes) != x.shape[-1]:
        raise CpuKernelError(f"split sizes {tuple(sizes)} do not add up to {x.shape[-1]} columns", where="split")
    out, c = [], 0
    for n in sizes:
        out.append(x[..., c:c + n])
        c += n
    return tuple(out)


def last_row(x: Any) -> np.ndarray:
    """The last row as a ``[1, D]`` view (prefill needs only the last position's logits)."""
    return x[-1:]


def argmax(logits: Any) -> np.ndarray:
    """Greedy token per row. Shapes ``[T, V]`` -> int64 ``[T]`` (ties: lowest id)."""
    return np.argmax(np.asarray(logits), axis=-1).astype(np.int64)


KERNELS = {"embedding_gather": embedding_gather, "rms_norm": rms_norm, "head_rms_norm": head_rms_norm,
           "matmul": matmul, "split": split, "rope": rope, "kv_cache_write": kv_cache_write, "attention": attention,
           "silu_mul": silu_mul, "gelu_mul": gelu_mul, "add": add, "add_bias": add_bias, "last_row": last_row,
           "argmax": argmax}
"""Kernel name -> function: the kernel contract's names (:mod:`pipeplan.runtime.kernels.reference`), on numpy."""

__all__ = ["ARRAYS", "CPU_TYPES", "KERNELS", "VEC_DOT_TYPE", "CpuKernelError", "QuantTensor", "available",
           "dequantize_rows", "embedding_gather", "get_num_threads", "load_stage_weights", "matmul",
           "set_num_threads", "simd"]
