"""Benchmark: prefill and decode tokens/s of ONE StageExecutor over all blocks of a GGUF model.

Usage::

    .venv/bin/python bench/stage_compute.py [--model PATH] [--target cpu|reference] [--threads 1]
                                            [--decode 256] [--prefill 64] [--repeats 5] [--fuse] [--out PATH]

``--target``: the kernel table and its weight loader: ``cpu`` (default; weights kept in their GGUF types,
``pipeplan.runtime.kernels.cpu``) or ``reference`` (dequantized float32, torch kernels).

Decode: greedy, one token per ``forward`` (prefill of the first EXPECTED prompt first), timed over
``--decode`` steps including the argmax; best of ``--repeats`` runs (the machine is shared).
``decode_tok_s_cpu_time_best`` divides by this thread's CPU time instead of wall time (robust when
other processes share the cores; with ``--threads 1`` the two agree on an idle machine).
Prefill: one ``forward`` of ``--prefill`` tokens with ``last_only=True``, best of ``--repeats``.
Prints the figures and writes JSON (default ``bench/results/stage_compute.json``). The issue's
target is 1-stage decode >= 0.25x llama.cpp's single-thread tokens/s (~2300 tok/s here -> ~575).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "stories260K.gguf"
LLAMA_CPP_TOK_S = 2300.0  # llama.cpp single-thread decode on this machine (issue brief)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--prefill", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--target", choices=("cpu", "reference"), default="cpu")
    ap.add_argument("--fuse", action="store_true", help="fuse q/k/v and gate/up matmuls (fuse_matmuls; reference)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "stage_compute.json")
    args = ap.parse_args(argv)
    if args.fuse and args.target == "cpu":
        ap.error("--fuse concatenates float32 weights: use it with --target reference")

    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.loader import load_stage_weights, stage_slices
    from pipeplan.runtime.program import LlamaHParams, StageExecutor, build_stage_program

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    facts = read_model_facts(args.model)
    hp = LlamaHParams.from_facts(facts)
    if args.target == "cpu":
        from pipeplan.runtime.kernels import cpu as table

        loader = table.load_stage_weights
    else:
        from pipeplan.runtime.kernels import reference as table  # type: ignore[no-redef]

        loader = load_stage_weights
    weights = loader(facts.files, stage_slices(facts, 0, hp.n_layer, True, True))
    max_seq = max(args.prefill, 8 + args.decode) + 1
    ex = StageExecutor(hp, build_stage_program(hp, 0, hp.n_layer, True, True, max_seq), weights, max_seq, table,
                       fuse=args.fuse, num_threads=args.threads)
    load_s = time.perf_counter() - t0
    # the cpu table's executor takes numpy (it never imports torch), the reference's torch tensors
    as_ids = (lambda v: np.asarray(v, dtype=np.int64)) if args.target == "cpu" else torch.as_tensor
    prompt = as_ids([1, 403, 407, 261, 378])

    def decode_run() -> tuple[float, float]:
        ex.reset()
        logits = ex.forward(prompt, 0, last_only=True)
        tok = as_ids([int(logits[-1].argmax())])
        pos = len(prompt)
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(args.decode):
            logits = ex.forward(tok, pos)
            tok = as_ids([int(logits[-1].argmax())])
            pos += 1
        return args.decode / (time.perf_counter() - start), args.decode / (time.thread_time() - cpu)

    ids = as_ids(torch.randint(3, hp.n_vocab, (args.prefill,)).tolist())

    def prefill_run() -> float:
        ex.reset()
        start = time.perf_counter()
        ex.forward(ids, 0, last_only=True)
        return args.prefill / (time.perf_counter() - start)

    decode_run()  # warm-up
    prefill_run()
    runs = [decode_run() for _ in range(args.repeats)]
    decode = [r[0] for r in runs]
    decode_cpu = [r[1] for r in runs]
    prefill = [prefill_run() for _ in range(args.repeats)]
    result = {
        "benchmark": "stage_compute",
        "model": args.model.name,
        "blocks": hp.n_layer,
        "threads": args.threads,
        "fused_matmuls": args.fuse,
        "kernels": args.target,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "load_s": round(load_s, 4),
        "decode_tokens": args.decode,
        "decode_tok_s_best": round(max(decode), 1),
        "decode_tok_s_median": round(sorted(decode)[len(decode) // 2], 1),
        "decode_ms_per_token_best": round(1000.0 / max(decode), 4),
        "decode_tok_s_cpu_time_best": round(max(decode_cpu), 1),
        "load_average_1m": round(__import__("os").getloadavg()[0], 2),
        "prefill_tokens": args.prefill,
        "prefill_tok_s_best": round(max(prefill), 1),
        "prefill_tok_s_median": round(sorted(prefill)[len(prefill) // 2], 1),
        "llama_cpp_reference_tok_s": LLAMA_CPP_TOK_S,
        "decode_ratio_vs_llama_cpp": round(max(decode) / LLAMA_CPP_TOK_S, 3),
        "target_ratio": 0.25,
    }
    for k, v in result.items():
        print(f"{k:28s} {v}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
