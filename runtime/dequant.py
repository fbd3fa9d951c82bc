"""Dequantization of GGUF tensor bytes to float32 numpy arrays.

The arithmetic is ``gguf.quants.dequantize`` (the gguf-py package kept by the llama.cpp project,
a line-by-line port of ggml's ``dequantize_row_*``); this module adds what a stage needs around it:
checking that the byte count matches the ggml type and shape *before* touching the data, turning
ggml order shapes into numpy order, and raising a typed :class:`DequantError` instead of a raw
``ValueError``/``NotImplementedError``.

Shapes: ``shape`` is in ggml order (``ne0`` first, the row length); the result has the reversed
(numpy/torch) shape, e.g. ggml ``(64, 512)`` for ``token_embd.weight`` -> numpy ``(512, 64)``.

:class:`QuantTensor` is a weight kept in its GGUF type (the CPU target's matmuls and embedding gather
read its bytes in place); :class:`WeightTypeError` refuses a ggml type a kernel table does not execute.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf import quants as gguf_quants
from pipeplan.errors import PipeplanError

SUPPORTED_TYPES: tuple[str, ...] = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K")
"""ggml types a stage is tested to load (others gguf can dequantize are accepted too)."""


class WeightTypeError(PipeplanError):
    """A tensor whose ggml type the chosen kernel table does not execute (e.g. ``Q2_K`` or ``IQ2_XS`` on
    the CPU target). ``kind`` is ``"bind"``: the stage faults before binding its program."""

    code = "weight_type"
    kind = "bind"


class DequantError(PipeplanError):
    """Tensor bytes that cannot be dequantized: unknown ggml type, a row length that is not a
    multiple of the type's block size, or a byte count that does not match ``shape``.

    ``kind`` is ``"parse"`` (the StageFault kind the stage maps it to, seed 001 WL-F-2).
    """

    code = "dequant"
    kind = "parse"


def ggml_type_of(name: str) -> GGMLQuantizationType:
    """The :class:`gguf.GGMLQuantizationType` called ``name`` (e.g. ``"Q4_K"``).

    Raises:
        DequantError: the name is not a ggml type, or gguf cannot dequantize it.
    """
    try:
        qtype = GGMLQuantizationType[name]
    except KeyError:
        raise DequantError(f"unknown ggml type {name!r}", where=name) from None
    if qtype not in (GGMLQuantizationType.F32, GGMLQuantizationType.F16) and qtype not in gguf_quants._type_traits:
        raise DequantError(f"ggml type {name} cannot be dequantized (not implemented in gguf)", where=name)
    return qtype


def expected_nbytes(ggml_type: str, shape: Sequence[int], *, what: str = "tensor") -> int:
    """Bytes a tensor of ``ggml_type`` and ggml-order ``shape`` occupies:
    ``prod(shape) / block_size * type_size`` (ggml ``ggml_nbytes`` for contiguous tensors).

    Raises:
        DequantError: unknown type, empty/negative shape, or ``shape[0]`` (the row length) not a
            multiple of the type's block size.
    """
    qtype = ggml_type_of(ggml_type)
    if len(shape) == 0 or any(int(d) <= 0 for d in shape):
        raise DequantError(f"{what}: invalid shape {tuple(shape)}", where=what)
    block, type_size = GGML_QUANT_SIZES[qtype]
    if int(shape[0]) % block != 0:
        raise DequantError(
            f"{what}: row length {shape[0]} is not a multiple of the {ggml_type} block size {block}", where=what
        )
    return prod(int(d) for d in shape) // block * type_size


def dequantize(raw: np.ndarray | memoryview | bytes, ggml_type: str, shape: Sequence[int], *, what: str = "tensor"):
    """Dequantize one tensor's bytes to float32.

    Args:
        raw: the tensor's bytes (uint8 array, memoryview or bytes; e.g. a slice of an mmap).
        ggml_type: ggml type name: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K (tested), or any other
            type ``gguf.quants`` can dequantize.
        shape: ggml-order shape (row length first).
        what: the tensor's name, used in error messages.

    Returns:
        ``np.ndarray[float32]`` of shape ``tuple(reversed(shape))``; for F32 a zero-copy view of
        ``raw`` (read-only when ``raw`` is).

    Raises:
        DequantError: see :func:`expected_nbytes`, or ``len(raw)`` differs from the expected size.

    Source: ggml ``dequantize_row_*`` via ``gguf.quants.dequantize`` (gguf 0.19.0).
    """
    qtype = ggml_type_of(ggml_type)
    need = expected_nbytes(ggml_type, shape, what=what)
    data = np.frombuffer(raw, dtype=np.uint8) if not isinstance(raw, np.ndarray) else raw.reshape(-1).view(np.uint8)
    if data.size != need:
        raise DequantError(
            f"{what}: {ggml_type} {tuple(int(d) for d in shape)} needs {need} bytes, got {data.size}", where=what
        )
    np_shape = tuple(int(d) for d in reversed(shape))
    if qtype == GGMLQuantizationType.F32:
        return data.view(np.float32).reshape(np_shape)
    block, type_size = GGML_QUANT_SIZES[qtype]
    # gguf dequantizes along the last axis of a byte-shaped array: rows of (row_len/block*type_size) bytes
    rows = data.reshape(-1, int(shape[0]) // block * type_size)
    try:
        out = gguf_quants.dequantize(rows, qtype)
    except (ValueError, NotImplementedError, gguf_quants.QuantError) as e:  # pragma: no cover - checked above
        raise DequantError(f"{what}: {e}", where=what) from e
    return np.ascontiguousarray(out, dtype=np.float32).reshape(np_shape)


class QuantTensor:
    """A weight matrix kept in its GGUF type, read in place (e.g. a view of the mapped file).

    Attributes:
        ggml_type: ggml type name (``"Q4_K"``, ``"F16"``, ...).
        shape: torch order (``[out_features, in_features]`` for a matrix: ggml ``(ne0, ne1)`` reversed),
            so :class:`~pipeplan.runtime.program.StageExecutor`'s shape check applies unchanged.
        data: uint8 array ``[prod(shape[:-1]), row_bytes]``: one row of ``shape[-1]`` values per line,
            in ggml block format (``expected_nbytes`` bytes in all).
        name: tensor name, for diagnostics.

    Raises:
        DequantError: the type is unknown, ``shape[-1]`` is not a multiple of its block size, or
            ``data`` does not hold exactly the bytes the type and shape need.
    """

    __slots__ = ("ggml_type", "type_id", "shape", "data", "name")

    def __init__(self, ggml_type: str, shape: Sequence[int], data: np.ndarray, name: str = "weight"):
        qtype = ggml_type_of(ggml_type)
        shape = tuple(int(d) for d in shape)
        need = expected_nbytes(ggml_type, tuple(reversed(shape)), what=name)
        flat = np.asarray(data).reshape(-1).view(np.uint8)
        if flat.size != need:
            raise DequantError(f"{name}: {ggml_type} {shape} needs {need} bytes, got {flat.size}", where=name)
        self.ggml_type = ggml_type
        self.type_id = int(qtype)
        self.shape = shape
        self.data = flat.reshape(prod(shape[:-1]), need // prod(shape[:-1]))
        self.name = name

    @property
    def ndim(self) -> int:
        """Number of dimensions of :attr:`shape`."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of :attr:`data`."""
        return int(self.data.size)

    def dequantize(self) -> np.ndarray:
        """The whole tensor as float32 numpy, shape :attr:`shape` (``gguf.quants.dequantize``)."""
        return dequantize(self.data, self.ggml_type, tuple(reversed(self.shape)), what=self.name)

    def __repr__(self) -> str:
        return f"QuantTensor({self.name}, {self.ggml_type}, shape={self.shape}, {self.nbytes} bytes)"
