"""GGUF header → ModelFacts: real files, generated variants, shard sets, and one crafted file per error code.

RP-AR-6 (model facts the planner can trust): every check here is one the planner relies on to reject
facts inconsistent with a stage layout — block count vs blk.N tensors, tensor byte ranges, shapes.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import gguf
import pytest
from gguf import GGUFValueType as VT
from pipeplan.errors import (
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
from pipeplan.frontend.gguf_facts import read_model_facts, sha256_file

from tests.conftest import TINY_RANDOM, VOCAB_ONLY
from tests.ggufgen import write_random_llama, write_split, write_variant

# --------------------------------------------------------------------------- helpers


def _tensor_info_offsets(path: Path, name: str) -> tuple[int, int]:
    """File offsets of the ggml type id (u32) and the data offset (u64) of tensor ``name`` in the index."""
    r = gguf.GGUFReader(path)
    t = next(t for t in r.tensors if t.name == name)
    nd = len(t.shape)
    type_at = t.field.offset + 8 + len(name.encode()) + 4 + 8 * nd
    return type_at, type_at + 4


def _kv_value_offset(path: Path, key: str) -> int:
    """File offset of the (scalar) value of metadata ``key``."""
    f = gguf.GGUFReader(path).fields[key]
    return f.offset + 8 + len(key.encode()) + 4


def _patched(src: Path, dst: Path, at: int, data: bytes) -> Path:
    buf = bytearray(src.read_bytes())
    buf[at : at + len(data)] = data
    dst.write_bytes(bytes(buf))
    return dst


def _rejects(path: Path, cls: type[GGUFError], code: str, *names: str, file: Path | None = None) -> GGUFError:
    """Read ``path``, expect ``cls``/``code`` and a message naming the file (``file``: the offending
    shard, default ``path``) and every ``names``."""
    with pytest.raises(cls) as info:
        read_model_facts(path)
    err = info.value
    assert err.code == code
    assert str(file or path) in err.message, err.message
    for n in names:
        assert n in err.message, (n, err.message)
    assert "\n" not in err.one_line() and err.one_line().startswith(f"error[{code}]: ")
    return err


@pytest.fixture(scope="session")
def gen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf_facts")


@pytest.fixture(scope="session")
def stories_facts(stories_path: Path):
    return read_model_facts(stories_path)


@pytest.fixture(scope="session")
def split3(stories_path: Path, gen_dir: Path) -> list[Path]:
    return write_split(stories_path, gen_dir / "split3", 3)


# --------------------------------------------------------------------------- good files


def test_stories_hyperparameters(stories_facts, stories_path):
    """RP-AR-6: stories260K facts match its llama.cpp metadata (DESIGN §6)."""
    f = stories_facts
    assert (f.architecture, f.block_count, f.embedding_length, f.head_count, f.head_count_kv) == ("llama", 5, 64, 8, 4)
    assert (f.feed_forward_length, f.vocab_size, f.context_length) == (172, 512, 2048)
    assert f.rope_dimension_count == 8 and f.rope_freq_base == 10000.0
    assert f.rms_norm_eps == pytest.approx(1e-5)
    assert f.alignment == 32 and f.head_dim == 8
    assert f.files == (str(stories_path),) and f.sha256 is None
    assert {t.ggml_type for t in f.tensors} == {"F32"}
    assert f.tensor("output.weight") is not None
    assert len(f.tensors) == 3 + 9 * 5


def test_stories_byte_ranges_match_gguf_reader(stories_facts, stories_path):
    """RP-AR-6: byte ranges are absolute, inside the file, disjoint, and equal GGUFReader's own."""
    size = stories_path.stat().st_size
    ref = {t.name: t for t in gguf.GGUFReader(stories_path).tensors}
    assert [t.name for t in stories_facts.tensors] == list(ref)
    spans = []
    for t in stories_facts.tensors:
        r = ref[t.name]
        assert (t.offset, t.n_bytes, t.shape, t.shard) == (r.data_offset, r.n_bytes, tuple(r.shape.tolist()), 0)
        assert 0 < t.offset and t.offset + t.n_bytes <= size
        assert t.offset % stories_facts.alignment == 0
        spans.append((t.offset, t.offset + t.n_bytes))
    spans.sort()
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_stories_block_totals(stories_facts):
    """RP-AR-6: block_bytes[i] is the sum of blk.i.* bytes; blocks + globals = all tensor bytes."""
    f = stories_facts
    assert len(f.block_bytes) == f.block_count
    for b in range(f.block_count):
        own = [t for t in f.tensors if t.block == b]
        assert len(own) == 9 and all(t.name.startswith(f"blk.{b}.") for t in own)
        assert f.block_bytes[b] == sum(t.n_bytes for t in own)
    globals_ = sum(t.n_bytes for t in f.tensors if t.block is None)
    assert sum(f.block_bytes) + globals_ == sum(t.n_bytes for t in f.tensors)
    # F32 llama block: 4 * (2*h*h + 2*kv*hd*h + 3*ffn*h + 2*h)
    h, ffn, kvd = 64, 172, 4 * 8
    assert f.block_bytes[0] == 4 * (2 * h * h + 2 * kvd * h + 3 * ffn * h + 2 * h)


