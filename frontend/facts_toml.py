"""Model-facts TOML: plan a model you have not downloaded.

A facts file states the llama hyperparameters (the GGUF ``llama.*`` keys) and a weight ggml type;
unless it lists ``[[tensors]]`` explicitly, the llama tensor index is synthesized with byte sizes
from ``gguf.GGML_QUANT_SIZES`` and consecutive offsets aligned to ``alignment`` (relative to the
start of a data section, since there is no file). Format::

    [model]
    architecture = "llama"          # optional, default "llama"
    name = "Meta-Llama-3-8B"
    block_count = 32
    embedding_length = 4096
    head_count = 32
    head_count_kv = 8               # optional, default head_count
    feed_forward_length = 14336
    vocab_size = 128256
    context_length = 8192
    rope_dimension_count = 128      # optional, default embedding_length / head_count
    rope_freq_base = 500000.0       # optional, default 10000
    rms_norm_eps = 1e-5
    alignment = 32                  # optional, default 32 (GGUF default)
    weight_type = "Q4_K"            # 2-D matrices; required without [[tensors]]
    norm_type = "F32"               # optional, 1-D norms, default F32
    tied_embeddings = false         # optional: no output.weight (token_embd is the head)
    files = []                      # optional: shard paths/URLs (ModelFacts.files)
    sha256 = "..."                  # optional

    [[tensors]]                     # optional, repeatable: an explicit index (then weight_type unused)
    name = "token_embd.weight"
    ggml_type = "Q4_K"
    shape = [4096, 128256]          # ggml order (ne0 first)
    shard = 0                       # optional, default 0
    offset = 0                      # optional, default: next aligned offset in its shard
    n_bytes = 295501824             # optional; checked against the type and shape when given

Synthesized order follows the spec of this module: ``token_embd``; per block ``attn_norm``,
``attn_q``, ``attn_k``, ``attn_v``, ``attn_output``, ``ffn_norm``, ``ffn_gate``, ``ffn_up``,
``ffn_down``; ``output_norm``; ``output``. A matrix whose row length is not a multiple of the weight
type's block size takes llama.cpp's fallback (``llama_tensor_get_type`` in llama-quant.cpp: Q4_K →
Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K/IQ* → IQ4_NL, then F16 if that does not fit either).

Every problem raises :class:`~pipeplan.errors.ModelFactsError` (code ``bad_model_facts``) whose
message names the file and the key (``model.block_count``, ``tensors[3].shape``...). Integers are
range-checked before anything is built from them: ``block_count`` <= :data:`MAX_BLOCKS`, widths, head
counts, vocabulary, context and tensor dimensions <= :data:`MAX_DIM`, byte sizes and offsets <= 2**63 - 1.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pipeplan.dialects.ggml_types import GGML_TYPE_SIZES
from pipeplan.errors import ModelFactsError
from pipeplan.files.paths import InputPathError, check_input_file
from pipeplan.frontend.llama_shapes import llama_tensor_shapes
from pipeplan.plan_types import ModelFacts, TensorInfo

__all__ = ["load_facts_toml", "loads_facts_toml", "dump_facts_toml", "synthesize_llama_tensors", "tensor_nbytes"]

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")
INT64_MAX = 2**63 - 1
"""Largest byte count, offset or tensor size (an i64 in the IR)."""
MAX_BLOCKS = 16384
"""Largest ``block_count``: far above any published model (Llama 3.1 405B has 126), small enough that the
synthesized index (nine tensors per block) stays a few MB."""
MAX_DIM = 2**31 - 1
"""Largest width, head count, vocabulary, context length or tensor dimension (an int32, as in llama.cpp)."""
MAX_ALIGNMENT = 1 << 30
MAX_SHARDS = 1 << 16
_REQUIRED_INT = ("block_count", "embedding_length", "head_count", "feed_forward_length", "vocab_size",
                 "context_length")
_OPTIONAL_INT = ("head_count_kv", "rope_dimension_count", "alignment")
_FLOATS = ("rope_freq_base", "rms_norm_eps")
_STRINGS = ("architecture", "name", "weight_type", "norm_type", "sha256")
_MODEL_KEYS = set(_REQUIRED_INT) | set(_OPTIONAL_INT) | set(_FLOATS) | set(_STRINGS) | {"tied_embeddings", "files"}
_TENSOR_KEYS = {"name", "ggml_type", "shape", "shard", "offset", "n_bytes"}
_FALLBACK = {
    "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
    **{t: "IQ4_NL" for t in ("Q2_K", "Q3_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M",
                             "IQ4_XS")},
    "TQ1_0": "Q4_0", "TQ2_0": "Q4_0",
}


def _pad(x: int, n: int) -> int:
    return ((x + n - 1) // n) * n


def _quant(type_name: str, where: str, src: str) -> tuple[int, int]:
    """(block size, bytes per block) of ggml type ``type_name``; ModelFactsError when unknown."""
    try:
        return GGML_TYPE_SIZES[type_name]
    except KeyError:
        known = ", ".join(GGML_TYPE_SIZES)
        raise ModelFactsError(f"{src}: {where} = {type_name!r} is not a ggml type (one of {known})",
                              where=f"{src}:{where}") from None


def tensor_nbytes(ggml_type: str, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of ``ggml_type`` with ggml-order ``shape`` (``ne0`` must be a block multiple)."""
    block, size = GGML_TYPE_SIZES[ggml_type]
    return math.prod(shape) // block * size


