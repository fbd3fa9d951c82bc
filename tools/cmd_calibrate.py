"""``pipeplan calibrate``: measure this machine's task costs for a model's plan and cache them as evidence.

Usage::

    pipeplan calibrate MODEL.gguf [--stages S] [--nodes POOL.toml] [--target cpu|reference] [--threads T]
                       [--prompt-len 8] [--max-seq-len L] [--tokens 16] [--repeats 1] [--round-trips 200]
                       [--cache-dir DIR] [--no-loop] [--backend local|ray] [--ray-address ADDR] [--force] [--json]

Plans the model as ``pipeplan plan`` does (``--stages`` local nodes with this machine's peaks, or
``--nodes``), compiles it and times it on calibration prompts: ``--target cpu`` (default) binds the
compiled stage programs to the CPU kernels ``pipeplan run`` uses and times every kernel, and the local
shared-memory ring hop per frame size (:func:`pipeplan.tools.calibrate.measure_cpu`); ``--target
reference`` replays the package with the torch kernels and charges every command of the measured
timeline (:func:`pipeplan.tools.calibrate.measure_runtime`). Either way: one entry per EstimateRequest
key (``op|dtypes|shape``) of the plan, kernels and hops. The cpu target also records, under
``runtime.<S>``, each stage's decode frame cost at 1/2/4/8 rows (``frame_rows_s``), a decode row's
attention at KV positions from the calibrated ones to the last (``kv_pos``, ``kv_row_s``, ``kv_ref_pos``) and, unless
``--no-loop``, the runtime's own costs measured on the local pipeline of the plan
(:func:`pipeplan.tools.calibrate.measure_loop`: 1 and 2 S + 1 sequences; the fitted wake-up, per-frame,
contention and work-scale terms of :mod:`pipeplan.analysis.concurrency`). ``--backend ray`` also measures, under
``runtime.<S>.ray_loop``, the relay chain of the plan's stages on Ray (``--ray-address`` a running cluster, else an
embedded local instance; each stage on the Ray node carrying its node id, as ``pipeplan run --backend ray``;
:func:`pipeplan.tools.calibrate.measure_ray_loop`): what a token's loop pays around the stages' work there, and
(unless ``--no-loop``) its ``terms``: the pipeline loop measured again on Ray actors and fitted with that chain for
hops, which ``pipeplan compare`` and the runtime's micro-batch choice use for runs on Ray. The table (``pipeplan-kernel-timings/1``) goes to
``<cache>/calibration/<key>.json`` (key: machine fingerprint + model sha256), merged with the keys
already there (``--force``: replaced), written atomically. Prints a table and the path (``--json``:
the document). ``pipeplan compile``, ``run``, ``replay`` and ``plan`` then use it by default.
Errors: one ``error[<code>]: ...`` line, exit 2 (``unsupported_target`` for a kernel target other
than ``cpu`` and ``reference``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from pipeplan.runtime.interrupts import exits_on_interrupt

HELP = "measure this machine's task costs for a model's plan and cache them (evidence for compile/run)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``calibrate`` options (module docstring)."""
    p.add_argument("model", metavar="MODEL.gguf", help="local GGUF file (or the first gguf-split shard)")
    p.add_argument("--stages", type=int, default=1, help="pipeline stages of the measured plan (default 1)")
    p.add_argument("--nodes", metavar="POOL.toml", help="node pool TOML (default: --stages local nodes)")
    p.add_argument("--target", default="cpu",
                   help="kernel target timed: cpu (default: the C kernels of `pipeplan run`, and the ring hops) | "
                        "reference (the torch kernels of the direct replay)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the replay (default 1)")
    p.add_argument("--prompt-len", type=int, default=8, help="rows of the prefill step (default %(default)s, as compile)")
    p.add_argument("--max-seq-len", type=int, metavar="L",
                   help="positions per sequence (default: as pipeplan plan, min(context length, 2048))")
    p.add_argument("--tokens", type=int, default=16, help="decode tokens per calibration replay (default %(default)s)")
    p.add_argument("--repeats", type=int, default=1, help="replays per calibration prompt (default %(default)s)")
    p.add_argument("--round-trips", type=int, default=200,
                   help="ring round trips per frame size timed with --target cpu (default %(default)s)")
    p.add_argument("--cache-dir", metavar="DIR", help="cache directory (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    p.add_argument("--no-loop", action="store_true",
                   help="cpu target: skip the pipeline run that measures the runtime's own costs (wake-up, per-frame)")
    p.add_argument("--backend", default="local", choices=("local", "ray"),
                   help="ray: also measure the relay chain of the plan's stages on Ray (default local)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to measure on (--backend ray; default: an embedded local Ray instance)")
    p.add_argument("--force", action="store_true", help="replace the cached table instead of merging into it")
    p.add_argument("--json", action="store_true", help="print the written document as JSON")


