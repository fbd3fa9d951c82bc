"""``pipeplan serve``: an OpenAI-compatible HTTP server over one pipeline-parallel plan of a GGUF model.

Usage::

    pipeplan serve MODEL.gguf [--stages N] [--nodes POOL.toml] [--host 127.0.0.1] [--port 8080]
                   [--backend local|inproc|ray] [--ray-address ADDR] [--target cpu|reference|cuda]
                   [--max-seq-len L] [--prefill-rows R] [--threads N] [--parallel N] [--micro-batches M]
                   [--queue N] [--alias NAME]
                   [--max-body-bytes B] [--chat-template-timeout S]
                   [--cache-dir DIR] [--log-level warning]

Flow: HOST:PORT is bound first (:func:`pipeplan.serve.server.bind_socket`), then the model is planned,
compiled and provisioned exactly as ``pipeplan run`` does (``read_model_facts`` -> ``plan_run`` ->
``compile_for_run`` -> ``project_provisions``), one :class:`~pipeplan.runtime.orchestrator.Pipeline` is
started, and uvicorn serves :func:`pipeplan.serve.app.make_app` until SIGTERM/SIGINT. Up to ``--parallel``
requests (default 1) run at once, admitted in arrival order (:class:`~pipeplan.serve.scheduler.Scheduler`;
the plan sizes the KV cache and the edge rings for them); ``--queue`` bounds the waiting ones (default 8; a
full queue is HTTP 429). Once ready it prints ``pipeplan: serving <model> on http://HOST:PORT
(...)`` on stderr.

Exit status: 2 for a typed start-up error (bad model path, rejected plan, address in use: one
``error[<code>]: ...`` line), 3 for a stage fault while loading; SIGTERM / SIGINT stop it gracefully (streams
ended, every stage stopped, shared memory released) with the CLI's interrupt convention: one
``error[interrupted]: ...`` line, exit status 143 / 130 (:mod:`pipeplan.runtime.interrupts`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipeplan.runtime.interrupts import exits_on_interrupt
from pipeplan.tools.cmd_run import DEFAULT_PREFILL_ROWS

HELP = "serve a GGUF model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions)"

DEFAULT_PORT = 8080
DEFAULT_QUEUE = 8
MAX_PARALLEL = 256
"""Largest ``--parallel`` (``pipeplan run`` and ``serve``): every slot holds a KV cache in every stage."""
MAX_QUEUE = 4096
"""Largest ``--queue``: every waiting request holds its prompt and an open connection."""
MAX_BODY_BYTES = 2**30
"""Largest ``--max-body-bytes``."""
MAX_TEMPLATE_TIMEOUT_S = 3600.0
"""Largest ``--chat-template-timeout``."""
DEFAULT_MAX_SEQ_LEN = 2048
"""``--max-seq-len`` when not given: this, or the model's context length when that is shorter."""
BACKENDS = ("local", "inproc", "ray")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``serve`` options on ``p``."""
    from pipeplan.tools.generation import TARGET_KERNELS

    p.add_argument("model", metavar="MODEL.gguf", help="local GGUF file (or the first gguf-split shard)")
    p.add_argument("--stages", type=int, default=1, help="number of pipeline stages (default 1)")
    p.add_argument("--nodes", metavar="POOL.toml",
                   help="node pool TOML, with peaks for the roofline evidence (default: --stages local nodes)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port, 0 = any free one (default {DEFAULT_PORT})")
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local: one process per stage with shared-memory rings; inproc: threads; ray: Ray actors "
                        "on the planned nodes (default local)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to connect to (ray backend; default: an embedded local Ray instance)")
    p.add_argument("--target", choices=tuple(TARGET_KERNELS), default="cpu",
                   help="kernels: cpu (default), reference (torch float32) or cuda (Triton)")
    p.add_argument("--max-seq-len", type=int, default=None,
                   help=f"positions per sequence (prompt + generated) the plan sizes (default {DEFAULT_MAX_SEQ_LEN}, "
                        f"or the model's context length when shorter)")
    p.add_argument("--prefill-rows", type=int, default=DEFAULT_PREFILL_ROWS,
                   help=f"rows of the compiled prefill step (default {DEFAULT_PREFILL_ROWS}, capped at max-seq-len - 1)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads per stage, 1 .. 4 x cores (default: 1 for local, torch's own for inproc)")
    p.add_argument("--parallel", type=int, default=1, metavar="N",
                   help=f"requests running at once (KV-cache slots per stage), 1 .. {MAX_PARALLEL} (default 1)")
    p.add_argument("--micro-batches", type=int, default=None, metavar="M",
                   help="most frames in flight; a decode frame carries up to ceil(N / M) requests' rows "
                        "(default: the M in 1..min(--parallel, --stages) the compiled costs predict fastest, "
                        "named on stderr)")
    p.add_argument("--queue", type=int, default=DEFAULT_QUEUE, metavar="N",
                   help=f"most requests waiting while one runs, 0 .. {MAX_QUEUE}; more get HTTP 429 (default {DEFAULT_QUEUE})")
    p.add_argument("--max-body-bytes", type=int, default=None, metavar="B",
                   help="largest request body in bytes, 1 .. 2**30; larger ones get HTTP 413 (default 4 MiB)")
    p.add_argument("--chat-template-timeout", type=float, default=None, metavar="S",
                   help="most seconds a chat template may take to render, (0, 3600]; longer is HTTP 400 "
                        "chat_template_rejected (default 5)")
    p.add_argument("--alias", default=None, metavar="NAME",
                   help="model id of /v1/models and the requests' `model` (default: the GGUF file name)")
    p.add_argument("--cache-dir", default=None,
                   help="weight and package cache (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                   help="uvicorn's log level; info also logs every request (default warning)")
    p.add_argument("--inject-fault", metavar="STAGE:KIND", default=None, help=argparse.SUPPRESS)


def _check_options(args: argparse.Namespace):
    """Option checks before any work; returns the fault injection (or None). Raises RunPlanRejection
    (invalid_request / invalid_runtime_config), LimitError, FaultInjectionError, BackendError (--ray-address without --backend ray)."""
    from pipeplan.errors import RunPlanRejection
    from pipeplan.runtime.backends import check_ray_address
    from pipeplan.runtime.limits import check_thread_count
    from pipeplan.runtime.stage import FaultInjection
    from pipeplan.tools.generation import check_cache_dir

    if not 0 <= args.port <= 65535:
        raise RunPlanRejection(f"--port must be in [0, 65535], got {args.port}", code="invalid_request", where="port")
    check_parallel(args.parallel, args.micro_batches)
    if not 0 <= args.queue <= MAX_QUEUE:
        raise RunPlanRejection(f"--queue must be in [0, {MAX_QUEUE}], got {args.queue}", code="invalid_request",
                               where="queue")
    if args.max_body_bytes is not None and not 1 <= args.max_body_bytes <= MAX_BODY_BYTES:
        raise RunPlanRejection(f"--max-body-bytes must be in [1, {MAX_BODY_BYTES}], got {args.max_body_bytes}",
                               code="invalid_request", where="max_body_bytes")
    t = args.chat_template_timeout
    if t is not None and not 0 < t <= MAX_TEMPLATE_TIMEOUT_S:  # NaN fails too
        raise RunPlanRejection(f"--chat-template-timeout must be in (0, {MAX_TEMPLATE_TIMEOUT_S:g}] seconds, got {t}",
                               code="invalid_request", where="chat_template_timeout")
    if args.prefill_rows < 1:
        raise RunPlanRejection(f"--prefill-rows must be >= 1, got {args.prefill_rows}", code="invalid_request",
                               where="prefill_rows")
    if args.alias is not None and not args.alias.strip():
        raise RunPlanRejection("--alias must not be empty", code="invalid_request", where="alias")
    if args.threads is not None:
        check_thread_count(args.threads)
    check_ray_address(args.backend, args.ray_address)
    check_cache_dir(args.cache_dir)
    return FaultInjection.parse(args.inject_fault) if args.inject_fault else FaultInjection.from_env()


def check_parallel(n: int, micro_batches: int | None = None) -> None:
    """``--parallel`` must be in ``[1, MAX_PARALLEL]`` and ``--micro-batches`` (when given) in ``[1, --parallel]``:
    else RunPlanRejection(invalid_runtime_config)."""
    from pipeplan.errors import RunPlanRejection

    if not 1 <= n <= MAX_PARALLEL:
        raise RunPlanRejection(f"--parallel must be in [1, {MAX_PARALLEL}], got {n}", code="invalid_runtime_config",
                               where="parallel")
    if micro_batches is not None and not 1 <= micro_batches <= n:
        raise RunPlanRejection(f"--micro-batches must be in [1, --parallel {n}], got {micro_batches}",
                               code="invalid_runtime_config", where="micro_batches")


def pick_micro_batches(args: argparse.Namespace, package) -> dict | None:
    """Without ``--micro-batches`` and with ``--parallel`` N > 1: set ``args.micro_batches`` to the M the compiled
    ``package``'s stage costs predict fastest (:func:`~pipeplan.analysis.concurrency.choose_micro_batches`) and
    print one stderr line naming it and the predicted aggregate tok/s per M. Returns the choice as JSON
    (``--json``'s ``micro_batches``), None when ``--micro-batches`` was given, N is 1 or the costs are not
    readable (the pipeline then keeps ``min(N, S)``)."""
    from pipeplan.analysis.concurrency import choose_micro_batches

    if args.parallel <= 1 or args.micro_batches is not None:
        return None
    choice = choose_micro_batches(package, args.parallel, backend=getattr(args, "backend", "local"))
    if choice is None:
        return None
    args.micro_batches = choice.micro_batches
    print(choice.line(), file=sys.stderr, flush=True)
    return choice.to_json()


def runtime_config(max_seq_len: int, parallel: int):
    """The RuntimeConfig of ``run``/``serve``: ``max_seq_len``, ``parallel`` sequences, and ring slots for them
    (at least the default 2, at least ``parallel``: each sequence has one frame in flight)."""
    from pipeplan.plan_types import RuntimeConfig

    return RuntimeConfig(max_seq_len=max_seq_len, ring_slots=max(RuntimeConfig().ring_slots, parallel),
                         parallel=parallel)


@exits_on_interrupt  # SIGINT / SIGTERM: graceful stop, then one error[interrupted] line, 130 / 143
def main(args: argparse.Namespace) -> int:
    """Run the server until a signal; typed start-up errors propagate to ``tools/cli.py`` (exit 2 / 3)."""
    with prepared_server(args) as srv:
        print(f"pipeplan: serving {srv.model_id} on {srv.url} ({srv.summary})", file=sys.stderr, flush=True)
        srv.server.serve_forever(srv.sock)
    return 0


@dataclass
class PreparedServer:
    """A bound socket, a started pipeline and the uvicorn server for it (:func:`prepared_server`)."""

    server: Any  # pipeplan.serve.server.Server
    sock: socket.socket
    scheduler: Any  # pipeplan.serve.scheduler.Scheduler
    pipeline: Any  # pipeplan.runtime.orchestrator.Pipeline
    model_id: str
    url: str
    summary: str


@contextlib.contextmanager
def prepared_server(args: argparse.Namespace) -> Iterator[PreparedServer]:
    """Check the options, bind HOST:PORT, plan -> compile -> provision as ``pipeplan run`` does, start the
    pipeline and make the server; on exit the pipeline is closed (idempotent: the app's shutdown closed it
    already) and the socket released. ``server.serve_forever(sock)`` serves (from any thread).

    Raises the typed start-up errors (GGUFError, RunPlanRejection, ServeBindError, StageFault, ...)."""
    from pipeplan.errors import GGUFError
    from pipeplan.files.paths import check_input_file
    from pipeplan.runtime.weights_source import cache_root
    from pipeplan.serve.server import bind_socket, bound_url
    from pipeplan.tools.generation import check_fault_stage, make_backend

    check_input_file(args.model, "GGUF file", GGUFError)
    fi = _check_options(args)
    cache_root(args.cache_dir)  # $PIPEPLAN_CACHE that is a file: error[cache_unusable] before any work
    backend = make_backend(args)
    sock = bind_socket(args.host, args.port)
    try:
        if args.backend == "local":
            from pipeplan.runtime.stage_host import prestart_stage_host

            prestart_stage_host()
        provisions, compiled = _plan_and_compile(args)
        check_fault_stage(fi, len(provisions))
        pick_micro_batches(args, compiled.package)

        from pipeplan.runtime.orchestrator import Pipeline
        from pipeplan.runtime.tokenizer import SPMTokenizer
        from pipeplan.serve.app import ServedModel, make_app
        from pipeplan.serve.chat import ChatTemplate, ChatTemplateError
        from pipeplan.serve.scheduler import Scheduler
        from pipeplan.serve.server import Server
        from pipeplan.tools.generation import TARGET_KERNELS

        tokenizer = SPMTokenizer.from_gguf(args.model)
        try:
            template = ChatTemplate.from_tokenizer(tokenizer)
        except ChatTemplateError as e:  # completions still work; chat says why not
            print(f"pipeplan: warning: {e.message}; /v1/chat/completions is unavailable", file=sys.stderr)
            template = None
        pipeline = Pipeline(provisions, backend=backend, fault_injection=fi, kernels=TARGET_KERNELS[args.target],
                            cache_dir=args.cache_dir, num_threads=args.threads, programs=compiled.programs,
                            parallel=args.parallel, micro_batches=args.micro_batches)
        try:
            pipeline.start()
            model_id = args.alias if args.alias is not None else os.path.basename(args.model)
            served = ServedModel(model_id, tokenizer, template, pipeline.max_seq_len)
            if args.max_body_bytes is not None:
                served.max_body_bytes = args.max_body_bytes
            if args.chat_template_timeout is not None:
                served.chat_template_timeout_s = args.chat_template_timeout
            scheduler = Scheduler(pipeline, tokenizer, queue_size=args.queue)
            server = Server(make_app(served, scheduler), on_exit=scheduler.begin_shutdown, log_level=args.log_level)
            n = len(provisions)
            pkg = "package cached" if compiled.cached else f"compiled in {compiled.compile_s:.2f} s"
            slots = f", {args.parallel} slots" if args.parallel != 1 else ""
            summary = (f"{n} stage{'s' if n != 1 else ''}, {args.backend}{slots}, context {pipeline.max_seq_len}, "
                       f"load {pipeline.load_s:.2f} s, {pkg}")
            yield PreparedServer(server, sock, scheduler, pipeline, model_id, bound_url(sock), summary)
        finally:
            pipeline.close()
    finally:
        sock.close()


def _plan_and_compile(args: argparse.Namespace):
    """``pipeplan run``'s plan -> compile -> provisions for ``args``: (provisions, CompiledRun)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import load_pool_toml
    from pipeplan.runtime.compiled import compile_for_run, local_pool_with_peaks

    facts = read_model_facts(args.model)
    if not 1 <= args.stages <= facts.block_count:
        raise RunPlanRejection(f"--stages {args.stages}: the model has {facts.block_count} blocks, so 1 to "
                               f"{facts.block_count} stages", code="invalid_stage_count", where="stages")
    max_seq_len = args.max_seq_len if args.max_seq_len is not None else min(DEFAULT_MAX_SEQ_LEN, facts.context_length)
    if args.nodes:
        pool = load_pool_toml(args.nodes)
        with open(args.nodes, encoding="utf-8") as f:
            pool_text = f.read()
    else:
        pool, pool_text = local_pool_with_peaks(args.stages)
    module = plan_run(facts, runtime_config(max_seq_len, args.parallel), pool, args.stages)
    provisions = project_provisions(module)
    from pipeplan.tools.generation import COMPILE_TARGETS

    compiled = compile_for_run(module, pool_text, cache_dir=args.cache_dir,
                               prompt_len=max(1, min(args.prefill_rows, max_seq_len - 1)),
                               target=COMPILE_TARGETS[args.target], model=args.model)
    return provisions, compiled