def test_tiny_random_norms_after_matrices():
    """The shared 1-block random model (norm tensors after its matrices, F16 matrices) reads fine."""
    f = read_model_facts(TINY_RANDOM)
    assert (f.block_count, f.embedding_length, f.head_count, f.head_count_kv, f.vocab_size) == (1, 8, 2, 2, 32000)
    assert f.name == "LLaMA v2"
    names = [t.name for t in f.tensors]
    assert names.index("blk.0.attn_norm.weight") > names.index("blk.0.ffn_down.weight")
    assert f.tensor("blk.0.attn_q.weight").ggml_type == "F16"
    assert f.tensor("blk.0.attn_norm.weight").ggml_type == "F32"
    assert f.block_bytes == (4 * 128 + 3 * 512 + 2 * 32,)


@pytest.mark.parametrize("ggml_type", ["F16", "BF16", "Q8_0", "Q4_0"])
def test_quantized_variant_types(stories_path, gen_dir, ggml_type):
    """Variants: 2-D matrices get the type (F16 when ne0 is not a block multiple), norms stay F32,
    sizes follow GGML_QUANT_SIZES, and hyperparameters are unchanged."""
    f = read_model_facts(write_variant(stories_path, gen_dir / f"q_{ggml_type}.gguf", ggml_type=ggml_type))
    block, _ = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[ggml_type]]
    for t in f.tensors:
        if len(t.shape) == 1:
            assert t.ggml_type == "F32", t
        elif t.shape[0] % block:
            assert t.ggml_type == "F16", t
        else:
            assert t.ggml_type == ggml_type, t
        bs, ts = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t.ggml_type]]
        assert t.n_bytes == t.shape[0] * t.shape[1] // bs * ts if len(t.shape) == 2 else t.n_bytes == 4 * t.shape[0]
    assert f.tensor("blk.0.ffn_down.weight").ggml_type == ("F16" if block > 1 else ggml_type)
    assert (f.block_count, f.vocab_size, f.feed_forward_length) == (5, 512, 172)


def test_tied_variant(stories_path, gen_dir):
    """drop_output: no output.weight; the last stage then owns token_embd.weight (tied head)."""
    f = read_model_facts(write_variant(stories_path, gen_dir / "tied.gguf", drop_output=True))
    assert f.tensor("output.weight") is None and len(f.tensors) == 47
    last = {t.name for t in f.tensors_for_stage(3, 5, first=False, last=True)}
    assert "token_embd.weight" in last and "output_norm.weight" in last


