"""``pipeplan run``: plan a pipeline for a GGUF model, compile it, and generate text by replaying it.

Usage::

    pipeplan run MODEL.gguf --prompt TEXT [--stages N] [--nodes POOL.toml] [--max-tokens K]
                 [--temperature T] [--top-k K] [--top-p P] [--seed S]
                 [--backend local|inproc|ray] [--ray-address ADDR] [--target reference|cuda]
                 [--prefill-rows R] [--max-seq-len L] [--cache-dir DIR] [--json]

Flow (DESIGN.md §1: the runtime runs what the compiler produced):

1. read the GGUF header (``read_model_facts``) and plan (``plan_run``) on the node pool: ``--nodes``, or
   ``--stages`` local nodes stating this machine's peaks (``$PIPEPLAN_LOCAL_PEAKS`` or the cached probe of
   :func:`pipeplan.frontend.pool.local_peaks`, via :func:`~pipeplan.runtime.replay.local_pool_with_peaks`: the
   explicit DeploymentBinding of a local run);
2. compile the plan in-process into a replay package for the ``virtual-queue`` target with roofline
   evidence (:func:`~pipeplan.runtime.replay.compile_for_run`), cached under
   ``<cache>/packages/<sha256 of plan, pool, options>`` so a repeated run does not recompile; the prefill
   step is compiled for ``--prefill-rows`` rows (default 64, at most ``max_seq_len - 1``; longer prompts
   are sent in chunks);
3. ``project_provisions`` and :func:`pipeplan.runtime.orchestrator.generate` on the backend, every stage
   binding the package's stage program (``programs=``) instead of building its own.

``--target reference`` runs the torch reference kernels; ``--target cuda`` the Triton kernels
(``pipeplan.runtime.kernels.triton``: weights kept in GGUF format and the KV cache on the GPU when torch
sees one, else Triton's interpreter on the CPU) with the same stage programs. ``--backend ray`` runs the
stages as Ray actors on the Ray nodes carrying the plan's node ids: ``--ray-address`` connects to a
cluster, without it an embedded local Ray instance is started (and stopped) whose node carries every
node id; a node id no live Ray node carries is ``error[unknown_node]`` (exit 2) before any actor starts.

Prints the prompt followed by the generated text, or with ``--json`` the token ids, prompt ids, ordered
stage events, per-phase timings and the package (path, cached, compile seconds).
Exit status: 0 ok; 2 a typed error (bad input, rejected plan, compile diagnostic); 3 a stage fault,
printed as ``error[stage_fault:<kind>]: stage <i>: <detail>`` (mapped by ``tools/cli.py``).
Hidden flag ``--inject-fault STAGE:KIND`` (or ``$PIPEPLAN_INJECT_FAULT``) makes that stage fail at the
step of that kind, for fault tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HELP = "generate text with a pipeline-parallel plan of a GGUF model (plan -> compile -> replay)"

TARGET_KERNELS = {"reference": None, "cuda": "pipeplan.runtime.kernels.triton"}
"""``--target`` -> the kernel module the stages run (None: the torch reference)."""
DEFAULT_PREFILL_ROWS = 64


def add_backend_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """``--backend``, ``--ray-address`` and ``--target`` (shared with ``pipeplan replay``)."""
    p.add_argument("--backend", choices=("local", "inproc", "ray"), default=default,
                   help=f"local: one process per stage with shared-memory rings; inproc: threads; ray: Ray actors "
                        f"on the planned nodes (default {default})")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to connect to (ray backend; default: an embedded local Ray instance)")
    p.add_argument("--target", choices=tuple(TARGET_KERNELS), default="reference",
                   help="kernels: reference (torch, default) or cuda (Triton; interpreter without a GPU)")




def check_ray_address(address: str | None) -> None:
    """Fail fast on an unreachable ``--ray-address`` (see
    :func:`pipeplan.runtime.ray_backend.probe_ray_address`). Raises RayUnavailableError (exit 2)."""
    from pipeplan.runtime.ray_backend import probe_ray_address

    probe_ray_address(address)


def check_cache_dir(cache_dir: str | None) -> None:
    """``--cache-dir`` must be a directory or creatable as one (it is created). Raises
    RunPlanRejection(invalid_request) before any work."""
    if cache_dir is None:
        return
    from pipeplan.errors import RunPlanRejection

    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as e:
        raise RunPlanRejection(f"--cache-dir {cache_dir}: not a usable directory: {e.strerror or e}",
                               code="invalid_request", where="cache_dir") from None


def make_run_backend(args: argparse.Namespace):
    """The Backend for ``--backend``/``--ray-address`` (an unreachable HOST:PORT fails fast, see
    :func:`check_ray_address`). Raises BackendError / RayUnavailableError."""
    from pipeplan.runtime.backends import make_backend

    backend = make_backend(args.backend, ray_address=args.ray_address)
    if args.backend == "ray":
        check_ray_address(args.ray_address)
    return backend


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``run`` options on ``p``."""
    p.add_argument("model", metavar="MODEL.gguf", help="local GGUF file (or the first gguf-split shard)")
    p.add_argument("--prompt", required=True, help="prompt text (BOS is prepended)")
    p.add_argument("--stages", type=int, default=1, help="number of pipeline stages (default 1)")
    p.add_argument("--nodes", metavar="POOL.toml",
                   help="node pool TOML, with peaks for the roofline evidence (default: --stages local nodes)")
    p.add_argument("--max-tokens", type=int, default=40, help="tokens to generate (default 40)")
    p.add_argument("--max-seq-len", type=int, default=256, help="positions per sequence the plan sizes (default 256)")
    p.add_argument("--prefill-rows", type=int, default=DEFAULT_PREFILL_ROWS,
                   help=f"rows of the compiled prefill step (default {DEFAULT_PREFILL_ROWS}, capped at max-seq-len - 1)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="keep the k best logits (0 = all)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = all)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    add_backend_arguments(p, "local")
    p.add_argument("--cache-dir", default=None,
                   help="weight and package cache (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    p.add_argument("--json", action="store_true", help="print ids, events, timings and the package as JSON")
    p.add_argument("--inject-fault", metavar="STAGE:KIND", default=None, help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    """Run the command; typed errors propagate to ``tools/cli.py`` (exit 2, or 3 for StageFault)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.events import WeightsReady
    from pipeplan.runtime.orchestrator import generate
    from pipeplan.runtime.replay import compile_for_run, local_pool_with_peaks
    from pipeplan.runtime.sampling import Sampler
    from pipeplan.runtime.stage import FaultInjection

    fi = FaultInjection.parse(args.inject_fault) if args.inject_fault else FaultInjection.from_env()
    Sampler(args.temperature, args.top_k, args.top_p, args.seed)  # SamplingError before planning/compiling
    if args.prefill_rows < 1:
        raise RunPlanRejection(f"--prefill-rows must be >= 1, got {args.prefill_rows}", code="invalid_request",
                               where="prefill_rows")
    if args.max_tokens < 1:
        raise RunPlanRejection(f"--max-tokens must be >= 1, got {args.max_tokens}", code="invalid_request",
                               where="max_tokens")
    check_cache_dir(args.cache_dir)
    backend = make_run_backend(args)  # bad backend options fail before any work
    t0 = time.perf_counter()
    facts = read_model_facts(args.model)
    if args.nodes:
        pool = load_pool_toml(args.nodes)
        with open(args.nodes, encoding="utf-8") as f:
            pool_text = f.read()
    else:
        pool, pool_text = local_pool_with_peaks(max(args.stages, 1))
    module = plan_run(facts, RuntimeConfig(max_seq_len=args.max_seq_len), pool, args.stages)
    provisions = project_provisions(module)
    t_plan = time.perf_counter() - t0
    compiled = compile_for_run(module, pool_text, cache_dir=args.cache_dir,
                               prompt_len=max(1, min(args.prefill_rows, args.max_seq_len - 1)))

    bar = None
    if sys.stderr.isatty() and not args.json:
        from tqdm import tqdm

        bar = tqdm(total=len(provisions), desc="loading stage weights", unit="stage", leave=False)

    def on_event(ev) -> None:
        if bar is not None and isinstance(ev, WeightsReady):
            bar.update(1)

    try:
        result = generate(args.model, provisions, args.prompt, max_tokens=args.max_tokens,
                          temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                          backend=backend, fault_injection=fi, on_event=on_event, cache_dir=args.cache_dir,
                          kernels=TARGET_KERNELS[args.target], programs=compiled.programs)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        doc = {"model": str(args.model), "stages": len(provisions), "backend": args.backend, "target": args.target,
               "prompt": args.prompt, **result.to_json(),
               "package": {"path": str(compiled.package), "cached": compiled.cached, "plan_s": t_plan,
                           "compile_s": compiled.compile_s, "load_s": compiled.load_s}}
        print(json.dumps(doc, indent=1))
    else:
        print(args.prompt + result.text)
    return 0
