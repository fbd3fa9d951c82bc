"""``pipeplan compile``: compile a RunPlan into a replay package for a target.

Usage::

    pipeplan compile PLAN.mlir [--nodes POOL.toml] [--target virtual-queue] [--evidence roofline]
                     [--evidence measured:TABLE.json ...] [--prompt-len 8] [--binder list-schedule]
                     [--decode-tokens 16] [--interpret] [--kernels cpu|reference] [--parallel N [--prompt-tokens P] [--micro-batches M]]
                     -o PKG [--trace trace.json] [--timeline predicted.json]

Runs :func:`pipeplan.compiler.replay_package.compile_plan_to_package` (the whole chain from the
RunPlan to the vmachine program, the predicted timeline and the manifest; for ``--target cuda-triton`` also
the lowered ``tmachine.mlir`` that ``pipeplan replay --target cuda`` runs, with ``--interpret`` for Triton's
CPU interpreter's launch configurations). The DeploymentBinding comes
from ``--nodes``, else from the node specs the plan carries (``pipeplan plan`` records them); a plan
naming its nodes by id only without ``--nodes`` is ``error[missing_binding]``. ``--evidence`` may be
repeated: providers in policy order; without it the cached calibration of this machine + the plan's
model (``pipeplan calibrate MODEL``, :func:`pipeplan.tools.calibrate.select_evidence`, under
``--cache-dir``) when there is one — for ``--kernels`` (default: the ``cpu`` calibration, else the
``reference`` one) —, else ``roofline``; one ``evidence: ...`` line on stderr says which (and why roofline).
``--parallel N`` also prints the predicted aggregate decode tok/s, p50/p99 per-token latency and request
latency of 1..N concurrent requests of ``--prompt-tokens`` prompt tokens (default ``--prompt-len``) and
``--decode-tokens`` tokens (:func:`pipeplan.analysis.concurrency.predict_concurrent` on the package's
costs and, with a cpu calibration, its runtime terms), naming the evidence; ``--micro-batches M`` frames in
flight (default the runtime's: the M its Pipeline chooses, ``choose_micro_batches`` of the package, when it
batches decode rows, else N). ``-o`` must be a new or empty directory or
an existing package whose manifest verifies (its listed files are replaced, nothing else in it is
touched); anything else is ``error[bad_output_path]`` and nothing is touched. ``--trace`` writes the
predicted Chrome trace (Perfetto / chrome://tracing), ``--timeline`` the predicted TimelineBundle JSON
(the package's ``predicted.timeline.json``), as in ``pipeplan replay``/``run``/``compare``.
On success prints the package directory and its digests; on any error one ``error[<code>]: <message>``
line and exit status 2, and no package (output paths are checked before compiling; every file is written
to a temporary file and renamed into place).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "compile a RunPlan into a replay package (vmachine program, lineage, predicted timeline, manifest)"

MAX_DECODE_TOKENS = 4096
"""Most ``--decode-tokens`` simulated (the simulation's time and the timeline's size grow with it)."""
MAX_PARALLEL = 256
"""Most ``--parallel`` sequences predicted."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compile`` options (module docstring)."""
    parser.add_argument("plan", metavar="PLAN.mlir", help="RunPlan IR (pipeplan plan output)")
    parser.add_argument("--nodes", metavar="POOL.toml",
                        help="node pool the plan was made for (DeploymentBinding; default: the plan's node specs)")
    parser.add_argument("--target", default="virtual-queue", help="target plugin (default %(default)s)")
    parser.add_argument("--evidence", action="append", metavar="PROVIDER",
                        help="evidence provider, in policy order: roofline | measured:TABLE.json "
                             "(default: this machine's calibration of the model, else roofline)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where `pipeplan calibrate` cached its evidence (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    parser.add_argument("--prompt-len", type=int, default=8, help="rows of the prefill step (default %(default)s)")
    parser.add_argument("--binder", default="list-schedule", help="list-schedule | reference-queue (default %(default)s)")
    parser.add_argument("--interpret", action="store_true",
                        help="cuda-triton: lower tmachine.mlir with the launch configurations of Triton's CPU interpreter")
    parser.add_argument("--decode-tokens", type=int, default=16, help="decode tokens simulated (default %(default)s)")
    parser.add_argument("--kernels", choices=("cpu", "reference"),
                        help="whose calibration to use (default: cpu's, else reference's)")
    parser.add_argument("--parallel", type=int, metavar="N",
                        help="also print the predicted throughput and latency of 1..N concurrent sequences")
    parser.add_argument("--micro-batches", type=int, metavar="M",
                        help="frames in flight of the --parallel prediction (default: the runtime's: the M in 1..min(N, S) "
                             "predicted fastest when it batches decode rows, else N, one frame per sequence)")
    parser.add_argument("--prompt-tokens", type=int, metavar="P",
                        help="prompt tokens per request of the --parallel prediction (default --prompt-len)")
    parser.add_argument("-o", "--output", required=True, metavar="PKG",
                        help="package directory: new, empty, or an existing package (its files are replaced)")
    parser.add_argument("--trace", metavar="trace.json",
                        help="also write the predicted Chrome trace (opens in Perfetto / chrome://tracing)")
    parser.add_argument("--timeline", metavar="predicted.json",
                        help="also write the predicted TimelineBundle JSON (pipeplan compare input)")


def main(args: argparse.Namespace) -> int:
    """Compile; print the package path and digests. Raises typed PipeplanErrors (exit 2 via the CLI)."""
    from pipeplan.compiler.replay_package import PackageError, compile_plan_to_package
    from pipeplan.tools.calibrate import plan_evidence

    if not 1 <= args.decode_tokens <= MAX_DECODE_TOKENS:
        raise PackageError(f"--decode-tokens must be in [1, {MAX_DECODE_TOKENS}], got {args.decode_tokens}",
                           code="invalid_request", where="decode_tokens")
    if args.parallel is not None and not 1 <= args.parallel <= MAX_PARALLEL:
        raise PackageError(f"--parallel must be in [1, {MAX_PARALLEL}], got {args.parallel}", code="invalid_request",
                           where="parallel")
    if args.prompt_tokens is not None and not 1 <= args.prompt_tokens <= MAX_DECODE_TOKENS:
        raise PackageError(f"--prompt-tokens must be in [1, {MAX_DECODE_TOKENS}], got {args.prompt_tokens}",
                           code="invalid_request", where="prompt_tokens")
    if args.micro_batches is not None and not 1 <= args.micro_batches <= MAX_PARALLEL:
        raise PackageError(f"--micro-batches must be in [1, {MAX_PARALLEL}], got {args.micro_batches}",
                           code="invalid_request", where="micro_batches")
    targets = (args.kernels,) if args.kernels else ("cpu", "reference")
    choice = plan_evidence(args.evidence, args.plan, target=targets, cache_dir=args.cache_dir)
    out = compile_plan_to_package(args.plan, args.target, choice.providers, args.output, pool=args.nodes,
                                  prompt_len=args.prompt_len, binder=args.binder, decode_tokens=args.decode_tokens,
                                  trace=args.trace, timeline=args.timeline, interpret=args.interpret)
    manifest = json.loads((out / "manifest.json").read_text())
    print(choice.message, file=sys.stderr)
    print(f"package {out}")
    for k, v in sorted(manifest["digests"].items()):
        print(f"  {k:9s} {v}")
    if args.parallel is not None:
        print_concurrent(out, args.parallel, args.prompt_tokens or args.prompt_len, args.decode_tokens,
                         choice.message.removeprefix("evidence: "), args.micro_batches)
    return 0


def runtime_batches() -> bool:
    """Whether this runtime's ``Pipeline`` batches decode rows into frames (takes ``micro_batches``)."""
    import inspect

    from pipeplan.runtime.orchestrator import Pipeline

    return "micro_batches" in inspect.signature(Pipeline).parameters


def print_concurrent(pkg, parallel: int, prompt_tokens: int, decode_tokens: int, evidence: str,
                     micro_batches: int | None = None) -> None:
    """The ``--parallel`` table: one row per N in 1..``parallel`` (module docstring), each with its M."""
    from pipeplan.analysis.concurrency import (
        choose_micro_batches,
        default_micro_batches,
        predict_concurrent,
        stage_costs,
    )

    def runtime_m(n: int) -> int:
        choice = choose_micro_batches(costs, n)
        return choice.micro_batches if choice is not None else default_micro_batches(n, costs.stages)

    costs = stage_costs(pkg)
    batches = runtime_batches()
    terms = costs.terms_line()
    print(f"predicted for concurrent sequences ({prompt_tokens} prompt + {decode_tokens} generated tokens each; "
          f"evidence: {evidence}; {terms}):")
    print(f"  {'N':>3s} {'aggregate tok/s':>15s} {'p50 ms/token':>12s} {'p99 ms/token':>12s} {'request s':>10s} "
          f"{'stage busy':>10s} {'M':>3s}")
    for n in range(1, parallel + 1):
        m = micro_batches if micro_batches is not None else (runtime_m(n) if batches else n)
        p = predict_concurrent(costs, n, prompt_tokens, decode_tokens, micro_batches=m)
        print(f"  {n:3d} {p.aggregate_tok_s:15.1f} {p.per_token_p50_s * 1e3:12.3f} {p.per_token_p99_s * 1e3:12.3f} "
              f"{p.request_latency_s:10.4f} {max(p.stage_utilisation):10.0%} {m:3d}")
