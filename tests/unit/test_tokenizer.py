"""SPM tokenizer: EXPECTED prompt ids (stories260K, Gemma 3), llama.cpp reference corpora (tests/data), pieces,
stream decoding, malformed tokenizer metadata and encode errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gguf
import pytest
from gguf import GGUFValueType as VT
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeplan.runtime.tokenizer import ABSENT, SPMTokenizer, TokenizerError

from tests.conftest import STORIES, VOCAB_ONLY
from tests.ggufgen import write_variant


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


# --------------------------------------------------------------------------- llama.cpp reference corpus
DATA = Path(__file__).resolve().parent.parent / "data"
CORPORA = ("gemma3", "llama_spm", "stories260k")
"""tests/data/<name>_tokenizer_cases.json, made by tests/data/make_tokenizer_cases.py with llama-cpp-python."""


def _corpus(name: str) -> dict:
    return json.loads((DATA / f"{name}_tokenizer_cases.json").read_text())


@pytest.fixture(scope="module")
def gemma_tok(gemma3_path):
    return SPMTokenizer.from_gguf(gemma3_path)


@pytest.fixture(scope="module")
def vocab(gemma_tok, tok, llama_tok):
    return {"gemma3": gemma_tok, "llama_spm": llama_tok, "stories260k": tok}


def test_gemma3_vocabulary_and_prompt_ids(gemma_tok, gemma3_expected):
    """Gemma 3's 262144-piece SPM vocabulary (BOS 2, EOS 1, no space prefix) encodes every prompt of
    gemma3-expected.json to llama.cpp's ids and decodes llama.cpp's greedy ids to its text."""
    t = gemma_tok
    assert (t.n_vocab, t.bos_id, t.eos_id, t.unk_id) == (262144, 2, 1, 3)
    assert (t.add_space_prefix, t.add_bos, t.add_eos, t.chat_template) == (False, True, False, None)
    assert t.encode("Once upon a time") == [2, 14946, 3324, 496, 990]
    for case in gemma3_expected["cases"]:
        assert t.encode(case["prompt"]) == case["prompt_ids"]
        assert t.decode(case["greedy_ids"]) == case["text"]
    assert _corpus("gemma3")["sha256"] == gemma3_expected["sha256"]  # the corpus was made on this file


@pytest.mark.parametrize("name", CORPORA)
def test_corpus_matches_llama_cpp(vocab, name):
    """Each corpus string (whitespace runs, Unicode blocks, ZWJ emoji, combining marks, CJK, code, long
    words, control characters, special-looking text) encodes to llama.cpp's ids with special=False and
    with special=True, and the ids after BOS decode to llama.cpp's text, on Gemma 3 (no space prefix,
    user-defined whitespace pieces), llama's 32000-piece vocabulary and stories260K (space prefix)."""
    doc, t = _corpus(name), vocab[name]
    assert len(doc["cases"]) >= (200 if name != "stories260k" else 90)
    wrong = []
    for c in doc["cases"]:
        for special, ids_key, text_key in ((False, "ids", "decoded"), (True, "ids_special", "decoded_special")):
            want = c.get(ids_key, c["ids"])
            got = t.encode(c["text"], special=special)
            body = want[1:] if want[:1] == [t.bos_id] else want
            text = t.decode(body, special=special)
            if got != want or text != c.get(text_key, c["text"]):
                wrong.append((c["text"][:40], special, got[:12], want[:12], text[:40]))
    assert wrong == []
    assert any("ids_special" in c for c in doc["cases"]) and any("decoded" in c for c in doc["cases"])


@pytest.mark.parametrize("name", CORPORA)
def test_pieces_and_special_ids_match_llama_cpp(vocab, name):
    """token_to_piece of every id, with special false and true, hashes to the digest of llama.cpp's
    llama_token_to_piece; BOS/EOS, add_bos/add_eos and the end-of-generation ids are llama.cpp's."""
    doc, t = _corpus(name), vocab[name]
    for special, label in ((False, "plain"), (True, "special")):
        h = hashlib.sha256()
        for i in range(t.n_vocab):
            p = t.token_to_piece(i, special=special)
            h.update(len(p).to_bytes(4, "little") + p)
        assert h.hexdigest() == doc["pieces_sha256"][label], label
    assert (t.n_vocab, t.bos_id, t.eos_id, t.add_bos, t.add_eos) == (
        doc["n_vocab"], doc["bos_id"], doc["eos_id"], doc["add_bos"], doc["add_eos"])
    assert sorted(t.eog_ids) == doc["eog_ids"]