def _fit(ggml_type: str, ne0: int) -> str:
    """llama.cpp's type fallback for a row of ``ne0`` elements (see module docstring)."""

    def fits(t: str) -> bool:
        return ne0 % GGML_TYPE_SIZES[t][0] == 0

    if fits(ggml_type):
        return ggml_type
    fallback = _FALLBACK.get(ggml_type)
    return fallback if fallback is not None and fits(fallback) else "F16"


def synthesize_llama_tensors(
    *, block_count: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
    weight_type: str, norm_type: str = "F32", alignment: int = 32, tied: bool = False,
) -> tuple[TensorInfo, ...]:
    """The llama tensor index of a model with these hyperparameters, in one shard, offsets from 0.

    Shapes in ggml order from :func:`pipeplan.frontend.llama_shapes.llama_tensor_shapes`; matrices take
    ``weight_type`` (with llama.cpp's fallback), 1-D norms ``norm_type``; each offset is the previous
    tensor's end padded to ``alignment``. Raises ``KeyError`` for unknown type names (callers check).
    """
    shapes = llama_tensor_shapes(hidden, heads, kv_heads, ffn, vocab)
    names = ["token_embd.weight"]
    for b in range(block_count):
        names += [f"blk.{b}.{p}.weight" for p in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                     "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    names += ["output_norm.weight"] + ([] if tied else ["output.weight"])
    out, offset = [], 0
    for name in names:
        m = _BLOCK_RE.match(name)
        shape = shapes[_BLOCK_RE.sub("blk.N.", name)][0]
        ty = norm_type if len(shape) == 1 else _fit(weight_type, shape[0])
        n = tensor_nbytes(ty, shape)
        out.append(TensorInfo(name, ty, shape, 0, offset, n, int(m.group(1)) if m else None))
        offset = _pad(offset + n, alignment)
    return tuple(out)


class _Table:
    """Typed access to one TOML table, raising ModelFactsError naming ``<src>: <prefix><key>``."""

    def __init__(self, data: dict[str, Any], prefix: str, src: str, allowed: set[str]):
        self.data, self.prefix, self.src = data, prefix, src
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise self.error(unknown[0], f"is not a known key (known: {', '.join(sorted(allowed))})")

    def error(self, key: str, what: str) -> ModelFactsError:
        return ModelFactsError(f"{self.src}: {self.prefix}{key} {what}", where=f"{self.src}:{self.prefix}{key}")

    def pos_int(self, key: str, default: int | None = None, *, zero_ok: bool = False, hi: int = INT64_MAX) -> int:
        if key not in self.data:
            if default is None:
                raise self.error(key, "is missing (a positive integer is required)")
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and not zero_ok):
            raise self.error(key, f"= {v!r}, expected a {'non-negative' if zero_ok else 'positive'} integer")
        if v > hi:
            raise self.error(key, f"= {v} is out of range (at most {hi})")
        return v

    def pos_float(self, key: str, default: float | None = None) -> float:
        if key not in self.data:
            if default is None:
                raise self.error(key, "is missing (a positive number is required)")
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
            raise self.error(key, f"= {v!r}, expected a positive finite number")
        return float(v)

    def string(self, key: str, default: str | None = None) -> str:
        if key not in self.data:
            if default is None:
                raise self.error(key, "is missing (a string is required)")
            return default
        v = self.data[key]
        if not isinstance(v, str) or not v:
            raise self.error(key, f"= {v!r}, expected a non-empty string")
        return v


