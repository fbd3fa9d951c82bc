"""What ``pipeplan run`` and ``pipeplan replay`` share: generation options (same names, same defaults),
their checks, and the output, which looks like llama.cpp's.

Options (both commands): ``--prompt``, ``--max-tokens`` (default 40), ``--temperature``/``--top-k``/
``--top-p``/``--seed`` (llama.cpp's sampler chain, :class:`~pipeplan.runtime.sampling.Sampler`),
``--backend local|inproc|ray|direct`` (default ``local``), ``--ray-address``, ``--target``,
``--threads``, ``--timeline`` (the measured TimelineBundle JSON) and ``--trace`` (the measured Chrome
trace, which Perfetto and chrome://tracing open), both recorded on every backend and target from the
instructions the stages executed (:mod:`pipeplan.runtime.trace`: the vmachine stage programs' kernels,
transfers and sampling, or the tmachine instructions for ``--target cuda``; :func:`recording`),
``--cache-dir``, ``--json``. The same two flags mean the same files in ``pipeplan compile`` (predicted)
and ``pipeplan compare --trace`` (side by side).

Output: the prompt, then every token's text as it is sampled (stdout flushed per token), a newline, and
one summary line on stderr::

    pipeplan: prompt <n> tokens, <prefill> tok/s | generated <n> tokens, <decode> tok/s | load <s> s | <n> stages, <backend>

``--json`` prints one JSON document instead (no streaming, no summary).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from pipeplan.errors import PipeplanError
from pipeplan.runtime.limits import check_prompt
from pipeplan.runtime.tmachine_run import compile_target

TARGET_KERNELS = {"cpu": "pipeplan.runtime.kernels.cpu", "reference": None, "cuda": "pipeplan.runtime.kernels.triton"}
"""``--target`` -> the kernel module the stages run: cpu (weights kept in their GGUF types, C kernels),
reference (None: the torch float32 reference), cuda (Triton)."""
COMPILE_TARGETS = {t: compile_target(k) for t, k in TARGET_KERNELS.items()}
"""``--target`` -> the compiler target of the run: the virtual machine's stage programs, or for cuda the
``tmachine`` program the stages interpret (:mod:`pipeplan.runtime.tmachine_run`)."""
DEFAULT_TARGET = "cpu"
"""``--target`` when not given (``reference`` for ``--backend direct``)."""
BACKENDS = ("local", "inproc", "ray", "direct")
DEFAULT_BACKEND = "local"
DEFAULT_MAX_TOKENS = 40


class OptionError(PipeplanError):
    """Options that do not go together (code ``bad_option``), e.g. a replay's ``--max-seq-len`` that is not its package's."""

    code = "bad_option"


def add_generation_arguments(p: argparse.ArgumentParser, several_prompts: bool = False) -> None:
    """Register the options ``run`` and ``replay`` share (module docstring) on ``p``; ``several_prompts``: the
    ``--prompt`` option may repeat (a list; :func:`split_prompts` normalizes it)."""
    if several_prompts:
        p.add_argument("--prompt", required=True, action="append",
                       help="prompt text, UTF-8 (BOS is prepended); repeat it for several sequences (with --parallel "
                            "N up to N run at once)")
    else:
        p.add_argument("--prompt", required=True, help="prompt text, UTF-8 (BOS is prepended)")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                   help=f"most tokens to generate (default {DEFAULT_MAX_TOKENS}; stops early at EOS)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="keep the k best logits (0 = all, default)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = all, default)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed, 0 .. 2**63-1 (default 0)")
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help=f"local: one process per stage with shared-memory rings; inproc: threads; ray: Ray actors on "
                        f"the planned nodes; direct: inproc with one kernel thread and the reference kernels by default "
                        f"(default {DEFAULT_BACKEND})")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to connect to (ray backend; default: an embedded local Ray instance)")
    p.add_argument("--target", choices=tuple(TARGET_KERNELS), default=None,
                   help="kernels: cpu (default; reference with --backend direct: quantized weights, C kernels), "
                        "reference (torch float32) or cuda (Triton; interpreter without a GPU)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads per stage, 1 .. 4 x cores (default: 1 for local and direct, torch's own for inproc)")
    p.add_argument("--timeline", metavar="measured.json",
                   help="write the measured TimelineBundle JSON here (pipeplan compare input; every backend)")
    p.add_argument("--trace", metavar="trace.json",
                   help="write the measured Chrome trace here (opens in Perfetto / chrome://tracing; every backend)")
    p.add_argument("--cache-dir", default=None,
                   help="weight and package cache (default $PIPEPLAN_CACHE or ~/.cache/pipeplan)")
    p.add_argument("--json", action="store_true", help="print ids, timings (and more) as one JSON document")
    p.add_argument("--inject-fault", metavar="STAGE:KIND", default=None, help=argparse.SUPPRESS)


def split_prompts(args: argparse.Namespace) -> list[str]:
    """The ``--prompt`` values (repeatable where :func:`add_generation_arguments` allowed it): sets
    ``args.prompts`` to the list and ``args.prompt`` to the first, and returns the list."""
    given = args.prompt if isinstance(args.prompt, list) else [args.prompt]
    args.prompts, args.prompt = list(given), given[0]
    return args.prompts


def check_generation_options(args: argparse.Namespace):
    """Check the shared options before any work; returns the FaultInjection to apply (or None).

    Raises PromptError(invalid_prompt); RunPlanRejection(invalid_request) for ``--max-tokens`` < 1;
    LimitError(invalid_request) for ``--threads`` outside ``[1, 4 x cores]``; SamplingError for sampler
    values out of range; FaultInjectionError for a malformed ``--inject-fault`` / ``$PIPEPLAN_INJECT_FAULT``;
    OutputPathError for a ``--timeline``/``--trace`` path that cannot be written; RunPlanRejection(invalid_request)
    for an unusable ``--cache-dir``. (``--ray-address`` without ``--backend ray`` fails in :func:`make_backend`.)
    """
    from pipeplan.errors import RunPlanRejection
    from pipeplan.runtime.limits import check_thread_count

    check_prompt(args.prompt)
    if getattr(args, "target", None) is None:
        args.target = "reference" if args.backend == "direct" else DEFAULT_TARGET
    if args.max_tokens < 1:
        raise RunPlanRejection(f"--max-tokens must be >= 1, got {args.max_tokens}", code="invalid_request",
                               where="max_tokens")
    if args.threads is not None:
        check_thread_count(args.threads)

    from pipeplan.files.atomic import check_output_file
    from pipeplan.runtime.sampling import Sampler  # torch
    from pipeplan.runtime.stage import FaultInjection

    Sampler(args.temperature, args.top_k, args.top_p, args.seed)  # SamplingError before any work
    fi = FaultInjection.parse(args.inject_fault) if args.inject_fault else FaultInjection.from_env()
    if args.timeline:
        check_output_file(args.timeline, "--timeline")
    if args.trace:
        check_output_file(args.trace, "--trace")
    check_cache_dir(args.cache_dir)
    return fi


def check_cache_dir(cache_dir: str | None) -> None:
    """An explicit ``--cache-dir`` must be a directory or creatable as one (it is created). Raises
    RunPlanRejection(invalid_request) before any work; the default cache (``$PIPEPLAN_CACHE``) is checked
    where it is used (``error[cache_unusable]``)."""
    if cache_dir is None:
        return
    import os

    from pipeplan.errors import RunPlanRejection

    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as e:
        raise RunPlanRejection(f"--cache-dir {cache_dir}: not a usable directory: {e.strerror or e}",
                               code="invalid_request", where="cache_dir") from None


def check_fault_stage(fi: Any, n_stages: int) -> None:
    """A fault injection must name one of the run's ``n_stages`` stages (else it would be silently ignored).
    Raises FaultInjectionError(bad_fault_injection)."""
    from pipeplan.runtime.stage import FaultInjectionError

    if fi is not None and not 0 <= fi.stage < n_stages:
        raise FaultInjectionError(f"fault injection names stage {fi.stage}, but the run has {n_stages} stage"
                                  f"{'s' if n_stages != 1 else ''} (0..{n_stages - 1})", where="stage")


def make_backend(args: argparse.Namespace):
    """The Backend for ``--backend``/``--ray-address`` (``direct``: inproc), made before any work so that bad
    backend options fail first; an unreachable HOST:PORT fails fast. Raises BackendError / RayUnavailableError."""
    from pipeplan.runtime.backends import check_ray_address
    from pipeplan.runtime.backends import make_backend as make

    check_ray_address(args.backend, args.ray_address)  # names the backend asked for (direct, not inproc)
    backend = make("inproc" if args.backend == "direct" else args.backend, ray_address=args.ray_address)
    if args.backend == "ray":
        from pipeplan.runtime.ray_backend import probe_ray_address

        probe_ray_address(args.ray_address)
    return backend


def stage_threads(args: argparse.Namespace) -> int | None:
    """Kernel threads per stage: ``--threads``, else 1 for ``--backend direct`` (None: the backend's default)."""
    return args.threads if args.threads is not None else (1 if args.backend == "direct" else None)


@contextlib.contextmanager
def recording(args: argparse.Namespace, programs: Mapping[int, Any] | None) -> Iterator[tuple[Any, str | None]]:
    """``programs`` with a private trace directory when ``--timeline``/``--trace`` is given (every stage writes the
    instructions it executes there: :mod:`pipeplan.runtime.trace`); yields ``(programs, directory or None)``. On
    exit the records are appended to the directory a program already named (``$PIPEPLAN_TMACHINE_TRACE``) and the
    private directory is removed."""
    if not (args.timeline or args.trace) or not programs:
        yield programs, None
        return
    import dataclasses
    import shutil
    import tempfile

    from pipeplan.runtime.trace import append_traces

    trace_dir = tempfile.mkdtemp(prefix="pipeplan-trace-")
    given = next(iter(programs.values())).trace
    try:
        yield {s: dataclasses.replace(p, trace=trace_dir) for s, p in programs.items()}, trace_dir
    finally:
        if given:
            append_traces(trace_dir, given)
        shutil.rmtree(trace_dir, ignore_errors=True)


def recorded_timeline(args: argparse.Namespace, programs: Mapping[int, Any], trace_dir: str, package: Any,
                      meta: Mapping[str, Any]) -> Any:
    """The measured TimelineBundle of the records in ``trace_dir`` (tmachine programs:
    :func:`~pipeplan.runtime.tmachine_run.measured_timeline`; else the package's vmachine program:
    :func:`~pipeplan.runtime.replay.measured_timeline`); writes ``--trace`` (``--timeline`` is the caller's, who
    may add to ``meta`` first)."""
    from pipeplan.runtime.tmachine_run import TMachineStageProgram
    from pipeplan.runtime.trace import read_traces

    traces = read_traces(trace_dir, len(programs))
    first = programs[min(programs)]
    if isinstance(first, TMachineStageProgram):
        from pipeplan.runtime.tmachine_run import measured_timeline

        timeline = measured_timeline(first, traces, {"backend": args.backend, **dict(meta)})
    else:
        from pipeplan.runtime.compiled import load_package
        from pipeplan.runtime.replay import measured_timeline as vm_timeline

        pkg = package if hasattr(package, "program") else load_package(package, verify=False)
        timeline = vm_timeline(pkg, traces, {"backend": args.backend, **dict(meta)})
    if args.trace:
        timeline.write_chrome_trace(args.trace, "--trace")
    return timeline


def _write(stream: TextIO, text: str, flush: bool = False) -> None:
    """Write (and flush) ``text``; a character the stream's encoding lacks becomes a replacement. Raises
    OutputPathError(write_failed) on an OS error other than a closed pipe (e.g. stdout on a full disk);
    BrokenPipeError propagates (the CLI treats a reader that went away as the end)."""
    from pipeplan.files.atomic import OutputPathError

    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:  # a terminal that cannot show some character: show a replacement instead
            enc = getattr(stream, "encoding", None) or "utf-8"
            stream.write(text.encode(enc, "replace").decode(enc, "replace"))
        if flush:
            stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        if stream is sys.stdout:  # what is left in its buffer cannot be written either: keep the final flush quiet
            import os

            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        raise OutputPathError(f"stdout: cannot write: {e.strerror or e}", code="write_failed", where="stdout") from None


class TokenPrinter:
    """Streams a generation to ``stream`` as llama.cpp does: the prompt, then each token's text piece as
    it is sampled (flushed per token), then a newline (:meth:`finish`). ``on_start`` is called once,
    just before the prompt is written (e.g. to close a progress bar)."""

    def __init__(self, prompt: str, stream: TextIO | None = None, on_start=None):
        self.prompt = prompt
        self.stream = stream if stream is not None else sys.stdout
        self.on_start = on_start
        self.streamed = ""
        self.started = False
        self.finished = False

    def _start(self) -> None:
        if not self.started:
            self.started = True
            if self.on_start is not None:
                self.on_start()
            _write(self.stream, self.prompt)

    def __call__(self, token_id: int, piece: str) -> None:
        self._start()
        _write(self.stream, piece, flush=True)
        self.streamed += piece

    def finish(self, text: str) -> None:
        """End the output: the rest of ``text`` (the generated text; what the stream has not shown yet,
        i.e. the replacement of a trailing incomplete UTF-8 sequence) and a newline."""
        self._start()
        rest = text[len(self.streamed):] if text.startswith(self.streamed) else ""
        _write(self.stream, rest + "\n", flush=True)
        self.finished = True

    def abort(self) -> None:
        """End a stream cut short by an error with a newline (the error goes to stderr)."""
        if self.started and not self.finished:
            self.finished = True
            try:
                _write(self.stream, "\n", flush=True)
            except (OSError, PipeplanError):
                pass  # the error being raised is the one to report


def summary_line(timings: Mapping[str, float], stages: int, backend: str, extra: str = "") -> str:
    """The one-line stderr summary (module docstring) from RunResult-style ``timings``."""
    n_p, n_g = int(timings.get("n_prompt", 0)), int(timings.get("n_generated", 0))
    line = (f"pipeplan: prompt {n_p} tokens, {timings.get('prefill_tok_s', 0.0):.1f} tok/s | "
            f"generated {n_g} tokens, {timings.get('decode_tok_s', 0.0):.1f} tok/s | "
            f"load {timings.get('load_s', 0.0):.2f} s | {stages} stage{'s' if stages != 1 else ''}, {backend}")
    return line + (f" | {extra}" if extra else "")


def generate_texts(args: argparse.Namespace, *, model: str, backend, provisions, programs, fi, on_event=None) -> list[Any]:
    """Generate a continuation of every prompt of ``args.prompts`` through one pipeline, up to ``args.parallel``
    at once (:func:`pipeplan.runtime.orchestrator.generate_many`); no streaming. Returns the RunResults in
    prompt order. Raises the typed errors of generation."""
    from pipeplan.runtime.orchestrator import generate_many

    return generate_many(model, provisions, args.prompts, max_tokens=args.max_tokens, temperature=args.temperature,
                         top_k=args.top_k, top_p=args.top_p, seed=args.seed, backend=backend, fault_injection=fi,
                         on_event=on_event, cache_dir=args.cache_dir, kernels=TARGET_KERNELS[args.target],
                         programs=programs, num_threads=stage_threads(args), parallel=getattr(args, "parallel", 1),
                         micro_batches=getattr(args, "micro_batches", None))


def generate_text(args: argparse.Namespace, *, model: str, backend, provisions, programs, package=None, fi,
                  on_event=None, on_start=None) -> tuple[Any, TokenPrinter | None]:
    """Generate with the options of ``args`` on ``provisions``/``programs`` through ``backend`` (the stage
    runtime; :func:`make_backend`). Streams to stdout unless ``--json``. Returns ``(RunResult, printer)`` (the
    printer None with --json). Raises the typed errors of generation (StageFault, RunRequestError, ...)."""
    from pipeplan.runtime.orchestrator import generate

    printer = None if args.json else TokenPrinter(args.prompt, on_start=on_start)
    try:
        result = generate(model, provisions, args.prompt, max_tokens=args.max_tokens,
                          temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                          backend=backend, fault_injection=fi, on_event=on_event, cache_dir=args.cache_dir,
                          kernels=TARGET_KERNELS[args.target], programs=programs, num_threads=stage_threads(args),
                          on_token=printer, parallel=getattr(args, "parallel", 1),
                          micro_batches=getattr(args, "micro_batches", None))
    except BaseException:
        if printer is not None:
            printer.abort()
        raise
    if printer is not None:
        printer.finish(result.text)
    return result, printer