def test_gemma3_user_defined_and_control_pieces(gemma_tok):
    """User-defined pieces (whitespace runs, [multimodal], </s> aside: llama.cpp makes it control) are cut
    from the text before merging and decode verbatim; control pieces (<start_of_turn>) are text unless
    special=True, and decode to nothing unless special=True."""
    t = gemma_tok
    assert t.encode("a  b", add_bos=False) == [236746, 138, 236763] and t.tokens[138] == "  "
    assert t.encode("[multimodal]", add_bos=False) == [5] and t.decode([5]) == "[multimodal]"
    turn = "<start_of_turn>user\nhi<end_of_turn>"
    assert t.encode(turn, special=True) == [2, 105, 2364, 107, 2202, 106]
    assert 105 not in t.encode(turn) and t.decode(t.encode(turn)) == turn
    assert t.decode([105]) == "" and t.decode([105], special=True) == "<start_of_turn>"
    assert t.encode("</s>", add_bos=False) != [212] and {1, 106, 212} == t.eog_ids


def test_stream_decoder_holds_partial_utf8(gemma_tok):
    """Byte tokens of one emoji: the stream yields nothing until the sequence is complete; a cut
    sequence flushes as U+FFFD, like decode."""
    t = gemma_tok
    ids = t.encode("🦙!", add_bos=False)
    assert [t.tokens[i] for i in ids[:4]] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    s = t.stream()
    assert [s.push(i) for i in ids] == ["", "", "", "🦙", "!"] and s.flush() == ""
    s = t.stream()
    assert s.push(ids[0]) + s.push(ids[1]) == "" and s.flush() == "\ufffd" == t.decode(ids[:2])
    assert s.push(ids[4]) == "!"  # flushed decoder starts afresh
    with pytest.raises(TokenizerError) as e:
        s.push(t.n_vocab)
    assert e.value.code == "bad_token_id"


@given(st.lists(st.sampled_from([3, 4, 5, 1, 68, 200, 250, 259, 300, 400, 450, 500, 511]), max_size=24))
@settings(max_examples=100, deadline=None)
def test_stream_decoder_equals_decode(ids):
    """Pushing any sequence of byte/normal/control tokens one at a time, plus flush, gives decode(ids)."""
    t = _stories_tok()
    s = t.stream()
    assert "".join(s.push(i) for i in ids) + s.flush() == t.decode(ids)


_STORIES_TOK: list[SPMTokenizer] = []


def _stories_tok() -> SPMTokenizer:
    if not _STORIES_TOK:
        _STORIES_TOK.append(SPMTokenizer.from_gguf(STORIES))
    return _STORIES_TOK[0]


def test_special_token_flags():
    """llama.cpp's rules for add_bos/add_eos and the space prefix: encode(add_bos=True) adds BOS only
    when add_bos, EOS when add_eos; a text fragment after a cut-out piece gets the space prefix again."""
    pieces = ["<unk>", "<s>", "</s>", "\u2581a", "a", "<u>", "\u2581"]
    types = [2, 3, 3, 1, 1, 4, 1]
    t = SPMTokenizer(pieces, [0.0] * 7, types, bos_id=1, eos_id=2, unk_id=0, add_bos=False, add_eos=True)
    assert t.encode("a") == [3, 2] and t.encode("a", add_bos=False) == [3]
    assert t.encode("a<u>a", add_bos=False) == [3, 5, 3]
    assert t.encode("a<s>a", add_bos=False, special=True) == [3, 1, 3]
    t = SPMTokenizer(pieces, [0.0] * 7, types, bos_id=1, add_space_prefix=False)
    assert t.encode("a<u>a") == [1, 4, 5, 4] and t.add_bos


