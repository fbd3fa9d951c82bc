"""``pipeplan run``: plan a pipeline for a GGUF model and generate text through it.

Flow: read the GGUF header (``read_model_facts``) -> ``plan_run`` (node pool from ``--nodes`` or
``--stages`` local nodes) -> ``project_provisions`` -> :func:`pipeplan.runtime.orchestrator.generate`
on the chosen backend. Prints the prompt followed by the generated text, or with ``--json`` the
token ids, prompt ids, ordered stage events and per-phase timings (load, prefill, decode, tok/s).

Exit status: 0 ok; 2 a typed error (bad input, rejected plan); 3 a stage fault, printed as
``error[stage_fault:<kind>]: stage <i>: <detail>`` (mapped by ``tools/cli.py``).
Hidden flag ``--inject-fault STAGE:KIND`` (or ``$PIPEPLAN_INJECT_FAULT``) makes that stage fail at
the step of that kind, for fault tests.
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "generate text with a pipeline-parallel plan of a GGUF model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``run`` options on ``p``."""
    p.add_argument("model", metavar="MODEL.gguf", help="local GGUF file (or the first gguf-split shard)")
    p.add_argument("--prompt", required=True, help="prompt text (BOS is prepended)")
    p.add_argument("--stages", type=int, default=1, help="number of pipeline stages (default 1)")
    p.add_argument("--nodes", metavar="POOL.toml", help="node pool TOML (default: --stages local nodes)")
    p.add_argument("--max-tokens", type=int, default=40, help="tokens to generate (default 40)")
    p.add_argument("--max-seq-len", type=int, default=256, help="positions per sequence the plan sizes (default 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="keep the k best logits (0 = all)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = all)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    p.add_argument("--backend", choices=("local", "inproc"), default="local",
                   help="local: one process per stage with shared-memory rings (default); inproc: threads")
    p.add_argument("--cache-dir", default=None, help="weight cache (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    p.add_argument("--json", action="store_true", help="print ids, events and timings as JSON")
    p.add_argument("--inject-fault", metavar="STAGE:KIND", default=None, help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    """Run the command; typed errors propagate to ``tools/cli.py`` (exit 2, or 3 for StageFault)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml, local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.events import WeightsReady
    from pipeplan.runtime.orchestrator import generate
    from pipeplan.runtime.stage import FaultInjection

    fi = FaultInjection.parse(args.inject_fault) if args.inject_fault else FaultInjection.from_env()
    facts = read_model_facts(args.model)
    pool = load_pool_toml(args.nodes) if args.nodes else local_pool(max(args.stages, 1))
    module = plan_run(facts, RuntimeConfig(max_seq_len=args.max_seq_len), pool, args.stages)
    provisions = project_provisions(module)

    bar = None
    if sys.stderr.isatty() and not args.json:
        from tqdm import tqdm

        bar = tqdm(total=len(provisions), desc="loading stage weights", unit="stage", leave=False)

    def on_event(ev) -> None:
        if bar is not None and isinstance(ev, WeightsReady):
            bar.update(1)

    try:
        result = generate(args.model, provisions, args.prompt, max_tokens=args.max_tokens,
                          temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                          backend=args.backend, fault_injection=fi, on_event=on_event, cache_dir=args.cache_dir)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        doc = {"model": str(args.model), "stages": len(provisions), "backend": args.backend,
               "prompt": args.prompt, **result.to_json()}
        print(json.dumps(doc, indent=1))
    else:
        print(args.prompt + result.text)
    return 0
