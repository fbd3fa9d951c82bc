"""``pipeplan plan``: plan a pipeline-parallel run and print its RunPlan IR.

Usage::

    pipeplan plan MODEL.gguf [--nodes POOL.toml] [--stages N] [--placement ID,ID,...]
                  [--max-seq-len L] [--activation-dtype f32] [--kv-dtype f32] [--ring-slots 2]
                  [--alignment 64] [--run-id ID] [-o plan.mlir]
    pipeplan plan --model-facts FACTS.toml ...          (instead of MODEL.gguf)

Output: the verified ``runplan`` module in the dialect's custom syntax, on stdout or in ``-o``.
A MODEL that is a URL (``scheme://...``) is refused (``error[remote_model]``): the header is read
from a local file; a facts TOML may list URLs in ``files`` (kept verbatim in the weight source).
On any rejection (planner, pool, GGUF, facts TOML) the exit status is 2, stderr holds ONE line
``error[<code>]: <message>``, stdout is empty and no ``-o`` file is written (the file is written
only after the plan is complete and verified, via a temporary file renamed into place).

Defaults: ``--nodes`` omitted -> a local pool of N nodes ``local0..`` (each with this machine's
physical memory and its measured peaks — memory bandwidth, f32 matmul FLOP/s, link = memory bandwidth
— so the plan states everything roofline costing needs; see :func:`pipeplan.frontend.pool.local_pool`
and :func:`~pipeplan.frontend.pool.local_peaks`: probed once with numpy, cached in
``$PIPEPLAN_CACHE/local_peaks.json`` or ``~/.cache/pipeplan/local_peaks.json``, overridden by
``PIPEPLAN_LOCAL_PEAKS="BW,FLOPS"``), N = the stage count. The plan records the pool's node specs.
``--stages`` omitted -> the placement's length; else with ``--nodes`` the fewest stages (on the pool's first
nodes, in pool order) whose partition fits the nodes' memory (:func:`fewest_stages_that_fit`; stderr says
``note: --stages not given: N stage(s) fit ...``); else 1. ``--max-seq-len`` omitted ->
``min(context_length, 2048)``: the model's full context when small, otherwise 2048 positions so that
KV caches and edge objects of long-context models (8192+) stay modest; pass it to plan for more.
"""

from __future__ import annotations

import argparse
import sys

from pipeplan.errors import PipeplanError
from pipeplan.plan_types import RuntimeConfig

HELP = "plan a pipeline-parallel run: print the RunPlan IR (or a typed rejection)"

DEFAULT_MAX_SEQ_LEN_CAP = 2048
"""``--max-seq-len`` default is ``min(model context length, DEFAULT_MAX_SEQ_LEN_CAP)``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``plan`` options on ``parser`` (see the module docstring)."""
    d = RuntimeConfig()
    parser.add_argument("model", nargs="?", metavar="MODEL.gguf", help="GGUF model (first shard of a split set)")
    parser.add_argument("--model-facts", metavar="FACTS.toml", help="model-facts TOML instead of a GGUF file")
    parser.add_argument("--nodes", metavar="POOL.toml",
                        help="node pool ([[nodes]] tables); default: local pool with this machine's measured peaks")
    parser.add_argument("--stages", type=int, metavar="N", help="pipeline stages (default: placement length or 1)")
    parser.add_argument("--placement", metavar="ID,ID,...", help="node id of each stage, in stage order")
    parser.add_argument("--max-seq-len", type=int, metavar="L",
                        help=f"positions per sequence (default: min(context length, {DEFAULT_MAX_SEQ_LEN_CAP}))")
    parser.add_argument("--activation-dtype", default=d.activation_dtype, help="activation edge dtype (default %(default)s)")
    parser.add_argument("--kv-dtype", default=d.kv_dtype, help="KV cache dtype (default %(default)s)")
    parser.add_argument("--ring-slots", type=int, default=d.ring_slots, help="slots per edge ring (default %(default)s)")
    parser.add_argument("--alignment", type=int, default=d.alignment, help="edge object alignment, bytes (default %(default)s)")
    parser.add_argument("--run-id", help="explicit run id (default: derived from the inputs)")
    parser.add_argument("-o", "--output", metavar="plan.mlir", help="write the IR here instead of stdout")


