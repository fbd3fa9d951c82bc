"""Predicted aggregate decode tok/s and per-token latency of 1/2/4/8 concurrent sequences over 1/2/3 stages.

Per stage count S: ``pipeplan calibrate MODEL --stages S`` (target cpu, into a private cache unless
``--cache-dir``), ``pipeplan plan``, ``pipeplan compile`` without ``--evidence`` (so it picks the
calibration and says so), then :func:`pipeplan.analysis.concurrency.predict_concurrent` on the package for
each N (with the calibration's runtime terms; M = min(N, S) frames in flight where the runtime batches decode
rows, else one frame per sequence). ``--measure`` adds the one-sequence figure measured by ``pipeplan run --backend local --json``
(decode tok/s, the only concurrency ``run`` has) next to the N = 1 prediction. Prints a table and writes
``bench/results/predict_concurrent[-<model>].json``.

Usage::

    python bench/predict_concurrent.py [--model M.gguf] [--stages 1,2,3] [--parallel 1,2,4,8]
                                       [--prompt-tokens 8] [--decode-tokens 64] [--measure]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE.parent.parent / "shared" / "models" / "stories260K.gguf"


def _cli(argv: list[str]) -> tuple[str, str]:
    """Run ``pipeplan ARGV`` in this process; ``(stdout, stderr)`` (raises SystemExit on a failure)."""
    from pipeplan.tools import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    if rc != 0:
        raise SystemExit(f"pipeplan {' '.join(argv)}: exit {rc}: {err.getvalue().strip()}")
    return out.getvalue(), err.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--parallel", default="1,2,4,8")
    ap.add_argument("--prompt-tokens", type=int, default=8)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--calibrate-tokens", type=int, default=16, help="decode tokens per calibration replay")
    ap.add_argument("--cache-dir", help="calibration cache (default: a private temporary one)")
    ap.add_argument("--measure", action="store_true", help="also measure 1 sequence with pipeplan run (local)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    from pipeplan.analysis.concurrency import predict_concurrent, stage_costs
    from pipeplan.tools.cmd_compile import runtime_batches

    batches = runtime_batches()  # the runtime batches decode rows: M = min(N, S); else one frame per sequence

    work = Path(tempfile.mkdtemp(prefix="pipeplan-predict-concurrent-"))
    cache = Path(a.cache_dir) if a.cache_dir else work / "cache"
    name = Path(a.model).stem
    rows = []
    print(f"{'stages':>6s} {'N':>3s} {'aggregate tok/s':>15s} {'p50 ms':>8s} {'p99 ms':>8s} {'request s':>9s} "
          f"{'busiest':>7s} {'measured tok/s':>14s}")
    for s in [int(x) for x in a.stages.split(",")]:
        t0 = time.perf_counter()
        _cli(["calibrate", a.model, "--stages", str(s), "--max-seq-len", str(a.max_seq_len), "--tokens",
              str(a.calibrate_tokens), "--cache-dir", str(cache)])
        cal_s = time.perf_counter() - t0
        plan = work / f"plan{s}.mlir"
        _cli(["plan", a.model, "--stages", str(s), "--max-seq-len", str(a.max_seq_len), "-o", str(plan)])
        pkg = work / f"pkg{s}"
        _, err = _cli(["compile", str(plan), "-o", str(pkg), "--cache-dir", str(cache), "--decode-tokens", "2"])
        line = err.strip().splitlines()[-1]
        if not line.startswith("evidence: calibrated"):
            raise SystemExit(f"compile did not pick the calibration: {line}")
        costs = stage_costs(pkg)
        measured = None
        if a.measure:
            out, _ = _cli(["run", a.model, "--prompt", "Once upon a time", "--stages", str(s), "--max-tokens",
                           str(a.decode_tokens), "--max-seq-len", str(a.max_seq_len), "--backend", "local",
                           "--cache-dir", str(cache), "--json"])
            measured = json.loads(out)["timings"]["decode_tok_s"]
        for n in [int(x) for x in a.parallel.split(",")]:
            p = predict_concurrent(costs, n, a.prompt_tokens, a.decode_tokens,
                                   micro_batches=None if batches else n)
            m = measured if n == 1 else None
            row = {"stages": s, **p.to_json(), "evidence_line": line, "calibrate_s": cal_s,
                   "measured_decode_tok_s": m,
                   "error_vs_measured": None if m is None else abs(p.aggregate_tok_s - m) / m}
            rows.append(row)
            print(f"{s:6d} {n:3d} {p.aggregate_tok_s:15.1f} {p.per_token_p50_s * 1e3:8.3f} "
                  f"{p.per_token_p99_s * 1e3:8.3f} {p.request_latency_s:9.4f} {max(p.stage_utilisation):7.0%} "
                  f"{'' if m is None else f'{m:14.1f}'}")
        print(f"       stage decode steps (ms): {', '.join(f'{x * 1e3:.3f}' for x in costs.decode_s)}; hops (us): "
              f"{', '.join(f'{x * 1e6:.1f}' for x in costs.decode_hop_s)}; {line}")
    out_path = Path(a.out) if a.out else HERE / "results" / (
        "predict_concurrent.json" if name == "stories260K" else f"predict_concurrent-{name}.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"model": a.model, "prompt_tokens": a.prompt_tokens,
                                    "decode_tokens": a.decode_tokens, "rows": rows,
                                    "load_average": os.getloadavg(),
                                    "command": " ".join([sys.executable, *sys.argv])}, indent=1) + "\n")
    print(f"-> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
