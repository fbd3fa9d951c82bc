"""Hypothesis fuzzing of the GGUF reader: truncations and byte flips in stories260K's header and
tensor index. Every outcome is a valid ModelFacts or one of our GGUFError subclasses — never another
exception type, never a partial result (the contract in errors.py / frontend/gguf_facts.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import gguf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeplan.errors import GGUFError
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.plan_types import ModelFacts

from tests.conftest import STORIES

SOURCE = STORIES.read_bytes()
_READER = gguf.GGUFReader(STORIES)
HEADER_END = int(_READER.data_offset)  # metadata + tensor index end here (14176)
INDEX_START = int(_READER.tensors[0].field.offset)  # the tensor index starts here
del _READER
TYPED = {c.code for c in GGUFError.__subclasses__()} | {"file_not_found"}
_SEEN: dict[str, int] = {}

FUZZ = settings(max_examples=150, deadline=None,
                database=None)


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="gguf_fuzz") as d:
        yield Path(d) / "fuzz.gguf"


def _check(path: Path, data: bytes) -> str:
    """Write ``data``, read it, assert the outcome is ModelFacts or a typed GGUFError; return its code."""
    path.write_bytes(data)
    try:
        facts = read_model_facts(path)
    except GGUFError as err:
        assert type(err) is not GGUFError or err.code == "file_not_found", err
        assert err.code in TYPED, err.code
        assert str(path) in err.message and "\n" not in err.one_line()
        code = err.code
    else:
        assert isinstance(facts, ModelFacts)
        size = len(data)
        assert len(facts.block_bytes) == facts.block_count
        assert all(t.offset + t.n_bytes <= size for t in facts.tensors)
        code = "ok"
    _SEEN[code] = _SEEN.get(code, 0) + 1
    return code


@FUZZ
@given(cut=st.one_of(st.integers(0, HEADER_END), st.integers(0, len(SOURCE) - 1)))
def test_truncation(scratch, cut):
    """Any prefix of the file: a cut anywhere before the end is rejected as a typed error."""
    code = _check(scratch, SOURCE[:cut])
    assert code != "ok"
    if cut >= HEADER_END:
        assert code == "truncated"


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, HEADER_END - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_byte_flips_in_header(scratch, flips):
    """1-4 bytes of the header/tensor index overwritten with arbitrary values."""
    buf = bytearray(SOURCE)
    for pos, val in flips:
        buf[pos] = val
    _check(scratch, bytes(buf))


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(INDEX_START, HEADER_END - 1), st.integers(0, 255)), min_size=1, max_size=3))
def test_byte_flips_in_tensor_index(scratch, flips):
    """1-3 bytes of the tensor index (names, dims, type ids, offsets) overwritten."""
    buf = bytearray(SOURCE)
    for pos, val in flips:
        buf[pos] = val
    _check(scratch, bytes(buf))


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(0, 23), st.integers(0, 7)), min_size=1, max_size=3, unique=True),
    cut=st.none() | st.integers(24, HEADER_END),
)
def test_fixed_header_bit_flips_and_cuts(scratch, flips, cut):
    """Bit flips in the fixed 24-byte header (magic, version, tensor/kv counts), optionally with a cut:
    the counts then claim far more than the file holds and must fail fast and typed."""
    buf = bytearray(SOURCE)
    for pos, bit in flips:
        buf[pos] ^= 1 << bit
    code = _check(scratch, bytes(buf[:cut] if cut is not None else buf))
    if any(pos < 4 for pos, _ in flips):
        assert code == "not_gguf"


def test_fuzz_reached_several_error_kinds():
    """The campaigns above are not vacuous: they produced several distinct typed outcomes (run in order)."""
    if not _SEEN:
        pytest.skip("run together with the fuzz tests")
    assert len(set(_SEEN) - {"ok"}) >= 3, _SEEN
