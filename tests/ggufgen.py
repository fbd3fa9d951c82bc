"""GGUF generators for tests: quantized / tied / split variants of a model and random llama models.

Everything is written with the ``gguf`` package (``GGUFWriter``, streaming one tensor at a time so a
few-hundred-MB random model never sits in memory whole) and read with ``GGUFReader``. Conventions
follow llama.cpp:

* quantization (``llama-quantize``): 2-D matrices (including ``token_embd.weight`` and
  ``output.weight``) get the requested type; 1-D tensors (norms) stay F32. A matrix whose row
  length (ggml ``ne0``) is not a multiple of the type's block size falls back to F16, as
  llama.cpp does for tensors a block type cannot hold (stories260K's ``ffn_down`` has ne0 = 172).
* ``general.file_type`` is set to the matching ``LlamaFileType`` (MOSTLY_F16, MOSTLY_Q8_0, ...).
* gguf-split (``llama-gguf-split``): shards ``<name>-00001-of-0000N.gguf`` with keys ``split.no``
  (u16), ``split.count`` (u16), ``split.tensors.count`` (i32); all other metadata lives in the first
  shard. ``GGUFWriter(split_max_tensors=...)`` implements exactly this and is used as is.

Public API::

    write_variant(src, dst, *, ggml_type=None, drop_output=False, kv_overrides=None, tensor_order=None) -> Path
    write_split(src, dst_dir, n_shards, *, name=None) -> list[Path]
    write_random_llama(dst, *, blocks, hidden, heads, kv_heads, ffn, vocab, ctx=256, ggml_type="F32",
                       seed=0, with_vocab=True, tensor_order=None, kv_overrides=None) -> Path
    write_random_model(dst, *, arch, blocks, hidden, heads, kv_heads, ffn, vocab, head_dim=None, ctx=256,
                       seed=0, sliding_window=None, tied=False, extra_tensors=None, drop_tensors=(),
                       kv_overrides=None, label=None) -> Path
    poison_tensor(path, name, index=0, value=inf) -> Path

``kv_overrides`` maps a metadata key to a new value (its GGUF value type is kept when the key
exists; give ``(value, GGUFValueType)`` to force one) or to ``None`` to delete the key: tests use it
to craft bad files (``general.alignment = 3``, a changed ``llama.block_count``, a missing
``llama.embedding_length``). Raises ``ValueError`` for arguments it cannot honour.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

__all__ = [
    "QUANTIZABLE",
    "write_variant",
    "write_split",
    "write_random_llama",
    "write_random_model",
    "llama_tensor_names",
    "poison_tensor",
    "RANDOM_ARCHS",
]

QUANTIZABLE = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
"""Types ``gguf.quants.quantize`` can produce (K-quants can only be dequantized)."""

_FILE_TYPE = {
    "F32": gguf.LlamaFileType.ALL_F32,
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "BF16": gguf.LlamaFileType.MOSTLY_BF16,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
    "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
    "Q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
}

_SKIP_KEYS = ("GGUF.", "split.")

# --------------------------------------------------------------------------- helpers


class _Tensor:
    """One tensor to write: numpy-order element ``shape``, ggml ``qtype`` and a data producer."""

    __slots__ = ("name", "shape", "qtype", "make")

    def __init__(self, name: str, shape: tuple[int, ...], qtype: QT, make: Callable[[], np.ndarray]):
        self.name, self.shape, self.qtype, self.make = name, shape, qtype, make

    @property
    def nbytes(self) -> int:
        block, size = gguf.GGML_QUANT_SIZES[self.qtype]
        return int(np.prod(self.shape, dtype=np.int64)) // block * size


def _qtype(name: str) -> QT:
    if name not in QUANTIZABLE:
        raise ValueError(f"ggml_type {name!r} cannot be written; choose one of {', '.join(QUANTIZABLE)}")
    return QT[name]


def _target_type(shape: tuple[int, ...], src_type: QT, want: QT | None) -> QT:
    """llama.cpp rule: 2-D matrices take ``want``; 1-D stays as is; unfit rows fall back to F16."""
    if want is None or len(shape) != 2:
        return src_type
    block, _ = gguf.GGML_QUANT_SIZES[want]
    if shape[-1] % block != 0:
        return QT.F16
    return want


def _convert(data: np.ndarray, src_type: QT, dst_type: QT) -> np.ndarray:
    """Re-encode ``data`` (as GGUFReader returns it for ``src_type``) into ``dst_type`` bytes/values."""
    if src_type == dst_type:
        return np.ascontiguousarray(data)
    if src_type == QT.F32:
        values = np.asarray(data, dtype=np.float32)
    else:
        values = gguf.quants.dequantize(np.asarray(data), src_type)
    return gguf.quants.quantize(np.ascontiguousarray(values, dtype=np.float32), dst_type)


def _apply_order(tensors: list[_Tensor], order: Sequence[str] | str | None) -> list[_Tensor]:
    """Reorder: None keeps order; ``"norms_last"`` moves 1-D tensors after the matrices (each group
    keeping its order); ``"reversed"`` reverses; a sequence must be a permutation of the names."""
    if order is None:
        return tensors
    if order == "norms_last":
        return [t for t in tensors if len(t.shape) != 1] + [t for t in tensors if len(t.shape) == 1]
    if order == "reversed":
        return list(reversed(tensors))
    if isinstance(order, str):
        raise ValueError(f"unknown tensor_order {order!r}: use 'norms_last', 'reversed' or a list of names")
    by_name = {t.name: t for t in tensors}
    if sorted(order) != sorted(by_name):
        raise ValueError("tensor_order must be a permutation of the tensor names")
    return [by_name[n] for n in order]


def _add_kv(writer: gguf.GGUFWriter, key: str, value: Any, vtype: VT, sub_type: VT | None) -> None:
    if key == "general.alignment" and vtype == VT.UINT32 and value > 0 and value & (value - 1) == 0:
        writer.add_custom_alignment(int(value))  # keeps the writer's data alignment in step
    else:
        writer.add_key_value(key, value, vtype, sub_type=sub_type)


def _infer_vtype(value: Any) -> tuple[Any, VT, VT | None]:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], VT):
        val, vt = value
        sub = None
        if vt == VT.ARRAY:
            sub = VT.get_type(val[0])
        return val, vt, sub
    if isinstance(value, list | tuple):
        return list(value), VT.ARRAY, VT.get_type(value[0])
    if isinstance(value, bool):
        return value, VT.BOOL, None
    if isinstance(value, int):
        return value, VT.UINT32, None
    if isinstance(value, float):
        return value, VT.FLOAT32, None
    return str(value), VT.STRING, None


def _write(
    dst: Path,
    arch: str,
    kvs: Iterable[tuple[str, Any, VT, VT | None]],
    tensors: list[_Tensor],
    *,
    split_max_tensors: int = 0,
) -> list[Path]:
    """Stream ``tensors`` into ``dst`` (or its shards) with GGUFWriter; returns the files written."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(dst, arch, split_max_tensors=split_max_tensors)
    try:
        for key, value, vtype, sub in kvs:
            _add_kv(writer, key, value, vtype, sub)
        for t in tensors:
            writer.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.qtype)
        files = writer.format_shard_names(dst)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in tensors:
            data = t.make()
            if data.nbytes != t.nbytes:
                raise ValueError(f"tensor {t.name}: produced {data.nbytes} bytes, expected {t.nbytes}")
            writer.write_tensor_data(data)
    finally:
        writer.close()
    return files


