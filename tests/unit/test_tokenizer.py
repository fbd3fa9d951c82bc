"""SPM tokenizer: EXPECTED prompt ids, decode to EXPECTED text, llama.cpp reference cases, errors."""

from __future__ import annotations

import gguf
import pytest
from pipeplan.runtime.tokenizer import SPMTokenizer, TokenizerError

from tests.conftest import VOCAB_ONLY


@pytest.fixture(scope="module")
def tok(stories_path):
    return SPMTokenizer.from_gguf(stories_path)


@pytest.fixture(scope="module")
def llama_tok():
    return SPMTokenizer.from_gguf(VOCAB_ONLY)


def test_prompt_ids_match_llama_cpp(tok, expected_cases):
    """encode(prompt) with BOS equals llama.cpp's prompt ids for all three EXPECTED prompts."""
    assert (tok.bos_id, tok.eos_id, tok.unk_id, tok.n_vocab) == (1, 2, 0, 512)
    for case in expected_cases:
        assert tok.encode(case["prompt"]) == case["prompt_ids"]
        assert tok.encode(case["prompt"], add_bos=False) == case["prompt_ids"][1:]


def test_decode_matches_expected_text(tok, expected_cases):
    """decode(greedy ids) equals llama.cpp's text; BOS decodes to nothing."""
    for case in expected_cases:
        assert tok.decode(case["greedy_ids"]) == case["text"]
    assert tok.decode([1]) == "" and tok.token_to_piece(1) == b""


def test_byte_fallback_roundtrip(tok):
    """Characters no piece covers fall back to <0xXX> byte tokens and decode back to the text
    (with the SPM space prefix)."""
    text = "héllo wörld 日本 🦙"
    ids = tok.encode(text, add_bos=False)
    byte_ids = [i for i in ids if tok.tokens[i].startswith("<0x")]
    assert len(byte_ids) >= len("日本🦙".encode()) and tok.decode(ids) == " " + text
    assert tok.encode("") == [1] and tok.encode("", add_bos=False) == []


# llama.cpp tests/test-tokenizer-0 cases for the llama SPM vocabulary (ggml-vocab-llama-spm.gguf)
LLAMA_SPM_CASES = {
    "Hello world": [15043, 3186],
    " Hello world": [29871, 15043, 3186],
    "Hello World!": [15043, 2787, 29991],
    "   Hello": [1678, 15043],
    "    Hello": [268, 15043],
    "    Hello\n    Hello": [268, 15043, 13, 1678, 15043],
    " this is 🦙.cpp": [29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223],
    " (": [29871, 313],
    "\n =": [29871, 13, 353],
    "' era": [525, 3152],
}


@pytest.mark.parametrize("text", list(LLAMA_SPM_CASES))
def test_llama_spm_reference_cases(llama_tok, text):
    """On the real 32000-piece llama vocabulary, encode matches llama.cpp's tokenizer test cases
    (merges by score, space escaping, byte fallback), and decode inverts it."""
    ids = llama_tok.encode(text, add_bos=False)
    assert ids == LLAMA_SPM_CASES[text]
    assert llama_tok.decode(ids) == " " + text


def _write_tok_gguf(path, *, model="llama", tokens=("a", "b"), drop=None):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if drop != "tokens":
        w.add_token_list(list(tokens))
    w.add_token_scores([0.0] * 2)
    w.add_token_types([1, 1])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_from_gguf_errors(tmp_path):
    """A non-SPM tokenizer model, a missing token list, mismatched arrays, an unreadable file and an
    out-of-range id are TokenizerError naming the problem."""
    with pytest.raises(TokenizerError, match="'gpt2' is not llama SPM"):
        SPMTokenizer.from_gguf(_write_tok_gguf(tmp_path / "a.gguf", model="gpt2"))
    with pytest.raises(TokenizerError, match="missing key tokenizer.ggml.tokens"):
        SPMTokenizer.from_gguf(_write_tok_gguf(tmp_path / "b.gguf", drop="tokens"))
    with pytest.raises(TokenizerError, match="3 tokens, 2 scores"):
        SPMTokenizer.from_gguf(_write_tok_gguf(tmp_path / "c.gguf", tokens=("a", "b", "c")))
    (tmp_path / "d.gguf").write_bytes(b"NOPE" * 8)
    with pytest.raises(TokenizerError, match="cannot read tokenizer"):
        SPMTokenizer.from_gguf(tmp_path / "d.gguf")
    t = SPMTokenizer(["<unk>", "a"], [0.0, 0.0], [2, 1])
    with pytest.raises(TokenizerError, match=r"token id 7 outside \[0, 2\)"):
        t.decode([1, 7])
