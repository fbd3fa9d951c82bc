"""``pipeplan-opt``: ``xdsl-opt`` with pipeplan's dialects and passes registered.

Same flags as ``xdsl-opt`` (``-p``, ``--verify-diagnostics``, ``--print-op-generic``,
``--split-input-file`` ...). ``pipeplan-opt --help`` ends with the catalog of pipeplan's passes
(:func:`pass_catalog`: derived from the pass classes, plus :data:`PASS_NOTES`).

A verifier or pass failure about one op is ``file.mlir:LINE:COL: error: [<ID>] <invariant>: <detail>``
followed by that op's first printed line (truncated), never a print of the whole module
(:mod:`pipeplan.dialects.diagnostics`: ops carry their source locations from the parser). Other
diagnostics are one line on stderr, never a traceback: exit status 1 for a pass pipeline that names an
unknown pass (with the closest names) or option, gives an option a value of the wrong type or an unquoted
path, an input that is missing, a directory, not UTF-8 text or nested too deeply to parse, an ``-o`` that
is not a regular file or cannot be written, and every verifier/pass/parse failure; exit status 2 for a bad
command-line flag (``error[invalid_argument]: ...``, as ``pipeplan``). Input paths are checked by
:func:`pipeplan.files.paths.check_input_file`; ``-o OUT`` is checked before any pass runs and written by
:func:`pipeplan.files.atomic.write_file_atomic` (a temporary file beside OUT, renamed over it only when
complete; never over anything but a regular file).

``--located-diagnostics`` makes ``--verify-diagnostics`` print such a failure the same way (location, message,
op text) instead of the message alone, so that a lit test of ``--split-input-file`` cases checks where each
failure points.

``--observe`` (``--observe=json``) runs the observers of :mod:`pipeplan.transforms.observers` after each
pass that ends a boundary and prints each observation as one line on stderr (JSON lines with ``=json``);
stdout is unchanged and a failing observation is a finding, not an error. ``--observe-strict`` (implies
``--observe``) makes any failing observation ``error[observation_failed]`` and exit status 1 once the output
is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import gc
import io
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from types import UnionType
from typing import IO, TYPE_CHECKING, Any, NoReturn, Union, get_args, get_origin, get_type_hints

from pipeplan.dialects.diagnostics import IRVerifyError, OpError, OpPassError, parse_located, verify_module
from pipeplan.errors import PipeplanError
from pipeplan.files.atomic import (
    GuardedStdout,
    OutputPathError,
    check_output_file,
    clear_inputs,
    note_inputs,
    write_file_atomic,
)
from pipeplan.files.paths import check_input_file
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, PassFailedException
from xdsl.utils.hints import isa, type_repr
from xdsl.xdsl_opt_main import xDSLOptMain

if TYPE_CHECKING:
    from pipeplan.transforms.observers import Observation

_NOTE_LIMIT = 2000
"""Longest note of an xDSL diagnostic that ``pipeplan-opt`` prints (xDSL attaches a print of the whole
module to verifier failures of non-pipeplan ops; those are dropped)."""


class OptError(PipeplanError):
    """A ``pipeplan-opt`` usage error (pass pipeline, input, output); ``code`` names the kind."""

    code = "invalid_pipeline"


@dataclasses.dataclass(frozen=True)
class PassNote:
    """What a pass's class does not say: the pass that must run before it and options required in context."""

    after: str = ""
    """A pass spec that must have produced the input (e.g. ``convert-pplan-to-cplan{keep_source=true}``)."""
    required: tuple[tuple[str, str], ...] = ()
    """``(option, when)`` pairs: the option must be given ``when`` (e.g. unless the module holds a binding)."""


