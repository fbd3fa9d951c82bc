"""``pipeplan replay``: run a replay package's stage programs with the reference kernels.

Usage::

    pipeplan replay PKG --model MODEL.gguf --prompt TEXT [--max-tokens K] [--timeline measured.json]
                    [--trace trace.json] [--json] [--threads N]

Runs :func:`pipeplan.runtime.replay.replay_package`: prints the generated text (``--json``: prompt
ids, token ids, text). ``--timeline`` writes the measured TimelineBundle, ``--trace`` its Chrome
trace. Errors: one ``error[<code>]: <message>`` line, exit status 2.
"""

from __future__ import annotations

import argparse
import json

HELP = "replay a compiled package on a GGUF model (same tokens as pipeplan run) and record its timeline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``replay`` options (module docstring)."""
    parser.add_argument("package", metavar="PKG", help="package directory (pipeplan compile -o)")
    parser.add_argument("--model", required=True, metavar="MODEL.gguf", help="the model the package was compiled for")
    parser.add_argument("--prompt", required=True, help="prompt text")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens to generate (default %(default)s)")
    parser.add_argument("--timeline", metavar="measured.json", help="write the measured TimelineBundle here")
    parser.add_argument("--trace", metavar="trace.json", help="write the measured Chrome trace here")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print a JSON result")


def main(args: argparse.Namespace) -> int:
    """Replay and print the result. Raises typed PipeplanErrors (exit 2 via the CLI)."""
    from pipeplan.runtime.replay import replay_package

    r = replay_package(args.package, args.model, args.prompt, args.max_tokens, num_threads=args.threads)
    if args.timeline:
        r.timeline.write(args.timeline)
    if args.trace:
        r.timeline.write_chrome_trace(args.trace)
    if args.json:
        print(json.dumps({"prompt_ids": r.prompt_ids, "token_ids": r.token_ids, "text": r.text}))
    else:
        print(r.text)
    return 0
