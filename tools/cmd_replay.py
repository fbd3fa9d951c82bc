"""``pipeplan replay``: run a replay package's stage programs on a GGUF model.

Usage::

    pipeplan replay PKG --model MODEL.gguf --prompt TEXT [--max-tokens K]
                    [--backend inproc|local|ray|direct] [--ray-address ADDR] [--target reference|cuda]
                    [--timeline measured.json] [--trace trace.json] [--json] [--threads N]

Backends (default ``inproc``: threads in this process, the quickest to start for a one-off replay):

* ``inproc`` / ``local`` / ``ray``: the normal runtime. The package's deployment (stage -> device, layer
  range) is re-planned into ProvisionStages (:func:`pipeplan.runtime.replay.package_provisions`), and
  every stage worker binds the package's stage program (:func:`~pipeplan.runtime.replay.compiled_stages`)
  on the chosen backend, with ``--target`` kernels (reference torch, or cuda = Triton);
* ``direct``: :func:`pipeplan.runtime.replay.replay_package`, the instruction-by-instruction replay in this
  process with the reference kernels, which records the measured TimelineBundle: ``--timeline`` writes it,
  ``--trace`` its Chrome trace (only this backend records them).

Prints the generated text (``--json``: prompt ids, token ids, text, backend). Errors: one
``error[<code>]: <message>`` line, exit status 2 (3 for a stage fault); options (``--max-tokens``,
``--threads``, the ``--timeline``/``--trace`` directories, ``--ray-address``) are checked before
anything runs.
"""

from __future__ import annotations

import argparse
import json

from pipeplan.errors import PipeplanError

HELP = "replay a compiled package on a GGUF model (same tokens as pipeplan run), on a backend or directly"


class ReplayOptionError(PipeplanError):
    """Options that do not go together (code ``bad_option``): ``--timeline``/``--trace`` or ``--target cuda``
    with the wrong backend."""

    code = "bad_option"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``replay`` options (module docstring)."""
    from pipeplan.tools.cmd_run import TARGET_KERNELS

    parser.add_argument("package", metavar="PKG", help="package directory (pipeplan compile -o)")
    parser.add_argument("--model", required=True, metavar="MODEL.gguf", help="the model the package was compiled for")
    parser.add_argument("--prompt", required=True, help="prompt text")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens to generate (default %(default)s)")
    parser.add_argument("--backend", choices=("inproc", "local", "ray", "direct"), default="inproc",
                        help="inproc (default), local, ray: the stage runtime; direct: instruction replay with timeline")
    parser.add_argument("--ray-address", default=None, metavar="ADDR", help="Ray cluster (ray backend)")
    parser.add_argument("--target", choices=tuple(TARGET_KERNELS), default="reference",
                        help="kernels: reference (default) or cuda (Triton)")
    parser.add_argument("--timeline", metavar="measured.json", help="write the measured TimelineBundle (direct)")
    parser.add_argument("--trace", metavar="trace.json", help="write the measured Chrome trace (direct)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    parser.add_argument("--cache-dir", default=None, help="weight cache (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    parser.add_argument("--json", action="store_true", help="print a JSON result")


def main(args: argparse.Namespace) -> int:
    """Replay and print the result. Raises typed PipeplanErrors (exit 2 via the CLI, 3 for StageFault).
    Options are checked before anything runs: ``--max-tokens``/``--threads`` >= 1, the ``--timeline`` and
    ``--trace`` directories exist (OutputPathError), a ``--ray-address`` HOST:PORT is reachable."""
    from pipeplan.lowering.timeline import check_output_file
    from pipeplan.tools.cmd_run import check_cache_dir, check_ray_address

    for name in ("max_tokens", "threads"):
        if getattr(args, name) < 1:
            raise ReplayOptionError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}",
                                    code="invalid_request", where=name)
    if args.timeline:
        check_output_file(args.timeline, "--timeline")
    if args.trace:
        check_output_file(args.trace, "--trace")
    check_cache_dir(args.cache_dir)
    if args.backend == "direct":
        if args.target != "reference" or args.ray_address:
            raise ReplayOptionError("the direct replay runs the reference kernels in this process: --target cuda and "
                                    "--ray-address need --backend inproc|local|ray", where="backend")
        from pipeplan.runtime.replay import replay_package

        r = replay_package(args.package, args.model, args.prompt, args.max_tokens, num_threads=args.threads)
        if args.timeline:
            r.timeline.write(args.timeline)
        if args.trace:
            r.timeline.write_chrome_trace(args.trace)
        prompt_ids, token_ids, text = r.prompt_ids, r.token_ids, r.text
    else:
        if args.timeline or args.trace:
            raise ReplayOptionError("--timeline/--trace are recorded by the direct replay only (--backend direct)",
                                    where="backend")
        from pipeplan.runtime.backends import make_backend
        from pipeplan.runtime.orchestrator import generate
        from pipeplan.runtime.replay import compiled_stages, load_package, package_provisions
        from pipeplan.tools.cmd_run import TARGET_KERNELS

        backend = make_backend(args.backend, ray_address=args.ray_address)
        if args.backend == "ray":
            check_ray_address(args.ray_address)
        pkg = load_package(args.package)
        provisions = package_provisions(pkg, args.model)
        res = generate(args.model, provisions, args.prompt, max_tokens=args.max_tokens, backend=backend,
                       kernels=TARGET_KERNELS[args.target], cache_dir=args.cache_dir, programs=compiled_stages(pkg),
                       num_threads=args.threads)
        prompt_ids, token_ids, text = res.prompt_ids, res.token_ids, res.text
    if args.json:
        print(json.dumps({"prompt_ids": prompt_ids, "token_ids": token_ids, "text": text, "backend": args.backend}))
    else:
        print(text)
    return 0
