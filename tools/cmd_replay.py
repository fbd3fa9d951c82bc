"""``pipeplan replay``: run a replay package's stage programs on a GGUF model.

Usage::

    pipeplan replay PKG --model MODEL.gguf --prompt TEXT [--max-tokens K] [--max-seq-len L]
                    [--temperature T] [--top-k K] [--top-p P] [--seed S] [--threads N]
                    [--backend local|inproc|ray|direct] [--ray-address ADDR] [--target cpu|reference|cuda]
                    [--timeline measured.json] [--trace trace.json] [--json]

The generation options, their defaults and the output are those of ``pipeplan run``
(:mod:`pipeplan.tools.generation`: default backend ``local``, 40 tokens, greedy):

``local`` / ``inproc`` / ``ray`` (``direct``: inproc with one kernel thread and the reference kernels unless
``--target``): the package's deployment (stage -> device, layer range) is re-planned into ProvisionStages
(:func:`pipeplan.runtime.replay.package_provisions`), and every stage worker binds the package's stage program
(:func:`~pipeplan.runtime.compiled.compiled_stages`) on the chosen backend, with ``--target`` kernels (cpu =
quantized weights and C kernels, the default; reference torch). ``--target cuda`` needs a package compiled for
``cuda-triton``: every stage runs the package's lowered ``tmachine.mlir`` (its device's streams) through the
tmachine interpreter (:func:`~pipeplan.runtime.compiled.tmachine_stages`), launching the Triton kernels with the
lowered grids and arguments, as ``pipeplan run --target cuda`` does (another package:
``error[unsupported_program]``). ``--timeline``/``--trace`` write the measured TimelineBundle (and its Chrome
trace) of the instructions the stages executed, on every backend (:func:`pipeplan.tools.generation.recording`).

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

from pipeplan.runtime.interrupts import exits_on_interrupt
from pipeplan.tools.generation import OptionError, add_generation_arguments

HELP = "replay a compiled package on a GGUF model (same options and output as pipeplan run)"


class ReplayOptionError(OptionError):
    """Options that do not go together (code ``bad_option``), e.g. a ``--max-seq-len`` that is not the package's."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``replay`` options (module docstring)."""
    parser.add_argument("package", metavar="PKG", help="package directory (pipeplan compile -o)")
    parser.add_argument("--model", required=True, metavar="MODEL.gguf", help="the model the package was compiled for")
    parser.add_argument("--max-seq-len", type=int, default=None,
                        help="positions per sequence: the package's (default); another value is refused")
    add_generation_arguments(parser)


@exits_on_interrupt  # SIGINT / SIGTERM: stages stopped, segments unlinked, one error[interrupted] line, 130 / 143
def main(args: argparse.Namespace) -> int:
    """Replay and print the result. Raises typed PipeplanErrors (exit 2 via the CLI, 3 for StageFault)."""
    from pipeplan.errors import GGUFError
    from pipeplan.files.paths import check_input_file
    from pipeplan.runtime.limits import check_prompt

    check_input_file(args.model, "GGUF file", GGUFError)  # a FIFO/device/directory: at once, before torch loads
    check_prompt(args.prompt)

    from pipeplan.dialects.vmachine import abi_of
    from pipeplan.errors import RunPlanRejection
    from pipeplan.runtime.compiled import compiled_stages, load_package, tmachine_stages
    from pipeplan.runtime.replay import package_provisions
    from pipeplan.tools.generation import (
        check_fault_stage,
        check_generation_options,
        generate_text,
        make_backend,
        recorded_timeline,
        recording,
        summary_line,
    )

    fi = check_generation_options(args)
    backend = make_backend(args)
    pkg = load_package(args.package)
    L = int(abi_of(pkg.program)["max_seq_len"])
    if args.max_seq_len is not None and args.max_seq_len != L:
        raise ReplayOptionError(f"--max-seq-len {args.max_seq_len}: the package was compiled for max_seq_len "
                                f"{L} (recompile the plan to change it)", where="max_seq_len")
    if args.max_tokens > L:
        raise RunPlanRejection(f"--max-tokens {args.max_tokens} exceeds the package's max_seq_len {L}",
                               code="invalid_request", where="max_tokens")
    provisions = package_provisions(pkg, args.model)
    programs = tmachine_stages(pkg) if args.target == "cuda" else compiled_stages(pkg)
    n_stages = len(provisions)
    check_fault_stage(fi, n_stages)
    with recording(args, programs) as (run_programs, trace_dir):
        result, _ = generate_text(args, model=args.model, backend=backend, provisions=provisions,
                                  programs=run_programs, fi=fi)
        if trace_dir is not None:
            timeline = recorded_timeline(args, run_programs, trace_dir, pkg, {"package": str(args.package)})
            if args.timeline:
                timeline.write(args.timeline, "--timeline")
    if args.json:
        print(json.dumps({"prompt_ids": result.prompt_ids, "token_ids": result.token_ids, "text": result.text,
                          "backend": args.backend}))
    else:
        print(summary_line(result.timings, n_stages, args.backend), file=sys.stderr)
    return 0