# --------------------------------------------------------------------------- malformed metadata (issue 11.11)
def _stories_tokens() -> list[str]:
    return list(_stories_tok().tokens)


def _dup_tokens() -> list[str]:
    toks = _stories_tokens()
    toks[300] = toks[301]
    return toks


def _zz_tokens() -> list[str]:
    toks = _stories_tokens()
    toks[toks.index("<0x41>")] = "<0xZZ>"
    return toks


def _utf8_tokens() -> list:
    toks: list = _stories_tokens()
    toks[300] = b"\xff\xfe"
    return toks


BAD_METADATA = {
    "string_bos": ({"tokenizer.ggml.bos_token_id": ("1", VT.STRING)},
                   "tokenizer.ggml.bos_token_id is a string, expected an integer"),
    "float_eos": ({"tokenizer.ggml.eos_token_id": (2.0, VT.FLOAT32)},
                  r"tokenizer.ggml.eos_token_id is a float \(FLOAT32\), expected an integer"),
    "bos_outside": ({"tokenizer.ggml.bos_token_id": 9999},
                    r"tokenizer.ggml.bos_token_id = 9999 is outside the vocabulary \[0, 512\)"),
    "byte_zz": ({"tokenizer.ggml.tokens": _zz_tokens}, "token 68 '<0xZZ>' has type BYTE but is not <0xHH>"),
    "float_types": ({"tokenizer.ggml.token_type": ([1.0] * 512, VT.ARRAY)},
                    "tokenizer.ggml.token_type is an array of FLOAT32, expected an array of integers"),
    "string_types": ({"tokenizer.ggml.token_type": (["1"] * 512, VT.ARRAY)},
                     "tokenizer.ggml.token_type is an array of STRING, expected an array of integers"),
    "short_scores": ({"tokenizer.ggml.scores": ([0.0] * 511, VT.ARRAY)}, "512 tokens, 511 scores, 512 types"),
    "long_types": ({"tokenizer.ggml.token_type": ([1] * 513, VT.ARRAY)}, "512 tokens, 512 scores, 513 types"),
    "nan_score": ({"tokenizer.ggml.scores": ([float("nan")] + [0.0] * 511, VT.ARRAY)}, "score of id 0 is NaN"),
    "missing_tokens": ({"tokenizer.ggml.tokens": None}, "missing key tokenizer.ggml.tokens"),
    "int_tokens": ({"tokenizer.ggml.tokens": (list(range(512)), VT.ARRAY)},
                   "tokenizer.ggml.tokens is an array of INT32, expected an array of strings"),
    "scalar_tokens": ({"tokenizer.ggml.tokens": ("abc", VT.STRING)},
                      "tokenizer.ggml.tokens is a string, expected an array of strings"),
    "duplicate_piece": ({"tokenizer.ggml.tokens": _dup_tokens}, r"appears twice in the vocabulary \(ids 300 and 301\)"),
    "not_utf8": ({"tokenizer.ggml.tokens": _utf8_tokens}, r"tokenizer.ggml.tokens\[300\] = b'\\xff\\xfe' is not UTF-8"),
    "missing_model": ({"tokenizer.ggml.model": None}, "missing key tokenizer.ggml.model"),
    "int_model": ({"tokenizer.ggml.model": (3, VT.UINT32)},
                  r"tokenizer.ggml.model is an integer \(UINT32\), expected a string"),
    "string_add_bos": ({"tokenizer.ggml.add_bos_token": ("yes", VT.STRING)},
                       "tokenizer.ggml.add_bos_token is a string, expected a bool"),
    "int_template": ({"tokenizer.chat_template": (7, VT.UINT32)},
                     r"tokenizer.chat_template is an integer \(UINT32\), expected a string"),
}


