"""``pipeplan run``: plan a pipeline for a GGUF model, compile it, and generate text by replaying it.

Usage::

    pipeplan run MODEL.gguf --prompt TEXT [--prompt TEXT ...] [--parallel N] [--micro-batches M] [--stages N]
                 [--nodes POOL.toml] [--max-tokens K] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--threads N]
                 [--backend local|inproc|ray|direct] [--ray-address ADDR] [--target cpu|reference|cuda]
                 [--prefill-rows R] [--max-seq-len L] [--cache-dir DIR] [--timeline measured.json]
                 [--trace trace.json] [--json]

Flow (DESIGN.md §1: the runtime runs what the compiler produced):

1. read the GGUF header (``read_model_facts``) and plan (``plan_run``) on the node pool: ``--nodes``, or
   ``--stages`` local nodes stating this machine's peaks (``$PIPEPLAN_LOCAL_PEAKS`` or the cached probe of
   :func:`pipeplan.frontend.pool.local_peaks`, via :func:`~pipeplan.runtime.compiled.local_pool_with_peaks`: the
   explicit DeploymentBinding of a local run);
2. compile the plan in-process into a replay package for the ``virtual-queue`` target
   (:func:`~pipeplan.runtime.compiled.compile_for_run`) with the cached calibration of this machine + model for
   ``--target``/``--threads`` when there is one (``pipeplan calibrate``), else roofline evidence
   (:func:`pipeplan.tools.calibrate.select_evidence`; with ``--timeline``/``--trace`` one ``evidence: ...``
   line on stderr says which, and the measured bundle's ``meta.evidence`` and ``--json``'s ``package.evidence`` too), cached under
   ``<cache>/packages/<sha256 of plan, pool, options>`` so a repeated run does not recompile; the prefill
   step is compiled for ``--prefill-rows`` rows (default 64, at most ``max_seq_len - 1``; longer prompts
   are sent in chunks);
3. ``project_provisions`` and :func:`pipeplan.runtime.orchestrator.generate` on the backend, every stage
   binding the package's stage program (``programs=``) instead of building its own (``--backend direct``:
   inproc, one kernel thread, reference kernels unless ``--target``). With ``--timeline`` (TimelineBundle JSON)
   or ``--trace`` (Chrome trace) every stage records the instructions it executes, on every backend and target
   (:func:`pipeplan.tools.generation.recording`; :mod:`pipeplan.runtime.trace`), and the measured timeline is
   built from those records.

``--target cpu`` (default) runs :mod:`pipeplan.runtime.kernels.cpu` (weights kept in their GGUF types, C
kernels); ``--target reference`` the torch float32 reference kernels; ``--target cuda`` compiles the plan
down to its ``tmachine`` program instead of the virtual package (:mod:`pipeplan.runtime.tmachine_run`,
cached as ``<cache>/packages/<key>.tmachine.mlir``: ``--json``'s ``package.path``) and every stage runs its
node's streams with the tmachine interpreter, launching the Triton kernels
(``pipeplan.runtime.kernels.triton``: weights kept in GGUF format, on the GPU when torch sees one, else
Triton's interpreter on the CPU) with the lowered grids; two stages on one node are
``error[invalid_runtime_config]``; its measured timeline holds the executed tmachine instructions
(:func:`~pipeplan.runtime.tmachine_run.measured_timeline`). ``--backend ray`` runs the
stages as Ray actors on the Ray nodes carrying the plan's node ids: ``--ray-address`` connects to a
cluster, without it an embedded local Ray instance is started (and stopped) whose node carries every
node id; a node id no live Ray node carries is ``error[unknown_node]`` (exit 2) before any actor starts.

Output (:mod:`pipeplan.tools.generation`, shared with ``pipeplan replay``): the prompt, then the generated
text streamed token by token, then one summary line on stderr (prompt tokens and prefill tok/s, generated
tokens and decode tok/s, load time, stages and backend, package compile time or cache hit); with
``--json`` the token ids, prompt ids, ordered stage events, per-phase timings and the package (path,
cached, compile seconds) instead.
Several prompts (``--prompt`` repeated) run through one started pipeline, up to ``--parallel N`` at once
(default 1: one after another; the plan sizes the KV cache and edge rings for N sequences, and a pool that
holds the model for one sequence but not for N is ``error[insufficient_memory]`` naming ``parallel``): no
streaming; each prompt and its text are printed in prompt order (a blank line between), then one summary
line per prompt and one ``pipeplan: <n> sequences, <tokens> generated tokens in <s> s, <tok/s> tok/s
aggregate`` line on stderr; ``--json`` gives ``{"results": [...]}``, one document per prompt. With one prompt
the output is the same whatever ``--parallel``.

Exit status: 0 ok; 2 a typed error (bad input, rejected plan, compile diagnostic); 3 a stage fault,
printed as ``error[stage_fault:<kind>]: stage <i>: <detail>`` (mapped by ``tools/cli.py``).
Hidden flag ``--inject-fault STAGE:KIND`` (or ``$PIPEPLAN_INJECT_FAULT``) makes that stage fail at the
step of that kind, for fault tests; a stage the run does not have is ``error[bad_fault_injection]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from pipeplan.runtime.interrupts import exits_on_interrupt
from pipeplan.tools.generation import (
    COMPILE_TARGETS,
    TARGET_KERNELS,
    add_generation_arguments,
    check_cache_dir,
    check_fault_stage,
    check_generation_options,
    check_prompt,
    generate_text,
    generate_texts,
    make_backend,
    recorded_timeline,
    recording,
    split_prompts,
    summary_line,
)

HELP = "generate text with a pipeline-parallel plan of a GGUF model (plan -> compile -> replay)"

DEFAULT_PREFILL_ROWS = 64
"""``--prefill-rows`` default: :data:`pipeplan.runtime.compiled.DEFAULT_PREFILL_ROWS` (a library ``Pipeline``'s), kept
here so that ``--help`` imports no compiler."""
DEFAULT_MAX_SEQ_LEN = 256
MAX_SEQ_LEN_LIMIT = 2**31 - 1

__all__ = ["DEFAULT_PREFILL_ROWS", "HELP", "TARGET_KERNELS", "add_arguments", "check_cache_dir", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``run`` options on ``p`` (the generation options are shared with ``pipeplan replay``)."""
    p.add_argument("model", metavar="MODEL.gguf", help="local GGUF file (or the first gguf-split shard)")
    p.add_argument("--stages", type=int, default=1, help="number of pipeline stages (default 1)")
    p.add_argument("--nodes", metavar="POOL.toml",
                   help="node pool TOML, with peaks for the roofline evidence (default: --stages local nodes)")
    p.add_argument("--max-seq-len", type=int, default=DEFAULT_MAX_SEQ_LEN,
                   help=f"positions per sequence the plan sizes (default {DEFAULT_MAX_SEQ_LEN})")
    p.add_argument("--prefill-rows", type=int, default=DEFAULT_PREFILL_ROWS,
                   help=f"rows of the compiled prefill step (default {DEFAULT_PREFILL_ROWS}, capped at max-seq-len - 1)")
    p.add_argument("--parallel", type=int, default=1, metavar="N",
                   help="sequences running at once for several --prompt (KV-cache slots per stage; default 1)")
    p.add_argument("--micro-batches", type=int, default=None, metavar="M",
                   help="most frames in flight; a decode frame carries up to ceil(N / M) sequences' rows "
                        "(default: the M in 1..min(--parallel, --stages) the compiled costs predict fastest, "
                        "named on stderr)")
    add_generation_arguments(p, several_prompts=True)


def _check_counts(args: argparse.Namespace) -> None:
    from pipeplan.errors import RunPlanRejection

    if args.prefill_rows < 1:
        raise RunPlanRejection(f"--prefill-rows must be >= 1, got {args.prefill_rows}", code="invalid_request",
                               where="prefill_rows")
    if not 1 <= args.max_seq_len <= MAX_SEQ_LEN_LIMIT:
        raise RunPlanRejection(f"--max-seq-len must be in [1, {MAX_SEQ_LEN_LIMIT}], got {args.max_seq_len}",
                               code="invalid_runtime_config", where="max_seq_len")
    if args.max_tokens > args.max_seq_len:
        raise RunPlanRejection(f"--max-tokens {args.max_tokens} exceeds --max-seq-len {args.max_seq_len} (prompt + "
                               f"generated positions must fit)", code="invalid_request", where="max_tokens")


@exits_on_interrupt  # SIGINT / SIGTERM: stages stopped, segments unlinked, one error[interrupted] line, 130 / 143
def main(args: argparse.Namespace) -> int:
    """Run the command; typed errors propagate to ``tools/cli.py`` (exit 2, or 3 for StageFault)."""
    from pipeplan.errors import GGUFError
    from pipeplan.files.paths import check_input_file

    check_input_file(args.model, "GGUF file", GGUFError)  # a FIFO/device/directory: at once, before torch loads
    for text in split_prompts(args):
        check_prompt(text)
    if args.backend == "local":  # the stage host's imports (torch) run while this process plans and compiles
        from pipeplan.runtime.stage_host import prestart_stage_host

        prestart_stage_host()
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.runtime.compiled import compile_for_run, local_pool_with_peaks
    from pipeplan.runtime.weights_source import cache_root
    from pipeplan.tools.calibrate import select_evidence

    fi = check_generation_options(args)
    _check_counts(args)
    from pipeplan.tools.cmd_serve import check_parallel, pick_micro_batches, runtime_config

    check_parallel(args.parallel, args.micro_batches)
    cache_root(args.cache_dir)  # $PIPEPLAN_CACHE that is a file: error[cache_unusable] before any work
    backend = make_backend(args)  # bad backend options fail before any work
    t0 = time.perf_counter()
    facts = read_model_facts(args.model)
    if not 1 <= args.stages <= facts.block_count:
        raise RunPlanRejection(f"--stages {args.stages}: the model has {facts.block_count} blocks, so 1 to "
                               f"{facts.block_count} stages", code="invalid_stage_count", where="stages")
    if args.nodes:
        pool = load_pool_toml(args.nodes)
        with open(args.nodes, encoding="utf-8") as f:
            pool_text = f.read()
    else:
        pool, pool_text = local_pool_with_peaks(args.stages)
    module = plan_run(facts, runtime_config(args.max_seq_len, args.parallel), pool, args.stages)
    provisions = project_provisions(module)
    check_fault_stage(fi, len(provisions))
    t_plan = time.perf_counter() - t0
    choice = select_evidence(None, facts.files, target=args.target, threads=args.threads or 1, cache_dir=args.cache_dir)
    compiled = compile_for_run(module, pool_text, cache_dir=args.cache_dir, evidence=choice.providers,
                               prompt_len=max(1, min(args.prefill_rows, args.max_seq_len - 1)),
                               target=COMPILE_TARGETS[args.target], model=args.model)
    args.micro_batch_choice = pick_micro_batches(args, compiled.package)
    with recording(args, compiled.programs) as (programs, trace_dir):
        return _generate(args, backend, provisions, compiled, programs, fi, t_plan, choice, trace_dir)


def _generate(args: argparse.Namespace, backend, provisions, compiled, programs, fi, t_plan: float, choice,
              trace_dir: str | None) -> int:
    """Generate (one prompt streamed, or several) and print the output (module docstring)."""
    from pipeplan.runtime.events import WeightsReady

    bar = None
    if sys.stderr.isatty() and not args.json and args.backend != "direct":
        from tqdm import tqdm

        bar = tqdm(total=len(provisions), desc="loading stage weights", unit="stage", leave=False)

    def on_event(ev) -> None:
        if bar is not None and isinstance(ev, WeightsReady):
            bar.update(1)

    def close_bar() -> None:
        if bar is not None:
            bar.close()

    if len(args.prompts) > 1:
        close_bar()
        return _several(args, backend, provisions, compiled, programs, fi, on_event, t_plan, choice, trace_dir)
    try:
        result, _ = generate_text(args, model=args.model, backend=backend, provisions=provisions, programs=programs,
                                  fi=fi, on_event=on_event, on_start=close_bar)
    finally:
        close_bar()
    timeline = None
    if trace_dir is not None:
        timeline = recorded_timeline(args, programs, trace_dir, compiled.package, {"evidence": choice.to_json()})
    if timeline is not None and args.timeline:  # the measured bundle names the evidence the package was priced with
        timeline.meta["evidence"] = choice.to_json()
        timeline.write(args.timeline, "--timeline")
    if args.timeline or args.trace:  # the predicted side of `pipeplan compare`: say what priced it
        print(choice.message, file=sys.stderr)
    if args.json:
        doc = {"model": str(args.model), "stages": len(provisions), "backend": args.backend, "target": args.target,
               "prompt": args.prompt, "prompt_ids": result.prompt_ids, "token_ids": result.token_ids,
               "text": result.text, "events": [], "timings": result.timings}
        if hasattr(result, "to_json"):
            doc.update(result.to_json())
        doc["package"] = {"path": str(compiled.package), "cached": compiled.cached, "plan_s": t_plan,
                          "compile_s": compiled.compile_s, "load_s": compiled.load_s, "evidence": choice.to_json()}
        if getattr(args, "micro_batch_choice", None) is not None:
            doc["micro_batches"] = args.micro_batch_choice
        print(json.dumps(doc, indent=1))
    else:
        pkg = "package cached" if compiled.cached else f"compiled in {compiled.compile_s:.2f} s"
        print(summary_line(result.timings, len(provisions), args.backend, pkg), file=sys.stderr)
    return 0


def _several(args: argparse.Namespace, backend, provisions, compiled, programs, fi, on_event, t_plan: float, choice,
             trace_dir: str | None) -> int:
    """Several ``--prompt``: run them (up to ``--parallel`` at once) and print them in order (module docstring)."""
    t0 = time.perf_counter()
    results = generate_texts(args, model=args.model, backend=backend, provisions=provisions,
                             programs=programs, fi=fi, on_event=on_event)
    wall = time.perf_counter() - t0
    if trace_dir is not None:
        timeline = recorded_timeline(args, programs, trace_dir, compiled.package, {"evidence": choice.to_json()})
        if args.timeline:
            timeline.write(args.timeline, "--timeline")
        print(choice.message, file=sys.stderr)
    if args.json:
        docs = [{"prompt": p, "prompt_ids": r.prompt_ids, "token_ids": r.token_ids, "text": r.text,
                 "timings": r.timings} for p, r in zip(args.prompts, results, strict=True)]
        doc = {"model": str(args.model), "stages": len(provisions), "backend": args.backend,
               "target": args.target, "parallel": args.parallel, "results": docs,
               "package": {"path": str(compiled.package), "cached": compiled.cached, "plan_s": t_plan,
                           "compile_s": compiled.compile_s, "load_s": compiled.load_s, "evidence": choice.to_json()}}
        if getattr(args, "micro_batch_choice", None) is not None:
            doc["micro_batches"] = args.micro_batch_choice
        print(json.dumps(doc, indent=1))
        return 0
    from pipeplan.tools.generation import TokenPrinter

    for i, (p, r) in enumerate(zip(args.prompts, results, strict=True)):
        if i:
            print(flush=True)
        TokenPrinter(p).finish(r.text)
    for r in results:
        print(summary_line(r.timings, len(provisions), args.backend), file=sys.stderr)
    n = sum(len(r.token_ids) for r in results)
    wall -= results[0].timings.get("load_s", 0.0) if results else 0.0  # the stages' start is in the summaries
    print(f"pipeplan: {len(results)} sequences, {n} generated tokens in {wall:.2f} s, "
          f"{n / wall if wall > 0 else 0.0:.1f} tok/s aggregate (--parallel {args.parallel})", file=sys.stderr)
    return 0
