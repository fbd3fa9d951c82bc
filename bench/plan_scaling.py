"""Planning scaling benchmark, three phases in one table and one JSON (issues 2, 4 and 5).

1. ``runplan``  (issue 2): read facts + plan + build IR + verify + project, over blocks x stages.
2. ``portable`` (issue 4): the full portable pipeline (convert-runplan-to-pplan, pplan-legalize,
   pplan-select-implementations, pplan-resolve-costs{roofline}) on a 70B-shaped model over 8 stages
   for 10..160 blocks (:func:`portable_scaling.sweep`). Target: 80 blocks < 2 s; CPU us per task
   flat (growth no worse than linear in tasks).
3. ``concrete`` (issue 5): list scheduling + memory planning (``bind(..., "list-schedule")``) of the
   70B-shaped model over 8 stages at 1x, 2x and 4x the 80 blocks (:func:`concrete_scaling.sweep`).
   Target: 80 blocks < 3 s; growth printed for 2x and 4x.
4. ``pipeline`` (issue 13): the 70B-shaped plan (``examples/llama3-70b.toml``, 80 blocks) over 8 stages through
   runplan -> vmachine in ONE ``pipeplan-opt`` invocation (a fresh process, wall time including start-up), then
   the parse time of the largest intermediate IR (each pipeline prefix's output is written once, the largest is
   parsed in-process, best of ``--repeat``). Targets: pipeline < 3 s, parse < 2 s.

Phase 1 in detail:

For each block count B (32..1024) a llama-70B-shaped facts TOML (hidden 8192, 64 heads, 8 KV heads,
ffn 28672, Q4_K weights; B blocks) is written and read with ``load_facts_toml``; then for each stage
count S (2..64, S <= B) on an S-node pool (alternating bandwidths, ample memory) it times:

* ``read``    load_facts_toml (once per B, charged to every S)
* ``plan``    plan_run_spec (the decision: partition, edges, specs)
* ``build``   build_runplan_module (IR construction)
* ``verify``  verify_runplan (the dialect's contract verifiers)
* ``project`` project_provisions (runplan-project-provisioning on a clone + read back)

``plan_run`` = plan + build + verify. Prints a table with total wall time, time/(B*S) and the ratio
of each row's total to the 80x8 row (wall times; linearity is judged on this process's CPU time,
which other load on the machine does not inflate), and writes ``bench/results/plan_scaling.json``.
Target (issue brief): 80 blocks x 8 stages end to end < 0.5 s; cost no worse than linear in B x S.

Usage: ``python bench/plan_scaling.py [--quick] [--repeat N] [--out PATH] [--phases runplan,portable,concrete,pipeline]``
(default run a few minutes here; ``--quick`` a smaller grid for phases 1 and 2).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import concrete_scaling
import portable_scaling
from pipeplan.dialects.runplan import verify_runplan
from pipeplan.dialects.runplan_build import build_runplan_module, project_provisions
from pipeplan.frontend.facts_toml import load_facts_toml
from pipeplan.frontend.planner import plan_run_spec
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig

BLOCKS = (32, 80, 128, 256, 512, 1024)
STAGES = (2, 8, 16, 32, 64)
QUICK_BLOCKS = (32, 80, 256)
QUICK_STAGES = (2, 8, 32)
LINEAR_TOLERANCE = 1.25
"""Rows at the smallest stage count grow linearly in blocks (ratio ~1.0), so timing noise on this
shared 2-core machine can push them slightly above 1: up to this ratio still counts as linear."""

FACTS_TOML = """[model]
architecture = "llama"
name = "bench-llama-{blocks}"
block_count = {blocks}
embedding_length = 8192
head_count = 64
head_count_kv = 8
feed_forward_length = 28672
vocab_size = 128256
context_length = 8192
rope_freq_base = 500000.0
rms_norm_eps = 1e-5
weight_type = "Q4_K"
"""


def pool(stages: int) -> NodePool:
    """``stages`` nodes with 1 PiB each (memory never binds) and bandwidths alternating 1x / 2x."""
    return NodePool(tuple(NodeSpec(f"n{i}", 1 << 50, bandwidth_bytes_per_s=1e12 * (1 + i % 2))
                          for i in range(stages)))


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def bench_case(facts_path: Path, blocks: int, stages: int, repeat: int) -> dict:
    """Best-of-``repeat`` seconds of each step for one (blocks, stages) case."""
    best: dict[str, float] = {}
    config = RuntimeConfig(max_seq_len=2048)
    for _ in range(repeat):
        cpu0 = time.process_time()
        facts, t_read = timed(load_facts_toml, facts_path)
        p = pool(stages)
        spec, t_plan = timed(plan_run_spec, facts, config, p, stages)
        module, t_build = timed(build_runplan_module, spec, [n.id for n in p.nodes])
        _, t_verify = timed(verify_runplan, module)
        provs, t_project = timed(project_provisions, module)
        assert len(provs) == stages and provs[-1].layer_end == blocks
        row = {"read": t_read, "plan": t_plan, "build": t_build, "verify": t_verify, "project": t_project}
        row["total"] = sum(row.values())
        row["cpu"] = time.process_time() - cpu0  # this process's CPU time: robust to other load
        if not best or row["total"] < best["total"]:
            best = row
    sizes = [s.layer_end - s.layer_start for s in spec.stages]
    return {"blocks": blocks, "stages": stages, "ops": len(list(module.walk())), **best,
            "per_block_stage_us": best["total"] / (blocks * stages) * 1e6,
            "min_stage_blocks": min(sizes), "max_stage_blocks": max(sizes)}


def runplan_phase(quick: bool, repeat: int) -> tuple[list[dict], dict]:
    """Phase 1 over the blocks x stages grid: rows and a summary (80x8 target, linearity)."""
    blocks_list, stages_list = (QUICK_BLOCKS, QUICK_STAGES) if quick else (BLOCKS, STAGES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for blocks in blocks_list:
            path = Path(tmp) / f"llama-{blocks}.toml"
            path.write_text(FACTS_TOML.format(blocks=blocks))
            for stages in stages_list:
                if stages > blocks:
                    continue
                rows.append(bench_case(path, blocks, stages, repeat if blocks <= 128 else 1))
    ref = next((r for r in rows if (r["blocks"], r["stages"]) == (80, 8)), rows[0])
    base = rows[0]
    for r in rows:
        r["total_ratio"] = r["total"] / ref["total"]
        r["work_ratio"] = (r["blocks"] * r["stages"]) / (ref["blocks"] * ref["stages"])
        r["growth_vs_smallest"] = (r["cpu"] / base["cpu"]) / ((r["blocks"] * r["stages"]) /
                                                                 (base["blocks"] * base["stages"]))
    worst = max(rows[1:] or rows, key=lambda r: r["growth_vs_smallest"])
    target = ref["total"] < 0.5 if (ref["blocks"], ref["stages"]) == (80, 8) else None
    summary = {"reference": {"blocks": ref["blocks"], "stages": ref["stages"], "total_s": ref["total"]},
               "target_80x8_under_0_5s": target, "worst_cpu_growth_over_work_growth": worst["growth_vs_smallest"],
               "worst_at": [worst["blocks"], worst["stages"]],
               "no_worse_than_linear": worst["growth_vs_smallest"] <= LINEAR_TOLERANCE}
    return rows, summary


def portable_phase(quick: bool, repeat: int) -> tuple[list[dict], dict]:
    """Phase 2 (:func:`portable_scaling.sweep`): rows and a summary (80x8 < 2 s, us/task growth)."""
    rows = portable_scaling.sweep(quick, max(repeat, 1))
    r80 = next(r for r in rows if r["blocks"] == 80)
    base = rows[0]
    for r in rows:
        r["growth_vs_smallest"] = r["cpu_us_per_task"] / base["cpu_us_per_task"]
    worst = max(rows, key=lambda r: r["growth_vs_smallest"])
    return rows, {"total_80x8_s": r80["total_s"], "cpu_80x8_s": r80["cpu_s"], "target_80x8_under_2s": r80["total_s"] < 2.0,
                  "worst_us_per_task_growth": worst["growth_vs_smallest"],
                  "no_worse_than_linear_in_tasks": worst["growth_vs_smallest"] <= LINEAR_TOLERANCE}


def concrete_phase() -> tuple[list[dict], dict]:
    """Phase 3 (:func:`concrete_scaling.sweep`): rows and a summary (80 blocks < 3 s, 2x/4x growth)."""
    rows = concrete_scaling.sweep()
    base = rows[0]
    return rows, {"schedule_memplan_80_s": base["schedule_memplan_s"],
                  "target_80_under_3s": base["schedule_memplan_s"] < 3.0,
                  "growth_2x": rows[1]["growth_vs_1x"] if len(rows) > 1 else None,
                  "growth_4x": rows[2]["growth_vs_1x"] if len(rows) > 2 else None,
                  "violations": sum(r["violations"] for r in rows)}


REPO = Path(__file__).resolve().parents[1]
PIPELINE = ("convert-runplan-to-pplan{{pool=\"{pool}\"}}", "pplan-legalize{{target=virtual-queue}}",
            "pplan-select-implementations", "pplan-resolve-costs{{evidence=roofline}}",
            "convert-pplan-to-cplan{{binder=list-schedule}}", "cplan-verify",
            "convert-cplan-to-vmachine{{model=\"{facts}\"}}")
PIPELINE_STAGES = 8


def _opt(args: list[str], tmp: Path) -> float:
    """Wall seconds of one ``pipeplan-opt`` process (a fresh interpreter, as a user runs it)."""
    t = time.perf_counter()
    exe = Path(sys.executable).parent / "pipeplan-opt"
    subprocess.run([str(exe) if exe.exists() else "pipeplan-opt", *args], check=True, cwd=tmp,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def pipeline_phase(repeat: int) -> tuple[list[dict], dict]:
    """Phase 4: runplan -> vmachine of the 70B-shaped 8-stage plan in one invocation; parse of the largest IR."""
    from pipeplan.api import register_pipeplan
    from pipeplan.dialects.diagnostics import parse_located
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import pool_toml
    from xdsl.context import Context
    from xdsl.parser import Parser

    facts_path = REPO / "examples" / "llama3-70b.toml"
    nodes = tuple(NodeSpec(f"g{i}", 80 * 2**30, 2.0e12, 1.0e15, 5.0e10) for i in range(PIPELINE_STAGES))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        pool_path = tmp / "pool.toml"
        pool_path.write_text(pool_toml(NodePool(nodes)))
        plan = tmp / "runplan.mlir"
        plan.write_text(str(plan_run(load_facts_toml(facts_path), RuntimeConfig(max_seq_len=4096),
                                     NodePool(nodes), PIPELINE_STAGES)))
        passes = [p.format(pool=pool_path, facts=facts_path) for p in PIPELINE]
        whole = min(_opt([str(plan), "-p", ",".join(passes), "-o", str(tmp / "vmachine.mlir")], tmp)
                    for _ in range(max(repeat, 1)))
        rows = [{"ir": "runplan", "bytes": plan.stat().st_size}]
        src = plan
        for i, p in enumerate(passes):
            out = tmp / f"ir{i}.mlir"
            _opt([str(src), "-p", p, "-o", str(out)], tmp)
            rows.append({"ir": p.split("{")[0], "bytes": out.stat().st_size})
            src = out
        largest = max(range(len(rows)), key=lambda i: rows[i]["bytes"])
        text = (plan if largest == 0 else tmp / f"ir{largest - 1}.mlir").read_text()
        ctx = register_pipeplan(Context())
        best = xdsl_best = float("inf")
        for _ in range(max(repeat, 1)):
            t = time.perf_counter()
            module = parse_located(ctx, text, "largest.mlir")  # what pipeplan-opt and the API parse with
            best = min(best, time.perf_counter() - t)
            t = time.perf_counter()
            Parser(ctx, text).parse_module()  # xDSL's own parser, for reference
            xdsl_best = min(xdsl_best, time.perf_counter() - t)
        ops = sum(1 for _ in module.walk())
    summary = {"pipeline_s": whole, "target_pipeline_under_3s": whole < 3.0, "largest_ir": rows[largest]["ir"],
               "largest_ir_bytes": rows[largest]["bytes"], "largest_ir_ops": ops, "parse_s": best, "xdsl_parse_s": xdsl_best,
               "target_parse_under_2s": best < 2.0}
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small grid (CI smoke run)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for cases up to 128 blocks (default 3)")
    ap.add_argument("--phases", default="runplan,portable,concrete,pipeline", help="comma-separated subset of the phases")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "plan_scaling.json"))
    args = ap.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(phases) - {"runplan", "portable", "concrete", "pipeline"})
    if unknown:
        ap.error(f"unknown phase {unknown[0]!r} (known: runplan, portable, concrete, pipeline)")
    t0 = time.perf_counter()
    result: dict = {"benchmark": "plan_scaling", "python": platform.python_version(), "machine": platform.machine()}
    table: list[tuple] = []  # phase, blocks, stages, units, seconds, cpu s, growth, detail
    if "runplan" in phases:
        rows, summary = runplan_phase(args.quick, args.repeat)
        result["runplan"] = {**summary, "rows": rows}
        table += [("runplan", r["blocks"], r["stages"], f"{r['ops']} ops", r["total"], r["cpu"],
                   r["growth_vs_smallest"], f"plan {r['plan']:.3f} verify {r['verify']:.3f} ranges "
                   f"{r['min_stage_blocks']}-{r['max_stage_blocks']}") for r in rows]
    if "portable" in phases:
        rows, summary = portable_phase(args.quick, min(args.repeat, 2))
        result["portable"] = {**summary, "rows": rows}
        table += [("portable", r["blocks"], r["stages"], f"{r['tasks']} tasks", r["total_s"], r["cpu_s"],
                   r["growth_vs_smallest"], f"{r['cpu_us_per_task']:.1f} cpu us/task") for r in rows]
    if "concrete" in phases:
        rows, summary = concrete_phase()
        result["concrete"] = {**summary, "rows": rows}
        table += [("concrete", r["blocks"], r["stages"], f"{r['tasks']} tasks", r["schedule_memplan_s"],
                   r["schedule_memplan_cpu_s"],
                   r["growth_vs_1x"], f"peak/bound {r['worst_peak_over_bound']:.4f}, {r['violations']} violations")
                  for r in rows]
    if "pipeline" in phases:
        rows, summary = pipeline_phase(min(args.repeat, 2))
        result["pipeline"] = {**summary, "rows": rows}
    hdr = f"{'phase':<9} {'blocks':>6} {'stages':>6} {'units':>12} {'wall s':>8} {'cpu s':>7} {'growth':>7}  detail"
    print(hdr)
    print("-" * len(hdr))
    for phase, b, st_, units, sec, cpu, growth, detail in table:
        cpu_s = f"{cpu:7.3f}" if cpu is not None else f"{'-':>7}"
        print(f"{phase:<9} {b:>6} {st_:>6} {units:>12} {sec:>8.3f} {cpu_s} {growth:>6.2f}x  {detail}")
    print("growth: runplan = CPU-time growth / (blocks x stages) growth vs the smallest case; portable = CPU us/task "
          "vs the smallest case; concrete = schedule+memplan CPU time vs 1x (80 blocks)")
    if "runplan" in result:
        s = result["runplan"]
        print(f"runplan:  80x8 end to end {s['reference']['total_s']:.3f} s (target < 0.5 s: "
              f"{'met' if s['target_80x8_under_0_5s'] else 'NOT met'}); worst growth/work "
              f"{s['worst_cpu_growth_over_work_growth']:.2f} at {s['worst_at'][0]}x{s['worst_at'][1]} "
              f"({'no worse than linear' if s['no_worse_than_linear'] else 'WORSE than linear'})")
    if "portable" in result:
        s = result["portable"]
        print(f"portable: 80x8 {s['total_80x8_s']:.3f} s wall, {s['cpu_80x8_s']:.3f} s CPU (target < 2 s: "
              f"{'met' if s['target_80x8_under_2s'] else 'NOT met'})"
              f"; worst us/task growth {s['worst_us_per_task_growth']:.2f} "
              f"({'no worse than linear in tasks' if s['no_worse_than_linear_in_tasks'] else 'WORSE than linear'})")
    if "concrete" in result:
        s = result["concrete"]
        print(f"concrete: 80 blocks {s['schedule_memplan_80_s']:.3f} s (target < 3 s: "
              f"{'met' if s['target_80_under_3s'] else 'NOT met'}); 2x blocks -> {s['growth_2x']}x, "
              f"4x blocks -> {s['growth_4x']}x time; {s['violations']} invariant violations")
    if "pipeline" in result:
        s = result["pipeline"]
        sizes = ", ".join(f"{r['ir']} {r['bytes'] / 1e6:.2f} MB" for r in s["rows"])
        print(f"pipeline: 70B-shaped 80 blocks x {PIPELINE_STAGES} stages runplan -> vmachine in one pipeplan-opt "
              f"invocation {s['pipeline_s']:.2f} s (target < 3 s: {'met' if s['target_pipeline_under_3s'] else 'NOT met'})"
              f"; parse of the largest IR ({s['largest_ir']} output, {s['largest_ir_bytes'] / 1e6:.2f} MB, "
              f"{s['largest_ir_ops']} ops) {s['parse_s']:.2f} s, xDSL's Parser {s['xdsl_parse_s']:.2f} s (target < 2 s: "
              f"{'met' if s['target_parse_under_2s'] else 'NOT met'})")
        print(f"          IR after each pass: {sizes}")
    wall = time.perf_counter() - t0
    result["wall_s"] = wall
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out} ({wall:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