def _tensors(raw: Any, src: str, alignment: int) -> tuple[TensorInfo, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        raise ModelFactsError(f"{src}: tensors must be a non-empty array of tables ([[tensors]])",
                              where=f"{src}:tensors")
    out: list[TensorInfo] = []
    next_offset: dict[int, int] = {}
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        tab = _Table(entry, f"tensors[{i}].", src, _TENSOR_KEYS)
        name = tab.string("name")
        if name in seen:
            raise tab.error("name", f"= {name!r} appears twice")
        seen.add(name)
        ty = tab.string("ggml_type")
        block, _ = _quant(ty, f"tensors[{i}].ggml_type", src)
        shape = entry.get("shape")
        if (not isinstance(shape, list) or not 1 <= len(shape) <= 4
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= MAX_DIM for d in shape)):
            raise tab.error("shape", f"= {shape!r}, expected 1 to 4 positive integers of at most {MAX_DIM} (ggml order)")
        shape_t = tuple(shape)
        if shape_t[0] % block:
            raise tab.error("shape", f"= {shape!r}: row length {shape_t[0]} is not a multiple of {ty}'s block {block}")
        n = tensor_nbytes(ty, shape_t)
        if n > INT64_MAX:
            raise tab.error("shape", f"= {shape!r}: {ty} takes {n} bytes, more than 2**63 - 1")
        if "n_bytes" in entry and tab.pos_int("n_bytes") != n:
            raise tab.error("n_bytes", f"= {entry['n_bytes']!r}, but {ty} {list(shape_t)} takes {n} bytes")
        shard = tab.pos_int("shard", 0, zero_ok=True, hi=MAX_SHARDS)
        offset = tab.pos_int("offset", next_offset.get(shard, 0), zero_ok=True)
        if offset + n > INT64_MAX:
            raise tab.error("offset", f"= {offset}: the tensor ends past 2**63 - 1 bytes")
        if offset % alignment:
            raise tab.error("offset", f"= {offset} is not a multiple of model.alignment = {alignment}")
        next_offset[shard] = _pad(offset + n, alignment)
        m = _BLOCK_RE.match(name)
        out.append(TensorInfo(name, ty, shape_t, shard, offset, n, int(m.group(1)) if m else None))
    by_shard: dict[int, list[TensorInfo]] = {}
    for t in out:
        by_shard.setdefault(t.shard, []).append(t)
    for ts in by_shard.values():
        ts.sort(key=lambda t: t.offset)
        for a, b in zip(ts, ts[1:]):
            if b.offset < a.offset + a.n_bytes:
                raise ModelFactsError(
                    f"{src}: tensors {a.name!r} and {b.name!r} overlap in shard {a.shard} "
                    f"([{a.offset}, {a.offset + a.n_bytes}) and [{b.offset}, {b.offset + b.n_bytes}))",
                    where=f"{src}:tensors",
                )
    return tuple(out)


