"""GGUF header → :class:`~pipeplan.plan_types.ModelFacts` (the compiler's frontend).

Only the header (magic, version, metadata) and the tensor index are parsed, with the ``gguf``
package's ``GGUFReader`` (pinned 0.19.0). We subclass it to (a) bound-check every read against the
file size, so a corrupt or cut file fails early with a typed error instead of a numpy/IndexError,
and (b) skip building tensor data views: tensor data is never touched. Tensor byte ranges are
absolute (``data_offset + tensor offset``), sized with ``gguf.GGML_QUANT_SIZES`` exactly as
``GGUFReader._build_tensors`` does.

Checks (each raises a :mod:`pipeplan.errors` ``GGUFError`` subclass whose message names the file
and the key or tensor and what was expected; follows llama.cpp ``gguf.cpp``/``llama-model-loader``):

* ``not_gguf``: bad magic or unsupported version (GGUFReader supports v2, v3), or metadata that
  cannot be decoded (unknown value type, duplicate key, bad UTF-8).
* ``truncated``: the header or index reaches past end of file, or the (dense) tensor data does.
* ``unknown_tensor_type``: a ggml type id gguf does not know.
* ``bad_alignment``: ``general.alignment`` not a positive power of two (or not a u32).
* ``vocab_only``: no tensors (a llama.cpp ``ggml-vocab-*.gguf``).
* ``block_count_mismatch``: ``<arch>.block_count`` != the set ``{N : blk.N.* present}`` = 0..B-1.
* ``inconsistent_tensor_index``: overlapping data ranges, data outside the file while the index is
  not dense, misaligned offsets, bad dims, duplicate tensors, tensor shapes that contradict the
  architecture's hyperparameters (e.g. llama's ``blk.3.attn_k.weight`` must be ``[hidden, kv_heads*head_dim]``).
* ``missing_key``: a required key absent or of the wrong type.
* ``unsupported_architecture``: ``general.architecture`` has no stage-program builder
  (:mod:`pipeplan.models.archs`: llama, gemma3, qwen2, qwen3).
* ``invalid_hparams``: a hyperparameter that is zero, negative, NaN, infinite or out of range (above
  int32, ``block_count`` above the tensor count), or hyperparameters the architecture cannot use (heads that do not divide the
  hidden size without ``attention.key_length``, kv heads that do not divide heads, rope dims above
  the head dim).
* ``missing_tensor`` / ``unexpected_tensor``: a tensor the stage program reads is absent (named with
  its block), or a tensor it would ignore is present (``blk.0.attn_q.bias`` in a llama file).
* ``inconsistent_shards``: gguf-split sets whose shards are missing or disagree.

Anything else the parser raises is wrapped as ``not_gguf`` (or ``truncated`` for out-of-range
reads) with the original message: callers only ever see ``GGUFError``.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType
from pipeplan.errors import (
    ARCH_GGUF_ERRORS,
    BadAlignmentError,
    BlockCountMismatchError,
    GGUFError,
    InconsistentShardsError,
    InconsistentTensorIndexError,
    InvalidHParamsError,
    MissingKeyError,
    NotGGUFError,
    TruncatedGGUFError,
    UnknownTensorTypeError,
    VocabOnlyError,
)
from pipeplan.files.paths import check_input_file
from pipeplan.frontend.llama_shapes import llama_tensor_shapes
from pipeplan.models.archs import Arch, check_model, get_arch
from pipeplan.models.stage_program import ProgramError
from pipeplan.plan_types import ModelFacts, TensorInfo

__all__ = ["read_model_facts", "sha256_file", "shard_paths", "llama_tensor_shapes", "SHARD_NAME_RE"]

GGML_MAX_DIMS = 4
"""ggml tensors have at most 4 dimensions (``GGML_MAX_DIMS`` in ggml.h)."""

SHARD_NAME_RE = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
"""gguf-split shard file names: ``<prefix>-00001-of-00003.gguf`` (llama.cpp ``llama_split_path``)."""

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")
_INT_TYPES = {
    GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
    GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64,
}
_FLOAT_TYPES = {GGUFValueType.FLOAT32, GGUFValueType.FLOAT64}
# smallest encoded size of one array element of each type (strings: 8-byte length; arrays: type+len)
_MIN_ITEM = {t: np.dtype(n).itemsize for t, n in gguf.GGUFReader.gguf_scalar_to_np.items()}
_MIN_ITEM[GGUFValueType.STRING] = 8
_MIN_ITEM[GGUFValueType.ARRAY] = 12
_MIN_KV = 8 + 4 + 1  # key length, value type, smallest value
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8  # name length, n_dims, type, offset


def _pad(x: int, n: int) -> int:
    return ((x + n - 1) // n) * n


@dataclass(frozen=True)
class _RawTensor:
    name: str
    ggml_type: str
    shape: tuple[int, ...]  # ggml order
    rel_offset: int
    n_bytes: int


class _IndexReader(gguf.GGUFReader):
    """``GGUFReader`` that bound-checks every read and stops at the tensor index.

    Overrides private hooks of gguf 0.19.0 (``_get``, ``_get_field_parts``, ``_build_fields``,
    ``_build_tensor_info``, ``_build_tensors``); the public attributes ``fields``, ``alignment``
    and ``data_offset`` keep their meaning, ``tensors`` stays empty and ``index`` holds the
    validated tensor index.
    """

    def __init__(self, path: Path):
        self._path = path
        self.index: list[_RawTensor] = []
        super().__init__(path, "r")

    # --- bounds
    def _get(self, offset: int, dtype: Any, count: int = 1, override_order: Any = None) -> Any:
        end = int(offset) + int(np.dtype(dtype).itemsize) * int(count)
        if end > len(self.data):
            raise TruncatedGGUFError(
                f"{self._path}: header reads bytes [{offset}, {end}) but the file has {len(self.data)} bytes",
                where=str(self._path),
            )
        return super()._get(offset, dtype, count, override_order)

    def _remaining(self, offs: int) -> int:
        return len(self.data) - int(offs)

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> Any:
        try:
            gtype = GGUFValueType(int(raw_type))
        except ValueError:
            raise NotGGUFError(
                f"{self._path}: metadata value at byte {orig_offs} has unknown GGUF value type {int(raw_type)}",
                where=str(self._path),
            ) from None
        if gtype == GGUFValueType.ARRAY:
            itype = int(self._get(orig_offs, np.uint32)[0])
            alen = int(self._get(orig_offs + 4, np.uint64)[0])
            try:
                item = _MIN_ITEM[GGUFValueType(itype)]
            except (ValueError, KeyError):
                raise NotGGUFError(
                    f"{self._path}: metadata array at byte {orig_offs} has unknown element type {itype}",
                    where=str(self._path),
                ) from None
            if alen * item > self._remaining(orig_offs + 12):
                raise TruncatedGGUFError(
                    f"{self._path}: metadata array at byte {orig_offs} claims {alen} elements, more than the "
                    f"{self._remaining(orig_offs + 12)} bytes left in the file",
                    where=str(self._path),
                )
            return self._array_parts(orig_offs, GGUFValueType(itype), alen)
        return super()._get_field_parts(orig_offs, raw_type)

    def _array_parts(self, orig_offs: int, sub: GGUFValueType, alen: int) -> Any:
        """Fast path for arrays (tokenizer lists hold 32k-256k entries): one part holds the whole
        payload instead of one numpy view per element. The field's ``parts[4][0]`` is the length,
        ``contents()`` is right for scalar arrays and meaningless for string arrays (we never read
        those). Arrays of arrays take GGUFReader's own path."""
        if sub == GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, GGUFValueType.ARRAY)
        head = [self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)]
        start = orig_offs + 12
        nptype = self.gguf_scalar_to_np.get(sub)
        if nptype is not None:
            payload = self._get(start, nptype, alen)
            return 12 + int(payload.nbytes), [*head, payload], [2], [GGUFValueType.ARRAY, sub]
        order = "<" if (sys.byteorder == "little") == (self.byte_order == "I") else ">"
        unpack = struct.Struct(order + "Q").unpack_from
        view: Any = memoryview(self.data)  # type: ignore[arg-type]  # np.memmap exposes the buffer protocol
        end, pos = len(self.data), start
        for i in range(alen):
            if pos + 8 > end:
                raise TruncatedGGUFError(
                    f"{self._path}: string #{i} of the metadata array at byte {orig_offs} runs past end of file",
                    where=str(self._path),
                )
            pos += 8 + unpack(view, pos)[0]
        if pos > end:
            raise TruncatedGGUFError(
                f"{self._path}: metadata array at byte {orig_offs} runs past end of file ({end} bytes)",
                where=str(self._path),
            )
        payload = self._get(start, np.uint8, pos - start)
        return pos - orig_offs, [*head, payload], [2], [GGUFValueType.ARRAY, sub]

    def _build_fields(self, offs: int, count: int) -> int:
        if int(count) * _MIN_KV > self._remaining(offs):
            raise TruncatedGGUFError(
                f"{self._path}: header claims {int(count)} metadata entries, more than the "
                f"{self._remaining(offs)} bytes left in the file can hold",
                where=str(self._path),
            )
        offs = super()._build_fields(offs, count)
        field = self.fields.get("general.alignment")
        if field is not None:
            value = field.parts[-1][0] if field.types and field.types[0] in _INT_TYPES else None
            if field.types != [GGUFValueType.UINT32] or value is None or value <= 0 or value & (value - 1):
                shown = field.contents() if field.types and field.types[0] != GGUFValueType.ARRAY else "array"
                raise BadAlignmentError(
                    f"{self._path}: general.alignment = {shown!r} "
                    f"({'/'.join(t.name for t in field.types)}); expected a u32 positive power of two",
                    where=f"{self._path}:general.alignment",
                )
        return offs

    def _build_tensor_info(self, offs: int, count: int) -> Any:
        if int(count) * _MIN_TENSOR_INFO > self._remaining(offs):
            raise TruncatedGGUFError(
                f"{self._path}: header claims {int(count)} tensors, more than the {self._remaining(offs)} "
                "bytes left in the file can index",
                where=str(self._path),
            )
        return super()._build_tensor_info(offs, count)

    def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
        seen: set[str] = set()
        for i, field in enumerate(fields):
            _nlen, name_data, n_dims, dims, raw_dtype, offset_tensor = field.parts
            try:
                name = bytes(name_data).decode("utf-8")
            except UnicodeDecodeError:
                raise InconsistentTensorIndexError(
                    f"{self._path}: tensor #{i} has a name that is not UTF-8", where=str(self._path)
                ) from None
            where = f"{self._path}:{name}"
            if name in seen:
                raise InconsistentTensorIndexError(f"{self._path}: tensor {name!r} appears twice in the index",
                                                   where=where)
            seen.add(name)
            nd = int(n_dims[0])
            shape = tuple(int(d) for d in dims.tolist())
            if not 1 <= nd <= GGML_MAX_DIMS or any(d <= 0 for d in shape):
                raise InconsistentTensorIndexError(
                    f"{self._path}: tensor {name!r} has dims {list(shape)}; expected 1..{GGML_MAX_DIMS} positive dims",
                    where=where,
                )
            try:
                qtype = GGMLQuantizationType(int(raw_dtype[0]))
                block, type_size = gguf.GGML_QUANT_SIZES[qtype]
            except (ValueError, KeyError):
                raise UnknownTensorTypeError(
                    f"{self._path}: tensor {name!r} has ggml type id {int(raw_dtype[0])}, which gguf "
                    f"{getattr(gguf, '__version__', '0.19')} does not know",
                    where=where,
                ) from None
            if shape[0] % block:
                raise InconsistentTensorIndexError(
                    f"{self._path}: tensor {name!r} of type {qtype.name} has row length {shape[0]}, "
                    f"not a multiple of its block size {block}",
                    where=where,
                )
            rel = int(offset_tensor[0])
            if rel % int(self.alignment):
                raise InconsistentTensorIndexError(
                    f"{self._path}: tensor {name!r} data offset {rel} is not a multiple of the alignment "
                    f"{int(self.alignment)}",
                    where=where,
                )
            n_elems = 1
            for d in shape:
                n_elems *= d
            self.index.append(_RawTensor(name, qtype.name, shape, rel, n_elems // block * type_size))
        self.tensors = []


@dataclass
class _Shard:
    path: Path
    size: int
    fields: dict[str, Any]  # key -> ReaderField
    alignment: int
    data_offset: int
    index: list[_RawTensor]


def _open_error(path: Path, exc: OSError) -> GGUFError:
    return GGUFError(f"{path}: cannot open: {exc.strerror or exc}", code="file_not_found"
                     if isinstance(exc, FileNotFoundError) else "io_error", where=str(path))


def _parse(path: Path) -> _Shard:
    """Parse one file's header + index; any failure becomes a GGUFError."""
    check_input_file(path, "GGUF file", GGUFError)  # a FIFO, device or directory: refused before open()
    try:
        with open(path, "rb") as f:
            head = f.read(24)
        size = path.stat().st_size
    except OSError as exc:
        raise _open_error(path, exc) from None
    if len(head) < 4 or head[:4] != b"GGUF":
        raise NotGGUFError(f"{path}: not a GGUF file (magic {head[:4]!r}, expected b'GGUF')", where=str(path))
    if len(head) < 8:
        raise TruncatedGGUFError(f"{path}: file ends inside the GGUF header ({len(head)} bytes)", where=str(path))
    version = int.from_bytes(head[4:8], "little")
    if version & 0xFFFF == 0:
        version = int.from_bytes(head[4:8], "big")
    if version not in gguf.gguf_reader.READER_SUPPORTED_VERSIONS:
        raise NotGGUFError(
            f"{path}: GGUF version {version} is not supported (expected one of "
            f"{gguf.gguf_reader.READER_SUPPORTED_VERSIONS})",
            where=str(path),
        )
    if len(head) < 24:
        raise TruncatedGGUFError(f"{path}: file ends inside the GGUF header ({len(head)} bytes)", where=str(path))
    try:
        reader = _IndexReader(path)
    except GGUFError:
        raise
    except (IndexError, OverflowError) as exc:
        raise TruncatedGGUFError(f"{path}: header cut short: {type(exc).__name__}: {exc}", where=str(path)) from None
    except Exception as exc:  # GGUFReader raises ValueError/KeyError/UnicodeDecodeError/numpy errors...
        raise NotGGUFError(f"{path}: corrupt GGUF header: {type(exc).__name__}: {exc}", where=str(path)) from None
    return _Shard(path, size, dict(reader.fields), int(reader.alignment), int(reader.data_offset), reader.index)


def _check_ranges(shard: _Shard) -> None:
    """Overlaps → inconsistent_tensor_index; data past EOF → truncated when the index is dense
    (every tensor starts at the aligned end of the previous one, as every writer lays it out), else
    inconsistent_tensor_index (an offset pointing somewhere it should not)."""
    order = sorted(shard.index, key=lambda t: (t.rel_offset, t.n_bytes))
    dense = True
    prev: _RawTensor | None = None
    for t in order:
        if prev is not None:
            prev_end = prev.rel_offset + prev.n_bytes
            if t.rel_offset < prev_end:
                raise InconsistentTensorIndexError(
                    f"{shard.path}: tensor {t.name!r} data [{shard.data_offset + t.rel_offset}, "
                    f"{shard.data_offset + t.rel_offset + t.n_bytes}) overlaps tensor {prev.name!r} "
                    f"[{shard.data_offset + prev.rel_offset}, {shard.data_offset + prev_end})",
                    where=f"{shard.path}:{t.name}",
                )
            if t.rel_offset != _pad(prev_end, shard.alignment):
                dense = False
        elif t.rel_offset != 0:
            dense = False
        prev = t
    for t in order:
        end = shard.data_offset + t.rel_offset + t.n_bytes
        if end > shard.size:
            where = f"{shard.path}:{t.name}"
            if dense:
                raise TruncatedGGUFError(
                    f"{shard.path}: file is {shard.size} bytes but tensor {t.name!r} data ends at byte {end}: "
                    "the file is cut short",
                    where=where,
                )
            raise InconsistentTensorIndexError(
                f"{shard.path}: tensor {t.name!r} data [{shard.data_offset + t.rel_offset}, {end}) lies "
                f"outside the file ({shard.size} bytes)",
                where=where,
            )


MAX_HPARAM = 2**31 - 1
"""Largest integer hyperparameter accepted (llama.cpp ``llama_hparams`` holds them as ``int32``/``uint32``)."""


class _Meta:
    """Typed access to one shard's metadata, raising MissingKeyError (absent, wrong type) or
    InvalidHParamsError (zero, negative, NaN, infinite or above :data:`MAX_HPARAM`) naming file, key, value."""

    def __init__(self, shard: _Shard):
        self.shard = shard

    def has(self, key: str) -> bool:
        return key in self.shard.fields

    def _field(self, key: str) -> Any:
        field = self.shard.fields.get(key)
        if field is None:
            raise MissingKeyError(f"{self.shard.path}: required metadata key {key!r} is missing",
                                  where=f"{self.shard.path}:{key}")
        return field

    def _bad(self, key: str, field: Any, expected: str) -> MissingKeyError:
        kind = "/".join(t.name for t in field.types)
        return MissingKeyError(f"{self.shard.path}: metadata key {key!r} is {kind}, expected {expected}",
                               where=f"{self.shard.path}:{key}")

    def string(self, key: str) -> str:
        field = self._field(key)
        if field.types != [GGUFValueType.STRING]:
            raise self._bad(key, field, "a string")
        return str(field.contents())

    def pos_int(self, key: str) -> int:
        field = self._field(key)
        if len(field.types) != 1 or field.types[0] not in _INT_TYPES:
            raise self._bad(key, field, "an integer")
        value = int(field.contents())
        if not 0 < value <= MAX_HPARAM:
            raise InvalidHParamsError(f"{self.shard.path}: metadata key {key!r} = {value}, expected a positive "
                                      f"integer <= {MAX_HPARAM} (int32, as llama.cpp's hparams)",
                                      where=f"{self.shard.path}:{key}")
        return value

    def pos_float(self, key: str) -> float:
        field = self._field(key)
        if len(field.types) != 1 or field.types[0] not in _FLOAT_TYPES | _INT_TYPES:
            raise self._bad(key, field, "a number")
        value = float(field.contents())
        if not value > 0 or value == float("inf"):
            raise InvalidHParamsError(f"{self.shard.path}: metadata key {key!r} = {value:.6g}, expected a "
                                      f"positive finite number", where=f"{self.shard.path}:{key}")
        return value

    def array_len(self, key: str) -> int | None:
        field = self.shard.fields.get(key)
        if field is None or field.types[:1] != [GGUFValueType.ARRAY]:
            return None
        return int(field.parts[4][0])  # key len, key, value type, item type, array length


def shard_paths(path: str | os.PathLike[str], count: int) -> list[Path]:
    """The ``count`` sibling shard paths of gguf-split shard ``path`` (any shard of the set), in order.

    Raises ``InconsistentShardsError`` when the name does not follow ``<prefix>-NNNNN-of-MMMMM.gguf``
    or its ``MMMMM`` differs from ``count`` (the ``split.count`` key).
    """
    p = Path(path)
    m = SHARD_NAME_RE.match(p.name)
    if m is None:
        raise InconsistentShardsError(
            f"{p}: split.count = {count} but the file name does not follow <prefix>-NNNNN-of-MMMMM.gguf",
            where=f"{p}:split.count",
        )
    if int(m["count"]) != count:
        raise InconsistentShardsError(
            f"{p}: split.count = {count} but the file name says {int(m['count'])} shards",
            where=f"{p}:split.count",
        )
    return [p.with_name(f"{m['prefix']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def _split_int(shard: _Shard, key: str) -> int | None:
    field = shard.fields.get(key)
    if field is None:
        return None
    if len(field.types) != 1 or field.types[0] not in _INT_TYPES:
        raise InconsistentShardsError(f"{shard.path}: {key} has type {field.types[0].name}, expected an integer",
                                      where=f"{shard.path}:{key}")
    return int(field.contents())


def _load_shards(path: Path) -> list[_Shard]:
    """One shard for a whole file; for a gguf-split set, every shard in order, cross-checked."""
    first = _parse(path)
    count = _split_int(first, "split.count")
    if count is None or (count == 1 and _split_int(first, "split.no") in (None, 0)):
        return [first]
    if count < 1:
        raise InconsistentShardsError(f"{path}: split.count = {count}, expected >= 1", where=f"{path}:split.count")
    paths = shard_paths(path, count)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InconsistentShardsError(
            f"{path}: shard set of {count} is incomplete: missing {', '.join(missing)}", where=missing[0]
        )
    shards = [first if p == path else _parse(p) for p in paths]
    total = 0
    names: dict[str, Path] = {}
    expected_total = None
    for i, s in enumerate(shards):
        no = _split_int(s, "split.no")
        cnt = _split_int(s, "split.count")
        tot = _split_int(s, "split.tensors.count")
        if no != i or cnt != count:
            raise InconsistentShardsError(
                f"{s.path}: split.no = {no}, split.count = {cnt}; expected split.no = {i}, split.count = {count} "
                f"(as in {paths[0].name})",
                where=f"{s.path}:split.no",
            )
        if tot is None or (expected_total is not None and tot != expected_total):
            raise InconsistentShardsError(
                f"{s.path}: split.tensors.count = {tot}, expected {expected_total} as in the other shards",
                where=f"{s.path}:split.tensors.count",
            )
        expected_total = tot
        for t in s.index:
            if t.name in names:
                raise InconsistentShardsError(
                    f"{s.path}: tensor {t.name!r} is also in {names[t.name]}", where=f"{s.path}:{t.name}"
                )
            names[t.name] = s.path
        total += len(s.index)
    if total != expected_total:
        raise InconsistentShardsError(
            f"{paths[0]}: shards hold {total} tensors but split.tensors.count = {expected_total}",
            where=f"{paths[0]}:split.tensors.count",
        )
    return shards


def _facts(shards: list[_Shard]) -> ModelFacts:
    head = shards[0]
    meta = _Meta(head)
    arch = meta.string("general.architecture")
    n_tensors = sum(len(s.index) for s in shards)
    if n_tensors == 0:
        kind = "a vocabulary" if meta.has("tokenizer.ggml.tokens") else "metadata"
        raise VocabOnlyError(
            f"{head.path}: file holds {kind} but no weight tensors (vocab-only GGUF); a model needs its weights",
            where=str(head.path),
        )
    for s in shards:
        _check_ranges(s)

    def key(k: str) -> str:
        return f"{arch}.{k}"

    try:
        spec = get_arch(arch)
    except ProgramError as e:
        raise ARCH_GGUF_ERRORS[e.code](f"{head.path}: general.architecture = {arch!r}: {e.message}",
                                       where=f"{head.path}:general.architecture") from None
    block_count = meta.pos_int(key("block_count"))
    n_tensors = sum(len(s.index) for s in shards)
    if block_count > n_tensors:  # each block has tensors: caught before any per-block list is built
        raise InvalidHParamsError(f"{head.path}: metadata key {key('block_count')!r} = {block_count} is out of "
                                  f"range: the file has {n_tensors} tensors", where=f"{head.path}:{key('block_count')}")
    hidden = meta.pos_int(key("embedding_length"))
    heads = meta.pos_int(key("attention.head_count"))
    kv_heads = meta.pos_int(key("attention.head_count_kv")) if meta.has(key("attention.head_count_kv")) else heads
    ffn = meta.pos_int(key("feed_forward_length"))
    ctx = meta.pos_int(key("context_length"))
    key_len = meta.pos_int(key("attention.key_length")) if meta.has(key("attention.key_length")) else 0
    value_len = meta.pos_int(key("attention.value_length")) if meta.has(key("attention.value_length")) else 0
    if (not key_len and hidden % heads) or heads % kv_heads:
        raise InvalidHParamsError(
            f"{head.path}: {key('embedding_length')} = {hidden}, {key('attention.head_count')} = {heads}, "
            f"{key('attention.head_count_kv')} = {kv_heads}: hidden must divide by heads (without "
            f"{key('attention.key_length')}) and heads by kv heads",
            where=f"{head.path}:{key('attention.head_count')}",
        )
    head_dim = key_len or hidden // heads
    rope_dims = meta.pos_int(key("rope.dimension_count")) if meta.has(key("rope.dimension_count")) else head_dim
    rope_base = meta.pos_float(key("rope.freq_base")) if meta.has(key("rope.freq_base")) else 10000.0
    eps_key = key("attention.layer_norm_rms_epsilon")
    if not meta.has(eps_key) and meta.has(key("attention.layer_norm_epsilon")):
        eps_key = key("attention.layer_norm_epsilon")
    eps = meta.pos_float(eps_key)
    params: list[tuple[str, int | float | str]] = []
    for mk in spec.metadata:
        if meta.has(key(mk.key)) or mk.required:
            params.append((mk.key, meta.pos_int(key(mk.key)) if mk.kind == "int" else meta.pos_float(key(mk.key))))

    tensors: list[TensorInfo] = []
    for si, s in enumerate(shards):
        for t in s.index:
            m = _BLOCK_RE.match(t.name)
            tensors.append(TensorInfo(t.name, t.ggml_type, t.shape, si, s.data_offset + t.rel_offset, t.n_bytes,
                                      int(m.group(1)) if m else None))
    present = sorted({t.block for t in tensors if t.block is not None})
    if present != list(range(block_count)):
        missing = sorted(set(range(block_count)) - set(present))
        extra = [b for b in present if b >= block_count]
        raise BlockCountMismatchError(
            f"{head.path}: {key('block_count')} = {block_count} but the blk.N.* tensors cover "
            f"{len(present)} blocks" + (f"; missing blocks {missing[:8]}" if missing else "")
            + (f"; blocks beyond the count {extra[:8]}" if extra else ""),
            where=f"{head.path}:{key('block_count')}",
        )

    by_name = {t.name: t for t in tensors}
    embd = by_name.get("token_embd.weight")
    if meta.has(key("vocab_size")):
        vocab = meta.pos_int(key("vocab_size"))
    elif (n := meta.array_len("tokenizer.ggml.tokens")) is not None and n > 0:
        vocab = n
    elif embd is not None and len(embd.shape) == 2:
        vocab = embd.shape[1]
    else:
        raise MissingKeyError(
            f"{head.path}: cannot tell the vocabulary size: no {key('vocab_size')!r}, no tokenizer.ggml.tokens "
            "and no 2-D token_embd.weight",
            where=f"{head.path}:{key('vocab_size')}",
        )
    block_bytes = [0] * block_count
    for t in tensors:
        if t.block is not None:
            block_bytes[t.block] += t.n_bytes
    name_field = head.fields.get("general.name")
    name = (str(name_field.contents()) if name_field is not None and name_field.types == [GGUFValueType.STRING]
            else head.path.stem)
    facts = ModelFacts(
        architecture=arch,
        name=name,
        block_count=block_count,
        embedding_length=hidden,
        head_count=heads,
        head_count_kv=kv_heads,
        feed_forward_length=ffn,
        vocab_size=vocab,
        context_length=ctx,
        rope_dimension_count=rope_dims,
        rope_freq_base=rope_base,
        rms_norm_eps=eps,
        alignment=head.alignment,
        tensors=tuple(tensors),
        block_bytes=tuple(block_bytes),
        files=tuple(os.path.abspath(s.path) for s in shards),  # absolute: usable from any cwd
        sha256=None,
        key_length=key_len,
        value_length=value_len,
        arch_params=tuple(sorted(params)),
    )
    _check_arch(facts, spec, shards, arch)
    return facts


def _check_arch(facts: ModelFacts, spec: Arch, shards: list[_Shard], arch: str) -> None:
    """Tensor shapes against the architecture's hyper-parameters (``inconsistent_tensor_index``), then
    :func:`pipeplan.models.archs.check_model` (``invalid_hparams``, ``missing_tensor``,
    ``unexpected_tensor``), as GGUFErrors naming the file."""
    path = shards[0].path
    try:
        hp = spec.hparams(facts)
    except ProgramError as e:
        raise ARCH_GGUF_ERRORS.get(e.code, InvalidHParamsError)(f"{path}: {e.message}", where=f"{path}:{arch}") from None
    llama = llama_tensor_shapes(facts.embedding_length, facts.head_count, facts.head_count_kv,
                                facts.feed_forward_length, facts.vocab_size) if arch == "llama" else {}
    shapes = spec.weight_shapes(hp)
    for t in facts.tensors:
        suffix = t.name.split(".", 2)[-1] if t.block is not None else t.name
        torch_shape = shapes.get(suffix)
        if torch_shape is not None and t.shape != tuple(reversed(torch_shape)):
            keys = llama.get(_BLOCK_RE.sub("blk.N.", t.name))
            why = f"{keys[1]}, " if keys is not None else ""
            raise InconsistentTensorIndexError(
                f"{shards[t.shard].path}: tensor {t.name!r} has shape {list(t.shape)}, expected "
                f"{list(reversed(torch_shape))} ({why}ggml order) from the {arch}.* hyperparameters",
                where=f"{shards[t.shard].path}:{t.name}",
            )
    try:
        check_model(facts)
    except ProgramError as e:
        raise ARCH_GGUF_ERRORS.get(e.code, InvalidHParamsError)(f"{path}: {e.message}",
                                                                where=f"{path}:{e.where or arch}") from None


def read_model_facts(path: str | os.PathLike[str]) -> ModelFacts:
    """Read the :class:`ModelFacts` of a GGUF file or gguf-split shard set (give any shard).

    Only the header and tensor index are read (tensor data is never touched): stories260K takes a
    few ms. ``TensorInfo.offset`` is absolute in ``files[shard]`` (absolute paths); shapes are in ggml order;
    ``block_bytes[i]`` sums the tensor bytes of ``blk.i.*``. Defaults follow llama.cpp:
    ``head_count_kv`` = ``head_count``, ``rope.dimension_count`` = hidden / heads,
    ``rope.freq_base`` = 10000, alignment 32; vocab size from ``<arch>.vocab_size``, else the
    tokenizer token list, else ``token_embd.weight``'s second dim; ``key_length``/``value_length``
    from ``attention.key_length``/``value_length`` (0 when absent), ``rope.dimension_count`` default
    the key head dim; ``arch_params`` the architecture's own keys (``Arch.metadata``). ``sha256`` is
    left None (see :func:`sha256_file`).

    Raises: a :class:`~pipeplan.errors.GGUFError` subclass (see the module docstring), never any
    other exception type.
    """
    p = Path(path)
    try:
        return _facts(_load_shards(p))
    except GGUFError:
        raise
    except RecursionError as exc:
        raise NotGGUFError(f"{p}: metadata nests too deeply: {exc}", where=str(p)) from None
    except Exception as exc:  # defensive: a reader quirk must not escape untyped
        raise NotGGUFError(f"{p}: cannot read GGUF: {type(exc).__name__}: {exc}", where=str(p)) from None


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes (streamed with ``hashlib.file_digest``).

    Raises ``GGUFError`` (code ``file_not_found`` or ``io_error``) when the file cannot be read.
    """
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as exc:
        raise _open_error(p, exc) from None
