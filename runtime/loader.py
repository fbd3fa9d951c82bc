"""Stage-local weight loading: map only a stage's tensor byte ranges, dequantize to float32.

Seed 001 (weight lifecycle): a stage loads only its assigned range (WL-A-4, WL-L-1/2/3). This
module memory-maps, per file (whole GGUF or gguf-split shard), only the byte ranges of the
requested tensors: ranges are coalesced when they are less than one allocation granule apart,
each region is mapped with its offset rounded down to ``mmap.ALLOCATIONGRANULARITY``; the rest
of the file is never mapped or read. :class:`LoadedWeights` reports the bytes mapped so tests can
show a stage touched only its own tensors.

:func:`load_stage_weights` dequantizes every tensor to float32 (the reference target);
:func:`load_quantized_weights` keeps matrices in their GGUF types (:class:`~pipeplan.runtime.dequant.QuantTensor`
views of the map) and F32 tensors as zero-copy numpy views (the CPU target; no torch is imported).

Errors are :class:`LoaderError` (``kind`` ``"download"`` when a file is missing or unreadable,
``"parse"`` when a range lies outside its file) and :class:`~pipeplan.runtime.dequant.DequantError`
(``kind`` ``"parse"``): the stage worker maps ``err.kind`` to ``StageFault(kind, ...)``.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType
from pipeplan.errors import PipeplanError
from pipeplan.plan_types import ModelFacts, TensorInfo, TensorSlice
from pipeplan.runtime.dequant import QuantTensor, WeightTypeError, dequantize, expected_nbytes

GRANULE = mmap.ALLOCATIONGRANULARITY


class LoaderError(PipeplanError):
    """A tensor's bytes cannot be mapped.

    ``kind``: ``"download"`` (the shard file is missing/unreadable: the artifact is not locally
    available, WL-F-1) or ``"parse"`` (a byte range outside the file, a shard index with no file,
    or a size that disagrees with the ggml type and shape, WL-F-2). ``code`` is ``loader:<kind>``.
    """

    def __init__(self, kind: str, detail: str, *, where: str | None = None):
        super().__init__(detail, code=f"loader:{kind}", where=where)
        self.kind = kind
        self.detail = detail

    def __reduce__(self):  # picklable across processes
        return (_make_loader_error, (self.kind, self.detail, self.where))


def _make_loader_error(kind: str, detail: str, where: str | None) -> LoaderError:
    return LoaderError(kind, detail, where=where)


def slice_of(t: TensorInfo) -> TensorSlice:
    """The :class:`TensorSlice` (what a stage loads) of a header :class:`TensorInfo`."""
    return TensorSlice(t.name, t.ggml_type, tuple(t.shape), t.shard, t.offset, t.n_bytes)


@dataclass
class MappedRegion:
    """One mapped window of a file: ``[offset, offset + length)``, ``offset`` granule-aligned."""

    file: str
    offset: int
    length: int


@dataclass
class MappedTensors:
    """Result of :func:`map_tensor_bytes`: name -> uint8 array view of the tensor's bytes, plus the
    mapped regions (their total length is ``mapped_bytes``)."""

    views: dict[str, np.ndarray]
    regions: list[MappedRegion] = field(default_factory=list)

    @property
    def mapped_bytes(self) -> int:
        """Total bytes mapped (sum of region lengths, including granule rounding)."""
        return sum(r.length for r in self.regions)


def _plan_regions(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Coalesce sorted ``(start, end)`` byte ranges into granule-aligned ``(map_start, map_end)``
    windows; ranges whose aligned windows touch or overlap are merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        a = start - start % GRANULE
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((a, end))
    return out


def map_tensors(files: Sequence[str | Path], tensors: Sequence[TensorSlice], *,
                access: int = mmap.ACCESS_READ) -> MappedTensors:
    """Memory-map only the byte ranges of ``tensors`` (see the module docstring).

    Args:
        files: local paths, indexed by ``TensorSlice.shard``.
        tensors: the tensors to map; ``offset``/``n_bytes`` are absolute byte positions in their file.
        access: ``mmap.ACCESS_READ`` (read-only views) or ``mmap.ACCESS_COPY`` (private copy-on-write
            views: writable, still sharing the page cache until written; torch can wrap them).

    Returns:
        :class:`MappedTensors` whose views stay valid as long as they are referenced (each view
        keeps its mmap alive); nothing is read until the views are used.

    Raises:
        LoaderError: ``download`` for a missing/unreadable file; ``parse`` for a shard index with no
            file, a negative offset/size, or a range reaching past the end of its file.
    """
    by_shard: dict[int, list[TensorSlice]] = {}
    for t in tensors:
        if not 0 <= t.shard < len(files):
            raise LoaderError("parse", f"tensor {t.name}: shard {t.shard} but only {len(files)} file(s)", where=t.name)
        if t.offset < 0 or t.n_bytes < 0:
            raise LoaderError("parse", f"tensor {t.name}: negative offset/size ({t.offset}, {t.n_bytes})", where=t.name)
        by_shard.setdefault(t.shard, []).append(t)
    result = MappedTensors(views={})
    for shard, ts in sorted(by_shard.items()):
        path = str(files[shard])
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise LoaderError("download", f"cannot open weight file {path}: {e.strerror}", where=path) from e
        try:
            size = os.fstat(fd).st_size
            for t in ts:
                if t.offset + t.n_bytes > size:
                    raise LoaderError(
                        "parse",
                        f"tensor {t.name}: bytes [{t.offset}, {t.offset + t.n_bytes}) lie outside "
                        f"{path} ({size} bytes)",
                        where=t.name,
                    )
            regions = _plan_regions([(t.offset, t.offset + t.n_bytes) for t in ts if t.n_bytes > 0])
            maps: list[tuple[int, int, np.ndarray]] = []
            for a, b in regions:
                try:
                    mm = mmap.mmap(fd, b - a, access=access, offset=a)
                except (OSError, ValueError) as e:
                    raise LoaderError("parse", f"cannot map bytes [{a}, {b}) of {path}: {e}", where=path) from e
                maps.append((a, b, np.frombuffer(mm, dtype=np.uint8)))
                result.regions.append(MappedRegion(path, a, b - a))
            for t in ts:
                if t.n_bytes == 0:
                    result.views[t.name] = np.zeros(0, dtype=np.uint8)
                    continue
                for a, b, arr in maps:
                    if a <= t.offset and t.offset + t.n_bytes <= b:
                        result.views[t.name] = arr[t.offset - a : t.offset - a + t.n_bytes]
                        break
        finally:
            os.close(fd)
    return result


def map_tensor_bytes(files: Sequence[str | Path], tensors: Sequence[TensorSlice]) -> dict[str, np.ndarray]:
    """Name -> uint8 numpy view of each tensor's bytes, mapping only those ranges.

    Same arguments and errors as :func:`map_tensors` (which also reports the mapped regions).
    """
    return map_tensors(files, tensors).views


class StageWeights(Mapping[str, Any]):
    """A stage's weights: a read-only mapping name -> torch tensor, plus ``mapped_bytes`` (bytes of the
    files that were mapped), ``tensor_bytes`` (sum of the requested tensors' ``n_bytes``) and ``regions``
    (the mapped file ranges). Base of :class:`LoadedWeights` and the Triton target's ``RawWeights``."""

    def __init__(self, tensors: Mapping[str, Any], mapped_bytes: int, tensor_bytes: int,
                 regions: list[MappedRegion]):
        self.tensors = tensors
        self.mapped_bytes = mapped_bytes
        self.tensor_bytes = tensor_bytes
        self.regions = regions

    def __getitem__(self, name: str) -> Any:
        return self.tensors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.tensors)} tensors, mapped_bytes={self.mapped_bytes})"


