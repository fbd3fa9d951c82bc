"""``pipeplan compile``: compile a RunPlan into a replay package for a target.

Usage::

    pipeplan compile PLAN.mlir [--nodes POOL.toml] [--target virtual-queue] [--evidence roofline]
                     [--evidence measured:TABLE.json ...] [--prompt-len 8] [--binder list-schedule]
                     [--decode-tokens 16] -o PKG [--trace trace.json] [--timeline predicted.json]

Runs :func:`pipeplan.compiler.replay_package.compile_plan_to_package` (the whole chain from the
RunPlan to the vmachine program, the predicted timeline and the manifest). The DeploymentBinding comes
from ``--nodes``, else from the node specs the plan carries (``pipeplan plan`` records them); a plan
naming its nodes by id only without ``--nodes`` is ``error[missing_binding]``. ``--evidence`` may be
repeated: providers in policy order; without it the cached calibration of this machine + the plan's
model (``pipeplan calibrate MODEL``, :func:`pipeplan.tools.calibrate.select_evidence`, under
``--cache-dir``) when there is one, else ``roofline``; one ``evidence: ...`` line on stderr says which
(and why roofline). ``-o`` must be a new or empty directory or
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
    parser.add_argument("--decode-tokens", type=int, default=16, help="decode tokens simulated (default %(default)s)")
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
    choice = plan_evidence(args.evidence, args.plan, cache_dir=args.cache_dir)
    out = compile_plan_to_package(args.plan, args.target, choice.providers, args.output, pool=args.nodes,
                                  prompt_len=args.prompt_len, binder=args.binder, decode_tokens=args.decode_tokens,
                                  trace=args.trace, timeline=args.timeline)
    manifest = json.loads((out / "manifest.json").read_text())
    print(choice.message, file=sys.stderr)
    print(f"package {out}")
    for k, v in sorted(manifest["digests"].items()):
        print(f"  {k:9s} {v}")
    return 0
