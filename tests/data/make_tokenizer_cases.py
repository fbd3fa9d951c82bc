"""Make the tokenizer reference data: llama.cpp's token ids for a corpus of tricky strings.

Never run by the tests (they read the JSON it writes). Run it with an interpreter that has
llama-cpp-python (a reference tool, not a project dependency)::

    /work/llama-venv/bin/python tests/data/make_tokenizer_cases.py \\
        --vocab gemma3=/root/.cache/pipeplan/models/gemma-3-270m-q4_k_m.gguf \\
        --vocab llama_spm=../shared/models/parser-inputs/ggml-vocab-llama-spm.gguf \\
        --vocab stories260k=../shared/models/stories260K.gguf

For each ``NAME=PATH`` it writes ``tests/data/NAME_tokenizer_cases.json``: the vocabulary facts llama.cpp
reports (size, BOS/EOS, add_bos/add_eos, end-of-generation ids), a sha256 over every token's piece
(``llama_token_to_piece`` with special false and true), and per corpus string the ids of
``Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=True, special=False)`` (``ids``), those
with ``special=True`` (``ids_special``, only where they differ) and the text the pieces of the ids after
BOS decode to (``decoded`` / ``decoded_special``, only where it differs from the string). The corpus
(:func:`corpus`) is built here, deterministically (fixed seeds): whitespace runs, Unicode blocks and
categories, emoji with ZWJ / modifiers / flags / tags, combining marks, mixed scripts, code, long words,
control characters and special-looking text. The small ``stories260k`` vocabulary gets every 4th string.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WS = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003",
      "\t \t", " \t\n", "\u200b", "        "]

HAND = [
    "Once upon a time", "The capital of France is", "def fibonacci(n):", "Water boils at", "In 1492,",
    "Hello world", " Hello world", "Hello World!", "   Hello", "    Hello", "    Hello\n    Hello", " (", "\n =",
    "' era", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "3333333", "33333333333",
    " this is 🦙.cpp", "w048 7tuijk dsdfhu", "нещо на Български", "កាន់តែពិសេសអាចខលចេញ",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "", " ", "  ", "   ", "\t", "  \t", "\n", "\n\n", "\n\n\n", "\t\n", "Hello\n", " Hello ", "Hello  ", "a  b",
    "a   b", "a\tb", "a\nb", "a\n\nb", "a\r\nb", "trailing space ", "trailing spaces   ", "  leading", "x" + " " * 40 + "y",
    "\n" * 40, "\t" * 35, " " * 70, "mixed \t \n \t ws", "3.14159 2.71828 1,000,000 1e-9 0x1F 0b1010 -42",
    "I've been 'here' and \"there\"; it's ok... right?!", "e.g. i.e. etc. Mr. Dr. U.S.A.",
    "https://example.com/path?q=1&r=two#frag", "user@example.org", "C:\\Windows\\System32", "~/.bashrc && ls -la | grep x",
    "日本語のテキストです。", "中文文本，包括标点符号！", "한국어 텍스트입니다.", "ภาษาไทยไม่มีช่องว่าง", "العربية من اليمين إلى اليسار",
    "עברית עם ניקוד: שָׁלוֹם", "हिन्दी भाषा में पाठ", "বাংলা লিপি", "Ελληνικά κείμενα", "Русский текст с ё и Ё",
    "Tiếng Việt có dấu", "Ümlaut Öl Äpfel straße", "ﬁ ligature ﬀ ﬃ", "Ⅻ ① ⑴ ⒈ ℃ ℉ № ™", "½ ¾ ⅓ ⁴ ₂ √ ∑ ∫ ∞ ≠ ≤ ≥",
    "e\u0301 vs \u00e9", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f"
    "\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357"
    "\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b"
    "\u031d\u0333",
    "🦙", "🦙🦙🦙", "👍🏽", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇯🇵🇫🇷🇺🇸", "1️⃣ #️⃣ *️⃣", "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "❤️ ❤ ♥", "☺️ ☺", "🧑‍🤝‍🧑", "😀😃😄😁😆😅😂🤣", "\U0001f9ec\U0001fae0\U0001fab8", "emoji👍inside🦙words",
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<s>", "</s>", "<bos>Hello", "Hello<eos>", "<start_of_turn>",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>\n", "<unused0><unused12>",
    "[multimodal]", "<start_of_image>", "<end_of_image>", "x<start_of_image>y", "<0x41>", "<0x0A>", "<0xZZ>",
    "\u2581", "\u2581\u2581a", "\u2581 \u2581", "a\u2581b", "<s> <s>", "  <start_of_turn> model  ",
    "\x00", "a\x00b", "\x01\x02\x1f", "\x7f", "\x1b[31mred\x1b[0m", "\ufeffBOM", "\u2028line\u2029para",
    "\u0085next", "\ue000\uf8ff private", "\U0010fffd", "\U0001d11e\U0001d122 music", "\U00013000\U00013001",
    "\U00020000\U0002a6d6 ext-B", "\uff21\uff22\uff23 ｶﾀｶﾅ", "\ufe0f\ufe0e", "\u202eRTL override\u202c",
    "supercalifragilisticexpialidocious", "Donaudampfschifffahrtsgesellschaftskapitän",
    "pneumonoultramicroscopicsilicovolcanoconiosis", "a" * 300, "ab" * 150, "Ω" * 100, "日" * 120, "🦙" * 60,
    "import numpy as np\n\ndef f(x: int) -> int:\n    return x ** 2  # square\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "<table><tr><td class=\"x\">cell</td></tr></table>", "<div>\n  <p>Hi &amp; bye</p>\n</div>",
    "SELECT * FROM users WHERE id = 1 AND name LIKE '%x%';", "for i in $(seq 1 10); do echo $i; done",
    "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.\\w{2,}$", "# Title\n\n- item 1\n- item 2\n\n```py\nprint(1)\n```",
    "    indented code\n        more\n\tand tab", "x=1;y=2;z=x+y", "a->b, a=>b, a::b, a..b, a...b, a?.b, a??b",
    "λx.λy.x y", "∀x∈ℝ: x²≥0", "f(x) = ∫₀^∞ e^{-x} dx",
]

BLOCKS = [  # (first, last) code points of Unicode blocks / categories to draw random strings from
    (0x0021, 0x007E), (0x00A1, 0x00FF), (0x0100, 0x017F), (0x0180, 0x024F), (0x0250, 0x02AF), (0x0370, 0x03FF),
    (0x0400, 0x04FF), (0x0530, 0x058F), (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0900, 0x097F), (0x0980, 0x09FF),
    (0x0B80, 0x0BFF), (0x0E00, 0x0E7F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F),
    (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x257F), (0x2600, 0x26FF), (0x2700, 0x27BF),
    (0x2800, 0x28FF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xE000, 0xF8FF), (0xFB00, 0xFB4F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x10000, 0x1007F), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F),
    (0x0300, 0x036F), (0x0000, 0x001F),
]

WORDS = ["the", "cat", "naïve", "café", "日本", "中文", "한국", "мир", "γάτα", "שלום", "مرحبا", "नमस्ते", "ไทย",
         "🦙", "👨‍👩‍👧", "e\u0301", "x86_64", "3.14", "--flag", "<tag>", "\u2581", "<bos>", "[multimodal]", "über"]


def corpus() -> list[str]:
    """The corpus: the hand-written strings, whitespace around words, random strings from each block of
    :data:`BLOCKS` (with spaces), combining-mark stacks, and random mixes of words and whitespace runs."""
    rng = random.Random(20240612)
    out = list(HAND)
    for ws in WS:
        out += [f"{ws}hello{ws}world{ws}", f"x{ws}日本{ws}🦙"]
    for lo, hi in BLOCKS:
        for _ in range(3):
            cps = [rng.randint(lo, hi) for _ in range(rng.randint(1, 12))]
            cps = [c for c in cps if not 0xD800 <= c <= 0xDFFF]
            s = "".join(chr(c) for c in cps)
            if rng.random() < 0.5:
                k = rng.randrange(len(s) + 1)
                s = s[:k] + rng.choice(WS) + s[k:]
            out.append(s)
    for _ in range(10):
        base = rng.choice("aeiouAEIOUnmxyz")
        out.append(base + "".join(chr(rng.randint(0x0300, 0x036F)) for _ in range(rng.randint(1, 8))) + " " + base)
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(2, 14)):
            parts.append(rng.choice(WORDS))
            parts.append(rng.choice(WS) if rng.random() < 0.4 else " ")
        out.append("".join(parts[: rng.randint(1, len(parts))]))
    long_en = " ".join(rng.choice(["lorem", "ipsum", "dolor", "sit", "amet,", "consectetur", "adipiscing", "elit."])
                       for _ in range(200))
    out += [long_en, "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(500)),
            "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(400))]
    return list(dict.fromkeys(out))  # drop repeats, keep order


def _piece(llama_cpp, vocab, tid: int, special: bool) -> bytes:
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, tid, buf, len(buf), 0, special)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, tid, buf, len(buf), 0, special)
    return buf.raw[:n]


def make(name: str, path: Path, strings: list[str], cmd: str) -> dict:
    import llama_cpp

    model = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    vocab = model._model.vocab
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    pieces = {sp: [_piece(llama_cpp, vocab, i, sp) for i in range(n_vocab)] for sp in (False, True)}
    digest = {}
    for sp, label in ((False, "plain"), (True, "special")):
        h = hashlib.sha256()
        for p in pieces[sp]:
            h.update(len(p).to_bytes(4, "little") + p)
        digest[label] = h.hexdigest()
    bos = llama_cpp.llama_vocab_bos(vocab)
    cases = []
    for s in strings:
        ids = model.tokenize(s.encode("utf-8"), add_bos=True, special=False)
        ids_sp = model.tokenize(s.encode("utf-8"), add_bos=True, special=True)
        case: dict = {"text": s, "ids": ids}
        if ids_sp != ids:
            case["ids_special"] = ids_sp
        for key, got, sp in (("decoded", ids, False), ("decoded_special", ids_sp, True)):
            body = got[1:] if got[:1] == [bos] else got
            text = b"".join(pieces[sp][i] for i in body).decode("utf-8", errors="replace")
            if text != s:
                case[key] = text
        cases.append(case)
    return {
        "vocab": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "made_by": cmd,
        "reference": f"llama-cpp-python {llama_cpp.__version__}: Llama(path, vocab_only=True).tokenize(text.encode(), "
                     "add_bos=True, special=False|True); pieces by llama_token_to_piece(vocab, id, buf, n, 0, special)",
        "n_vocab": n_vocab,
        "bos_id": bos,
        "eos_id": llama_cpp.llama_vocab_eos(vocab),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog_ids": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "pieces_sha256": digest,
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    args = ap.parse_args(argv)
    strings = corpus()
    cmd = "python tests/data/make_tokenizer_cases.py " + " ".join(f"--vocab {v}" for v in args.vocab)
    for spec in args.vocab:
        name, _, path = spec.partition("=")
        subset = strings[::4] if name == "stories260k" else strings
        doc = make(name, Path(path), subset, cmd)
        out = args.out_dir / f"{name}_tokenizer_cases.json"
        out.write_text(json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n")
        print(f"{out}: {len(doc['cases'])} cases, {out.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
