"""Model-facts TOML: shipped examples, synthesized llama tensor index, dump/load round trip, rejections.

RP-AR-6: facts a user states without a GGUF are checked for internal consistency (block count vs
tensors, head counts, shapes) before any planner sees them.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
from pipeplan.errors import ModelFactsError
from pipeplan.frontend.facts_toml import dump_facts_toml, load_facts_toml, loads_facts_toml
from pipeplan.frontend.gguf_facts import read_model_facts

from tests.conftest import REPO

EXAMPLES = REPO / "examples"

BASE = """
[model]
name = "tiny"
block_count = 2
embedding_length = 64
head_count = 8
head_count_kv = 4
feed_forward_length = 172
vocab_size = 512
context_length = 256
rms_norm_eps = 1e-5
weight_type = "Q8_0"
"""


def _size(ty: str, shape: tuple[int, ...]) -> int:
    block, per = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[ty]]
    n = 1
    for d in shape:
        n *= d
    return n // block * per


@pytest.fixture(scope="module")
def llama70b():
    return load_facts_toml(EXAMPLES / "llama3-70b.toml")


def test_llama3_8b_example():
    """RP-AR-6: the 8B example: 32 blocks of 9 tensors, F16 matrices, F32 norms, llama 3 hyperparameters."""
    f = load_facts_toml(EXAMPLES / "llama3-8b.toml")
    assert (f.block_count, f.embedding_length, f.head_count, f.head_count_kv) == (32, 4096, 32, 8)
    assert (f.feed_forward_length, f.vocab_size, f.context_length) == (14336, 128256, 8192)
    assert f.rope_freq_base == 500000.0 and f.rms_norm_eps == 1e-5 and f.head_dim == 128
    assert f.files == () and len(f.tensors) == 1 + 32 * 9 + 2
    assert {t.ggml_type for t in f.tensors if len(t.shape) == 2} == {"F16"}
    assert {t.ggml_type for t in f.tensors if len(t.shape) == 1} == {"F32"}
    h, kv, ffn = 4096, 8 * 128, 14336
    assert f.block_bytes == (2 * (2 * h * h + 2 * kv * h + 3 * ffn * h) + 2 * 4 * h,) * 32
    assert f.tensor("blk.31.attn_k.weight").shape == (4096, 1024)


def test_llama3_70b_example(llama70b):
    """RP-AR-6: the 70B example: 80 blocks, Q4_K matrices, block totals of 481,361,920 bytes."""
    f = llama70b
    assert (f.block_count, f.embedding_length, f.head_count, f.head_count_kv, f.feed_forward_length) == (
        80, 8192, 64, 8, 28672)
    assert len(f.block_bytes) == 80 and len(set(f.block_bytes)) == 1
    h, kv, ffn = 8192, 8 * 128, 28672
    per_block = _size("Q4_K", (h, h)) * 2 + _size("Q4_K", (h, kv)) * 2 + _size("Q4_K", (h, ffn)) * 3 + 2 * 4 * h
    assert f.block_bytes[0] == per_block == 481_361_920
    total = sum(t.n_bytes for t in f.tensors)
    assert sum(f.block_bytes) + sum(t.n_bytes for t in f.tensors if t.block is None) == total
    assert 39e9 < total < 41e9  # ~4.5 bits per weight of 70.6 B parameters


def test_synthesized_offsets_are_aligned_and_disjoint(llama70b):
    """Synthesized offsets: consecutive, each the previous end padded to the alignment, in spec order."""
    ts = llama70b.tensors
    assert ts[0].name == "token_embd.weight" and ts[0].offset == 0
    assert [t.name for t in ts[1:10]] == [f"blk.0.{p}.weight" for p in (
        "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    assert [t.name for t in ts[-2:]] == ["output_norm.weight", "output.weight"]
    for a, b in zip(ts, ts[1:]):
        assert b.offset == -(-(a.offset + a.n_bytes) // 32) * 32


@pytest.mark.parametrize("name", ["llama3-8b.toml", "llama3-70b.toml"])
def test_examples_round_trip(name):
    """dump_facts_toml then loads_facts_toml gives back equal facts (explicit [[tensors]] form)."""
    f = load_facts_toml(EXAMPLES / name)
    text = dump_facts_toml(f)
    assert "[[tensors]]" in text
    assert loads_facts_toml(text, name) == f
    assert dump_facts_toml(loads_facts_toml(text, name)) == text


def test_gguf_facts_round_trip(stories_path):
    """Facts read from stories260K (absolute offsets, files) survive a TOML round trip unchanged."""
    f = read_model_facts(stories_path)
    assert loads_facts_toml(dump_facts_toml(f), "stories") == f


def test_fallback_type_and_tied():
    """ffn_down (ne0 = 172) cannot hold Q8_0 blocks of 32 and falls back to F16; tied drops output.weight;
    rope defaults follow llama.cpp (hidden/heads, 10000)."""
    f = loads_facts_toml(BASE + "tied_embeddings = true\n")
    assert f.tensor("blk.0.ffn_down.weight").ggml_type == "F16"
    assert f.tensor("blk.0.ffn_up.weight").ggml_type == "Q8_0"
    assert f.tensor("output.weight") is None and f.tensor("token_embd.weight") is not None
    assert f.rope_dimension_count == 8 and f.rope_freq_base == 10000.0 and f.alignment == 32
    q4k = loads_facts_toml(BASE.replace('"Q8_0"', '"Q4_K"'))
    assert q4k.tensor("blk.1.ffn_down.weight").ggml_type == "F16"  # Q4_K -> Q5_0 (block 32) -> F16
    assert q4k.tensor("blk.1.attn_q.weight").ggml_type == "Q5_0"  # ne0 = 64: Q4_K (256) -> Q5_0 fits


def test_matches_stories_gguf(stories_path):
    """A facts TOML stating stories260K's hyperparameters synthesizes the same tensor set, shapes and
    block totals as the real file (F32 everywhere)."""
    text = BASE.replace("block_count = 2", "block_count = 5").replace("context_length = 256",
                                                                      "context_length = 2048")
    f = loads_facts_toml(text.replace('"Q8_0"', '"F32"'))
    g = read_model_facts(stories_path)
    assert {(t.name, t.shape, t.n_bytes) for t in f.tensors} == {(t.name, t.shape, t.n_bytes) for t in g.tensors}
    assert f.block_bytes == g.block_bytes


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[model\nname=1", "not valid TOML"),
        ("name = 'x'\n", "model"),
        (BASE.replace("block_count = 2\n", ""), "model.block_count"),
        (BASE.replace("block_count = 2", "block_count = -2"), "model.block_count"),
        (BASE.replace("block_count = 2", "block_count = true"), "model.block_count"),
        (BASE.replace("block_count = 2", "blocks = 2"), "model.blocks"),
        (BASE.replace('"Q8_0"', '"Q9_9"'), "model.weight_type"),
        (BASE.replace('weight_type = "Q8_0"', ""), "model.weight_type"),
        (BASE.replace("head_count_kv = 4", "head_count_kv = 3"), "model.head_count_kv"),
        (BASE.replace("head_count = 8", "head_count = 7"), "model.head_count"),
        (BASE.replace("rms_norm_eps = 1e-5", "rms_norm_eps = 'small'"), "model.rms_norm_eps"),
        (BASE + "alignment = 24\n", "model.alignment"),
        (BASE + "tied_embeddings = 1\n", "model.tied_embeddings"),
        (BASE + "[extra]\n", "extra"),
    ],
)
def test_malformed_model_table(text, key):
    """bad_model_facts: syntax errors and each kind of bad [model] key, named in the message."""
    with pytest.raises(ModelFactsError) as info:
        loads_facts_toml(text, "bad.toml")
    assert info.value.code == "bad_model_facts"
    assert key in info.value.message and "bad.toml" in info.value.message


EXPLICIT = """
[model]
block_count = 1
embedding_length = 64
head_count = 8
feed_forward_length = 256
vocab_size = 32
context_length = 64
rms_norm_eps = 1e-5
"""


def _explicit(**over) -> str:
    """An explicit one-block index as TOML, with per-tensor overrides {name: {key: value or None to drop}}."""
    f = loads_facts_toml(EXPLICIT + 'weight_type = "F16"\n')
    text = dump_facts_toml(f)
    blocks = text.split("\n[[tensors]]\n")
    out = [blocks[0]]
    for b in blocks[1:]:
        name = b.split('"')[1]
        for k, v in over.get(name, {}).items():
            b = "\n".join(line for line in b.split("\n") if not line.startswith(k + " "))
            b += f"\n{k} = {v}\n" if v is not None else "\n"
        out.append(b)
    return "\n[[tensors]]\n".join(out)


def test_explicit_tensors_ok():
    """An explicit [[tensors]] index loads; offsets may be omitted (next aligned offset)."""
    f = loads_facts_toml(_explicit())
    assert f.block_count == 1 and len(f.tensors) == 12 and f.block_bytes[0] > 0
    text = "\n".join(line for line in _explicit().split("\n") if not line.startswith("offset"))
    g = loads_facts_toml(text)
    assert [t.offset for t in g.tensors] == [t.offset for t in f.tensors]


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"blk.0.attn_k.weight": {"shape": "[64, 16]", "n_bytes": None}}, "tensors[3].shape"),
        ({"blk.0.attn_k.weight": {"n_bytes": 5}}, "tensors[3].n_bytes"),
        ({"blk.0.attn_k.weight": {"ggml_type": '"Q1_9"'}}, "tensors[3].ggml_type"),
        ({"blk.0.attn_k.weight": {"ggml_type": '"Q4_K"', "n_bytes": None}}, "tensors[3].shape"),
        ({"blk.0.attn_k.weight": {"offset": 0}}, "overlap"),
        ({"blk.0.attn_k.weight": {"offset": 3}}, "tensors[3].offset"),
        ({"blk.0.attn_k.weight": {"name": '"blk.1.attn_k.weight"'}}, "model.block_count"),
        ({"blk.0.attn_k.weight": {"name": '"blk.0.attn_q.weight"'}}, "appears twice"),
        ({"blk.0.attn_k.weight": {"colour": '"red"'}}, "tensors[3].colour"),
    ],
)
def test_malformed_tensors(over, needle):
    """RP-AR-6 / bad_model_facts: explicit tensors that contradict the hyperparameters or each other."""
    with pytest.raises(ModelFactsError) as info:
        loads_facts_toml(_explicit(**over), "t.toml")
    assert info.value.code == "bad_model_facts"
    assert needle in info.value.message, info.value.message


def test_unreadable_file(tmp_path: Path):
    """bad_model_facts: a missing file and a non-UTF-8 file name the path."""
    with pytest.raises(ModelFactsError, match="cannot read"):
        load_facts_toml(tmp_path / "nope.toml")
    p = tmp_path / "bin.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ModelFactsError) as info:
        load_facts_toml(p)
    assert str(p) in info.value.message
