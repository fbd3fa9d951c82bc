"""``pipeplan replay``: run a replay package's stage programs on a GGUF model.

Usage::

    pipeplan replay PKG --model MODEL.gguf --prompt TEXT [--max-tokens K] [--max-seq-len L]
                    [--temperature T] [--top-k K] [--top-p P] [--seed S] [--threads N]
                    [--backend local|inproc|ray|direct] [--ray-address ADDR] [--target cpu|reference|cuda]
                    [--timeline measured.json] [--trace trace.json] [--json]

The generation options, their defaults and the output are those of ``pipeplan run``
(:mod:`pipeplan.tools.generation`: default backend ``local``, 40 tokens, greedy):

* ``local`` / ``inproc`` / ``ray``: the normal runtime. The package's deployment (stage -> device, layer
  range) is re-planned into ProvisionStages (:func:`pipeplan.runtime.replay.package_provisions`), and
  every stage worker binds the package's stage program (:func:`~pipeplan.runtime.replay.compiled_stages`)
  on the chosen backend, with ``--target`` kernels (cpu = quantized weights and C kernels, the default; reference
  torch). ``--target cuda`` needs a package compiled for ``cuda-triton``: every stage runs the package's lowered
  ``tmachine.mlir`` (its device's streams) through the tmachine interpreter
  (:func:`~pipeplan.runtime.replay.tmachine_stages`), launching the Triton kernels with the lowered grids and
  arguments, as ``pipeplan run --target cuda`` does (another package: ``error[unsupported_program]``); there
  ``--timeline``/``--trace`` write the measured TimelineBundle of the executed tmachine instructions;
* ``direct``: :func:`pipeplan.runtime.replay.replay_package`, the instruction-by-instruction replay in this
  process with the reference kernels (greedy), which records the measured TimelineBundle: ``--timeline``
  writes it, ``--trace`` its Chrome trace (with ``--target cuda`` a backend records them too).

``--max-seq-len`` is fixed by the package (the plan it was compiled from); given, it must equal it.
Prints the prompt and the generated text streamed token by token, then the summary line on stderr
(``--json``: prompt ids, token ids, text, backend). Errors: one ``error[<code>]: <message>`` line, exit
status 2 (3 for a stage fault); options (``--max-tokens``, ``--threads``, sampling, the ``--timeline``/
``--trace`` paths, ``--ray-address``) are checked before anything runs.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipeplan.tools.generation import OptionError, add_generation_arguments

HELP = "replay a compiled package on a GGUF model (same options and output as pipeplan run), on a backend or directly"


class ReplayOptionError(OptionError):
    """Options that do not go together (code ``bad_option``), e.g. ``--timeline`` with a stage backend or a
    ``--max-seq-len`` that is not the package's."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``replay`` options (module docstring)."""
    parser.add_argument("package", metavar="PKG", help="package directory (pipeplan compile -o)")
    parser.add_argument("--model", required=True, metavar="MODEL.gguf", help="the model the package was compiled for")
    parser.add_argument("--max-seq-len", type=int, default=None,
                        help="positions per sequence: the package's (default); another value is refused")
    add_generation_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Replay and print the result. Raises typed PipeplanErrors (exit 2 via the CLI, 3 for StageFault)."""
    from pipeplan.errors import GGUFError
    from pipeplan.files.paths import check_input_file
    from pipeplan.runtime.limits import check_prompt

    check_input_file(args.model, "GGUF file", GGUFError)  # a FIFO/device/directory: at once, before torch loads
    check_prompt(args.prompt)

    from pipeplan.dialects.vmachine import abi_of
    from pipeplan.errors import RunPlanRejection
    from pipeplan.runtime.replay import compiled_stages, load_package, package_provisions, tmachine_stages
    from pipeplan.tools.generation import (
        check_fault_stage,
        check_generation_options,
        generate_text,
        make_backend,
        summary_line,
    )

    args.tmachine_timeline = args.backend != "direct"  # --target cuda: --timeline/--trace of the executed instructions
    fi = check_generation_options(args)
    backend = make_backend(args)
    provisions, programs, n_stages = None, None, 0
    if backend is not None or args.max_seq_len is not None:  # the direct replay loads the package itself
        pkg = load_package(args.package)
        L = int(abi_of(pkg.program)["max_seq_len"])
        if args.max_seq_len is not None and args.max_seq_len != L:
            raise ReplayOptionError(f"--max-seq-len {args.max_seq_len}: the package was compiled for max_seq_len "
                                    f"{L} (recompile the plan to change it)", where="max_seq_len")
        if args.max_tokens > L:
            raise RunPlanRejection(f"--max-tokens {args.max_tokens} exceeds the package's max_seq_len {L}",
                                   code="invalid_request", where="max_tokens")
        n_stages = len(pkg.manifest.get("deployment", {}).get("stages", []))
        if backend is not None:
            provisions = package_provisions(pkg, args.model)
            programs = tmachine_stages(pkg) if args.target == "cuda" else compiled_stages(pkg)
            n_stages = len(provisions)
            check_fault_stage(fi, n_stages)
    if args.target == "cuda" and (args.timeline or args.trace):
        result = _replay_recorded(args, backend, provisions, programs, fi)
    else:
        result, _, _ = generate_text(args, model=args.model, backend=backend, provisions=provisions, programs=programs,
                                     package=args.package, fi=fi)
    if args.json:
        print(json.dumps({"prompt_ids": result.prompt_ids, "token_ids": result.token_ids, "text": result.text,
                          "backend": args.backend}))
    else:
        if not n_stages:  # direct: the package's stages, from the events of its measured timeline
            n_stages = len({e.stage for e in result.timeline.events})
        print(summary_line(result.timings, n_stages, args.backend), file=sys.stderr)
    return 0


def _replay_recorded(args: argparse.Namespace, backend, provisions, programs, fi):
    """``--target cuda`` with ``--timeline``/``--trace``: generate with every stage recording the tmachine
    instructions it executes (a private directory; ``$PIPEPLAN_TMACHINE_TRACE`` gets the records too), then
    write the measured TimelineBundle of those records
    (:func:`~pipeplan.runtime.tmachine_run.measured_timeline`), as ``pipeplan run --target cuda`` does."""
    import dataclasses
    import shutil
    import tempfile

    from pipeplan.runtime.tmachine_run import append_traces, measured_timeline, read_traces
    from pipeplan.tools.generation import generate_text

    trace_dir = tempfile.mkdtemp(prefix="pipeplan-tmachine-")
    given = next(iter(programs.values())).trace
    recording = {s: dataclasses.replace(p, trace=trace_dir) for s, p in programs.items()}
    try:
        result, _, _ = generate_text(args, model=args.model, backend=backend, provisions=provisions, programs=recording,
                                     package=args.package, fi=fi)
        timeline = measured_timeline(recording[min(recording)], read_traces(trace_dir, len(recording)),
                                     {"backend": args.backend, "package": str(args.package)})
        if args.trace:
            timeline.write_chrome_trace(args.trace, "--trace")
        if args.timeline:
            timeline.write(args.timeline, "--timeline")
    finally:
        if given:
            append_traces(trace_dir, given)
        shutil.rmtree(trace_dir, ignore_errors=True)
    return result