def loads_facts_toml(text: str, source: str = "<facts>") -> ModelFacts:
    """Parse facts TOML ``text`` (``source`` names it in messages) into :class:`ModelFacts`.

    Raises :class:`ModelFactsError` for TOML syntax errors, a missing/unknown/mistyped key, an
    unknown ggml type, head counts that do not divide, explicit tensors whose blocks disagree with
    ``block_count``, whose shapes contradict the hyperparameters, or whose ranges overlap.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelFactsError(f"{source}: not valid TOML: {exc}", where=source) from None
    extra = sorted(set(doc) - {"model", "tensors"})
    if extra:
        raise ModelFactsError(f"{source}: top-level key {extra[0]!r} is not known (expected [model], [[tensors]])",
                              where=f"{source}:{extra[0]}")
    if not isinstance(doc.get("model"), dict):
        raise ModelFactsError(f"{source}: model table ([model]) is missing", where=f"{source}:model")
    m = _Table(doc["model"], "model.", source, _MODEL_KEYS)
    arch = m.string("architecture", "llama")
    name = m.string("name", Path(source).stem if source != "<facts>" else "model")
    ints = {k: m.pos_int(k, hi=MAX_BLOCKS if k == "block_count" else MAX_DIM) for k in _REQUIRED_INT}
    hidden, heads = ints["embedding_length"], ints["head_count"]
    kv_heads = m.pos_int("head_count_kv", heads, hi=MAX_DIM)
    if hidden % heads:
        raise m.error("head_count", f"= {heads} does not divide model.embedding_length = {hidden}")
    if heads % kv_heads:
        raise m.error("head_count_kv", f"= {kv_heads} does not divide model.head_count = {heads}")
    alignment = m.pos_int("alignment", 32, hi=MAX_ALIGNMENT)
    if alignment & (alignment - 1):
        raise m.error("alignment", f"= {alignment}, expected a power of two")
    rope_dims = m.pos_int("rope_dimension_count", hidden // heads, hi=MAX_DIM)
    rope_base = m.pos_float("rope_freq_base", 10000.0)
    eps = m.pos_float("rms_norm_eps")
    tied = m.data.get("tied_embeddings", False)
    if not isinstance(tied, bool):
        raise m.error("tied_embeddings", f"= {tied!r}, expected true or false")
    files = m.data.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise m.error("files", f"= {files!r}, expected an array of strings")
    sha = m.string("sha256", "") or None
    ffn, vocab, blocks = ints["feed_forward_length"], ints["vocab_size"], ints["block_count"]

    if "tensors" in doc:
        if "weight_type" in m.data or "norm_type" in m.data or "tied_embeddings" in m.data:
            raise m.error("weight_type", "(and norm_type, tied_embeddings) cannot be combined with [[tensors]]")
        tensors = _tensors(doc["tensors"], source, alignment)
        present = sorted({t.block for t in tensors if t.block is not None})
        if present != list(range(blocks)):
            raise m.error("block_count", f"= {blocks} but [[tensors]] holds blocks {present[:8]}"
                          + ("..." if len(present) > 8 else ""))
        if arch == "llama":
            expected = llama_tensor_shapes(hidden, heads, kv_heads, ffn, vocab)
            for i, t in enumerate(tensors):
                want = expected.get(_BLOCK_RE.sub("blk.N.", t.name))
                if want is not None and t.shape != want[0]:
                    raise ModelFactsError(
                        f"{source}: tensors[{i}].shape = {list(t.shape)} for {t.name!r}, expected {list(want[0])} "
                        f"({want[1]})",
                        where=f"{source}:tensors[{i}].shape",
                    )
    else:
        weight_type = m.string("weight_type")
        _quant(weight_type, "model.weight_type", source)
        norm_type = m.string("norm_type", "F32")
        _quant(norm_type, "model.norm_type", source)
        if arch != "llama":
            raise m.error("architecture", f"= {arch!r}: only llama tensor indexes can be synthesized; "
                                           "list [[tensors]] explicitly")
        tensors = synthesize_llama_tensors(block_count=blocks, hidden=hidden, heads=heads, kv_heads=kv_heads,
                                           ffn=ffn, vocab=vocab, weight_type=weight_type, norm_type=norm_type,
                                           alignment=alignment, tied=tied)
    block_bytes = [0] * blocks
    for t in tensors:
        if t.block is not None:
            block_bytes[t.block] += t.n_bytes
    total = sum(t.n_bytes for t in tensors)
    if total > INT64_MAX:
        raise m.error("block_count", f"= {blocks}: the model's tensors take {total} bytes, more than 2**63 - 1")
    return ModelFacts(
        architecture=arch, name=name, block_count=blocks, embedding_length=hidden, head_count=heads,
        head_count_kv=kv_heads, feed_forward_length=ffn, vocab_size=vocab, context_length=ints["context_length"],
        rope_dimension_count=rope_dims, rope_freq_base=rope_base, rms_norm_eps=eps, alignment=alignment,
        tensors=tensors, block_bytes=tuple(block_bytes), files=tuple(files), sha256=sha,
    )


def load_facts_toml(path: str | os.PathLike[str]) -> ModelFacts:
    """Read a facts TOML file (see the module docstring) into :class:`ModelFacts`.

    Raises :class:`ModelFactsError` (code ``bad_model_facts``) naming the file and key; also when
    the file cannot be read or is not UTF-8.
    """
    p = Path(path)
    try:
        check_input_file(p, "facts TOML")
        text = p.read_text(encoding="utf-8")
    except InputPathError as exc:
        raise ModelFactsError(f"{p}: cannot read facts TOML: {exc.message}", where=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFactsError(f"{p}: cannot read facts TOML: {exc}", where=str(p)) from None
    return loads_facts_toml(text, str(p))


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # JSON string escapes are valid TOML basic-string escapes


def _toml_float(x: float) -> str:
    r = repr(float(x))
    return r if any(c in r for c in ".eEn") else r + ".0"  # 'inf'/'nan' contain 'n'


def dump_facts_toml(facts: ModelFacts) -> str:
    """TOML text for ``facts`` with an explicit ``[[tensors]]`` index, so that
    ``loads_facts_toml(dump_facts_toml(f)) == f`` for any facts this module or the GGUF reader made
    (floats are written with ``repr``, which round-trips exactly)."""
    lines = ["[model]", f"architecture = {_toml_str(facts.architecture)}", f"name = {_toml_str(facts.name)}"]
    for key in ("block_count", "embedding_length", "head_count", "head_count_kv", "feed_forward_length",
                "vocab_size", "context_length", "rope_dimension_count"):
        lines.append(f"{key} = {getattr(facts, key)}")
    lines.append(f"rope_freq_base = {_toml_float(facts.rope_freq_base)}")
    lines.append(f"rms_norm_eps = {_toml_float(facts.rms_norm_eps)}")
    lines.append(f"alignment = {facts.alignment}")
    if facts.files:
        lines.append("files = [" + ", ".join(_toml_str(f) for f in facts.files) + "]")
    if facts.sha256:
        lines.append(f"sha256 = {_toml_str(facts.sha256)}")
    for t in facts.tensors:
        lines += [
            "",
            "[[tensors]]",
            f"name = {_toml_str(t.name)}",
            f"ggml_type = {_toml_str(t.ggml_type)}",
            "shape = [" + ", ".join(str(d) for d in t.shape) + "]",
            f"shard = {t.shard}",
            f"offset = {t.offset}",
            f"n_bytes = {t.n_bytes}",
        ]
    return "\n".join(lines) + "\n"
