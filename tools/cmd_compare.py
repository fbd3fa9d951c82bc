"""``pipeplan compare``: predicted vs measured TimelineBundle.

Usage::

    pipeplan compare PREDICTED MEASURED [--trace side_by_side.json] [--json]

PREDICTED is a bundle file or a package directory (its ``predicted.timeline.json``); MEASURED a
bundle from ``pipeplan replay --timeline``. Prints the correspondence level reached (none | command |
instruction | order), the per-token decode latency errors (median, p90) and the worst commands;
``--trace`` writes a Chrome trace (Perfetto / chrome://tracing) with the predicted and measured processes
side by side, atomically.

MEASURED may instead be a throughput measurement (``pipeplan-throughput/1``: ``{"format", "rows": [{"n_sequences",
"stages", "aggregate_tok_s", "p50_s", "p99_s", "prompt_tokens"?, "decode_tokens"?}]}``, as
``bench/throughput.py`` writes; :func:`pipeplan.analysis.concurrency.read_throughput`); PREDICTED is then the
package: each row is predicted for its N (:func:`~pipeplan.analysis.concurrency.predict_concurrent`, prompt
tokens default the package's prefill rows, decode tokens 64) and printed next to the measurement with the
relative error of aggregate tok/s, p50 and p99, with the runtime terms of the calibration the package was
compiled with (a row whose ``backend`` is ``ray``: with the calibration's Ray relay chain, ``pipeplan calibrate
--backend ray``, the evidence line saying whether it had one); a row's ``micro_batches`` (absent: one frame per sequence) is the M predicted. Rows of other
stage counts than the package's are skipped (and counted); none of its stage count is
``error[stage_mismatch]``. A row of more than :data:`ROW_TOKENS_MAX` tokens in all (prompt and generated, every
sequence) is ``error[bad_throughput]`` (compare simulates every token). A timeline whose times are not finite numbers (``NaN``, ``Infinity``) is
``error[non_finite]`` naming the event: no correspondence level is reported for it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = "compare a predicted and a measured timeline: correspondence level, per-command and per-token error"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compare`` options (module docstring)."""
    parser.add_argument("predicted", metavar="PREDICTED", help="predicted bundle or package directory")
    parser.add_argument("measured", metavar="MEASURED",
                        help="measured bundle (pipeplan replay --timeline) or throughput measurement JSON")
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
    if _is_throughput(args.measured):
        return _compare_throughput(p, args)
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


DEFAULT_DECODE_TOKENS = 64
"""Generated tokens per request predicted for a throughput row without ``decode_tokens``."""

ROW_TOKENS_MAX = 1 << 17
"""Most tokens (``n_sequences * (prompt_tokens + decode_tokens)``) of one throughput row compare simulates (at
most about 10 s per row with runtime terms on this 2-core machine)."""


def _check_row_sizes(rows: list[Any], path: str, prefill_rows: int) -> None:
    """Each row must be one compare simulates in bounded time: at most :data:`ROW_TOKENS_MAX` tokens
    (``n_sequences * (prompt_tokens + decode_tokens)``). Raises ConcurrencyError(bad_throughput) naming the row."""
    from pipeplan.analysis.concurrency import ConcurrencyError

    for i, m in enumerate(rows):
        prompt, decode = m.prompt_tokens or prefill_rows, m.decode_tokens or DEFAULT_DECODE_TOKENS
        if m.n_sequences * (prompt + decode) > ROW_TOKENS_MAX:
            raise ConcurrencyError(f"{path}: row {i}: n_sequences * (prompt_tokens + decode_tokens) = {m.n_sequences}"
                                   f" * ({prompt} + {decode}) is more than the {ROW_TOKENS_MAX} tokens compare "
                                   f"simulates per row", code="bad_throughput", where="n_sequences")


def _is_throughput(path: str) -> bool:
    """Whether ``path`` holds a throughput measurement, or an attempt at one that :func:`read_throughput` should
    reject as such: its ``format``, ``rows`` or ``n_sequences``, or a JSON list (a timeline bundle is an
    object). A path that is not a readable regular file (a FIFO is never opened) is not one: the timeline reader
    names it."""
    from pipeplan.analysis.concurrency import THROUGHPUT_FORMAT
    from pipeplan.errors import PipeplanError
    from pipeplan.files.paths import check_input_file

    try:
        check_input_file(path, "measured timeline")
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, PipeplanError):
        return False
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON: a list, or one naming the format, is a throughput attempt
        return text.lstrip().startswith("[") or f'"{THROUGHPUT_FORMAT}"' in text[:4096]
    if isinstance(doc, dict):
        return doc.get("format") == THROUGHPUT_FORMAT or "n_sequences" in doc or "rows" in doc
    return isinstance(doc, list)  # a timeline bundle is an object; a bare list can only be rows


