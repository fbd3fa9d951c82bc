"""``pipeplan compare``: predicted vs measured TimelineBundle.

Usage::

    pipeplan compare PREDICTED MEASURED [--trace side_by_side.json] [--json]

PREDICTED is a bundle file or a package directory (its ``predicted.timeline.json``); MEASURED a
bundle from ``pipeplan replay --timeline``. Prints the correspondence level reached (none | command |
instruction | order), the per-token decode latency errors (median, p90) and the worst commands;
``--trace`` writes a Chrome trace (Perfetto / chrome://tracing) with the predicted and measured processes
side by side, atomically. A timeline whose times are not finite numbers (``NaN``, ``Infinity``) is
``error[non_finite]`` naming the event: no correspondence level is reported for it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "compare a predicted and a measured timeline: correspondence level, per-command and per-token error"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compare`` options (module docstring)."""
    parser.add_argument("predicted", metavar="PREDICTED", help="predicted bundle or package directory")
    parser.add_argument("measured", metavar="MEASURED", help="measured bundle (pipeplan replay --timeline)")
    parser.add_argument("--trace", metavar="trace.json",
                        help="write the side-by-side Chrome trace here (opens in Perfetto / chrome://tracing)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def main(args: argparse.Namespace) -> int:
    """Compare and print. Raises TimelineError, OutputPathError (``--trace`` in a missing directory, checked
    first) (exit 2 via the CLI)."""
    from pipeplan.analysis.timeline import (
        TimelineBundle,
        check_output_file,
        compare,
        write_side_by_side_trace,
    )

    if args.trace:
        check_output_file(args.trace, "--trace")
    p = Path(args.predicted)
    pred = TimelineBundle.read(p / "predicted.timeline.json" if p.is_dir() else p)
    meas = TimelineBundle.read(args.measured)
    c = compare(pred, meas)
    if args.trace:
        write_side_by_side_trace(pred, meas, args.trace, "--trace")
    if args.json:
        print(json.dumps(c.to_json(), sort_keys=True))
        return 0
    print(f"correspondence level: {c.level} ({c.reason}); {c.matched} events matched")
    if c.token_errors:
        print(f"per-token decode latency error: median {c.token_median:.1%}, p90 {c.token_p90:.1%} "
              f"over {len(c.token_errors)} tokens")
        for i, (a, b, e) in enumerate(zip(c.token_predicted, c.token_measured, c.token_errors)):
            print(f"  token {i:3d}: predicted {a * 1e6:10.1f} us  measured {b * 1e6:10.1f} us  error {e:6.1%}")
    worst = sorted(c.command_errors.items(), key=lambda kv: -abs(kv[1]))[:10]
    if worst:
        print("worst commands (median relative error of predicted duration):")
        for cmd, e in worst:
            print(f"  {e:+8.1%}  {cmd}")
    return 0
