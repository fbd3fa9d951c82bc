"""What ``pipeplan run`` and ``pipeplan replay`` share: generation options (same names, same defaults),
their checks, and the output, which looks like llama.cpp's.

Options (both commands): ``--prompt``, ``--max-tokens`` (default 40), ``--temperature``/``--top-k``/
``--top-p``/``--seed`` (llama.cpp's sampler chain, :class:`~pipeplan.runtime.sampling.Sampler`),
``--backend local|inproc|ray|direct`` (default ``local``), ``--ray-address``, ``--target``,
``--threads``, ``--timeline`` (the measured TimelineBundle JSON) and ``--trace`` (the measured Chrome
trace, which Perfetto and chrome://tracing open), both recorded by ``--backend direct`` (and by ``pipeplan run
--target cuda`` on any backend: the executed tmachine instructions),
``--cache-dir``, ``--json``. The same two flags mean the same files in ``pipeplan compile`` (predicted)
and ``pipeplan compare --trace`` (side by side).

Output: the prompt, then every token's text as it is sampled (stdout flushed per token), a newline, and
one summary line on stderr::

    pipeplan: prompt <n> tokens, <prefill> tok/s | generated <n> tokens, <decode> tok/s | load <s> s | <n> stages, <backend>

``--json`` prints one JSON document instead (no streaming, no summary).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from pipeplan.errors import PipeplanError
from pipeplan.runtime.limits import check_prompt

TARGET_KERNELS = {"cpu": "pipeplan.runtime.kernels.cpu", "reference": None, "cuda": "pipeplan.runtime.kernels.triton"}
"""``--target`` -> the kernel module the stages run: cpu (weights kept in their GGUF types, C kernels),
reference (None: the torch float32 reference), cuda (Triton)."""
COMPILE_TARGETS = {"cpu": "virtual-queue", "reference": "virtual-queue", "cuda": "cuda-triton"}
"""``--target`` -> the compiler target of the run: the virtual machine's stage programs, or for cuda the
``tmachine`` program the stages interpret (:mod:`pipeplan.runtime.tmachine_run`)."""
DEFAULT_TARGET = "cpu"
"""``--target`` when not given (``reference`` for ``--backend direct``, which replays with the reference kernels)."""
BACKENDS = ("local", "inproc", "ray", "direct")
DEFAULT_BACKEND = "local"
DEFAULT_MAX_TOKENS = 40


class OptionError(PipeplanError):
    """Options that do not go together (code ``bad_option``): ``--timeline``/``--trace``, non-greedy
    sampling or a fault injection with a backend that cannot honour them."""

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
                        f"the planned nodes; direct: instruction-by-instruction replay in this process that records "
                        f"the measured timeline (greedy) (default {DEFAULT_BACKEND})")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to connect to (ray backend; default: an embedded local Ray instance)")
    p.add_argument("--target", choices=tuple(TARGET_KERNELS), default=None,
                   help="kernels: cpu (default; reference with --backend direct: quantized weights, C kernels), "
                        "reference (torch float32) or cuda (Triton; interpreter without a GPU)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads per stage, 1 .. 4 x cores (default: 1 for local and direct, torch's own for inproc)")
    p.add_argument("--timeline", metavar="measured.json",
                   help="write the measured TimelineBundle JSON here (pipeplan compare input; --backend direct)")
    p.add_argument("--trace", metavar="trace.json",
                   help="write the measured Chrome trace here (opens in Perfetto / chrome://tracing; --backend direct)")
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
    OptionError(bad_option) for ``--timeline``/``--trace``/``--inject-fault``/sampling/``--target cuda``/
    ``--ray-address`` with a backend that cannot honour them (``--timeline``/``--trace`` on another backend than
    direct need ``--target cuda`` and ``args.tmachine_timeline``, which ``pipeplan run`` sets); OutputPathError for a ``--timeline``/
    ``--trace`` path that cannot be written; RunPlanRejection(invalid_request) for an unusable ``--cache-dir``.
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

    sampler = Sampler(args.temperature, args.top_k, args.top_p, args.seed)  # SamplingError before any work
    fi = FaultInjection.parse(args.inject_fault) if args.inject_fault else FaultInjection.from_env()
    if args.backend == "direct":
        why = (f"--target {args.target}" if args.target != "reference" else "--ray-address" if args.ray_address
               else "non-greedy sampling (--temperature > 0)" if not sampler.greedy
               else "a fault injection" if fi is not None else None)
        if why is not None:
            raise OptionError(f"the direct replay runs the reference kernels greedily in this process: {why} needs "
                              f"--backend local|inproc|ray", where="backend")
    elif (args.timeline or args.trace) and not (args.target == "cuda" and getattr(args, "tmachine_timeline", False)):
        raise OptionError("--timeline/--trace are recorded by the direct replay (--backend direct) and by `pipeplan "
                          "run|replay --target cuda` only", where="backend")
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
    """The Backend for ``--backend``/``--ray-address`` (None for ``direct``), made before any work so that bad
    backend options fail first; an unreachable HOST:PORT fails fast. Raises BackendError / RayUnavailableError."""
    if args.backend == "direct":
        return None
    from pipeplan.runtime.backends import make_backend as make

    backend = make(args.backend, ray_address=args.ray_address)
    if args.backend == "ray":
        from pipeplan.runtime.ray_backend import probe_ray_address

        probe_ray_address(args.ray_address)
    return backend


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
                         programs=programs, num_threads=args.threads, parallel=getattr(args, "parallel", 1),
                         micro_batches=getattr(args, "micro_batches", None))


def generate_text(args: argparse.Namespace, *, model: str, backend, provisions, programs, package, fi, on_event=None,
                  on_start=None) -> tuple[Any, Any, TokenPrinter | None]:
    """Generate with the options of ``args`` on ``provisions``/``programs`` through ``backend`` (the stage
    runtime; :func:`make_backend`) or, for ``--backend direct`` (``backend`` None), by replaying ``package``
    (writing ``--timeline``/``--trace``).

    Streams to stdout unless ``--json``. Returns ``(result, timeline, printer)``: a RunResult (backends)
    or ReplayResult (direct, whose measured timeline is ``timeline``), and the printer (None with --json).
    Raises the typed errors of generation (StageFault, RunRequestError, ReplayError, ...)."""
    printer = None if args.json else TokenPrinter(args.prompt, on_start=on_start)
    try:
        if args.backend == "direct":
            from pipeplan.runtime.replay import replay_package

            r = replay_package(package, model, args.prompt, args.max_tokens,
                               num_threads=1 if args.threads is None else args.threads, on_token=printer)
            if args.timeline:
                r.timeline.write(args.timeline, "--timeline")
            if args.trace:
                r.timeline.write_chrome_trace(args.trace, "--trace")
            result, timeline = r, r.timeline
        else:
            from pipeplan.runtime.orchestrator import generate

            result = generate(model, provisions, args.prompt, max_tokens=args.max_tokens,
                              temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                              backend=backend, fault_injection=fi, on_event=on_event, cache_dir=args.cache_dir,
                              kernels=TARGET_KERNELS[args.target], programs=programs, num_threads=args.threads,
                              on_token=printer, parallel=getattr(args, "parallel", 1))
            timeline = None
    except BaseException:
        if printer is not None:
            printer.abort()
        raise
    if printer is not None:
        printer.finish(result.text)
    return result, timeline, printer
