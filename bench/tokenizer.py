"""Tokenizer benchmark (issue 12 item 5): vocabulary load time and encode/decode speed on Gemma 3 (262144 SPM
pieces), pipeplan's :class:`~pipeplan.runtime.tokenizer.SPMTokenizer` vs llama.cpp's when available.

Measured, each the best and the median of ``--repeat`` runs in this process:

* ``load_s``: ``SPMTokenizer.from_gguf(path)`` / ``Llama(path, vocab_only=True)`` (target < 1 s);
* ``encode``: the 388 strings of ``tests/data/gemma3_tokenizer_cases.json`` one call each (``short``), and one
  document of ``--doc-kb`` KiB built from them (``document``), ``add_bos=True, special=False``: tokens/s;
* ``decode``: the document's ids back to text: tokens/s.

llama.cpp runs in this interpreter when ``import llama_cpp`` works, else in ``--llama-python PATH`` (an
interpreter with llama-cpp-python, e.g. /work/llama-venv/bin/python) as a subprocess running this file with
``--llama-only``; without either the table has pipeplan alone and says so. Both sides' ids are compared
(``ids_equal``). Prints a table and writes ``bench/results/tokenizer.json``.

Usage: ``python bench/tokenizer.py [--model PATH] [--repeat N] [--doc-kb K] [--llama-python PATH] [--out PATH]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE.parent / "tests" / "data" / "gemma3_tokenizer_cases.json"
DEFAULT_MODEL = Path(os.environ.get("PIPEPLAN_TEST_MODELS", Path.home() / ".cache" / "pipeplan" / "models")) \
    / "gemma-3-270m-q4_k_m.gguf"


def texts(doc_kb: int) -> tuple[list[str], str]:
    """The corpus strings and one document of about ``doc_kb`` KiB made by repeating them (newline-joined)."""
    strings = [c["text"] for c in json.loads(CASES.read_text())["cases"]]
    block = "\n".join(strings)
    doc = (block + "\n") * max(1, (doc_kb * 1024) // max(1, len(block.encode())))
    return strings, doc[: doc_kb * 1024]


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """(best, median) seconds of ``repeat`` calls and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def measure(side: str, model: Path, repeat: int, doc_kb: int) -> dict:
    """Load/encode/decode timings of one side (``pipeplan`` or ``llama.cpp``); ids hashed for comparison."""
    strings, doc = texts(doc_kb)
    if side == "pipeplan":
        from pipeplan.runtime.tokenizer import SPMTokenizer

        def load():
            return SPMTokenizer.from_gguf(model)

        best, med, tok = timed(load, repeat)

        def enc_short():
            return [tok.encode(s) for s in strings]

        def enc_doc():
            return tok.encode(doc)

        def dec(ids):
            return tok.decode(ids[1:])
    else:
        import llama_cpp

        def load():
            return llama_cpp.Llama(str(model), vocab_only=True, verbose=False)

        best, med, tok = timed(load, repeat)

        def enc_short():
            return [tok.tokenize(s.encode(), add_bos=True, special=False) for s in strings]

        def enc_doc():
            return tok.tokenize(doc.encode(), add_bos=True, special=False)

        def dec(ids):
            return tok.detokenize(ids[1:]).decode("utf-8", errors="replace")

    s_best, s_med, short_ids = timed(enc_short, repeat)
    d_best, d_med, doc_ids = timed(enc_doc, repeat)
    x_best, x_med, _ = timed(lambda: dec(doc_ids), repeat)
    n_short = sum(len(i) for i in short_ids)
    n_doc = len(doc_ids)
    h = hashlib.sha256(json.dumps([short_ids, doc_ids]).encode()).hexdigest()
    return {"side": side, "load_s_best": best, "load_s_median": med,
            "encode_short_tokens": n_short, "encode_short_tok_s": n_short / s_best, "encode_short_s_median": s_med,
            "encode_doc_tokens": n_doc, "encode_doc_tok_s": n_doc / d_best, "encode_doc_s_median": d_med,
            "decode_doc_tok_s": n_doc / x_best, "decode_doc_s_median": x_med, "ids_sha256": h}


def llama_side(args: argparse.Namespace) -> tuple[dict | None, str]:
    """llama.cpp's row, measured in-process or through ``--llama-python``; (None, reason) when neither works."""
    try:
        import llama_cpp  # noqa: F401

        return measure("llama.cpp", args.model, args.repeat, args.doc_kb), "in-process"
    except ImportError:
        pass
    if not args.llama_python:
        return None, "llama_cpp not importable and no --llama-python given: pipeplan alone"
    cmd = [args.llama_python, str(Path(__file__).resolve()), "--llama-only", "--model", str(args.model),
           "--repeat", str(args.repeat), "--doc-kb", str(args.doc_kb)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return None, f"--llama-python failed: {p.stderr.strip().splitlines()[-1:] or p.returncode}"
    return json.loads(p.stdout.strip().splitlines()[-1]), f"subprocess {args.llama_python}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--doc-kb", type=int, default=64)
    ap.add_argument("--llama-python", default=None, help="interpreter with llama-cpp-python for the llama.cpp row")
    ap.add_argument("--llama-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "tokenizer.json")
    args = ap.parse_args(argv)
    if args.llama_only:
        print(json.dumps(measure("llama.cpp", args.model, args.repeat, args.doc_kb)))
        return 0
    ours = measure("pipeplan", args.model, args.repeat, args.doc_kb)
    ref, how = llama_side(args)
    rows = [ours] + ([ref] if ref else [])
    cols = [("load_s_best", "load s", ".3f"), ("load_s_median", "load med", ".3f"),
            ("encode_short_tok_s", "enc short tok/s", ",.0f"), ("encode_doc_tok_s", "enc doc tok/s", ",.0f"),
            ("decode_doc_tok_s", "dec doc tok/s", ",.0f")]
    print(f"{'side':<10}" + "".join(f"{h:>17}" for _, h, _ in cols))
    for r in rows:
        print(f"{r['side']:<10}" + "".join(f"{format(r[k], f):>17}" for k, _, f in cols))
    result = {"model": str(args.model), "repeat": args.repeat, "doc_kb": args.doc_kb, "llama_cpp": how,
              "machine": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
              "loadavg_1min": os.getloadavg()[0], "rows": rows,
              "load_under_1s": ours["load_s_median"] < 1.0}
    if ref:
        result["ids_equal"] = ours["ids_sha256"] == ref["ids_sha256"]
        result["ratio_vs_llama_cpp"] = {k: ours[k] / ref[k] for k, _, _ in cols}
        print(f"ids equal: {result['ids_equal']}; pipeplan / llama.cpp: "
              + ", ".join(f"{h} {result['ratio_vs_llama_cpp'][k]:.2f}x" for k, h, _ in cols))
    else:
        print(f"llama.cpp: {how}")
    print(f"load under 1 s (median): {result['load_under_1s']} (1-min load average {result['loadavg_1min']:.1f} "
          f"on {result['cpus']} CPUs)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