class LoadedWeights(StageWeights):
    """A stage's dequantized weights: a read-only mapping name -> float32 torch tensor (numpy/torch
    order), plus ``mapped_bytes`` (bytes of the files that were mapped) and ``tensor_bytes`` (sum of
    the requested tensors' ``n_bytes``)."""


def check_slice_bytes(t: TensorSlice) -> None:
    """Raise ``LoaderError("parse")`` when ``t.n_bytes`` is not what its ggml type and shape need
    (``pipeplan.runtime.dequant.expected_nbytes``, llama.cpp's row sizes); ``where`` is the tensor name."""
    need = expected_nbytes(t.ggml_type, t.shape, what=t.name)
    if need != t.n_bytes:
        raise LoaderError(
            "parse", f"tensor {t.name}: {t.ggml_type} {tuple(t.shape)} needs {need} bytes, index says {t.n_bytes}",
            where=t.name,
        )


def load_stage_weights(files: Sequence[str | Path], tensors: Sequence[TensorSlice]) -> LoadedWeights:
    """Map and dequantize a stage's tensors.

    Args:
        files: local paths of the GGUF file or of its gguf-split shards (index = ``TensorSlice.shard``).
        tensors: the stage's tensors (``ProvisionStage.tensors``), shapes in ggml order.

    Returns:
        :class:`LoadedWeights` (a ``Mapping[str, torch.Tensor]``): each tensor float32, contiguous,
        shape reversed from ggml order (``blk.0.attn_k.weight`` ggml (64, 32) -> torch (32, 64),
        i.e. ``[out_features, in_features]``). Tensors own their memory (copied out of the map), so
        the maps are released when this returns.

    Raises:
        LoaderError: see :func:`map_tensors`; ``parse`` also when ``n_bytes`` disagrees with the
            ggml type and shape.
        DequantError: unknown or undequantizable ggml type, bad row length (kind ``parse``).
    """
    import torch

    for t in tensors:
        check_slice_bytes(t)
    mapped = map_tensors(files, tensors)
    out: dict[str, torch.Tensor] = {}
    for t in tensors:
        arr = dequantize(mapped.views[t.name], t.ggml_type, t.shape, what=t.name)
        out[t.name] = torch.from_numpy(np.array(arr, dtype=np.float32, copy=True))
    return LoadedWeights(out, mapped.mapped_bytes, sum(t.n_bytes for t in tensors), mapped.regions)