PASS_NOTES: dict[str, PassNote] = {
    "runplan-verify": PassNote(after="pipeplan plan"),
    "runplan-project-provisioning": PassNote(after="pipeplan plan"),
    "convert-runplan-to-pplan": PassNote(after="pipeplan plan"),
    "pplan-legalize": PassNote(after="convert-runplan-to-pplan",
                               required=(("target", "unless the module holds a pplan.target_binding"),)),
    "pplan-select-implementations": PassNote(after="pplan-legalize"),
    "pplan-resolve-costs": PassNote(after="pplan-select-implementations",
                                    required=(("evidence", "unless the module holds a pplan.evidence_policy"),)),
    "convert-pplan-to-cplan": PassNote(after="pplan-resolve-costs"),
    "cplan-verify": PassNote(after="convert-pplan-to-cplan (keep_source=true for the commit gate)"),
    "cplan-project-timing": PassNote(after="convert-pplan-to-cplan"),
    "cplan-simulate": PassNote(after="convert-pplan-to-cplan"),
    "convert-cplan-to-vmachine": PassNote(after="convert-pplan-to-cplan",
                                          required=(("model", "unless the module holds a vmachine.abi"),)),
    "convert-cplan-to-triton": PassNote(after="convert-pplan-to-cplan{keep_source=true} (target cuda-triton)"),
}
"""Per pipeplan pass: ordering and context-dependent required options (tests check names and options)."""


def _pipeplan_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    from pipeplan.universe import PIPEPLAN_UNIVERSE

    return dict(PIPEPLAN_UNIVERSE.all_passes)


def pass_options(cls: type[ModulePass]) -> list[tuple[str, str, Any]]:
    """``(name, type, default)`` of each option (dataclass field) of a pass class; default is
    ``dataclasses.MISSING`` for an option without one."""
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "name" or not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out.append((f.name, type_repr(hints[f.name]), default))
    return out


def summary_line(cls: type) -> str:
    """The first docstring line of ``cls`` for a terminal: RST literals as `x`, pointers to the module
    docstring dropped (empty when there is no docstring)."""
    doc = (cls.__doc__ or "").strip()
    line = doc.splitlines()[0] if doc else ""
    line = re.sub(r"\s*\((see )?(the )?module docstring\)", "", line.replace("``", "`"))
    return line.strip()


def _format_default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    if isinstance(value, bool):
        return "= " + str(value).lower()
    if isinstance(value, str):
        return f'= "{value}"'
    if isinstance(value, tuple):
        return "= " + (",".join(_format_default(v)[2:] for v in value) if value else "(none)")
    return f"= {value}"