def test_split_facts_equal_whole(stories_facts, split3):
    """RP-AR-6: a 3-shard gguf-split set has the same facts as the whole file except shard/offset/files."""
    assert [p.name for p in split3] == [f"stories260K-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    for given in split3:  # any shard opens the set
        f = read_model_facts(given)
        assert f.files == tuple(str(p) for p in split3)
        strip = lambda fa: {k: v for k, v in fa.__dict__.items() if k not in ("tensors", "files")}  # noqa: E731
        assert strip(f) == strip(stories_facts)
        assert [(t.name, t.ggml_type, t.shape, t.n_bytes, t.block) for t in f.tensors] == [
            (t.name, t.ggml_type, t.shape, t.n_bytes, t.block) for t in stories_facts.tensors
        ]
        assert [t.shard for t in f.tensors] == [0] * 16 + [1] * 16 + [2] * 16
        for t in f.tensors:
            assert t.offset + t.n_bytes <= Path(f.files[t.shard]).stat().st_size


def test_random_llama_facts(gen_dir):
    """write_random_llama: facts equal the arguments; Q8_0 matrices; norms-last order reads fine."""
    p = write_random_llama(gen_dir / "rand.gguf", blocks=3, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=300,
                           ctx=128, ggml_type="Q8_0", tensor_order="norms_last", seed=3)
    f = read_model_facts(p)
    assert (f.block_count, f.embedding_length, f.head_count, f.head_count_kv) == (3, 64, 4, 2)
    assert (f.feed_forward_length, f.vocab_size, f.context_length, f.rope_dimension_count) == (96, 300, 128, 16)
    assert f.tensor("blk.2.ffn_up.weight").ggml_type == "Q8_0"
    assert [t.name for t in f.tensors][-1].endswith("norm.weight")
    r = gguf.GGUFReader(p)
    assert len(r.fields["tokenizer.ggml.tokens"].contents()) == 300
    no_vocab = read_model_facts(write_random_llama(gen_dir / "rand_nv.gguf", blocks=1, hidden=32, heads=2,
                                                   kv_heads=1, ffn=64, vocab=100, with_vocab=False))
    assert no_vocab.vocab_size == 100 and no_vocab.head_dim == 16


def test_sha256_file(stories_path, tmp_path):
    """sha256_file matches hashlib over the bytes; a missing file is a typed error."""
    import hashlib

    assert sha256_file(stories_path) == hashlib.sha256(stories_path.read_bytes()).hexdigest()
    with pytest.raises(GGUFError) as info:
        sha256_file(tmp_path / "nope.gguf")
    assert info.value.code == "file_not_found"


# --------------------------------------------------------------------------- rejections, one per code


def test_missing_file(tmp_path):
    """A path that does not exist is a GGUFError (file_not_found) naming it."""
    p = tmp_path / "absent.gguf"
    _rejects(p, GGUFError, "file_not_found")


def test_not_gguf_magic(stories_path, tmp_path):
    """not_gguf: wrong magic; also a text file and an empty file."""
    _rejects(_patched(stories_path, tmp_path / "magic.gguf", 0, b"GGML"), NotGGUFError, "not_gguf", "magic")
    text = tmp_path / "readme.gguf"
    text.write_text("hello, not a model\n")
    _rejects(text, NotGGUFError, "not_gguf")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    _rejects(empty, NotGGUFError, "not_gguf")


def test_not_gguf_version(stories_path, tmp_path):
    """not_gguf: an unsupported GGUF version (99)."""
    _rejects(_patched(stories_path, tmp_path / "v99.gguf", 4, struct.pack("<I", 99)), NotGGUFError, "not_gguf",
             "version 99")


def test_truncated_header(stories_path, tmp_path):
    """truncated: the file ends inside the metadata."""
    p = tmp_path / "cut_header.gguf"
    p.write_bytes(stories_path.read_bytes()[:200])
    _rejects(p, TruncatedGGUFError, "truncated")


def test_truncated_data(stories_path, tmp_path):
    """truncated: the header is whole but the last tensor's data is cut; the message names it."""
    p = tmp_path / "cut_data.gguf"
    p.write_bytes(stories_path.read_bytes()[:-100])  # inside the last tensor (256 B)
    last = gguf.GGUFReader(stories_path).tensors[-1].name
    _rejects(p, TruncatedGGUFError, "truncated", last)


def test_unknown_tensor_type(stories_path, tmp_path):
    """unknown_tensor_type: ggml type id 99 patched into blk.1.attn_v.weight's index entry."""
    at, _ = _tensor_info_offsets(stories_path, "blk.1.attn_v.weight")
    p = _patched(stories_path, tmp_path / "type99.gguf", at, struct.pack("<I", 99))
    _rejects(p, UnknownTensorTypeError, "unknown_tensor_type", "blk.1.attn_v.weight", "99")


def test_bad_alignment(stories_path, tmp_path):
    """bad_alignment: general.alignment = 3; and a zero alignment."""
    for value in (3, 0):
        p = write_variant(stories_path, tmp_path / f"align{value}.gguf",
                          kv_overrides={"general.alignment": (value, VT.UINT32)})
        _rejects(p, BadAlignmentError, "bad_alignment", "general.alignment")


def test_vocab_only():
    """vocab_only: llama.cpp's ggml-vocab-llama-spm.gguf (0 tensors, claims 32 blocks)."""
    _rejects(VOCAB_ONLY, VocabOnlyError, "vocab_only", "vocab")


@pytest.mark.parametrize("claimed", [6, 4])
def test_block_count_mismatch(stories_path, tmp_path, claimed):
    """RP-AR-6: llama.block_count changed to 6 (a block missing) or 4 (a block beyond the count)."""
    p = write_variant(stories_path, tmp_path / f"bc{claimed}.gguf", kv_overrides={"llama.block_count": claimed})
    err = _rejects(p, BlockCountMismatchError, "block_count_mismatch", "llama.block_count", str(claimed))
    assert ("missing blocks [5]" if claimed == 6 else "beyond the count [4]") in err.message


def test_offset_past_eof(stories_path, tmp_path):
    """inconsistent_tensor_index: a tensor offset pointing past end of file (index no longer dense)."""
    _, off_at = _tensor_info_offsets(stories_path, "blk.2.ffn_up.weight")
    p = _patched(stories_path, tmp_path / "past_eof.gguf", off_at, struct.pack("<Q", 1 << 30))
    _rejects(p, InconsistentTensorIndexError, "inconsistent_tensor_index", "blk.2.ffn_up.weight", "outside the file")


def test_overlapping_ranges(stories_path, tmp_path):
    """inconsistent_tensor_index: blk.0.attn_k.weight's offset set to blk.0.attn_q.weight's."""
    r = gguf.GGUFReader(stories_path)
    q_rel = next(t for t in r.tensors if t.name == "blk.0.attn_q.weight").data_offset - r.data_offset
    _, off_at = _tensor_info_offsets(stories_path, "blk.0.attn_k.weight")
    p = _patched(stories_path, tmp_path / "overlap.gguf", off_at, struct.pack("<Q", q_rel))
    _rejects(p, InconsistentTensorIndexError, "inconsistent_tensor_index", "blk.0.attn_q.weight",
             "blk.0.attn_k.weight", "overlaps")


def test_misaligned_offset(stories_path, tmp_path):
    """inconsistent_tensor_index: a tensor offset that is not a multiple of general.alignment."""
    r = gguf.GGUFReader(stories_path)
    rel = next(t for t in r.tensors if t.name == "output.weight").data_offset - r.data_offset
    _, off_at = _tensor_info_offsets(stories_path, "output.weight")
    p = _patched(stories_path, tmp_path / "misaligned.gguf", off_at, struct.pack("<Q", rel + 4))
    _rejects(p, InconsistentTensorIndexError, "inconsistent_tensor_index", "output.weight", "alignment")


def test_embedding_shape_vs_vocab(stories_path, tmp_path):
    """RP-AR-6: llama.vocab_size = 600 contradicts token_embd.weight [64, 512]."""
    p = write_variant(stories_path, tmp_path / "vocab600.gguf", kv_overrides={"llama.vocab_size": 600})
    _rejects(p, InconsistentTensorIndexError, "inconsistent_tensor_index", "token_embd.weight", "600")


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (None, "missing"),
        (("64", VT.STRING), "STRING"),
    ],
)
def test_missing_key(stories_path, tmp_path, override, needle):
    """missing_key: llama.embedding_length absent or a string (a zero is invalid_hparams, below)."""
    p = write_variant(stories_path, tmp_path / "nokey.gguf", kv_overrides={"llama.embedding_length": override})
    _rejects(p, MissingKeyError, "missing_key", "llama.embedding_length", needle)


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("llama.embedding_length", 0, "= 0"),
        ("llama.attention.head_count", 0, "= 0"),
        ("llama.attention.head_count_kv", 0, "= 0"),
        ("llama.context_length", 0, "= 0"),
        ("llama.block_count", 0, "= 0"),
        ("llama.block_count", (0xFFFFFFFF, VT.UINT32), "= 4294967295"),
        ("llama.block_count", 1000, "= 1000 is out of range"),
        ("llama.attention.layer_norm_rms_epsilon", (float("nan"), VT.FLOAT32), "= nan"),
        ("llama.attention.layer_norm_rms_epsilon", (-1e-5, VT.FLOAT32), "= -1e-05"),
    ],
)
def test_hparam_out_of_range(stories_path, tmp_path, name, value, needle):
    """QA 6b/6c: a present hyperparameter that is zero, NaN, negative or out of range is invalid_hparams
    naming the key and its value (not missing_key, not a MemoryError wrapped as not_gguf)."""
    p = write_variant(stories_path, tmp_path / "hp.gguf", kv_overrides={name: value})
    _rejects(p, InvalidHParamsError, "invalid_hparams", name, needle)


