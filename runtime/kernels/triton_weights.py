"""Raw (still-quantized) weight loading for the CUDA/Triton path.

The reference path (:func:`pipeplan.runtime.loader.load_stage_weights`) dequantizes every tensor to
float32 at load. The Triton GEMV kernels instead read the GGUF bytes as stored and dequantize inside
the kernel, so that a decode step moves the quantized bytes (the point of Q8_0/Q4_0 on a GPU). This
module maps a stage's byte ranges with the same loader (:func:`pipeplan.runtime.loader.map_tensors`:
only the stage's own ranges, seed 001 WL-L-1/2) and keeps each matrix in its ggml format:

=========  ==================================================================================
ggml type  what the stage holds for a ``[N, K]`` matrix (torch order; ggml ``(K, N)``)
=========  ==================================================================================
F32        a plain float32 tensor ``[N, K]``
F16/BF16   :class:`GGMLWeight` over a float16/bfloat16 tensor ``[N, K]``
Q8_0 ...   :class:`GGMLWeight` over uint8 ``[N, K / block * block_bytes]``: the GGUF blocks of each row
           as stored (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: 32 weights per block; Q4_K, Q5_K, Q6_K: 256 per
           super-block, ``K % 256 == 0``); layouts and arithmetic in :mod:`pipeplan.runtime.kernels.triton.gemv`
=========  ==================================================================================

The formats are :data:`pipeplan.targets.triton_formats.WEIGHT_FORMATS` (the table the kernels,
the ``cuda-triton`` legality and its lowering share). 1-D tensors (norm weights, biases) are always
float32 (llama.cpp keeps them F32; they are tiny). Other matrix types (Q2_K, Q3_K, IQ*, ...) are
rejected at load with :class:`~pipeplan.runtime.kernels.triton._common.TritonKernelError`
``triton:weight_type`` (kind ``bind``): a diagnostic, never a silent dequantize-to-F32 fallback.

:class:`GGMLWeight` is a ``torch.Tensor`` wrapper subclass whose logical shape is ``[N, K]`` and whose
advertised dtype is float32, so :class:`~pipeplan.runtime.program.StageExecutor` binds it unchanged
(its shape check passes and it is not converted). The Triton kernels read ``.raw``/``.ggml_type``;
any other torch op on it (e.g. a reference kernel) dequantizes on the fly with the gguf package
(:func:`pipeplan.runtime.dequant.dequantize`), so reference and Triton tables take the same weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from pipeplan.plan_types import TensorSlice
from pipeplan.runtime.dequant import dequantize, expected_nbytes
from pipeplan.runtime.kernels.triton._common import TritonKernelError
from pipeplan.runtime.loader import StageWeights, check_slice_bytes, map_tensors
from pipeplan.targets.triton_formats import RAW_TYPES, WEIGHT_FORMATS
from torch.utils._pytree import tree_map

BLOCK_BYTES = {f.ggml_type: (f.block, f.block_bytes) for f in WEIGHT_FORMATS.values() if f.quantized}
"""Block types: ggml type -> (weights per block, bytes per block) (ggml ``GGML_QUANT_SIZES``)."""


class GGMLWeight(torch.Tensor):
    """A weight matrix kept in its GGUF format: logical shape ``[N, K]``, advertised dtype float32.

    Attributes:
        raw: the stored data (float16/bfloat16 ``[N, K]``, or uint8 ``[N, row_bytes]`` for the block formats).
        ggml_type: a :data:`RAW_TYPES` name other than ``"F32"``.
        wname: tensor name, for diagnostics.
    """

    raw: torch.Tensor
    ggml_type: str
    wname: str

    @staticmethod
    def __new__(cls, raw: torch.Tensor, ggml_type: str, shape: tuple[int, int], name: str = "weight"):
        r = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32, device=raw.device)
        r.raw = raw
        r.ggml_type = ggml_type
        r.wname = name
        return r

    def __init__(self, raw: torch.Tensor, ggml_type: str, shape: tuple[int, int], name: str = "weight"):
        n, k = shape
        if ggml_type in BLOCK_BYTES:
            qk, bs = BLOCK_BYTES[ggml_type]
            if k % qk:
                raise TritonKernelError("weight_layout", f"weight {name}: {ggml_type} [N={n}, K={k}]: K is not a "
                                        f"multiple of the {ggml_type} block ({qk} weights)", where=name, kind="bind")
            want = (n, k // qk * bs)
            ok = raw.dtype == torch.uint8 and k % qk == 0
        else:
            want = (n, k)
            ok = raw.dtype == {"F16": torch.float16, "BF16": torch.bfloat16}.get(ggml_type)
        if not ok or tuple(raw.shape) != want or not raw.is_contiguous():
            raise TritonKernelError("weight_layout", f"weight {name}: {ggml_type} [N={n}, K={k}] needs a contiguous "
                                    f"raw tensor {want}, got {raw.dtype} {tuple(raw.shape)}", where=name, kind="bind")

    def __repr__(self, *, tensor_contents=None):  # noqa: D105  (torch.Tensor.__repr__'s own signature, unannotated
        # as in torch: mypy rejects every annotated override of it, even an identical one)
        return f"GGMLWeight({self.wname}, {self.ggml_type}, shape={tuple(self.shape)}, device={self.raw.device})"

    def dequantized(self) -> torch.Tensor:
        """The float32 ``[N, K]`` matrix (gguf's dequantization; computed once, then cached)."""
        cached = getattr(self, "_deq", None)
        if cached is None:
            if self.ggml_type in ("F16", "BF16"):
                cached = self.raw.float()
            else:
                n, k = self.shape
                arr = dequantize(self.raw.cpu().numpy().reshape(-1), self.ggml_type, (k, n), what=self.wname)
                cached = torch.from_numpy(np.array(arr, dtype=np.float32, copy=True)).to(self.raw.device)
            self._deq = cached
        return cached

    def to_device(self, device: torch.device | str) -> GGMLWeight:
        """The same weight with its raw data on ``device`` (the raw bytes move, not a dequantized copy)."""
        n, k = self.shape
        return GGMLWeight(self.raw.to(device), self.ggml_type, (int(n), int(k)), self.wname)

    @property
    def nbytes_raw(self) -> int:
        """Bytes of the stored data (what a GEMV reads)."""
        return self.raw.numel() * self.raw.element_size()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        """Any torch op on a GGMLWeight runs on its dequantized float32 matrix (reference kernels)."""
        unwrap = lambda a: a.dequantized() if isinstance(a, GGMLWeight) else a  # noqa: E731
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


def weight_from_bytes(data: np.ndarray | bytes, ggml_type: str, ggml_shape: Sequence[int], name: str = "weight",
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """Wrap one tensor's GGUF bytes for the Triton kernels (see the module table).

    Args:
        data: the tensor's bytes (uint8), exactly ``expected_nbytes(ggml_type, ggml_shape)`` of them.
        ggml_type: ggml type name. ggml_shape: ggml order (row length first); 1-D or 2-D.
        name: tensor name for diagnostics. device: where the result lives.

    Returns:
        float32 tensor (F32 matrices, every 1-D tensor) or :class:`GGMLWeight` ``[N, K]``.

    Raises:
        TritonKernelError: ``triton:weight_type`` (kind ``bind``) for a type outside :data:`RAW_TYPES`
            or a tensor of more than 2 dimensions; ``triton:weight_layout`` for a wrong byte count.
        DequantError: a 1-D tensor whose type gguf cannot dequantize.
    """
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else np.asarray(data, np.uint8)
    shape = tuple(int(s) for s in ggml_shape)
    need = expected_nbytes(ggml_type, shape, what=name)
    if buf.size != need:
        raise TritonKernelError("weight_layout", f"weight {name}: {ggml_type} {shape} needs {need} bytes, got {buf.size}",
                                where=name, kind="bind")
    if len(shape) == 1:
        arr = dequantize(buf, ggml_type, shape, what=name)
        return torch.from_numpy(np.array(arr, dtype=np.float32, copy=True)).to(device)
    if len(shape) != 2 or ggml_type not in RAW_TYPES:
        raise TritonKernelError(
            "weight_type", f"weight {name}: ggml type {ggml_type} with {len(shape)} dims is not consumed by the Triton "
            f"kernels (supported matrices: {', '.join(RAW_TYPES)})", where=name, kind="bind")
    k, n = shape
    copy = torch.from_numpy(np.array(buf, copy=True))
    if ggml_type == "F32":
        return copy.view(torch.float32).reshape(n, k).to(device)
    if ggml_type in ("F16", "BF16"):
        dt = torch.float16 if ggml_type == "F16" else torch.bfloat16
        return GGMLWeight(copy.view(dt).reshape(n, k).to(device), ggml_type, (n, k), name)
    return GGMLWeight(copy.reshape(n, -1).to(device), ggml_type, (n, k), name)


class RawWeights(StageWeights):
    """A stage's weights in GGUF format (name -> float32 tensor or :class:`GGMLWeight`), plus
    ``mapped_bytes`` (file bytes mapped), ``tensor_bytes`` (sum of the tensors' ``n_bytes``) and
    ``regions`` -- the same accounting as :class:`pipeplan.runtime.loader.LoadedWeights`."""


def load_stage_weights_raw(files: Sequence[str | Path], tensors: Sequence[TensorSlice],
                           device: torch.device | str = "cpu") -> RawWeights:
    """Map a stage's tensors and keep them in GGUF format for the Triton kernels.

    Args:
        files: the GGUF file or its gguf-split shards (index = ``TensorSlice.shard``).
        tensors: the stage's tensors (``ProvisionStage.tensors``, ggml-order shapes).
        device: where the weights live (``"cuda"`` on a GPU stage).

    Returns:
        :class:`RawWeights`; each matrix as in the module table, each owning its memory.

    Raises:
        LoaderError: as :func:`pipeplan.runtime.loader.map_tensors`; ``parse`` when ``n_bytes``
            disagrees with the type and shape.
        TritonKernelError: ``triton:weight_type`` (kind ``bind``) for a matrix type the kernels do not read.
    """
    for t in tensors:
        check_slice_bytes(t)
        if len(t.shape) == 2 and t.ggml_type not in RAW_TYPES:
            raise TritonKernelError(
                "weight_type", f"weight {t.name}: ggml type {t.ggml_type} is not consumed by the Triton kernels "
                f"(supported matrices: {', '.join(RAW_TYPES)})", where=t.name, kind="bind")
    mapped = map_tensors(files, tensors)
    out = {t.name: weight_from_bytes(mapped.views[t.name], t.ggml_type, t.shape, t.name, device) for t in tensors}
    return RawWeights(out, mapped.mapped_bytes, sum(t.n_bytes for t in tensors), mapped.regions)


def quantize_matrix(w: torch.Tensor, ggml_type: str, name: str = "weight") -> torch.Tensor:
    """Quantize a float32 ``[N, K]`` matrix to ``ggml_type`` with ``gguf.quants.quantize`` and wrap
    it like :func:`weight_from_bytes` (tests and benchmarks make quantized weights with it).

    Raises:
        TritonKernelError: ``triton:weight_type`` for a type outside :data:`RAW_TYPES` or one gguf
            cannot quantize (gguf 0.19 has no K-quant quantizer: build Q4_K/Q5_K/Q6_K bytes directly instead).
    """
    from gguf import GGMLQuantizationType
    from gguf import quants as gguf_quants

    if ggml_type not in RAW_TYPES:
        raise TritonKernelError("weight_type", f"cannot make {ggml_type} weights (supported: {', '.join(RAW_TYPES)})",
                                where=name, kind="bind")
    arr = w.detach().float().cpu().numpy()
    if ggml_type == "F32":
        return torch.from_numpy(arr.copy())
    try:
        q = gguf_quants.quantize(arr, GGMLQuantizationType[ggml_type])
    except NotImplementedError:
        raise TritonKernelError("weight_type", f"gguf cannot quantize to {ggml_type} (no quantizer in the gguf "
                                "package)", where=name, kind="bind") from None
    n, k = arr.shape
    return weight_from_bytes(np.ascontiguousarray(q).view(np.uint8).reshape(-1), ggml_type, (k, n), name)


__all__ = ["BLOCK_BYTES", "GGMLWeight", "RAW_TYPES", "RawWeights", "load_stage_weights_raw", "quantize_matrix",
           "weight_from_bytes"]