def pass_catalog() -> str:
    """The pipeplan part of ``pipeplan-opt --help``: each pass with its one-line description, its options
    (type, default, when required) and the pass that must run before it."""
    lines = ["pipeplan passes (-p 'pass-a,pass-b{option=value other=\"a/path.toml\"}'; quote paths and other",
             "strings that are not plain identifiers; every xDSL pass is available too):"]
    for name, factory in _pipeplan_passes().items():
        cls = factory()
        note = PASS_NOTES.get(name, PassNote())
        required = dict(note.required)
        lines.append(f"  {name}")
        lines.append(f"      {summary_line(cls)}")
        for opt, typ, default in pass_options(cls):
            when = f"  required {required[opt]}" if opt in required else ""
            lines.append(f"      {opt}: {typ} {_format_default(default)}{when}")
        if note.after:
            lines.append(f"      after: {note.after}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- pass pipeline checks
def _quoted_fix(spec: str, col: int) -> str:
    """``spec`` with the unquoted option value around column ``col`` quoted ('' when there is none)."""
    for m in re.finditer(r"([A-Za-z_][\w-]*)=([^\s,{}\"]+)", spec):
        if m.start(2) <= col <= m.end(2) + 1:
            return spec[: m.start(2)] + f'"{m.group(2)}"' + spec[m.end(2):]
    return ""


def _parse_error(spec: str, e: ArgSpecParseError) -> OptError:
    text = [ln for ln in str(e).splitlines() if ln.strip()]
    caret = next((ln for ln in text if ln.strip().startswith("^")), "")
    col = caret.index("^") if caret else -1
    what = text[-1].strip() if text else "syntax error"
    where = f" at column {col + 1} ({spec[col]!r})" if 0 <= col < len(spec) else " at its end" if col >= 0 else ""
    fix = _quoted_fix(spec, col) if col >= 0 else ""
    hint = f"; quote string values: {fix}" if fix else ""
    return OptError(f"-p: cannot parse the pass pipeline{where}: {what}{hint}", code="pipeline_syntax",
                    where=spec)


def _value_text(values: tuple[Any, ...]) -> str:
    if not values:
        return "no value"
    shown = [str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else str(v) for v in values]
    return ",".join(shown)


_EXAMPLES = {"str": '"..."', "bool": "true", "int": "1", "float": "0.5", "tuple[str, ...]": "a,b"}


def _value_fits(values: tuple[Any, ...], hint: Any) -> bool:
    """Whether xDSL's ``ArgSpec`` conversion accepts ``values`` for a field annotated ``hint``: one value of
    the type, a tuple of them, or no value for an optional (``X | None``) field."""
    if not values:
        return get_origin(hint) in (Union, UnionType) and type(None) in get_args(hint)
    return (len(values) == 1 and isa(values[0], hint)) or isa(values, hint)


def check_pipeline(spec: str, available: dict[str, Callable[[], type[ModulePass]]]) -> None:
    """Raise :class:`OptError` naming the first problem of the ``-p`` spec: syntax, unknown pass (with the
    closest names), unknown option (with the pass's options) or an option value of the wrong type."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:
        raise _parse_error(spec, e) from None
    for s in specs:
        if s.name not in available:
            close = difflib.get_close_matches(s.name, list(available), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise OptError(f"unknown pass {s.name!r}{hint} (pipeplan-opt --help lists the pipeplan passes)",
                           code="unknown_pass", where=s.name)
        cls = available[s.name]()
        options = {name: typ for name, typ, _ in pass_options(cls)}
        hints = get_type_hints(cls)
        for raw, values in s.parameters.items():
            opt = raw.replace("-", "_")
            if opt not in options:
                close = difflib.get_close_matches(opt, list(options), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                known = ", ".join(options) if options else "none"
                raise OptError(f"{s.name}: unknown option {raw!r}{hint} (options: {known})", code="unknown_option",
                               where=f"{s.name}{{{raw}}}")
            if not _value_fits(values, hints[opt]):
                given = ",".join(str(v) for v in values)
                example = f'"{given}"' if options[opt] == "str" and given else _EXAMPLES.get(options[opt], "")
                hint = f" (e.g. {s.name}{{{opt}={example}}})" if example else ""
                raise OptError(f"{s.name}: option {opt} expects {options[opt]}, got {_value_text(values)}{hint}",
                               code="invalid_option_value", where=f"{s.name}{{{opt}}}")
        try:
            cls.from_pass_spec(s)
        except ValueError as e:
            raise OptError(f"{s.name}: {e}", code="invalid_option_value", where=s.name) from None


# --------------------------------------------------------------------------- input and output
def read_input(path: str | None) -> bytes:
    """The bytes of the input file (stdin when None or ``-``, as in ``mlir-opt``), checked to be UTF-8 text.

    Raises: OptError ``file_not_found`` / ``bad_input_path`` (a directory, FIFO, device) / ``unreadable``
    (:func:`pipeplan.files.paths.check_input_file`, before any open), ``input_not_text`` (with the offset
    of the first invalid byte)."""
    if path == "-":
        path = None
    name = path if path is not None else "<stdin>"
    if path is None:
        data = sys.stdin.buffer.read()
    else:
        check_input_file(path, "input", error=OptError)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OptError(f"input {path}: cannot read: {e.strerror or e}", code="unreadable", where=path) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OptError(f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); pipeplan-opt "
                       f"reads MLIR text", code="input_not_text", where=name) from None
    return data


class _Buffer(io.StringIO):
    """The output collected in memory; xDSL closes its output stream, which must not discard the text."""

    def close(self) -> None:
        pass


def _arg_error(message: str) -> NoReturn:
    print(f"error[invalid_argument]: {' '.join(message.split())} (pipeplan-opt --help lists the options)",
          file=sys.stderr)
    sys.exit(2)


class PipeplanOptMain(xDSLOptMain):
    """xDSLOptMain plus every pipeplan dialect and pass (duplicates from plugins are skipped), with the
    checks of the module docstring."""

    _buffer: _Buffer | None = None
    _observations: list[Observation]

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from pipeplan.universe import PIPEPLAN_UNIVERSE as u

        for name, factory in u.all_dialects.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        from pipeplan.dialects.printing import PlanMLIRTarget

        self.available_targets["mlir"] = lambda: PlanMLIRTarget  # same text, string literals in one write

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in _pipeplan_passes().items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        for action in arg_parser._actions:
            if "--passes" in action.option_strings:
                action.help = (f"comma-separated pass pipeline: the pipeplan passes listed below and "
                               f"{len(self.available_passes) - len(_pipeplan_passes())} xDSL passes "
                               f"(xdsl-opt --help)")
        # "--observe=json" is its own option string (argparse matches it whole before splitting at "="), so
        # "--observe file.mlir" never takes the input file as the option's value.
        arg_parser.add_argument("--observe", dest="observe", action="store_const", const="text", default=None,
                                help="after each pass that ends a boundary (legalization, construction, timing, "
                                     "machine verification), print each observer's observation as one line on "
                                     "stderr; stdout is unchanged")
        arg_parser.add_argument("--observe=json", dest="observe", action="store_const", const="json",
                                help="as --observe, one JSON object per line")
        arg_parser.add_argument("--observe-strict", action="store_true",
                                help="like --observe, and exit status 1 (error[observation_failed]) when an "
                                     "observation fails")
        arg_parser.add_argument("--located-diagnostics", action="store_true",
                                help="with --verify-diagnostics, print a verifier or pass failure about one op as "
                                     "'file:line:col: error: <message>' and the op's first line (as without "
                                     "--verify-diagnostics), not the message alone")
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        arg_parser.error = _arg_error  # type: ignore[method-assign]
        plain_help = arg_parser.format_help
        arg_parser.format_help = lambda: plain_help() + "\n" + pass_catalog()  # type: ignore[method-assign]

    def setup_pipeline(self) -> None:
        check_pipeline(self.args.passes, self.available_passes)
        try:
            super().setup_pipeline()
        except ValueError as e:  # anything check_pipeline did not foresee, still one line
            raise OptError(f"-p: {e}", code="invalid_pipeline", where=self.args.passes) from None
        self._observations = []
        self.pipeline = dataclasses.replace(self.pipeline, callback=self._cached_verify(self.pipeline.callback))
        mode = self.args.observe or ("text" if self.args.observe_strict else None)
        if mode is not None:  # imported only when observing: plain runs do not load every dialect up front
            from pipeplan.transforms.observers import default_registry, observing_callback

            self.pipeline = dataclasses.replace(self.pipeline, callback=observing_callback(
                default_registry(), self._emit_observation(mode), self.pipeline.callback))

    def _cached_verify(self, inner: Callable[..., None] | None) -> Callable[..., None]:
        """xDSL's callback between passes (``--time-passes``, ``--print-between-passes``) with its
        ``module.verify()`` done by :func:`~pipeplan.dialects.diagnostics.verify_module` (the module's own
        verifier skipped when nothing in it changed)."""
        args = self.args

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            if not args.disable_verify:
                verify_module(module)
            if inner is not None:
                saved, args.disable_verify = args.disable_verify, True
                try:
                    inner(previous, module, following)
                finally:
                    args.disable_verify = saved

        return callback

    def _emit_observation(self, mode: str) -> Callable[[Observation], None]:
        def emit(obs: Observation) -> None:
            self._observations.append(obs)
            print(json.dumps(obs.to_json(), sort_keys=True) if mode == "json" else obs.line(), file=sys.stderr)
            sys.stderr.flush()

        return emit

    def apply_passes(self, prog: ModuleOp) -> None:
        """xDSL's verification and passes; with ``--verify-diagnostics --located-diagnostics`` a failure
        about one op (:class:`~pipeplan.dialects.diagnostics.OpError`) is reported as its two-line
        diagnostic (location, message, op text)."""
        try:
            super().apply_passes(prog)
        except OpError as e:
            if self.args.verify_diagnostics and self.args.located_diagnostics:
                raise DiagnosticException(e.diagnostic()) from None
            raise

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        data = read_input(self.args.input_file)
        if self.args.input_file in (None, "-"):
            return io.BytesIO(data), "mlir"
        ext = os.path.splitext(self.args.input_file)[1].lstrip(".")
        if ext not in self.available_frontends:
            raise OptError(f"{self.args.input_file}: unrecognized file extension {ext!r} (pipeplan-opt reads "
                           f".mlir files, or MLIR text on stdin)", code="input_not_mlir",
                           where=self.args.input_file)
        return io.BytesIO(data), ext

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """MLIR input is parsed by :class:`~pipeplan.dialects.diagnostics.LocatingParser`, so every op
        carries its ``file:line:col`` for diagnostics; other frontends as in xDSL."""
        if (self.args.frontend or file_extension) != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        return parse_located(self.ctx, chunk.read(), self.get_input_name(), line_offset=start_offset,
                             allow_implicit_module=not self.args.no_implicit_module)

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        clear_inputs()
        note_inputs(self.args.input_file)  # -o naming the input file is error[output_is_input]
        check_output_file(self.args.output_file, "-o")  # before any pass runs
        self._buffer = _Buffer()
        return self._buffer

    def run(self) -> None:
        super().run()
        if self._buffer is not None:
            write_file_atomic(self.args.output_file, self._buffer.getvalue(), "-o")
        failed = [o for o in getattr(self, "_observations", []) if not o.ok]
        if failed and self.args.observe_strict:
            first = failed[0]
            raise OptError(f"--observe-strict: {len(failed)} observation{'s' if len(failed) != 1 else ''} failed "
                           f"(first: {first.name} after {first.after or 'the pipeline'})", code="observation_failed")


_NESTED_CODE = re.compile(r"error\[([A-Za-z0-9_]+)\]: ")


def coded_line(e: Exception) -> str:
    """One ``error[<code>]: <message>`` line for a failed pass or a typed error: the code of a nested
    ``error[<code>]: `` in the message (``convert-runplan-to-pplan: pool: error[invalid_pool]: ...`` becomes
    ``error[invalid_pool]: convert-runplan-to-pplan: pool: ...``), else the PipeplanError's code, else
    ``pass_failed``."""
    text = " ".join((e.message if isinstance(e, PipeplanError) else str(e)).split())
    m = _NESTED_CODE.search(text)
    if m is not None:
        return f"error[{m.group(1)}]: {text[:m.start()]}{text[m.end():]}"
    code = e.code if isinstance(e, PipeplanError) else "pass_failed"
    return f"error[{code}]: {text}"


_GC_THRESHOLD = (100_000, 50, 100)
"""Collector thresholds while ``pipeplan-opt`` runs: a plan's IR is millions of long-lived objects, which
the default thresholds (700, 10, 10) traverse again and again (about a fifth of a 70B-shaped pipeline's
time); young cycles are still collected."""


def _entry_point(argv: Sequence[str] | None) -> bool:
    """Whether this call is the process's ``pipeplan-opt`` command (the console script, no ``argv``)."""
    return argv is None and os.path.basename(sys.argv[0]) == "pipeplan-opt"


def main(argv: Sequence[str] | None = None, *, exit_process: bool | None = None) -> None:
    """Entry point of ``pipeplan-opt`` (``argv`` defaults to ``sys.argv[1:]``).

    With ``exit_process`` (default: when called as the ``pipeplan-opt`` command, :func:`_entry_point`) the
    process ends as soon as the output is written and the streams are flushed (``os._exit`` with the exit
    status: freeing a large module at interpreter shutdown costs most of a second and leaves nothing to
    do); the objects alive at start are frozen out of garbage collection and the cyclic collector is off
    for the rest of the process (its young-generation passes cost ~0.2 s of a 70B-shaped pipeline and free
    next to nothing: the peak memory of that pipeline is the same with it off; reference counting still
    frees everything acyclic). Otherwise the collector runs with :data:`_GC_THRESHOLD` meanwhile (restored
    after).
    """
    if exit_process is None:
        exit_process = _entry_point(argv)
    old = gc.get_threshold()
    if exit_process:
        gc.freeze()
        gc.disable()
    gc.set_threshold(*_GC_THRESHOLD)
    code: int | str | None = 0
    try:
        _main(argv)
    except SystemExit as e:
        if not exit_process:
            raise
        code = e.code
    except BaseException:  # an unexpected failure: its traceback, exit status 1 (as the interpreter would)
        if not exit_process:
            raise
        traceback.print_exc()
        code = 1
    finally:
        gc.set_threshold(*old)
    if exit_process:
        _exit_now(code)


def _exit_now(code: int | str | None) -> NoReturn:
    """``sys.exit(code)`` without the interpreter's shutdown: flush the streams, then ``os._exit``."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0 if code is None else code)


def _main(argv: Sequence[str] | None = None) -> None:
    """:func:`main` proper (see there).

    Diagnostics (a usage error of the module docstring, a verifier or pass failure, a parse error, a typed
    pipeplan error) are printed on stderr without a Python traceback and the exit status is 1, like
    ``mlir-opt``. With ``--verify-diagnostics`` xDSL itself prints them on stdout and exits 0 (lit tests
    rely on it).
    """
    tool: PipeplanOptMain | None = None
    real = sys.stdout
    sys.stdout = GuardedStdout(real)  # type: ignore[assignment]  # stdout that fails: error[write_failed]: stdout
    try:
        try:
            tool = PipeplanOptMain(description="pipeplan optimizer driver", args=argv)
            tool.run()
        finally:
            sys.stdout.flush()
    except (OptError, OutputPathError) as e:
        if e.where == "stdout" and (real is None or real is sys.__stdout__):
            real = open(os.devnull, "w")  # noqa: SIM115  (keeps the interpreter's final flush quiet)
        print(e.one_line(), file=sys.stderr)
        sys.exit(1)
    except (IRVerifyError, OpPassError) as e:
        print(e.diagnostic(), file=sys.stderr)
        sys.exit(1)
    except (PassFailedException, PipeplanError) as e:
        print(coded_line(e), file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            if len(note) <= _NOTE_LIMIT:
                print(note, file=sys.stderr)
        sys.exit(1)
    except (DiagnosticException, ParseError) as e:
        print(f"error: {e}", file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            if len(note) <= _NOTE_LIMIT:  # never a print of the whole module
                print(note, file=sys.stderr)
        sys.exit(1)
    except RecursionError:
        name = (tool.args.input_file or "stdin") if tool is not None else "the input"
        print(f"error[input_too_deep]: {name} nests regions or attributes too deeply to parse or print (more "
              f"than Python's recursion limit of {sys.getrecursionlimit()} frames)", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error[interrupted]: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # stdout closed early (piped into `head`)
        try:
            real = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        sys.exit(0)
    finally:
        if isinstance(sys.stdout, GuardedStdout):
            sys.stdout = real


if __name__ == "__main__":
    main(exit_process=True)