def test_missing_architecture(stories_path, tmp_path):
    """missing_key: the general.architecture key renamed in place (same length) so it is absent."""
    at = gguf.GGUFReader(stories_path).fields["general.architecture"].offset
    p = _patched(stories_path, tmp_path / "noarch.gguf", at + 8, b"general.architecturX")
    _rejects(p, MissingKeyError, "missing_key", "general.architecture")


def test_split_missing_shard(split3, tmp_path):
    """inconsistent_shards: the second of three shards is missing; the message names it."""
    d = tmp_path / "s"
    d.mkdir()
    for p in (split3[0], split3[2]):
        shutil.copy(p, d / p.name)
    err = _rejects(d / split3[0].name, InconsistentShardsError, "inconsistent_shards", split3[1].name)
    assert "missing" in err.message


def test_split_count_mismatch(split3, tmp_path):
    """inconsistent_shards: shard 2 says split.count = 4 while the set has 3."""
    d = tmp_path / "s"
    d.mkdir()
    for p in split3:
        shutil.copy(p, d / p.name)
    bad = d / split3[1].name
    os.chmod(bad, 0o644)
    _patched(bad, bad, _kv_value_offset(bad, "split.count"), struct.pack("<H", 4))
    _rejects(d / split3[0].name, InconsistentShardsError, "inconsistent_shards", "split.count = 4", file=bad)


