"""Loader: map only a stage's byte ranges (whole file and gguf-split shards), typed failures."""

from __future__ import annotations

import dataclasses

import gguf
import numpy as np
import pytest
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.runtime.dequant import DequantError
from pipeplan.runtime.loader import (
    GRANULE,
    LoaderError,
    load_stage_weights,
    map_tensor_bytes,
    map_tensors,
    stage_slices,
)

from tests.ggufgen import write_split

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def facts(stories_path):
    return read_model_facts(stories_path)


@pytest.fixture(scope="module")
def reader(stories_path):
    return gguf.GGUFReader(stories_path)


def _reader_array(reader, name):
    t = next(t for t in reader.tensors if t.name == name)
    return np.asarray(t.data).reshape(tuple(int(d) for d in reversed(t.shape)))


def test_whole_model_values(stories_path, facts, reader):
    """WL-L-1: every tensor loads as float32 torch in numpy order, equal to GGUFReader's data."""
    w = load_stage_weights([stories_path], stage_slices(facts, 0, 5, True, True))
    assert len(w) == 48 and set(w) == {t.name for t in facts.tensors}
    assert tuple(w["token_embd.weight"].shape) == (512, 64)
    assert tuple(w["blk.0.attn_k.weight"].shape) == (32, 64)
    assert tuple(w["blk.0.ffn_down.weight"].shape) == (64, 172)
    for name in ("token_embd.weight", "blk.3.ffn_down.weight", "output_norm.weight"):
        assert np.array_equal(w[name].numpy(), _reader_array(reader, name))


def test_stage_maps_only_its_bytes(stories_path, facts):
    """WL-A-4 / WL-L-1: a middle stage [1, 3) maps only its tensors' bytes: at most one allocation
    granule of rounding per mapped region, far less than the file, and only its tensors are loaded."""
    size = stories_path.stat().st_size
    slices = stage_slices(facts, 1, 3, False, False)
    w = load_stage_weights([stories_path], slices)
    assert set(w) == {s.name for s in slices} and all(n.startswith(("blk.1.", "blk.2.")) for n in w)
    own = sum(s.n_bytes for s in slices)
    assert w.tensor_bytes == own == facts.block_bytes[1] + facts.block_bytes[2]
    assert own <= w.mapped_bytes <= own + GRANULE * len(w.regions)
    assert w.mapped_bytes < 0.4 * size
    lo = min(s.offset for s in slices)
    hi = max(s.offset + s.n_bytes for s in slices)
    assert all(lo - GRANULE < r.offset and r.offset + r.length <= hi for r in w.regions)
    # the last stage (block 4 + head) does not map the embedding or other blocks
    last = load_stage_weights([stories_path], stage_slices(facts, 4, 5, False, True))
    assert "token_embd.weight" not in last and "output.weight" in last
    assert last.mapped_bytes <= last.tensor_bytes + GRANULE * len(last.regions)


def test_map_tensor_bytes_raw_views(stories_path, facts):
    """map_tensor_bytes returns uint8 views of exactly each tensor's n_bytes."""
    sl = stage_slices(facts, 0, 1, True, False)
    views = map_tensor_bytes([stories_path], sl)
    with open(stories_path, "rb") as f:
        for s in sl:
            assert views[s.name].dtype == np.uint8 and views[s.name].size == s.n_bytes
            f.seek(s.offset)
            assert views[s.name].tobytes() == f.read(s.n_bytes)


def test_shards_load_equal_whole(tmp_path_factory, stories_path, facts):
    """WL-L-2: loading a range from 3 gguf-split shards gives the same tensors as the whole file,
    and maps bytes of only the shards holding the range."""
    paths = write_split(stories_path, tmp_path_factory.mktemp("split"), 3)
    sf = read_model_facts(paths[0])
    assert len(sf.files) == 3
    sl = stage_slices(sf, 3, 5, False, True)
    w = load_stage_weights(sf.files, sl)
    ref = load_stage_weights([stories_path], stage_slices(facts, 3, 5, False, True))
    assert set(w) == set(ref)
    for n in ref:
        assert np.array_equal(w[n].numpy(), ref[n].numpy())
    shards_used = {s.shard for s in sl}
    assert {r.file for r in w.regions} == {str(sf.files[i]) for i in shards_used}


def test_missing_file_is_download_error(tmp_path, facts):
    """WL-F-1: a missing weight file is LoaderError kind download naming the path."""
    with pytest.raises(LoaderError) as e:
        load_stage_weights([tmp_path / "nope.gguf"], stage_slices(facts, 0, 1, True, False))
    assert e.value.kind == "download" and e.value.code == "loader:download" and "nope.gguf" in str(e.value)


def test_out_of_file_range_is_parse_error(stories_path, facts):
    """WL-F-2: a tensor range past the end of the file (or a shard with no file) is LoaderError kind
    parse naming the tensor; nothing is returned."""
    sl = list(stage_slices(facts, 0, 1, True, False))
    size = stories_path.stat().st_size
    sl[1] = dataclasses.replace(sl[1], offset=size - 100)
    with pytest.raises(LoaderError, match=rf"tensor {sl[1].name}: bytes .* lie outside") as e:
        map_tensors([stories_path], sl)
    assert e.value.kind == "parse"
    with pytest.raises(LoaderError, match="shard 2 but only 1 file"):
        map_tensors([stories_path], [dataclasses.replace(sl[0], shard=2)])


def test_size_mismatch_and_bad_type_are_parse_errors(stories_path, facts):
    """WL-F-2: n_bytes disagreeing with type x shape, or an unknown ggml type, faults as parse."""
    s = stage_slices(facts, 0, 1, False, False)[0]
    with pytest.raises(LoaderError, match="needs .* bytes, index says") as e:
        load_stage_weights([stories_path], [dataclasses.replace(s, n_bytes=s.n_bytes - 4)])
    assert e.value.kind == "parse"
    with pytest.raises(DequantError, match="unknown ggml type 'Q3_X'") as e2:
        load_stage_weights([stories_path], [dataclasses.replace(s, ggml_type="Q3_X")])
    assert e2.value.kind == "parse"