@exits_on_interrupt  # SIGINT / SIGTERM: measuring processes and Ray stopped, one error[interrupted] line, 130 / 143
def main(args: argparse.Namespace) -> int:
    """Calibrate (module docstring). Raises typed PipeplanErrors (exit 2 via the CLI)."""
    from pipeplan.errors import GGUFError, RunPlanRejection
    from pipeplan.files.paths import check_input_file
    from pipeplan.runtime.backends import check_ray_address
    from pipeplan.runtime.limits import check_thread_count
    from pipeplan.tools.calibrate import (
        MODEL_SHA_MEMO,
        TARGETS,
        CalibrationError,
        calibration_key,
        calibration_path,
        loop_sequences,
        machine_fingerprint,
        measure_cpu,
        measure_runtime,
        model_fingerprint,
        write_calibration,
    )
    from pipeplan.tools.cmd_plan import DEFAULT_MAX_SEQ_LEN_CAP
    from pipeplan.tools.generation import check_cache_dir

    check_input_file(args.model, "GGUF file", GGUFError)
    if args.target not in TARGETS:
        raise CalibrationError(f"--target {args.target}: calibrate times the kernel targets {', '.join(TARGETS)}",
                               code="unsupported_target", where="target")
    check_thread_count(args.threads, "--threads")
    for name in ("prompt_len", "tokens", "repeats", "round_trips"):
        if getattr(args, name) < 1:
            raise CalibrationError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}",
                                   code="invalid_request", where=name)
    check_ray_address(args.backend, args.ray_address)
    if args.backend == "ray":  # before any measuring: no ray package, or nothing listening at --ray-address
        from pipeplan.runtime.ray_backend import make_ray_backend, probe_ray_address

        make_ray_backend(args.ray_address)
        probe_ray_address(args.ray_address)
    if args.cache_dir is not None:
        check_cache_dir(args.cache_dir)
    from pipeplan.runtime.weights_source import cache_root

    cache_root(args.cache_dir)
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.compiled import local_pool_with_peaks

    t0 = time.perf_counter()
    facts = read_model_facts(args.model)
    if not 1 <= args.stages <= facts.block_count:
        raise RunPlanRejection(f"--stages {args.stages}: the model has {facts.block_count} blocks, so 1 to "
                               f"{facts.block_count} stages", code="invalid_stage_count", where="stages")
    max_seq_len = args.max_seq_len if args.max_seq_len is not None else min(facts.context_length,
                                                                            DEFAULT_MAX_SEQ_LEN_CAP)
    need = args.prompt_len + args.tokens + 1
    if max_seq_len < need:
        raise CalibrationError(f"--max-seq-len {max_seq_len} is shorter than the calibration replay's prompt-len + "
                               f"tokens + 1 = {need}", code="invalid_request", where="max_seq_len")
    pool = load_pool_toml(args.nodes) if args.nodes else local_pool_with_peaks(args.stages)[0]
    n_loop = loop_sequences(args.stages)
    module = plan_run(facts, RuntimeConfig(max_seq_len=max_seq_len, ring_slots=max(2, n_loop), parallel=n_loop),
                      pool, args.stages)
    machine = machine_fingerprint(args.target, args.threads)
    path = calibration_path(args.cache_dir, "x")
    model = model_fingerprint(facts.files, path.with_name(MODEL_SHA_MEMO))
    path = calibration_path(args.cache_dir, calibration_key(machine, model))
    if args.target == "cpu":
        table = measure_cpu(module, args.model, pool=args.nodes, prompt_len=args.prompt_len, tokens=args.tokens,
                            repeats=args.repeats, threads=args.threads, round_trips=args.round_trips)
    else:
        table = measure_runtime(module, args.model, pool=args.nodes, prompt_len=args.prompt_len, tokens=args.tokens,
                                repeats=args.repeats, threads=args.threads)
    table["method"].update({"stages": args.stages, "max_seq_len": max_seq_len})
    if (args.target == "cpu" and not args.no_loop) or args.backend == "ray":
        _loops(module, table, args, max_seq_len)
    doc = write_calibration(path, table, machine, model, force=args.force)
    elapsed = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"path": str(path), "seconds": elapsed, "measured_keys": len(table["entries"]), **doc},
                         indent=1))
        return 0
    fresh = {e["key"] for e in table["entries"]}
    print(f"{'key':56s} {'seconds':>11s} {'samples':>8s}")
    for e in doc["entries"]:
        mark = "" if e["key"] in fresh else "  (earlier run)"
        print(f"{e['key']:56s} {e['seconds']:11.3e} {e.get('samples', 0):8d}{mark}")
    loop = table.get("runtime", {}).get(str(args.stages), {}).get("loop")
    if loop:
        print(f"pipeline loop: {_loop_line(loop)}")
        _warn_loose_fit("pipeline loop", loop)
    ray_loop = table.get("runtime", {}).get(str(args.stages), {}).get("ray_loop")
    if ray_loop:
        edges = ", ".join(f"{e} {m}" for e, m in ray_loop["edges"].items())
        print(f"Ray loop ({ray_loop['relays']} relays; {edges}): {ray_loop['loop_s'] * 1e6:.1f} us, CPU per frame "
              f"relay {ray_loop['relay_cpu_s'] * 1e6:.1f} us, driver {ray_loop['driver_cpu_s'] * 1e6:.1f} us")
        if ray_loop.get("terms"):
            print(f"Ray pipeline loop: {_loop_line(ray_loop['terms'])}")
            _warn_loose_fit("Ray pipeline loop", ray_loop["terms"])
    for h in table.get("transport", {}).get("hops", []):
        print(f"ring hop {h['bytes']:>8d} B: {h['hop_s'] * 1e6:8.1f} us (send call {h['send_s'] * 1e6:.1f} us, "
              f"{h['round_trips']} round trips)")
    print(f"calibrated {len(fresh)} keys of {facts.name} ({args.stages} stage{'s' if args.stages > 1 else ''}, "
          f"target {args.target}, {args.threads} thread{'s' if args.threads > 1 else ''}) in {elapsed:.1f} s -> {path}",
          file=sys.stderr)
    return 0


