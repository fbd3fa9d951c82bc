"""Start-up benchmark: time to first token and wall time of ``pipeplan run`` (issue 11 item 10), and
1-stage in-process decode with and without a competing process.

Usage: ``python bench/startup.py [--stages 1,3,5] [--repeat 3] [--tokens 8] [--pythonpath DIR]
[--baseline DIR] [--no-load-test]``. Prints a table and writes ``bench/results/startup.json``.

Part 1, start-up: ``pipeplan run stories260K --backend local --stages N --max-tokens 8 --json`` as a
fresh process, for each stage count, ``cold`` (an empty package cache: plan + compile + parse) and
``cached`` (the package compiled by the cold run). The local peaks are fixed
(``PIPEPLAN_LOCAL_PEAKS``) so no run probes the machine; Python bytecode is cached (:data:`PYCACHE`), as
for an installed package. Per run:

- ``ttft_s``: launch -> first token, from the run's own events: the last ``StageReady`` event's
  ``time.monotonic()`` (system-wide clock, read here just before the launch) plus the reported
  ``prefill_s`` (RESET + prompt -> first token);
- ``wall_s``: launch -> process exit, for ``--tokens`` generated tokens (output printed, stages stopped).

Rounds interleave the configurations (one run of each per round, rotating the order) so that load drift
on a shared machine hits them alike; medians and minima over ``--repeat`` rounds are reported, with the
load average before and after. ``--pythonpath DIR`` runs another checkout's ``pipeplan`` package (e.g. a
``git archive`` of main unpacked into ``DIR/pipeplan``) with this venv instead of this one;
``--baseline DIR`` runs it as well, interleaved with this one (before/after figures under the same load).

Part 2, threads under load: 1-stage ``inproc`` greedy decode of 128 tokens (after a warm-up sequence)
with the default thread policy (:func:`pipeplan.runtime.backends.default_num_threads`) and with one
torch thread per core (torch's own default, what an in-process run used before), without and with
``--competitors`` (default 1) ``yes > /dev/null`` processes running ("quiet" means no competitor of ours:
on a shared machine the load average says what else ran).

Target (issue 11): 3 local stages on stories260K with a cached package reach the first token in < 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODEL = REPO.parent / "shared" / "models" / "stories260K.gguf"
PROMPT = "Once upon a time"
PEAKS = "2.0e10,1.0e11"


def _cli(pythonpath: str | None) -> list[str]:
    if pythonpath:
        return [sys.executable, "-m", "pipeplan.tools.cli"]
    exe = REPO / ".venv" / "bin" / "pipeplan"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli"]


PYCACHE = Path(tempfile.gettempdir()) / "pipeplan-bench-pycache"
"""Bytecode cache of the measured processes (``PYTHONPYCACHEPREFIX``): an installed package has its bytecode
cached, so the runs should too, even where ``PYTHONDONTWRITEBYTECODE`` is set (it is in some sandboxes);
outside the source tree, so the checkout stays clean. The warm-up runs fill it."""


def one_run(stages: int, cache: Path, tokens: int, pythonpath: str | None) -> dict:
    """One ``pipeplan run`` process; returns ttft_s, wall_s and the run's own phase timings."""
    env = dict(os.environ, PIPEPLAN_CACHE=str(cache), PIPEPLAN_LOCAL_PEAKS=PEAKS,
               PYTHONPYCACHEPREFIX=str(PYCACHE / ("base" if pythonpath else "this")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    cmd = _cli(pythonpath) + ["run", str(MODEL), "--prompt", PROMPT, "--stages", str(stages), "--backend", "local",
                              "--max-tokens", str(tokens), "--json"]
    t_mono = time.monotonic()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"run failed ({p.returncode}): {p.stderr.strip()}")
    doc = json.loads(p.stdout)
    ready = max(e["t"] for e in doc["events"] if e["event"] == "StageReady")
    tm = doc["timings"]
    return {"ttft_s": ready - t_mono + tm["prefill_s"], "wall_s": wall, "stage_load_s": tm["load_s"],
            "plan_s": doc["package"]["plan_s"], "compile_s": doc["package"]["compile_s"],
            "package_load_s": doc["package"]["load_s"], "cached": doc["package"]["cached"],
            "n_generated": tm["n_generated"]}


def startup(stage_counts: list[int], repeat: int, tokens: int, codes: dict[str, str | None]) -> list[dict]:
    """Interleaved rounds over (code, stages, cold|cached); ``codes``: name -> pythonpath (None: this
    checkout). Returns one row per configuration."""
    configs = [(c, n, kind) for c in codes for n in stage_counts for kind in ("cold", "cached")]
    runs: dict[tuple[str, int, str], list[dict]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="pipeplan-startup-") as tmp:
        warm = {(c, n): Path(tmp) / f"warm-{c}-{n}" for c in codes for n in stage_counts}
        for (c, n), d in warm.items():  # the cached configurations' package (and the OS page cache) first
            one_run(n, d, tokens, codes[c])
        for r in range(repeat):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for c, n, kind in order:
                cache = warm[(c, n)] if kind == "cached" else Path(tmp) / f"cold-{c}-{n}-{r}"
                got = one_run(n, cache, tokens, codes[c])
                assert got["cached"] == (kind == "cached"), got
                runs[(c, n, kind)].append(got)
    rows = []
    for (c, n, kind), rs in runs.items():
        row: dict = {"code": c, "pythonpath": codes[c], "stages": n, "package": kind, "runs": rs}
        for k in ("ttft_s", "wall_s", "stage_load_s", "compile_s", "package_load_s", "plan_s"):
            vals = [x[k] for x in rs]
            row[k] = statistics.median(vals)
            row[k.replace("_s", "_min_s")] = min(vals)
        rows.append(row)
    return rows


def _inproc_decode(threads: int | None, tokens: int) -> dict:
    """1-stage inproc: decode tok/s of ``tokens`` greedy tokens after a warm-up sequence."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.orchestrator import Pipeline

    facts = read_model_facts(MODEL)
    ps = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=256), local_pool(1), 1))
    with Pipeline(ps, backend="inproc", num_threads=threads) as pipe:
        used = pipe.options.num_threads  # what the stage thread set (torch's count is per thread under OpenMP)
        pipe.generate_ids([1, 403, 407, 261, 378], 16)
        _, tm = pipe.generate_ids([1, 403, 407, 261, 378], tokens)
    return {"threads": used, "decode_tok_s": tm["decode_tok_s"]}


def threads_under_load(competitors: int, tokens: int, repeat: int) -> list[dict]:
    """Decode tok/s for {policy default, one thread per core} x {quiet, loaded}; medians over rounds."""
    from pipeplan.runtime.backends import usable_cores

    cores = usable_cores()
    settings = {"policy": None, "per-core": cores}
    res: dict[tuple[str, str], list[dict]] = {}
    for _ in range(repeat):
        for load in ("quiet", "loaded"):
            hogs = []
            if load == "loaded":
                hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(competitors)]
                time.sleep(0.2)
            try:
                for name, th in settings.items():
                    res.setdefault((name, load), []).append(_inproc_decode(th, tokens))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    return [{"threads": name, "load": load, "torch_threads": rs[0]["threads"], "competitors": competitors if
             load == "loaded" else 0, "decode_tok_s": statistics.median(r["decode_tok_s"] for r in rs),
             "rounds": [r["decode_tok_s"] for r in rs]} for (name, load), rs in res.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stages", default="1,3,5")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--pythonpath", default=None, help="run the pipeplan package found in this directory")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also run the pipeplan package in DIR (e.g. main), interleaved with this one")
    ap.add_argument("--competitors", type=int, default=1, help="`yes` processes for the loaded rows")
    ap.add_argument("--no-load-test", action="store_true", help="skip part 2 (threads under load)")
    ap.add_argument("--out", default=str(HERE / "results" / "startup.json"))
    args = ap.parse_args()
    stage_counts = [int(x) for x in args.stages.split(",")]
    load0 = os.getloadavg()
    codes: dict[str, str | None] = {"this": args.pythonpath}
    if args.baseline:
        codes["baseline"] = args.baseline
    rows = startup(stage_counts, args.repeat, args.tokens, codes)
    load1 = os.getloadavg()
    print(f"pipeplan run stories260K --backend local --max-tokens {args.tokens}  (median / min of {args.repeat}; "
          f"load avg {load0[0]:.1f} -> {load1[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'code':>8} {'stages':>6} {'package':>7} {'ttft s':>8} {'min':>6} {'wall s':>8} {'min':>6} "
          f"{'stages ready s':>14} {'compile s':>9} {'pkg load s':>10}")
    for r in rows:
        print(f"{r['code']:>8} {r['stages']:>6} {r['package']:>7} {r['ttft_s']:>8.2f} {r['ttft_min_s']:>6.2f} "
              f"{r['wall_s']:>8.2f} {r['wall_min_s']:>6.2f} {r['stage_load_s']:>14.2f} {r['compile_s']:>9.2f} "
              f"{r['package_load_s']:>10.3f}")
    target = next((r for r in rows if r["code"] == "this" and r["stages"] == 3 and r["package"] == "cached"), None)
    if target is not None:
        print(f"target: 3 stages, cached package, first token < 2 s: median {target['ttft_s']:.2f} s "
              f"({'met' if target['ttft_s'] < 2.0 else 'not met'} at this load)")
    doc: dict = {"bench": "startup", "model": str(MODEL), "host": platform.node(), "cpus": os.cpu_count(),
                 "python": platform.python_version(), "codes": codes, "tokens": args.tokens,
                 "repeat": args.repeat, "loadavg_before": load0, "loadavg_after": load1, "startup": rows}
    if not args.no_load_test:
        load2 = os.getloadavg()
        th = threads_under_load(args.competitors, 128, args.repeat)
        print(f"\n1-stage inproc decode, 128 tokens (median of {args.repeat}; load avg {load2[0]:.1f})")
        print(f"{'threads':>9} {'torch':>5} {'load':>7} {'decode tok/s':>12}")
        for r in th:
            print(f"{r['threads']:>9} {r['torch_threads']:>5} {r['load']:>7} {r['decode_tok_s']:>12.0f}")
        doc["inproc_threads"] = th
        doc["loadavg_load_test"] = load2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