def _source_kvs(reader: gguf.GGUFReader, overrides: Mapping[str, Any] | None) -> list[tuple[str, Any, VT, VT | None]]:
    """Metadata of ``reader`` as (key, value, type, subtype), minus GGUF.*/split.*/architecture,
    with ``overrides`` applied (None deletes; a new key is appended)."""
    overrides = dict(overrides or {})
    out: list[tuple[str, Any, VT, VT | None]] = []
    for key, field in reader.fields.items():
        if key.startswith(_SKIP_KEYS) or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == VT.ARRAY else None
        value = field.contents()
        if key in overrides:
            new = overrides.pop(key)
            if new is None:
                continue
            if isinstance(new, tuple) and len(new) == 2 and isinstance(new[1], VT):
                value, vtype, sub = _infer_vtype(new)
            else:
                value = new
        out.append((key, value, vtype, sub))
    for key, new in overrides.items():
        if new is not None:
            out.append((key, *_infer_vtype(new)))
    return out


def _arch(reader: gguf.GGUFReader) -> str:
    field = reader.get_field("general.architecture")
    if field is None:
        raise ValueError("source GGUF has no general.architecture")
    return str(field.contents())


# --------------------------------------------------------------------------- public API


def write_variant(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    ggml_type: str | None = None,
    drop_output: bool = False,
    kv_overrides: Mapping[str, Any] | None = None,
    tensor_order: Sequence[str] | str | None = None,
) -> Path:
    """Copy ``src`` (every metadata key incl. tokenizer arrays, every tensor) into ``dst``.

    Args:
        ggml_type: None keeps every tensor's type; otherwise one of :data:`QUANTIZABLE`: 2-D
            matrices are re-encoded with ``gguf.quants.quantize`` (1-D norms stay as they are; rows
            not a multiple of the block size fall back to F16, the llama.cpp rule) and
            ``general.file_type`` is updated.
        drop_output: remove ``output.weight`` (a tied-embedding model: llama.cpp then uses
            ``token_embd.weight`` as the output head).
        kv_overrides: metadata edits (see module docstring).
        tensor_order: ``"norms_last"``, ``"reversed"`` or an explicit permutation of tensor names.
    Returns: ``Path(dst)``. Raises ``ValueError`` for an unsupported ``ggml_type``.
    """
    src, dst = Path(src), Path(dst)
    want = _qtype(ggml_type) if ggml_type is not None else None
    reader = gguf.GGUFReader(src)
    overrides = dict(kv_overrides or {})
    if want is not None and "general.file_type" not in overrides:
        overrides["general.file_type"] = (int(_FILE_TYPE[ggml_type]), VT.UINT32)  # type: ignore[index]
    tensors: list[_Tensor] = []
    for rt in reader.tensors:
        if drop_output and rt.name == "output.weight":
            continue
        shape = tuple(int(d) for d in reversed(rt.shape.tolist()))  # numpy order
        dst_type = _target_type(shape, rt.tensor_type, want)
        tensors.append(
            _Tensor(rt.name, shape, dst_type, lambda rt=rt, d=dst_type: _convert(rt.data, rt.tensor_type, d))
        )
    tensors = _apply_order(tensors, tensor_order)
    _write(dst, _arch(reader), _source_kvs(reader, overrides), tensors)
    return dst