FIT_WARN = 0.1
"""The fit residual of a pipeline loop's runtime terms above which calibrate warns (stderr)."""


def _warn_loose_fit(name: str, loop: dict[str, Any]) -> bool:
    """Warn on stderr, and return True, when ``loop``'s runtime terms reproduce its measured rates only within more
    than :data:`FIT_WARN` (the one- and the busy-run were measured at different loads: a busy machine)."""
    if loop["fit_residual"] <= FIT_WARN:  # NaN warns too
        return False
    print(f"warning: the {name}'s runtime terms reproduce its measured rates only within {loop['fit_residual']:.0%} "
          f"(a busy machine?): calibrate again when it is idle", file=sys.stderr)
    return True


def _loop_line(loop: dict[str, Any]) -> str:
    """A fitted pipeline loop (:func:`pipeplan.tools.calibrate.measure_loop`) in one line: its measured rates and
    terms."""
    return (f"1 sequence {loop['rate_one_tok_s']:.1f} tok/s, {loop['sequences']} sequences "
            f"{loop['rate_busy_tok_s']:.1f} tok/s on {loop['cores']} cores -> wake {loop['wake_s'] * 1e6:.1f} us, "
            f"per frame {loop['frame_s'] * 1e6:.1f} us, contention {loop['contention']:.2f}, work x "
            f"{loop.get('work_scale', 1.0):.2f} (fit residual {loop['fit_residual']:.0%})")


def _loops(module: Any, table: dict[str, Any], args: argparse.Namespace, max_seq_len: int) -> None:
    """The runtime's own costs into ``table["runtime"][S]``: ``loop`` (cpu target, unless ``--no-loop``:
    :func:`pipeplan.tools.calibrate.measure_loop` on the local pipeline of a package compiled with the fresh
    ``table``, in a private temporary directory removed afterwards), then for ``--backend ray``, with Ray connected
    (:func:`~pipeplan.tools.calibrate.ray_session`), ``ray_loop`` (the relay chain,
    :func:`~pipeplan.tools.calibrate.measure_ray_loop`) and, with the loop, its ``terms``: the same loop measured on
    Ray actors and fitted to the package's costs with that chain for hops."""
    import shutil
    import tempfile
    from pathlib import Path

    from pipeplan.compiler.replay_package import compile_plan_to_package
    from pipeplan.tools.calibrate import LOOP_TOKENS, measure_loop, measure_ray_loop, ray_session

    sec = table.setdefault("runtime", {}).setdefault(str(args.stages), {})
    loop = args.target == "cpu" and not args.no_loop
    work = Path(tempfile.mkdtemp(prefix="pipeplan-calibrate-loop-"))
    try:
        def measure(backend: str) -> dict[str, Any]:
            return measure_loop(module, pkg, prompt_len=args.prompt_len, threads=args.threads, backend=backend,
                                tokens=min(max(8, args.tokens + 8), LOOP_TOKENS, max_seq_len - args.prompt_len - 1))

        if loop:
            (work / "table.json").write_text(json.dumps(table))
            pkg = compile_plan_to_package(module, "virtual-queue", [f"measured:{work / 'table.json'}", "roofline"],
                                          work / "pkg", pool=args.nodes, prompt_len=args.prompt_len, decode_tokens=1)
            local = measure("local")
        if args.backend == "ray":
            with ray_session(module, args.ray_address) as ids:
                sec["ray_loop"] = measure_ray_loop(module, ids)
                if loop:
                    (work / "table.json").write_text(json.dumps(table))  # the package's costs now read the chain
                    sec["ray_loop"]["terms"] = measure("ray")
        if loop:
            sec["loop"] = local
    finally:
        shutil.rmtree(work, ignore_errors=True)
