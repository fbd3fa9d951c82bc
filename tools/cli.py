"""``pipeplan``: the user command (``plan``, ``run``, ...).

Each subcommand lives in its own module ``pipeplan.tools.cmd_<name>`` exposing
``HELP: str``, ``add_arguments(parser)`` and ``main(args) -> int``. Errors are typed
(:class:`pipeplan.errors.PipeplanError`): printed as one ``error[<code>]: <message>`` line on
stderr with a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from typing import NoReturn

from pipeplan import __version__
from pipeplan.errors import PipeplanError, StageFault

COMMANDS = ("plan", "run", "serve", "compile", "replay", "compare", "calibrate", "clean")

OUTPUT_OPTIONS = frozenset({"output", "trace", "timeline", "cache_dir", "prompt", "shm_dir"})
"""Namespace fields that are not input files (outputs, directories, text)."""


def note_command_inputs(args: argparse.Namespace) -> None:
    """Record every file the command reads (positional files, ``--nodes``, ``--model``, ``--model-facts``,
    ``--evidence measured:TABLE.json``, ...) so that no output replaces one (``error[output_is_input]``)."""
    from pipeplan.files.atomic import clear_inputs, note_inputs

    clear_inputs()
    for key, value in vars(args).items():
        if key.startswith("_") or key in OUTPUT_OPTIONS:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str):
                note_inputs(v.removeprefix("measured:"))


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: a malformed command line (``--stages abc``, ``--backend bogus``, a
    missing required argument, an unknown option) prints ``error[invalid_argument]: <message naming the
    option> (see `pipeplan <command> --help`)`` on stderr and exits with status 2, instead of the usage
    dump. Sub-parsers are of this class too; ``--help`` is unchanged."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(2, f"error[invalid_argument]: {text} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with one sub-parser per available command."""
    parser = ArgumentParser(prog="pipeplan", description="Pipeline-parallel LLM planning and inference")
    parser.add_argument("--version", action="version", version=f"pipeplan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            mod = import_module(f"pipeplan.tools.cmd_{name}")
        except ModuleNotFoundError as e:  # a command not built yet
            if e.name == f"pipeplan.tools.cmd_{name}":
                continue
            raise
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Exit status: 0 ok, 2 rejected/invalid input (also stdout that cannot be written:
    ``error[write_failed]: stdout: ...``), 3 stage fault. ``--help``/``--version``/a malformed command
    line raise SystemExit as argparse does."""
    from pipeplan.files.atomic import GuardedStdout

    real = sys.stdout
    sys.stdout = GuardedStdout(real)  # type: ignore[assignment]
    exiting = False
    try:
        try:
            rc = _run(argv)
        except SystemExit:
            exiting = True
            sys.stdout.flush()
            raise
        sys.stdout.flush()
        return rc
    except PipeplanError as e:  # stdout failed (a command's own PipeplanErrors are caught in _run)
        real = _quiet_stdout(real)
        print(e.one_line(), file=sys.stderr)
        if exiting:
            raise SystemExit(2) from None
        return 2
    except BrokenPipeError:  # stdout closed early (e.g. piped into `head`): not an error of ours
        real = _quiet_stdout(real)
        return 0
    finally:
        if isinstance(sys.stdout, GuardedStdout):
            sys.stdout = real


def _quiet_stdout(real):
    """Replace a stdout that failed by ``os.devnull``, so the interpreter's final flush stays quiet."""
    if real is None or real is sys.__stdout__:
        try:
            return open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            return real
    return real


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named with the command's own --help (plain parse_args would blame `pipeplan`)
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        note_command_inputs(args)
        if os.environ.get("PIPEPLAN_CPU_KERNELS") is not None:  # a typo is an error, not the default kernels
            from pipeplan.runtime.kernels.cpu import check_kernel_env

            check_kernel_env()
        return int(args._main(args) or 0)
    except StageFault as e:
        print(e.one_line(), file=sys.stderr)
        return 3
    except PipeplanError as e:
        if e.code == "write_failed" and e.where == "stdout":
            raise
        print(e.one_line(), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error[interrupted]: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