@pytest.mark.parametrize("case", list(BAD_METADATA))
def test_malformed_tokenizer_metadata_is_a_typed_error(tmp_path, case):
    """Each malformed tokenizer.* key of a GGUF is TokenizerError code bad_tokenizer naming the file, the
    key and what was expected (the CLI line ``error[bad_tokenizer]: ...``), never a traceback."""
    overrides, message = BAD_METADATA[case]
    overrides = {k: v() if callable(v) else v for k, v in overrides.items()}
    path = write_variant(STORIES, tmp_path / f"{case}.gguf", kv_overrides=overrides)
    with pytest.raises(TokenizerError, match=message) as e:
        SPMTokenizer.from_gguf(path)
    assert e.value.code == "bad_tokenizer" and str(path) in e.value.message
    assert e.value.one_line().startswith("error[bad_tokenizer]: ") and "\n" not in e.value.one_line()


def test_gguf_metadata_defaults_and_chat_template(tmp_path):
    """Absent ids (0xFFFFFFFF) keep llama.cpp's SPM defaults (BOS 1, EOS 2, UNK 0), absent flags its
    defaults (add_bos, space prefix); tokenizer.chat_template is returned as is."""
    template = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    path = write_variant(STORIES, tmp_path / "t.gguf", kv_overrides={
        "tokenizer.ggml.bos_token_id": ABSENT, "tokenizer.ggml.eos_token_id": None,
        "tokenizer.ggml.unknown_token_id": None, "tokenizer.chat_template": template})
    t = SPMTokenizer.from_gguf(path)
    assert (t.bos_id, t.eos_id, t.unk_id, t.add_bos, t.add_space_prefix) == (1, 2, 0, True, True)
    assert t.chat_template == template and _stories_tok().chat_template is None


def test_encode_and_vocabulary_errors(tmp_path):
    """A missing file and a non-GGUF keep the reader's code; a lone surrogate is bad_text; byte fallback
    without the byte token, and a vocabulary whose special ids or add_bos cannot hold, are bad_tokenizer."""
    with pytest.raises(TokenizerError, match="cannot read tokenizer") as e:
        SPMTokenizer.from_gguf(tmp_path / "missing.gguf")
    assert e.value.code == "file_not_found"
    (tmp_path / "d.gguf").write_bytes(b"NOPE" * 8)
    with pytest.raises(TokenizerError) as e:
        SPMTokenizer.from_gguf(tmp_path / "d.gguf")
    assert e.value.code == "not_gguf"
    with pytest.raises(TokenizerError, match="not valid Unicode at character 1") as e:
        _stories_tok().encode("a\ud800b")
    assert e.value.code == "bad_text"
    t = SPMTokenizer(["<unk>", "a"], [0.0, 0.0], [2, 1], add_space_prefix=False)
    with pytest.raises(TokenizerError, match=r"no byte token <0xC3> for 'é'") as e:
        t.encode("é")
    assert e.value.code == "bad_tokenizer" and t.encode("a") == [1]
    with pytest.raises(TokenizerError, match=r"bos id 5 outside the vocabulary \[0, 2\)"):
        SPMTokenizer(["<unk>", "a"], [0.0, 0.0], [2, 1], bos_id=5)
    with pytest.raises(TokenizerError, match="add_bos_token is true, but there is no BOS id"):
        SPMTokenizer(["<unk>", "a"], [0.0, 0.0], [2, 1], add_bos=True)
    with pytest.raises(TokenizerError, match="token types must be integers"):
        SPMTokenizer(["<unk>", "a"], [0.0, 0.0], [2.0, 1.5])


def test_cli_run_reports_bad_tokenizer(tmp_path, capsys, monkeypatch):
    """`pipeplan run` on a model whose bos_token_id is a string exits 2 with one error[bad_tokenizer] line."""
    from pipeplan.tools.cli import main

    monkeypatch.setenv("PIPEPLAN_CACHE", str(tmp_path / "cache"))
    path = write_variant(STORIES, tmp_path / "m.gguf", kv_overrides={"tokenizer.ggml.bos_token_id": ("1", VT.STRING)})
    rc = main(["run", str(path), "--prompt", "hi", "--backend", "inproc", "--max-tokens", "1", "--stages", "1",
               "--max-seq-len", "16", "--prefill-rows", "4"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error[bad_tokenizer]: ") and "bos_token_id is a string, expected an integer" in err
