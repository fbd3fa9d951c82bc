"""Measured aggregate decode tok/s and per-token latency of N concurrent requests over S local stages.

For each stage count S: plan the model for ``parallel = max(N)`` sequences (``RuntimeConfig.parallel``, ring
slots as many), compile it (:func:`pipeplan.runtime.replay.compile_for_run`, cached), start one
``Pipeline(parallel=max(N))`` on ``--backend`` (default local: one process per stage, one thread each; ray: one
actor per stage on a local ``--ray-nodes``-node Ray cluster, ``bench/_ray_cluster.py``, stage i on node ``local<i>``), then
for each N run N greedy requests at once (:meth:`~pipeplan.runtime.orchestrator.Pipeline.generate_concurrent`;
``--prompt-tokens`` ids and ``--decode-tokens`` generated ids each, prompts differ) ``--repeat`` times, the
best kept.

Figures per (S, N):

* ``agg_tok_s``: steady-state aggregate decode rate: tokens every sequence received in the window where all
  N are decoding (from the last first-token to the first last-token), over the window's length;
* ``overall_tok_s``: all generated tokens over the makespan (first admission -> last token);
* ``p50_ms`` / ``p99_ms``: per-token latency, the gaps between consecutive tokens of one sequence;
* ``x_base``: ``agg_tok_s`` over the 1-stage, 1-request figure (issue 14's target: >= 0.8 x min(S, cores) for
  N >= S on a model whose step is >= 5 ms);
* ``predicted``: the simulator's aggregate tok/s for the same N, S and package when
  ``predict_concurrent`` exists in ``pipeplan.analysis.simulate`` or ``pipeplan.analysis.concurrency``
  (else ``n/a``).

Usage::

    python bench/throughput.py [--model stories|gemma|PATH.gguf] [--stages 1,2,3] [--parallel 1,2,4,8]
                               [--prompt-tokens 8] [--decode-tokens 32] [--repeat 2]
                               [--backend local|inproc|ray] [--ray-nodes 3] [--micro-batches M]
                               [--out bench/results/throughput.json]

Prints a table and writes the JSON (default ``bench/results/throughput.json``; ``throughput-<model>.json`` for
a model other than stories260K).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = {"stories": HERE.parent.parent / "shared" / "models" / "stories260K.gguf",
          "gemma": Path.home() / ".cache" / "pipeplan" / "models" / "gemma-3-270m-q4_k_m.gguf"}
CPU = "pipeplan.runtime.kernels.cpu"


def _predictor():
    """``predict_concurrent`` where the simulator has it, else None."""
    for name in ("pipeplan.analysis.simulate", "pipeplan.analysis.concurrency"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "predict_concurrent", None)
        if fn is not None:
            return fn
    return None


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def figures(token_times: list[list[float]], t0: float) -> dict[str, float]:
    """The measured figures (module docstring) of per-sequence token times (``time.perf_counter()``)."""
    lo = max(ts[0] for ts in token_times)
    hi = min(ts[-1] for ts in token_times)
    counted = sum(1 for ts in token_times for t in ts if lo < t <= hi)
    gaps = [b - a for ts in token_times for a, b in zip(ts, ts[1:], strict=False)]
    last = max(ts[-1] for ts in token_times)
    n = sum(len(ts) for ts in token_times)
    return {"agg_tok_s": counted / (hi - lo) if hi > lo else 0.0,
            "overall_tok_s": n / (last - t0) if last > t0 else 0.0,
            "p50_ms": 1e3 * _percentile(gaps, 50), "p99_ms": 1e3 * _percentile(gaps, 99),
            "makespan_s": last - t0, "n_tokens": n}


def run_stage_count(model: Path, stages: int, parallel: list[int], args, cache: str) -> list[dict]:
    """Rows of one stage count (module docstring)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.orchestrator import GenRequest, Pipeline
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    facts = read_model_facts(model)
    n_max = max(parallel)
    pool, text = local_pool_with_peaks(stages)
    seq_len = args.prompt_tokens + args.decode_tokens + 8
    module = plan_run(facts, RuntimeConfig(max_seq_len=seq_len, ring_slots=max(2, n_max), parallel=n_max),
                      pool, stages)
    compiled = compile_for_run(module, text, cache_dir=cache, prompt_len=args.prompt_tokens)
    predict = _predictor()
    rows = []
    vocab = facts.vocab_size
    with Pipeline(project_provisions(module), backend=args.backend, programs=compiled.programs, kernels=CPU,
                  num_threads=1, parallel=n_max, micro_batches=args.micro_batches) as pipe:
        pipe.generate_concurrent([GenRequest([1, 2], 4)])  # warm: first-touch of weights and caches
        for n in parallel:
            best: dict | None = None
            for _ in range(args.repeat):
                reqs = [GenRequest([1] + [(7 + 31 * k + 13 * j) % (vocab - 3) + 3 for j in range(args.prompt_tokens - 1)],
                                   args.decode_tokens) for k in range(n)]
                t0 = time.perf_counter()
                got = pipe.generate_concurrent(reqs)
                f = figures([g.token_times for g in got], t0)
                if best is None or f["agg_tok_s"] > best["agg_tok_s"]:
                    best = f
            assert best is not None
            predicted: float | str = "n/a"
            if predict is not None:
                try:
                    predicted = float(predict(compiled.package, n, args.prompt_tokens, args.decode_tokens,
                                              prefill_rows=args.prompt_tokens).aggregate_tok_s)
                except Exception as e:  # a simulator whose interface differs: say so, never a figure
                    predicted = f"n/a ({type(e).__name__})"
            rows.append({"stages": stages, "parallel": n, **best, "predicted_agg_tok_s": predicted})
            print(f"  S={stages} N={n}: {best['agg_tok_s']:.1f} tok/s aggregate", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="stories", help="stories, gemma, or a GGUF path")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--parallel", default="1,2,4,8")
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--backend", default="local", choices=("local", "inproc", "ray"))
    ap.add_argument("--ray-nodes", type=int, default=3,
                    help="ray: Ray nodes of the local cluster (bench/_ray_cluster.py), stage i on node local<i>")
    ap.add_argument("--micro-batches", type=int, default=None, metavar="M",
                    help="Pipeline(micro_batches=M): most frames in flight (default min(parallel, stages))")
    ap.add_argument("--cache-dir", default=None, help="package cache (default: a private temporary one)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    model = MODELS.get(a.model, Path(a.model))
    stages = [int(s) for s in a.stages.split(",")]
    parallel = sorted({int(n) for n in a.parallel.split(",")})
    cache = a.cache_dir or tempfile.mkdtemp(prefix="pipeplan-throughput-")
    rows: list[dict] = []
    with contextlib.ExitStack() as stack:
        if a.backend == "ray":
            if max(stages) > a.ray_nodes:
                ap.error(f"--stages {a.stages} needs at most --ray-nodes {a.ray_nodes} stages (one per node)")
            from _ray_cluster import ray_cluster

            stack.enter_context(ray_cluster([f"local{i}" for i in range(a.ray_nodes)]))
        for s in stages:
            rows += run_stage_count(model, s, parallel, a, cache)
    base = next((r["agg_tok_s"] for r in rows if r["stages"] == 1 and r["parallel"] == 1), None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"{'S':>2} {'N':>3} {'agg tok/s':>10} {'overall':>9} {'p50 ms':>8} {'p99 ms':>8} {'x base':>7} "
          f"{'target':>7} {'predicted':>10}")
    for r in rows:
        r["x_base"] = r["agg_tok_s"] / base if base else None
        r["target_x_base"] = 0.8 * min(r["stages"], cores) if r["parallel"] >= r["stages"] else None
        pred = r["predicted_agg_tok_s"]
        xb = "" if r["x_base"] is None else f"{r['x_base']:.2f}"
        tg = "" if r["target_x_base"] is None else f"{r['target_x_base']:.2f}"
        ps = f"{pred:.1f}" if isinstance(pred, float) else str(pred)
        print(f"{r['stages']:>2} {r['parallel']:>3} {r['agg_tok_s']:>10.1f} {r['overall_tok_s']:>9.1f} "
              f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {xb:>7} {tg:>7} {ps:>10}")
    name = "throughput.json" if a.model == "stories" else f"throughput-{Path(str(model)).stem if a.model not in MODELS else a.model}.json"
    out = Path(a.out) if a.out else HERE / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"model": str(model), "backend": a.backend, "ray_nodes": a.ray_nodes if a.backend == "ray" else None, "target": "cpu", "threads_per_stage": 1, "cores": cores,
           "prompt_tokens": a.prompt_tokens, "decode_tokens": a.decode_tokens, "repeat": a.repeat,
           "machine": platform.machine(), "load_avg": os.getloadavg(),
           "command": "python bench/throughput.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": rows}
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
