"""Decode step cost of a micro-batch of R sequences against R single-sequence steps, in one stage executor.

One :class:`~pipeplan.runtime.program.StageExecutor` holds the whole model (CPU table, one thread, R KV-cache
slots, each prefilled with a prompt of ``--prompt-tokens`` ids); then, ``--repeat`` times, R decode steps one
sequence at a time (``forward`` per slot) and one micro-batched step of the R sequences
(``forward_segments``), each timed by wall clock and by this process's CPU time (``time.process_time``, which
other processes on a busy host inflate far less than the wall clock). Every batched step's logits are checked
against the single steps' (bit-identical, else the script fails). The best of the repeats is kept.

Figures per R: ``single_ms`` / ``batched_ms`` (CPU ms of R single steps / of one batched step), ``speedup``
(their ratio: the decode tok/s gain of one stage that batches R sequences), and the same by wall clock.

Usage::

    python bench/micro_batch.py [--model gemma|stories|PATH.gguf] [--rows 1,2,4,8] [--repeat 7]
                                [--out bench/results/micro-batch/steps-<model>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = {"stories": HERE.parent.parent / "shared" / "models" / "stories260K.gguf",
          "gemma": Path.home() / ".cache" / "pipeplan" / "models" / "gemma-3-270m-q4_k_m.gguf"}


def measure(model: Path, rows: list[int], prompt_tokens: int, repeat: int) -> list[dict]:
    """The rows of the table (module docstring)."""
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.kernels import cpu
    from pipeplan.runtime.loader import load_quantized_weights, slice_of
    from pipeplan.runtime.program import HParams, StageExecutor, build_stage_program

    facts = read_model_facts(model)
    hp = HParams.from_facts(facts)
    w = load_quantized_weights(facts.files, [slice_of(t) for t in facts.tensors], types=cpu.CPU_TYPES)
    seq = prompt_tokens + 2 * repeat + 2
    r_max = max(rows)
    ex = StageExecutor(hp, build_stage_program(hp, 0, hp.n_layer, True, True, seq), w, seq, cpu, slots=r_max,
                       num_threads=1)
    out = []
    for r in rows:
        for s in range(r):
            ex.reset(s)
            ex.forward(np.asarray([1] + [(7 + 31 * s + 13 * j) % (hp.n_vocab - 3) + 3
                                         for j in range(prompt_tokens - 1)]), 0, last_only=True, slot=s)
        best: dict[str, float] = {}
        pos = prompt_tokens
        for _ in range(repeat):
            toks = [(11 * s + pos) % (hp.n_vocab - 3) + 3 for s in range(r)]
            c0, t0 = time.process_time(), time.perf_counter()
            alone = [np.array(ex.forward(np.asarray([toks[s]]), pos, last_only=True, slot=s), copy=True)
                     for s in range(r)]
            c1, t1 = time.process_time(), time.perf_counter()
            got = ex.forward_segments(np.asarray(toks), [(s, pos, 1) for s in range(r)], last_only=True)
            c2, t2 = time.process_time(), time.perf_counter()
            if not all(np.array_equal(got[s:s + 1], alone[s]) for s in range(r)):
                raise SystemExit(f"R={r}: batched logits differ from the single steps'")
            pos += 1  # the batched step rewrote the same positions: the next round starts one further
            for k, v in (("single_ms", c1 - c0), ("batched_ms", c2 - c1), ("single_wall_ms", t1 - t0),
                         ("batched_wall_ms", t2 - t1)):
                best[k] = min(best.get(k, float("inf")), 1e3 * v)
        best["speedup"] = best["single_ms"] / best["batched_ms"]
        best["speedup_wall"] = best["single_wall_ms"] / best["batched_wall_ms"]
        out.append({"rows": r, **best})
        print(f"  R={r}: {best['speedup']:.2f}x", file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma", help="gemma, stories, or a GGUF path")
    ap.add_argument("--rows", default="1,2,4,8")
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    model = MODELS.get(a.model, Path(a.model))
    rows = measure(model, [int(r) for r in a.rows.split(",")], a.prompt_tokens, a.repeat)
    print(f"{'R':>3} {'single ms':>10} {'batched ms':>11} {'speedup':>8} {'wall single':>12} {'wall batched':>13} "
          f"{'wall x':>7}")
    for r in rows:
        print(f"{r['rows']:>3} {r['single_ms']:>10.1f} {r['batched_ms']:>11.1f} {r['speedup']:>8.2f} "
              f"{r['single_wall_ms']:>12.1f} {r['batched_wall_ms']:>13.1f} {r['speedup_wall']:>7.2f}")
    name = a.model if a.model in MODELS else model.stem
    out = Path(a.out) if a.out else HERE / "results" / "micro-batch" / f"steps-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": str(model), "threads": 1, "load_avg": os.getloadavg(),
                               "command": "python bench/micro_batch.py " + " ".join(argv if argv is not None
                                                                                    else sys.argv[1:]),
                               "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
