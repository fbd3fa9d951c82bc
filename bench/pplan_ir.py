"""Portable-plan IR size and parse benchmark (issue 13 items 2 and 5).

Two plans after ``pplan-resolve-costs{evidence=roofline}``:

* ``stories260K`` on 2 stages (``pipeplan plan MODEL --stages 2 --nodes examples/pool-2.toml``, prompt 8):
  the printed module's bytes and bytes per task (target: <= 60 KB);
* the 70B-shaped model (``examples/llama3-70b.toml``) with 80 blocks on 8 stages (prompt 16, the
  cuda-triton target, as ``bench/portable_scaling.py``): the portable pipeline's wall time, the printed
  module's bytes and op count, and the time to print it and to parse it back (``pipeplan-opt``'s
  located parser, verification included).

Prints a table and writes ``bench/results/pplan_ir.json``. Usage:
``python bench/pplan_ir.py [--repeat N] [--out PATH]`` (best of N, default 2).
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import re
import tempfile
import time
from pathlib import Path

from pipeplan.api import build_pipeline, register_pipeplan
from pipeplan.dialects.diagnostics import parse_located
from pipeplan.dialects.pplan import find_plan
from pipeplan.frontend.facts_toml import load_facts_toml
from pipeplan.frontend.gguf_facts import read_model_facts
from pipeplan.frontend.planner import plan_run
from pipeplan.frontend.pool import load_pool_toml, pool_toml
from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
from xdsl.context import Context
from xdsl.printer import Printer

REPO = Path(__file__).resolve().parents[1]
STORIES = REPO.parent / "shared" / "models" / "stories260K.gguf"
PIPE = ("convert-runplan-to-pplan{{prompt_len={prompt} pool=\"{pool}\"}},pplan-legalize{{target={target}}},"
        "pplan-select-implementations,pplan-resolve-costs{{evidence=roofline}}")


def _text(module) -> str:
    buf = io.StringIO()
    Printer(stream=buf).print_op(module)
    return buf.getvalue() + "\n"


def measure(facts, pool: NodePool, pool_file: Path, stages: int, prompt: int, target: str, seq: int) -> dict:
    """One plan through the portable pipeline, then printed and parsed back."""
    ctx = register_pipeplan(Context())
    module = plan_run(facts, RuntimeConfig(max_seq_len=seq), pool, stages)
    t0 = time.perf_counter()
    build_pipeline(PIPE.format(prompt=prompt, pool=pool_file, target=target)).apply(ctx, module)
    pipe_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = _text(module)
    print_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = parse_located(ctx, text, "plan.mlir")
    back.verify()
    parse_s = time.perf_counter() - t0
    tasks = len(find_plan(module).tasks())
    return {"tasks": tasks, "ops": sum(1 for _ in module.walk()), "bytes": len(text.encode()),
            "bytes_per_task": round(len(text.encode()) / tasks), "pipeline_s": pipe_s, "print_s": print_s,
            "parse_s": parse_s}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="runs per plan; the fastest is reported")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "pplan_ir.json"))
    a = ap.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory() as td:
        pool2_file = REPO / "examples" / "pool-2.toml"
        pool2 = load_pool_toml(str(pool2_file))
        facts = read_model_facts(str(STORIES))
        rows["stories260K-2"] = min((measure(facts, pool2, pool2_file, 2, 8, "virtual-queue", 2048)
                                     for _ in range(a.repeat)), key=lambda r: r["pipeline_s"])
        nodes = tuple(NodeSpec(f"g{i}", 80 * 2**30, 2.0e12, 1.0e15, 5.0e10) for i in range(8))
        pool8 = NodePool(nodes)
        pool8_file = Path(td) / "pool.toml"
        pool8_file.write_text(pool_toml(pool8))
        src = (REPO / "examples" / "llama3-70b.toml").read_text()
        path = Path(td) / "llama-80.toml"
        path.write_text(re.sub(r"(?m)^block_count = \d+$", "block_count = 80", src))
        f70 = load_facts_toml(path)
        rows["70b-80x8"] = min((measure(f70, pool8, pool8_file, 8, 16, "cuda-triton", 4096)
                                for _ in range(a.repeat)), key=lambda r: r["pipeline_s"])
    print(f"{'plan':<16}{'tasks':>7}{'ops':>8}{'bytes':>10}{'B/task':>8}{'pipeline s':>12}{'print s':>9}"
          f"{'parse s':>9}")
    for name, r in rows.items():
        print(f"{name:<16}{r['tasks']:>7}{r['ops']:>8}{r['bytes']:>10}{r['bytes_per_task']:>8}"
              f"{r['pipeline_s']:>12.3f}{r['print_s']:>9.3f}{r['parse_s']:>9.3f}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