def write_split(
    src: str | os.PathLike[str], dst_dir: str | os.PathLike[str], n_shards: int, *, name: str | None = None
) -> list[Path]:
    """Write ``src`` as a gguf-split shard set of exactly ``n_shards`` files in ``dst_dir``.

    Files are ``<name>-00001-of-0000N.gguf`` (``name`` defaults to the source stem), tensors keep
    their order and data, ``GGUFWriter(split_max_tensors=ceil(T / n_shards))`` does the splitting.
    Returns the shard paths in order. Raises ``ValueError`` when ``n_shards`` < 2, exceeds the
    tensor count, or cannot be reached with equal-count shards (e.g. 48 tensors in 9 shards).
    """
    src, dst_dir = Path(src), Path(dst_dir)
    reader = gguf.GGUFReader(src)
    n = len(reader.tensors)
    if not 2 <= n_shards <= n:
        raise ValueError(f"n_shards must be in [2, {n}] for {src.name} ({n} tensors), got {n_shards}")
    per = -(-n // n_shards)
    if -(-n // per) != n_shards:
        raise ValueError(f"{n} tensors cannot be cut into exactly {n_shards} shards of at most {per} tensors")
    tensors = [
        _Tensor(
            rt.name,
            tuple(int(d) for d in reversed(rt.shape.tolist())),
            rt.tensor_type,
            lambda rt=rt: np.ascontiguousarray(rt.data),
        )
        for rt in reader.tensors
    ]
    files = _write(dst_dir / f"{name or src.stem}.gguf", _arch(reader), _source_kvs(reader, None), tensors,
                   split_max_tensors=per)
    assert len(files) == n_shards, files
    return files


def llama_tensor_names(blocks: int, *, with_output: bool = True) -> list[str]:
    """Tensor names in the order llama.cpp's converters write them (token_embd, output_norm,
    output, then per block attn_q/k/v/output, attn_norm, ffn_gate/down/up, ffn_norm)."""
    names = ["token_embd.weight", "output_norm.weight"] + (["output.weight"] if with_output else [])
    for b in range(blocks):
        names += [f"blk.{b}.{p}.weight" for p in ("attn_q", "attn_k", "attn_v", "attn_output", "attn_norm",
                                                     "ffn_gate", "ffn_down", "ffn_up", "ffn_norm")]
    return names


def _tiny_spm_vocab(vocab: int) -> tuple[list[str], list[float], list[int]]:
    """``vocab`` SPM pieces: <unk>, <s>, </s>, byte pieces <0x00>..<0xFF> when room, then
    single characters and ``▁``-prefixed pieces, all distinct; scores decrease with the id."""
    if vocab < 3:
        raise ValueError(f"vocab must be >= 3 (unk, bos, eos), got {vocab}")
    tokens = ["<unk>", "<s>", "</s>"]
    types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    if vocab >= 3 + 256 + 1:
        tokens += [f"<0x{b:02X}>" for b in range(256)]
        types += [int(gguf.TokenType.BYTE)] * 256
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    pieces = ["▁"] + [c for c in alphabet] + ["▁" + c for c in alphabet]
    pieces += ["▁" + a + b for a in alphabet for b in alphabet] + [a + b for a in alphabet for b in alphabet]
    i = 0
    while len(tokens) < vocab:
        tokens.append(pieces[i] if i < len(pieces) else f"▁t{i}")
        types.append(int(gguf.TokenType.NORMAL))
        i += 1
    scores = [0.0, 0.0, 0.0] + [-float(k) for k in range(len(tokens) - 3)]
    return tokens, scores, types


def write_random_llama(
    dst: str | os.PathLike[str],
    *,
    blocks: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn: int,
    vocab: int,
    ctx: int = 256,
    ggml_type: str = "F32",
    seed: int = 0,
    with_vocab: bool = True,
    tensor_order: Sequence[str] | str | None = None,
    kv_overrides: Mapping[str, Any] | None = None,
) -> Path:
    """A llama-architecture GGUF with random weights (N(0, 0.02) matrices, norms = 1) that llama.cpp
    and our runtime can load and run, and (``with_vocab``) a tiny SPM vocabulary of ``vocab`` pieces.

    Shapes (numpy order, ``head_dim = hidden // heads``): token_embd/output ``(vocab, hidden)``,
    attn_q/attn_output ``(hidden, hidden)``, attn_k/attn_v ``(kv_heads*head_dim, hidden)``,
    ffn_gate/ffn_up ``(ffn, hidden)``, ffn_down ``(hidden, ffn)``, norms ``(hidden,)``.
    ``ggml_type`` applies to the matrices (llama.cpp rule, see module docstring). File size is about
    ``4 * (2*vocab*hidden + blocks*(2*hidden^2 + 2*kv*hd*hidden + 3*ffn*hidden))`` bytes for F32.
    Raises ``ValueError`` when ``hidden % heads`` or ``heads % kv_heads`` is not 0.
    """
    if hidden % heads or heads % kv_heads:
        raise ValueError(f"hidden ({hidden}) must divide by heads ({heads}) and heads by kv_heads ({kv_heads})")
    dst = Path(dst)
    want = _qtype(ggml_type)
    hd = hidden // heads
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (vocab, hidden),
        "output_norm.weight": (hidden,),
        "output.weight": (vocab, hidden),
    }
    for b in range(blocks):
        p = f"blk.{b}."
        shapes.update({
            p + "attn_q.weight": (hidden, hidden),
            p + "attn_k.weight": (kv_heads * hd, hidden),
            p + "attn_v.weight": (kv_heads * hd, hidden),
            p + "attn_output.weight": (hidden, hidden),
            p + "attn_norm.weight": (hidden,),
            p + "ffn_gate.weight": (ffn, hidden),
            p + "ffn_down.weight": (hidden, ffn),
            p + "ffn_up.weight": (ffn, hidden),
            p + "ffn_norm.weight": (hidden,),
        })
    tensors: list[_Tensor] = []
    for i, name in enumerate(llama_tensor_names(blocks)):
        shape = shapes[name]
        qt = _target_type(shape, QT.F32, want)

        def make(shape: tuple[int, ...] = shape, qt: QT = qt, i: int = i) -> np.ndarray:
            if len(shape) == 1:
                return np.ones(shape, dtype=np.float32)
            rng = np.random.default_rng([seed, i])
            values = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(np.float32)
            return _convert(values, QT.F32, qt)

        tensors.append(_Tensor(name, shape, qt, make))
    tensors = _apply_order(tensors, tensor_order)

    kvs: list[tuple[str, Any, VT, VT | None]] = [
        ("general.name", f"random-llama-{blocks}x{hidden}", VT.STRING, None),
        ("general.file_type", int(_FILE_TYPE[ggml_type]), VT.UINT32, None),
        ("llama.context_length", ctx, VT.UINT32, None),
        ("llama.embedding_length", hidden, VT.UINT32, None),
        ("llama.block_count", blocks, VT.UINT32, None),
        ("llama.feed_forward_length", ffn, VT.UINT32, None),
        ("llama.rope.dimension_count", hd, VT.UINT32, None),
        ("llama.attention.head_count", heads, VT.UINT32, None),
        ("llama.attention.head_count_kv", kv_heads, VT.UINT32, None),
        ("llama.attention.layer_norm_rms_epsilon", 1e-5, VT.FLOAT32, None),
        ("llama.rope.freq_base", 10000.0, VT.FLOAT32, None),
        ("llama.vocab_size", vocab, VT.UINT32, None),
    ]
    if with_vocab:
        tokens, scores, types = _tiny_spm_vocab(vocab)
        kvs += [
            ("tokenizer.ggml.model", "llama", VT.STRING, None),
            ("tokenizer.ggml.tokens", tokens, VT.ARRAY, VT.STRING),
            ("tokenizer.ggml.scores", scores, VT.ARRAY, VT.FLOAT32),
            ("tokenizer.ggml.token_type", types, VT.ARRAY, VT.INT32),
            ("tokenizer.ggml.unknown_token_id", 0, VT.UINT32, None),
            ("tokenizer.ggml.bos_token_id", 1, VT.UINT32, None),
            ("tokenizer.ggml.eos_token_id", 2, VT.UINT32, None),
            ("tokenizer.ggml.add_bos_token", True, VT.BOOL, None),
        ]
    if kv_overrides:
        merged = {k: (v, t, s) for k, v, t, s in kvs}
        for key, new in kv_overrides.items():
            if new is None:
                merged.pop(key, None)
            elif key in merged and not (isinstance(new, tuple) and len(new) == 2 and isinstance(new[1], VT)):
                merged[key] = (new, merged[key][1], merged[key][2])
            else:
                merged[key] = _infer_vtype(new)
        kvs = [(k, *v) for k, v in merged.items()]
    _write(dst, "llama", kvs, tensors)
    return dst


RANDOM_ARCHS = ("llama", "gemma3", "qwen2", "qwen3")
"""Architectures :func:`write_random_model` writes."""


def _arch_block_tensors(arch: str, hidden: int, heads: int, kv_heads: int, ffn: int, hd: int
                        ) -> list[tuple[str, tuple[int, ...], str]]:
    """Per-block ``(suffix, numpy shape, init)`` of ``arch`` as llama.cpp's loader names them; init is
    ``"matrix"`` (N(0, 1/fan_in)), ``"norm"`` (1 + N(0, 0.2)) or ``"bias"`` (N(0, 0.1))."""
    q, kv = heads * hd, kv_heads * hd
    out = [("attn_q.weight", (q, hidden), "matrix"), ("attn_k.weight", (kv, hidden), "matrix"),
           ("attn_v.weight", (kv, hidden), "matrix"), ("attn_output.weight", (hidden, q), "matrix"),
           ("attn_norm.weight", (hidden,), "norm"), ("ffn_gate.weight", (ffn, hidden), "matrix"),
           ("ffn_down.weight", (hidden, ffn), "matrix"), ("ffn_up.weight", (ffn, hidden), "matrix"),
           ("ffn_norm.weight", (hidden,), "norm")]
    if arch == "qwen2":
        out += [("attn_q.bias", (q,), "bias"), ("attn_k.bias", (kv,), "bias"), ("attn_v.bias", (kv,), "bias")]
    if arch in ("gemma3", "qwen3"):
        out += [("attn_q_norm.weight", (hd,), "norm"), ("attn_k_norm.weight", (hd,), "norm")]
    if arch == "gemma3":
        out += [("post_attention_norm.weight", (hidden,), "norm"), ("post_ffw_norm.weight", (hidden,), "norm")]
    return out


def write_random_model(
    dst: str | os.PathLike[str],
    *,
    arch: str,
    blocks: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    ffn: int,
    vocab: int,
    head_dim: int | None = None,
    ctx: int = 256,
    seed: int = 0,
    sliding_window: int | None = None,
    tied: bool = False,
    extra_tensors: Mapping[str, tuple[int, ...]] | None = None,
    drop_tensors: Sequence[str] = (),
    kv_overrides: Mapping[str, Any] | None = None,
    label: str | None = None,
) -> Path:
    """An F32 GGUF of architecture ``arch`` (one of :data:`RANDOM_ARCHS`) with random weights that
    llama.cpp and our runtime can load and run, and a tiny SPM vocabulary of ``vocab`` pieces.

    Values (numpy ``default_rng([seed, i])`` per tensor ``i``, deterministic): matrices N(0, 1/fan_in),
    ``token_embd`` N(0, 1), norms 1 + N(0, 0.2) (QK norms included), qwen2's q/k/v biases N(0, 0.1).
    ``head_dim`` (default ``hidden // heads``) is written as ``attention.key_length``/``value_length``
    when it differs from ``hidden // heads`` or the arch states them (gemma3, qwen3).
    ``sliding_window`` (gemma3: required by llama.cpp; default 4) goes to ``attention.sliding_window``.
    ``tied`` drops ``output.weight``. ``extra_tensors`` adds F32 tensors (name -> numpy shape, values
    N(0, 0.1)); ``drop_tensors`` removes named tensors; ``kv_overrides`` as in :func:`write_random_llama`
    (keys named with the label); ``label`` (default ``arch``) is written as ``general.architecture`` and
    prefixes the hyperparameter keys while the tensors stay ``arch``'s (a mislabelled file).
    Raises ValueError for an unknown arch or heads that do not divide.
    """
    if arch not in RANDOM_ARCHS:
        raise ValueError(f"arch must be one of {RANDOM_ARCHS}, got {arch!r}")
    if heads % kv_heads or (head_dim is None and hidden % heads):
        raise ValueError(f"heads ({heads}) must divide by kv_heads ({kv_heads}) and hidden ({hidden}) by heads")
    hd = head_dim or hidden // heads
    specs: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (vocab, hidden), "embd"),
                                                     ("output_norm.weight", (hidden,), "norm")]
    if not tied:
        specs.append(("output.weight", (vocab, hidden), "matrix"))
    for b in range(blocks):
        specs += [(f"blk.{b}.{n}", shape, init) for n, shape, init in
                  _arch_block_tensors(arch, hidden, heads, kv_heads, ffn, hd)]
    specs += [(n, tuple(shape), "extra") for n, shape in (extra_tensors or {}).items()]
    unknown = set(drop_tensors) - {n for n, _, _ in specs}
    if unknown:
        raise ValueError(f"drop_tensors names tensors the model does not have: {sorted(unknown)}")
    tensors: list[_Tensor] = []
    for i, (name, shape, init) in enumerate(specs):
        if name in drop_tensors:
            continue

        def make(shape: tuple[int, ...] = shape, init: str = init, i: int = i) -> np.ndarray:
            rng = np.random.default_rng([seed, i])
            z = rng.standard_normal(shape, dtype=np.float32)
            if init == "matrix":
                return (z / np.float32(np.sqrt(shape[-1]))).astype(np.float32)
            if init == "norm":
                return (1 + np.float32(0.2) * z).astype(np.float32)
            if init in ("bias", "extra"):
                return (np.float32(0.1) * z).astype(np.float32)
            return z

        tensors.append(_Tensor(name, shape, QT.F32, make))
    k = label or arch
    kvs: list[tuple[str, Any, VT, VT | None]] = [
        ("general.name", f"random-{arch}-{blocks}x{hidden}", VT.STRING, None),
        ("general.file_type", int(gguf.LlamaFileType.ALL_F32), VT.UINT32, None),
        (f"{k}.context_length", ctx, VT.UINT32, None),
        (f"{k}.embedding_length", hidden, VT.UINT32, None),
        (f"{k}.block_count", blocks, VT.UINT32, None),
        (f"{k}.feed_forward_length", ffn, VT.UINT32, None),
        (f"{k}.attention.head_count", heads, VT.UINT32, None),
        (f"{k}.attention.head_count_kv", kv_heads, VT.UINT32, None),
        (f"{k}.attention.layer_norm_rms_epsilon", 1e-6, VT.FLOAT32, None),
        (f"{k}.rope.freq_base", 10000.0, VT.FLOAT32, None),
    ]
    if arch in ("gemma3", "qwen3") or hd != hidden // heads:
        kvs += [(f"{k}.attention.key_length", hd, VT.UINT32, None), (f"{k}.attention.value_length", hd, VT.UINT32, None)]
    if arch == "gemma3":
        kvs.append((f"{k}.attention.sliding_window", sliding_window or 4, VT.UINT32, None))
    tokens, scores, types = _tiny_spm_vocab(vocab)
    kvs += [
        ("tokenizer.ggml.model", "llama", VT.STRING, None),
        ("tokenizer.ggml.tokens", tokens, VT.ARRAY, VT.STRING),
        ("tokenizer.ggml.scores", scores, VT.ARRAY, VT.FLOAT32),
        ("tokenizer.ggml.token_type", types, VT.ARRAY, VT.INT32),
        ("tokenizer.ggml.unknown_token_id", 0, VT.UINT32, None),
        ("tokenizer.ggml.bos_token_id", 1, VT.UINT32, None),
        ("tokenizer.ggml.eos_token_id", 2, VT.UINT32, None),
        ("tokenizer.ggml.add_bos_token", True, VT.BOOL, None),
    ]
    if kv_overrides:
        merged = {key: (v, t, sub) for key, v, t, sub in kvs}
        for key, new in kv_overrides.items():
            if new is None:
                merged.pop(key, None)
            elif key in merged and not (isinstance(new, tuple) and len(new) == 2 and isinstance(new[1], VT)):
                merged[key] = (new, merged[key][1], merged[key][2])
            else:
                merged[key] = _infer_vtype(new)
        kvs = [(key, *v) for key, v in merged.items()]
    dst = Path(dst)
    _write(dst, k, kvs, tensors)
    return dst


def poison_tensor(path: str | os.PathLike[str], name: str, index: int = 0, value: float = float("inf")) -> Path:
    """Overwrite element ``index`` of F32 tensor ``name`` in the GGUF at ``path`` with ``value`` (in
    place; e.g. an Inf weight for the non-finite fault tests). Raises ValueError when the tensor is
    missing or not F32."""
    p = Path(path)
    reader = gguf.GGUFReader(p)
    t = next((t for t in reader.tensors if t.name == name), None)
    if t is None or t.tensor_type != QT.F32:
        raise ValueError(f"{p}: no F32 tensor {name!r}")
    at = int(t.data_offset) + 4 * int(index)
    del reader
    with open(p, "r+b") as f:
        f.seek(at)
        f.write(np.float32(value).tobytes())
    return p