def _compare_throughput(pkg: Path, args: argparse.Namespace) -> int:
    """Predicted vs measured throughput rows (module docstring). Raises ConcurrencyError (exit 2)."""
    from pipeplan.analysis.concurrency import (
        ConcurrencyError,
        predict_concurrent,
        read_throughput,
        stage_costs,
    )

    rows = read_throughput(args.measured)
    if not pkg.is_dir():
        raise ConcurrencyError(f"{pkg}: a throughput measurement is compared with a package directory (its costs)",
                               code="bad_package", where=str(pkg))
    by_backend = {"local": stage_costs(pkg)}
    for m in rows:
        if m.backend == "ray" and "ray" not in by_backend:
            by_backend["ray"] = stage_costs(pkg, backend="ray")
    costs = by_backend["local"]
    mine = [m for m in rows if m.stages == costs.stages]
    if not mine:
        raise ConcurrencyError(f"{args.measured}: no row was measured on the package's {costs.stages} stages "
                               f"(rows of {sorted({m.stages for m in rows})})", code="stage_mismatch", where="stages")
    _check_row_sizes(rows, args.measured, costs.prefill_rows)
    out = []
    for m in mine:
        mc = by_backend.get(m.backend, costs)
        pr = predict_concurrent(mc, m.n_sequences, m.prompt_tokens or costs.prefill_rows,
                                m.decode_tokens or DEFAULT_DECODE_TOKENS, micro_batches=m.micro_batches or m.n_sequences)

        def err(a: float, b: float) -> float | None:
            return abs(a - b) / b if b > 0 else None

        out.append({"n_sequences": m.n_sequences, "stages": m.stages, "backend": m.backend,
                    "micro_batches": pr.micro_batches, "evidence": mc.evidence,
                    "predicted": {"aggregate_tok_s": pr.aggregate_tok_s, "p50_s": pr.per_token_p50_s,
                                  "p99_s": pr.per_token_p99_s},
                    "measured": {"aggregate_tok_s": m.aggregate_tok_s, "p50_s": m.p50_s, "p99_s": m.p99_s},
                    "error": {"aggregate_tok_s": err(pr.aggregate_tok_s, m.aggregate_tok_s),
                              "p50_s": err(pr.per_token_p50_s, m.p50_s), "p99_s": err(pr.per_token_p99_s, m.p99_s)}})
    skipped = len(rows) - len(mine)
    if args.json:
        print(json.dumps({"evidence": costs.evidence, "runtime_terms": costs.runtime_terms, "rows": out,
                          "skipped_rows": skipped}, sort_keys=True))
        return 0
    terms = costs.terms_line()
    print(f"throughput: predicted (evidence {costs.evidence}; {terms}) vs measured ({args.measured}"
          f"{f'; {skipped} rows of other stage counts skipped' if skipped else ''})")
    if "ray" in by_backend and any(m.backend == "ray" for m in mine):
        print(f"  rows measured on Ray: evidence {by_backend['ray'].evidence}; {by_backend['ray'].terms_line()}")
    print(f"  {'N':>3s} {'stages':>6s} {'backend':>7s} {'pred tok/s':>10s} {'meas tok/s':>10s} {'error':>7s} {'pred p50 ms':>11s} "
          f"{'meas p50 ms':>11s} {'error':>7s} {'pred p99 ms':>11s} {'meas p99 ms':>11s} {'error':>7s}")

    def pct(x: float | None) -> str:
        return "   n/a" if x is None else f"{x:7.1%}"

    for r in out:
        a, b, e = r["predicted"], r["measured"], r["error"]
        print(f"  {r['n_sequences']:3d} {r['stages']:6d} {r['backend'] or 'local':>7s} {a['aggregate_tok_s']:10.1f} {b['aggregate_tok_s']:10.1f} "
              f"{pct(e['aggregate_tok_s'])} {a['p50_s'] * 1e3:11.3f} {b['p50_s'] * 1e3:11.3f} {pct(e['p50_s'])} "
              f"{a['p99_s'] * 1e3:11.3f} {b['p99_s'] * 1e3:11.3f} {pct(e['p99_s'])}")
    return 0