def test_split_order_and_names(split3, tmp_path):
    """inconsistent_shards: shards 2 and 3 swapped on disk (split.no out of order); a first shard renamed
    so its name no longer follows <prefix>-NNNNN-of-MMMMM.gguf."""
    d = tmp_path / "swap"
    d.mkdir()
    shutil.copy(split3[0], d / split3[0].name)
    shutil.copy(split3[1], d / split3[2].name)
    shutil.copy(split3[2], d / split3[1].name)
    _rejects(d / split3[0].name, InconsistentShardsError, "inconsistent_shards", "split.no = 2",
             file=d / split3[1].name)
    lone = tmp_path / "model.gguf"
    shutil.copy(split3[0], lone)
    _rejects(lone, InconsistentShardsError, "inconsistent_shards", "split.count")


def test_tensor_shape_vs_hyperparameters(stories_path, tmp_path):
    """RP-AR-6: blk.1.attn_k.weight's second dim patched 32 -> 16 contradicts head_count_kv * head_dim."""
    type_at, _ = _tensor_info_offsets(stories_path, "blk.1.attn_k.weight")
    ne1_at = type_at - 8  # dims are u64 ne0, ne1 right before the type id
    assert struct.unpack("<Q", stories_path.read_bytes()[ne1_at : ne1_at + 8]) == (32,)
    p = _patched(stories_path, tmp_path / "kdim.gguf", ne1_at, struct.pack("<Q", 16))
    _rejects(p, InconsistentTensorIndexError, "inconsistent_tensor_index", "blk.1.attn_k.weight", "[64, 32]")


def test_head_counts_must_divide(stories_path, tmp_path):
    """RP-AR-6: head_count_kv = 3 does not divide head_count = 8: invalid_hparams (not missing_key: the
    keys are present, their values do not fit together), naming the head keys (issue 11 item 2)."""
    p = write_variant(stories_path, tmp_path / "kv3.gguf", kv_overrides={"llama.attention.head_count_kv": 3})
    _rejects(p, InvalidHParamsError, "invalid_hparams", "llama.attention.head_count_kv = 3")


def test_files_are_absolute_for_relative_paths(stories_path, monkeypatch):
    """RP-AR-6: ``ModelFacts.files`` holds absolute paths even when the GGUF is named relative to the cwd."""
    monkeypatch.chdir(stories_path.parent)
    f = read_model_facts(stories_path.name)
    assert f.files == (str(stories_path),)
