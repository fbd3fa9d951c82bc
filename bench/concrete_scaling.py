"""Concrete-plan construction scaling: 70B-shaped model, 8 stages, 1x / 2x / 4x the 80 blocks.

For each size: the real pipeline (planner -> convert-runplan-to-pplan -> pplan-legalize{virtual-queue}
-> pplan-select-implementations -> pplan-resolve-costs{roofline}) builds the costed pplan (timed
apart, not part of the budget); then the measured part: reading it into a Problem
(``problem_from_module``), list scheduling + joint memory planning (``bind(..., "list-schedule")``),
and the seven invariants (``check_invariants``). The budget of issue 5 is list scheduling and memory
planning of the 80-block model in under 3 s. Weights are Q4_0 (the virtual-queue target has no
K-quants; Q4_0 and Q4_K both take 0.5625 bytes per weight, so bytes are those of the Q4_K facts).

Prints a table (seconds and growth relative to 1x) and the memory planner's peak next to the
max-live-bytes lower bound on the ``device`` memory space, and writes bench/results/concrete_scaling.json.

The binder is timed with the garbage collector paused (after a collection).

Run: ``.venv/bin/python bench/concrete_scaling.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import gc
import json
import platform
import tempfile
import time
from pathlib import Path

from pipeplan.api import register_pipeplan, run_pipeline
from pipeplan.frontend.facts_toml import loads_facts_toml
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import pool_toml
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from pipeplan.transforms.convert_pplan_to_cplan import bind, problem_from_module
from pipeplan.transforms.cplan_verify import check_invariants
from xdsl.context import Context

ROOT = Path(__file__).resolve().parent.parent
STAGES = 8
PIPE = ("convert-runplan-to-pplan{{pool=\"{pool}\"}},pplan-legalize{{target=virtual-queue}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}}")


def costed_module(mult: int, tmp: Path):
    """The costed pplan module of the 70B facts with ``80 * mult`` blocks over 8 stages."""
    text = (ROOT / "examples" / "llama3-70b.toml").read_text()
    text = text.replace("block_count = 80", f"block_count = {80 * mult}").replace('"Q4_K"', '"Q4_0"')
    facts = loads_facts_toml(text)
    mem = (80 << 30) * mult
    nodes = tuple(NodeSpec(f"n{i}", mem, 3.0e12, 1.0e15, 5.0e10) for i in range(STAGES))
    pool = tmp / f"pool{mult}.toml"
    pool.write_text(pool_toml(NodePool(nodes)))
    mod = plan_run(facts, RuntimeConfig(max_seq_len=1024), NodePool(nodes), STAGES)
    run_pipeline(register_pipeplan(Context()), mod, PIPE.format(pool=pool))
    return mod


def measure(mult: int, tmp: Path) -> dict:
    t = time.perf_counter()
    mod = costed_module(mult, tmp)
    t_pp = time.perf_counter() - t
    t = time.perf_counter()
    prob = problem_from_module(mod)
    t_adapt = time.perf_counter() - t
    gc.collect()  # the timed region measures the binder, not a collection of the previous pipeline's garbage
    gc.disable()
    try:
        t, c = time.perf_counter(), time.process_time()
        res = bind(prob, "list-schedule")
        t_bind, c_bind = time.perf_counter() - t, time.process_time() - c
    finally:
        gc.enable()
    t = time.perf_counter()
    bad = check_invariants(res.plan)
    t_verify = time.perf_counter() - t
    dev = [r for r in res.reports if r.space == "device"]
    worst = max(dev, key=lambda r: r.peak / max(r.lower_bound, 1))
    worst_t = max(dev, key=lambda r: r.transient_peak / max(r.transient_lower_bound, 1))
    return {
        "blocks": 80 * mult, "stages": STAGES, "tasks": len(prob.tasks), "buffers": len(prob.buffers),
        "pplan_pipeline_s": round(t_pp, 3), "adapter_s": round(t_adapt, 3), "schedule_memplan_s": round(t_bind, 3),
        "schedule_memplan_cpu_s": round(c_bind, 3),
        "verify_s": round(t_verify, 3), "violations": len(bad), "makespan_s": res.schedule.makespan,
        "worst_peak_over_bound": round(worst.peak / worst.lower_bound, 6),
        "worst_transient_peak_over_bound": round(worst_t.transient_peak / max(worst_t.transient_lower_bound, 1), 6),
        "device_reports": [{"device": r.device, "peak": r.peak, "lower_bound": r.lower_bound,
                            "transient_peak": r.transient_peak, "transient_lower_bound": r.transient_lower_bound}
                           for r in dev],
    }


MULTS = (1, 2, 4)


def sweep() -> list[dict]:
    """Measure 1x, 2x and 4x the 80 blocks; each row gets ``growth_vs_1x``: schedule+memplan CPU time
    of this process relative to 1x (CPU time, so other load on the shared machine does not skew it)."""
    with tempfile.TemporaryDirectory() as d:
        rows = [measure(mult, Path(d)) for mult in MULTS]
    for r in rows:
        r["growth_vs_1x"] = round(r["schedule_memplan_cpu_s"] / max(rows[0]["schedule_memplan_cpu_s"], 1e-9), 2)
    return rows


def main() -> int:
    rows = sweep()
    base = rows[0]
    print(f"{'blocks':>6} {'tasks':>6} {'bufs':>6} {'pplan s':>8} {'adapt s':>8} {'sched+mem s':>11} {'growth':>7} "
          f"{'verify s':>8} {'peak/bound':>10} {'trans/bound':>11}")
    for r in rows:
        print(f"{r['blocks']:>6} {r['tasks']:>6} {r['buffers']:>6} {r['pplan_pipeline_s']:>8.2f} {r['adapter_s']:>8.2f} "
              f"{r['schedule_memplan_s']:>11.3f} {r['growth_vs_1x']:>6.2f}x {r['verify_s']:>8.3f} "
              f"{r['worst_peak_over_bound']:>10.4f} {r['worst_transient_peak_over_bound']:>11.4f}")
    ok = base["schedule_memplan_s"] < 3.0 and all(r["violations"] == 0 for r in rows)
    print(f"80-block list scheduling + memory planning: {base['schedule_memplan_s']:.3f} s (budget 3 s): "
          f"{'OK' if ok else 'OVER'}")
    out = ROOT / "bench" / "results" / "concrete_scaling.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(), "rows": rows},
                              indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
