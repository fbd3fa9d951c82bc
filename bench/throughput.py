"""Measured aggregate decode tok/s and per-token latency of N concurrent requests over S local stages, with the
calibrated prediction next to each row.

Per stage count S: the cpu calibration of the model for S stages is taken from the cache (``--cache-dir``,
default ``$PIPEPLAN_CACHE`` / ``~/.cache/pipeplan``) or made first (``pipeplan calibrate MODEL --stages S``:
kernels, batched frames, ring hops and the runtime loop; ``--recalibrate`` remakes it). Per (S, N),
:func:`measure` plans the model for ``parallel = N`` (``RuntimeConfig.parallel``, ring slots as many), compiles
it with that evidence (:func:`pipeplan.runtime.replay.compile_for_run`), starts ``Pipeline(parallel=N)`` on
``--backend`` (local: one process per stage, one thread each; ``micro_batches=M`` when the runtime has that
argument: ``--micro-batches`` or, by default, the runtime's choice,
:func:`~pipeplan.analysis.concurrency.choose_micro_batches` on the package, so a row shows what a user gets; ray: one actor per stage on a local ``--ray-nodes``-node Ray cluster, ``bench/_ray_cluster.py``,
stage i on node ``local<i>``), runs N greedy requests at once (``--prompt-tokens`` ids, ``--decode-tokens`` generated ids each,
prompts differ) ``--repeat`` times, keeps the best, and predicts the same run
(:func:`pipeplan.analysis.concurrency.predict_concurrent` on the package, the same M). With ``--rounds R`` > 1 the
whole sequence (per stage count: calibration, then its rows) runs R times, the calibration remade each round so
that every prediction is paired with a measurement made minutes after it; a row then gives the median
measured rate and the median prediction over the rounds (:func:`combine_rounds`), and the spread of the
measured rate between rounds (on a shared machine whose speed drifts, the same run differs by 10-20% minutes
apart). For Ray the calibration is ``pipeplan calibrate --backend ray`` on the bench's cluster: it also
measures what the runtime pays around its stages there (``runtime.<S>.ray_loop``,
:func:`pipeplan.runtime.ray_chain.measure_chain`): one activation row looped driver -> S relay actors placed as the
stages (``local<i>``, the run's transport on every edge) -> driver. The prediction takes it in place of the local
ring's hops and wake-up (``stage_costs(package, backend="ray")``,
:meth:`~pipeplan.analysis.concurrency.StageCosts.with_ray_loop`), as ``pipeplan compare`` does for a Ray row.

Figures per row (``agg_tok_s`` and ``predicted_agg_tok_s`` by the same estimator,
:func:`~pipeplan.analysis.concurrency.throughput_summary`: the decode rate over the middle half of the
sequences):

* ``agg_tok_s`` / ``predicted_agg_tok_s`` / ``error``: measured, predicted, (predicted - measured) / measured;
  ``predicted_no_kv_agg_tok_s`` / ``error_no_kv``: the same prediction without the calibration's KV-position
  term (:meth:`~pipeplan.analysis.concurrency.StageCosts.kv_extra`), to show what it changes;
* ``window_tok_s``: tokens every sequence received while all N decode (last first token -> first last token)
  over that window;
* ``overall_tok_s``: all generated tokens over the makespan; ``p50_ms`` / ``p99_ms``: per-token latency;
* ``calibration_rate_one_tok_s`` (local, N = 1 rows): the calibration's own one-sequence rate of the same stage
  count (its pipeline loop's ``rate_one_tok_s``: the row's own configuration, measured minutes before it); the
  table's "repeatability" line compares it with the row's measured rate;
* ``x_base``: ``agg_tok_s`` over the 1-stage, 1-request figure (issue 14's target: >= 0.8 x min(S, cores) for
  N >= S on a model whose step is >= 5 ms).

Usage::

    python bench/throughput.py [--model stories|gemma|PATH.gguf] [--stages 1,2,3] [--parallel 1,2,4,8]
                               [--prompt-tokens 8] [--decode-tokens 32] [--repeat 2] [--rounds 1]
                               [--backend local|inproc|ray] [--ray-nodes 3] [--micro-batches M] [--cache-dir DIR] [--recalibrate] [--out PATH]

Prints a table and writes a ``pipeplan-throughput/1`` document (``pipeplan compare PKG`` reads it; default
``bench/results/throughput.json``, ``throughput-<model>.json`` for a model other than stories260K) with the
evidence of each stage count and the load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import io
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODELS = {"stories": HERE.parent.parent / "shared" / "models" / "stories260K.gguf",
          "gemma": Path.home() / ".cache" / "pipeplan" / "models" / "gemma-3-270m-q4_k_m.gguf"}
CPU = "pipeplan.runtime.kernels.cpu"


def pipeline_micro_batches() -> bool:
    """Whether ``Pipeline`` takes ``micro_batches`` (the runtime batches decode rows into frames)."""
    from pipeplan.runtime.orchestrator import Pipeline

    return "micro_batches" in inspect.signature(Pipeline).parameters


def calibrated(model: Path, stages: int, seq_len: int, prompt_len: int, cache: str | None,
               recalibrate: bool, backend: str = "local") -> tuple[Any, dict[str, Any]]:
    """The cpu calibration of ``model`` for ``stages`` stages (an ``EvidenceChoice``) and its runtime section
    (``runtime.<S>``: ``loop`` has the terms and the measured rates, ``rate_one_tok_s`` the one-sequence rate of this
    stage count; ``ray_loop`` the relay chain on Ray), made first with ``pipeplan calibrate`` (``--backend ray`` for
    ``backend`` ray, on the connected cluster) when the cache has none for this stage count (or ``recalibrate``)."""
    from pipeplan.analysis.concurrency import runtime_section
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.tools import cli
    from pipeplan.tools.calibrate import read_table, select_evidence

    files = list(read_model_facts(model).files)

    def choice() -> tuple[Any, dict[str, Any]] | None:
        c = select_evidence(None, files, target="cpu", cache_dir=cache)
        table = read_table(c.path) if c.path is not None else None
        sec = runtime_section(table, stages) if table is not None else {}
        ok = isinstance(sec.get("loop"), dict) and (backend != "ray" or isinstance(sec.get("ray_loop"), dict))
        return (c, sec) if ok else None

    got = None if recalibrate else choice()
    if got is None:
        argv = ["calibrate", str(model), "--stages", str(stages), "--max-seq-len", str(seq_len), "--prompt-len",
                str(prompt_len)]
        argv += ["--cache-dir", cache] if cache else []
        argv += ["--backend", "ray"] if backend == "ray" else []
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
        if rc != 0:
            raise SystemExit(f"pipeplan {' '.join(argv)}: exit {rc}: {err.getvalue().strip()}")
        print("  " + " | ".join(x for x in out.getvalue().splitlines() if x.startswith(("pipeline loop", "Ray loop", "Ray pipeline loop"))),
              file=sys.stderr)
        got = choice()
        if got is None:
            raise SystemExit(f"pipeplan {' '.join(argv)} wrote no usable calibration")
    return got


def measure(model: Path, stages: int, parallel: int, backend: str, *, prompt_tokens: int, decode_tokens: int,
            repeat: int, evidence: Any, micro_batches: int | None = None, cache: str | None = None) -> dict:
    """One configuration: plan, compile with ``evidence``, run ``parallel`` requests ``repeat`` times on a fresh
    ``Pipeline`` (best kept), predict it (for Ray, with the calibration's relay chain on the cluster:
    ``stage_costs(package, backend="ray")``); the row (module docstring)."""
    from pipeplan.analysis.concurrency import (
        choose_micro_batches,
        default_micro_batches,
        predict_concurrent,
        stage_costs,
        throughput_summary,
    )
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.orchestrator import GenRequest, Pipeline
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks

    facts = read_model_facts(model)
    pool, text = local_pool_with_peaks(stages)
    module = plan_run(facts, RuntimeConfig(max_seq_len=prompt_tokens + decode_tokens + 8, ring_slots=max(2, parallel),
                                           parallel=parallel), pool, stages)
    compiled = compile_for_run(module, text, cache_dir=cache, evidence=evidence.providers, prompt_len=prompt_tokens)
    batching = pipeline_micro_batches()
    choice = None if micro_batches or not batching else choose_micro_batches(compiled.package, parallel, backend=backend)
    m = (micro_batches or (choice.micro_batches if choice is not None else default_micro_batches(parallel, stages))
         if batching else parallel)
    extra: dict[str, Any] = {"micro_batches": m} if batching else {}
    vocab = facts.vocab_size
    best: dict | None = None
    with Pipeline(project_provisions(module), backend=backend, programs=compiled.programs, kernels=CPU,
                  num_threads=1, parallel=parallel, **extra) as pipe:
        # warm: first touch of weights, caches and every KV slot and position the timed runs use
        pipe.generate_concurrent([GenRequest([1, 2], prompt_tokens + decode_tokens - 2) for _ in range(parallel)])
        for _ in range(repeat):
            reqs = [GenRequest([1] + [(7 + 31 * k + 13 * j) % (vocab - 3) + 3 for j in range(prompt_tokens - 1)],
                               decode_tokens) for k in range(parallel)]
            t0 = time.perf_counter()
            got = pipe.generate_concurrent(reqs)
            f = figures([[t - t0 for t in g.token_times] for g in got])
            f["agg_tok_s"] = throughput_summary([[t - t0 for t in g.token_times] for g in got])["aggregate_tok_s"]
            if best is None or f["agg_tok_s"] > best["agg_tok_s"]:
                best = f
    assert best is not None
    # the package's, with its evidence (for Ray: its calibration's relay chain in place of the local hops)
    costs = stage_costs(compiled.package, prefill_rows=prompt_tokens, backend=backend)
    p = predict_concurrent(costs, parallel, prompt_tokens, decode_tokens, micro_batches=m)
    flat = (predict_concurrent(dataclasses.replace(costs, kv_pos=(), kv_row_s=()), parallel, prompt_tokens,
                               decode_tokens, micro_batches=m).aggregate_tok_s if costs.kv_pos else None)
    return {"stages": stages, "parallel": parallel, "micro_batches": m, "backend": backend, **best,
            "micro_batch_choice": None if choice is None else choice.to_json(),
            "predicted_agg_tok_s": p.aggregate_tok_s, "predicted_p50_ms": 1e3 * p.per_token_p50_s,
            "error": (p.aggregate_tok_s - best["agg_tok_s"]) / best["agg_tok_s"] if best["agg_tok_s"] else None,
            "predicted_no_kv_agg_tok_s": flat,
            "error_no_kv": (flat - best["agg_tok_s"]) / best["agg_tok_s"] if flat and best["agg_tok_s"] else None,
            "evidence": p.evidence, "package": str(compiled.package),
            # pipeplan-throughput/1 fields (pipeplan compare)
            "n_sequences": parallel, "aggregate_tok_s": best["agg_tok_s"], "p50_s": best["p50_ms"] / 1e3,
            "p99_s": best["p99_ms"] / 1e3, "prompt_tokens": prompt_tokens, "decode_tokens": decode_tokens}


def combine_rounds(rows: list[dict]) -> dict:
    """One configuration's row over its rounds (each a :func:`measure` row, calibrated just before it): the round
    whose measured ``agg_tok_s`` is the median (lower median for an even count) gives the measured figures;
    ``predicted_agg_tok_s`` / ``predicted_no_kv_agg_tok_s`` are the medians of the rounds' predictions and
    ``error`` / ``error_no_kv`` compare them with that measured figure; ``rounds_agg_tok_s``,
    ``rounds_predicted_agg_tok_s`` and ``rounds_error`` list every round's, ``measured_spread`` is (max - min) /
    median of the measured rates."""
    import statistics

    order = sorted(rows, key=lambda r: r["agg_tok_s"])
    out = dict(order[(len(order) - 1) // 2])
    meas = out["agg_tok_s"]
    pred = statistics.median(r["predicted_agg_tok_s"] for r in rows)
    flat = [r["predicted_no_kv_agg_tok_s"] for r in rows if r.get("predicted_no_kv_agg_tok_s")]
    out["predicted_agg_tok_s"] = pred
    out["error"] = (pred - meas) / meas if meas else None
    out["predicted_no_kv_agg_tok_s"] = statistics.median(flat) if flat else None
    out["error_no_kv"] = (out["predicted_no_kv_agg_tok_s"] - meas) / meas if flat and meas else None
    out["rounds_agg_tok_s"] = [r["agg_tok_s"] for r in rows]
    out["rounds_predicted_agg_tok_s"] = [r["predicted_agg_tok_s"] for r in rows]
    out["rounds_error"] = [r["error"] for r in rows]
    out["measured_spread"] = (order[-1]["agg_tok_s"] - order[0]["agg_tok_s"]) / meas if meas else 0.0
    return out


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def figures(token_times: list[list[float]]) -> dict[str, float]:
    """``window_tok_s, overall_tok_s, p50_ms, p99_ms, makespan_s, n_tokens`` of per-sequence token times
    (seconds from the start of the run; module docstring)."""
    lo = max(ts[0] for ts in token_times)
    hi = min(ts[-1] for ts in token_times)
    counted = sum(1 for ts in token_times for t in ts if lo < t <= hi)
    gaps = [b - a for ts in token_times for a, b in zip(ts, ts[1:], strict=False)]
    last = max(ts[-1] for ts in token_times)
    n = sum(len(ts) for ts in token_times)
    return {"window_tok_s": counted / (hi - lo) if hi > lo else 0.0, "overall_tok_s": n / last if last > 0 else 0.0,
            "p50_ms": 1e3 * _percentile(gaps, 50), "p99_ms": 1e3 * _percentile(gaps, 99), "makespan_s": last,
            "n_tokens": n}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="stories", help="stories, gemma, or a GGUF path")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--parallel", default="1,2,4,8")
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per row and round (the best is kept)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of calibration then every row of each stage count (a row: medians over the rounds)")
    ap.add_argument("--backend", default="local", choices=("local", "inproc", "ray"))
    ap.add_argument("--ray-nodes", type=int, default=3,
                    help="ray: Ray nodes of the local cluster (bench/_ray_cluster.py), stage i on node local<i>")
    ap.add_argument("--micro-batches", type=int, default=None,
                    help="frames in flight (runtimes with micro-batching; default the runtime's choice, "
                         "choose_micro_batches on the compiled package)")
    ap.add_argument("--cache-dir", default=None, help="calibration and package cache (default $PIPEPLAN_CACHE)")
    ap.add_argument("--recalibrate", action="store_true", help="calibrate again even when the cache has one")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    model = MODELS.get(a.model, Path(a.model))
    stages = [int(s) for s in a.stages.split(",")]
    parallel = sorted({int(n) for n in a.parallel.split(",")})
    load_before = os.getloadavg()
    rows: list[dict] = []
    evidence_lines = {}
    ray_loops: dict[int, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        if a.backend == "ray":
            if max(stages) > a.ray_nodes:
                ap.error(f"--stages {a.stages} needs at most --ray-nodes {a.ray_nodes} stages (one per node)")
            from _ray_cluster import ray_cluster

            stack.enter_context(ray_cluster([f"local{i}" for i in range(a.ray_nodes)]))
        by_config: dict[tuple[int, int], list[dict]] = {}
        for rnd in range(a.rounds):
            for s in stages:
                ev, sec = calibrated(model, s, max(64, a.prompt_tokens + a.decode_tokens + 8), a.prompt_tokens,
                                     a.cache_dir, a.recalibrate or rnd > 0, a.backend)
                if a.backend == "ray":
                    ray_loops.setdefault(s, []).append(sec["ray_loop"])
                evidence_lines[str(s)] = ev.message
                print(f"round {rnd + 1}/{a.rounds} S={s}: {ev.message}", file=sys.stderr, flush=True)
                for n in parallel:
                    r = measure(model, s, n, a.backend, prompt_tokens=a.prompt_tokens, decode_tokens=a.decode_tokens,
                                repeat=a.repeat, evidence=ev, micro_batches=a.micro_batches, cache=a.cache_dir)
                    if n == 1 and a.backend == "local":
                        r["calibration_rate_one_tok_s"] = sec["loop"].get("rate_one_tok_s")
                    by_config.setdefault((s, n), []).append(r)
                    print(f"  S={s} N={n}: measured {r['agg_tok_s']:.1f} tok/s, predicted "
                          f"{r['predicted_agg_tok_s']:.1f} ({r['error']:+.1%})", file=sys.stderr, flush=True)
        rows = [combine_rounds(rs) for rs in by_config.values()]
    base = next((r["agg_tok_s"] for r in rows if r["stages"] == 1 and r["parallel"] == 1), None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"{'S':>2} {'N':>3} {'M':>3} {'agg tok/s':>10} {'predicted':>10} {'error':>7} {'window':>8} {'overall':>8} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'x base':>7} {'target':>7}")
    for r in rows:
        r["x_base"] = r["agg_tok_s"] / base if base else None
        r["target_x_base"] = 0.8 * min(r["stages"], cores) if r["parallel"] >= r["stages"] else None
        xb = "" if r["x_base"] is None else f"{r['x_base']:.2f}"
        tg = "" if r["target_x_base"] is None else f"{r['target_x_base']:.2f}"
        er = "n/a" if r["error"] is None else f"{r['error']:+.1%}"
        print(f"{r['stages']:>2} {r['parallel']:>3} {r['micro_batches']:>3} {r['agg_tok_s']:>10.1f} "
              f"{r['predicted_agg_tok_s']:>10.1f} {er:>7} {r['window_tok_s']:>8.1f} {r['overall_tok_s']:>8.1f} "
              f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {xb:>7} {tg:>7}")
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    if errs:
        print(f"prediction error of aggregate tok/s: max {max(errs):.1%}, mean {sum(errs) / len(errs):.1%} "
              f"over {len(errs)} rows")
    flat = [abs(r["error_no_kv"]) for r in rows if r.get("error_no_kv") is not None]
    if flat:
        print(f"  without the KV-position term (every decode row at the calibrated position): max {max(flat):.1%}, "
              f"mean {sum(flat) / len(flat):.1%} over {len(flat)} rows")
    if a.rounds > 1:
        spread = [r["measured_spread"] for r in rows]
        print(f"  over {a.rounds} rounds (a row: median measured, median predicted): measured tok/s of one row "
              f"spread by up to {max(spread):.1%} (mean {sum(spread) / len(spread):.1%}) between rounds")
    again = [(r["calibration_rate_one_tok_s"] - m) / m for rs in by_config.values() for r in rs
             if r.get("calibration_rate_one_tok_s") and (m := r["agg_tok_s"])]
    if again:
        print(f"  repeatability: the calibration's one-sequence loop and the N = 1 row (the same run, minutes apart) "
              f"differ by up to {max(map(abs, again)):.1%} (mean {sum(map(abs, again)) / len(again):.1%}) over "
              f"{len(again)} pairs")
    for s, line in evidence_lines.items():
        print(f"S={s}: {line}")
    name = "throughput.json" if a.model == "stories" else f"throughput-{Path(str(model)).stem if a.model not in MODELS else a.model}.json"
    out = Path(a.out) if a.out else HERE / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": "pipeplan-throughput/1", "model": str(model), "backend": a.backend,
           "ray_nodes": a.ray_nodes if a.backend == "ray" else None, "ray_loops": {str(k): v for k, v in ray_loops.items()} or None, "rounds": a.rounds, "target": "cpu",
           "threads_per_stage": 1, "cores": cores, "prompt_tokens": a.prompt_tokens, "decode_tokens": a.decode_tokens,
           "repeat": a.repeat, "machine": platform.machine(), "load_avg_before": load_before,
           "load_avg_after": os.getloadavg(), "evidence": evidence_lines,
           "command": "python bench/throughput.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": rows}
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