class QuantizedWeights(StageWeights):
    """A stage's weights kept as stored: name -> float32 numpy array (F32 tensors: zero-copy views of the
    map; 1-D tensors of other types: dequantized) or :class:`~pipeplan.runtime.dequant.QuantTensor`
    (matrices of every other type: views of the map). Same counters as :class:`StageWeights`."""


def load_quantized_weights(files: Sequence[str | Path], tensors: Sequence[TensorSlice], *,
                           types: Collection[str]) -> QuantizedWeights:
    """Map a stage's tensors and keep them in their GGUF types (no resident float32 copy of a matrix).

    Args:
        files / tensors: as :func:`load_stage_weights`.
        types: the ggml types the kernel table executes (e.g. ``pipeplan.runtime.kernels.cpu.CPU_TYPES``).

    Returns:
        :class:`QuantizedWeights`; shapes in torch order (ggml order reversed). The views keep their maps
        alive; the file's pages are read on first use.

    Raises:
        WeightTypeError: a tensor's ggml type is not in ``types`` (kind ``bind``; names tensor and type).
        LoaderError / DequantError: as :func:`load_stage_weights`.
    """
    for t in tensors:
        if t.ggml_type in GGMLQuantizationType.__members__ and t.ggml_type not in types:
            raise WeightTypeError(f"tensor {t.name} has ggml type {t.ggml_type}, which this target does not execute "
                                  f"(it runs {', '.join(types)})", where=t.name)
        check_slice_bytes(t)
    mapped = map_tensors(files, tensors, access=mmap.ACCESS_COPY)
    out: dict[str, Any] = {}
    for t in tensors:
        view = mapped.views[t.name]
        shape = tuple(int(d) for d in reversed(t.shape))
        if t.ggml_type == "F32" and view.ctypes.data % 4 == 0:
            out[t.name] = view.view(np.float32).reshape(shape)
        elif len(shape) == 1 or t.ggml_type == "F32":  # norms and biases; or an unaligned F32 tensor: a copy
            arr = dequantize(view, t.ggml_type, t.shape, what=t.name)
            out[t.name] = np.array(arr, dtype=np.float32, copy=True)
        else:
            out[t.name] = QuantTensor(t.ggml_type, shape, view, t.name)
    return QuantizedWeights(out, mapped.mapped_bytes, sum(t.n_bytes for t in tensors), mapped.regions)


def stage_slices(facts: ModelFacts, layer_start: int, layer_end: int, first: bool, last: bool
                 ) -> tuple[TensorSlice, ...]:
    """The :class:`TensorSlice` of every tensor a stage owns (``ModelFacts.tensors_for_stage``):
    blocks in ``[layer_start, layer_end)``, ``token_embd.weight`` when ``first``, the output norm and
    head (or tied ``token_embd.weight``) when ``last``."""
    return tuple(slice_of(t) for t in facts.tensors_for_stage(layer_start, layer_end, first, last))