def _load_facts(args: argparse.Namespace):
    if (args.model is None) == (args.model_facts is None):
        raise PipeplanError("give exactly one of MODEL.gguf or --model-facts FACTS.toml", code="usage")
    if args.model_facts is not None:
        from pipeplan.frontend.facts_toml import load_facts_toml

        return load_facts_toml(args.model_facts)
    from pipeplan.frontend.gguf_facts import read_model_facts

    if "://" in args.model:
        raise PipeplanError(f"{args.model}: a URL; `pipeplan plan` reads the GGUF header from a local file. Download "
                            f"it first, or describe it with --model-facts FACTS.toml (files = [\"<url>\"])",
                            code="remote_model", where=args.model)
    return read_model_facts(args.model)


def fewest_stages_that_fit(facts, config: RuntimeConfig, pool) -> int:
    """The smallest stage count ``1 <= N <= min(nodes, blocks)`` the planner can place on the pool's first N
    nodes without ``insufficient_memory``.

    Raises: the planner's first rejection that is not ``insufficient_memory`` (a bad pool, facts or config);
    ``RunPlanRejection(insufficient_memory)`` when no count fits, with the diagnosis at the largest count.
    """
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.planner import plan_run_spec

    top = max(1, min(len(pool.nodes), facts.block_count))
    last, where = "", None
    for n in range(1, top + 1):
        try:
            plan_run_spec(facts, config, pool, n)
        except RunPlanRejection as e:
            if e.code != "insufficient_memory":
                raise
            last, where = e.message, e.where
        else:
            return n
    raise RunPlanRejection(f"no stage count from 1 to {top} fits the memory of the pool's {len(pool.nodes)} nodes "
                           f"({facts.block_count} blocks); with {top} stages: {last}", code="insufficient_memory",
                           where=where)


def render_plan(args: argparse.Namespace) -> str:
    """Plan from parsed ``args`` and return the printed IR (custom syntax, trailing newline).

    Raises: PipeplanError subclasses (RunPlanRejection, GGUFError, ModelFactsError) — never partial.
    """
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml, local_peaks, local_pool

    facts = _load_facts(args)
    placement = None
    if args.placement is not None:
        placement = [p.strip() for p in args.placement.split(",")]
    stages = args.stages if args.stages is not None else (len(placement) if placement else 1)
    pool = load_pool_toml(args.nodes) if args.nodes is not None else local_pool(max(stages, 1), peaks=local_peaks())
    max_seq_len = args.max_seq_len
    if max_seq_len is None:
        max_seq_len = min(facts.context_length, DEFAULT_MAX_SEQ_LEN_CAP)
    config = RuntimeConfig(max_seq_len=max_seq_len, activation_dtype=args.activation_dtype,
                           kv_dtype=args.kv_dtype, ring_slots=args.ring_slots, alignment=args.alignment)
    note = None
    if args.stages is None and placement is None and args.nodes is not None:
        stages = fewest_stages_that_fit(facts, config, pool)
        note = (f"note: --stages not given: {stages} stage{'s' if stages > 1 else ''} fit{'' if stages > 1 else 's'} "
                f"the memory of {args.nodes} (the fewest)")
    module = plan_run(facts, config, pool, stages, placement, run_id=args.run_id)
    if note is not None:  # only once the plan is complete: a rejection stays the one line on stderr
        print(note, file=sys.stderr)
    text = str(module)
    return text if text.endswith("\n") else text + "\n"


def _write_atomic(path: str, text: str) -> None:
    from pipeplan.files.atomic import write_file_atomic

    write_file_atomic(path, text, "-o")  # temp file beside it, renamed when complete; never a non-file


def main(args: argparse.Namespace) -> int:
    """Run ``pipeplan plan``. Returns 0; typed errors propagate to ``pipeplan.tools.cli.main`` (exit 2)."""
    text = render_plan(args)
    if args.output:
        _write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
