"""``pipeplan`` command-line errors (tools/cli.py): every malformed command line of every subcommand is one
``error[invalid_argument]: ...`` line naming the option, exit status 2; ``--help`` is unchanged."""

from __future__ import annotations

import argparse

import pytest
from pipeplan.tools.cli import build_parser
from pipeplan.tools.cli import main as cli_main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _bad_command_lines() -> list[tuple[list[str], str]]:
    """(argv, text the error must contain) for each subcommand: an unknown option, each int/float option
    given a word, each option with choices given a bogus one, and no arguments where some are required."""
    cases: list[tuple[list[str], str]] = [([], "command"), (["no-such-command"], "no-such-command")]
    for name, p in _subparsers().items():
        filled = []  # placeholders for the required arguments, so the unknown option is what is reported
        for a in p._actions:
            if a.required:
                filled += [a.option_strings[-1], "x"] if a.option_strings else ["x"]
        cases.append(([name, *filled, "--no-such-option"], "--no-such-option"))
        for a in p._actions:
            if not a.option_strings or a.nargs == 0:
                continue
            opt = a.option_strings[-1]
            if a.type in (int, float):
                cases.append(([name, opt, "abc"], opt))
            if a.choices:
                cases.append(([name, opt, "bogus-choice"], opt))
        required = [a for a in p._actions if a.required]
        if required:
            shown = required[0].metavar or (required[0].option_strings or [required[0].dest])[-1]
            cases.append(([name], str(shown)))
    return cases


CASES = _bad_command_lines()


@pytest.mark.parametrize(("argv", "names"), CASES, ids=[" ".join(c[0]) or "(none)" for c in CASES])
def test_malformed_command_line_is_one_line(capsys, argv, names):
    """`--stages abc`, `--backend bogus`, a missing required argument, an unknown option or command: one
    `error[invalid_argument]` line naming it (and the command's --help), exit 2, nothing on stdout."""
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    cap = capsys.readouterr()
    assert e.value.code == 2 and cap.out == ""
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error[invalid_argument]: "), cap.err
    assert names in lines[0] and "--help" in lines[0], lines[0]
    assert "usage:" not in cap.err


def test_cases_cover_the_named_examples():
    """The generated table holds the cases issue 11 names (so a renamed option cannot empty it silently)."""
    argvs = [c[0] for c in CASES]
    assert ["plan", "--stages", "abc"] in argvs
    assert ["run", "--backend", "bogus-choice"] in argvs
    assert len({a[0] for a in argvs if a}) >= len(_subparsers())


def test_help_still_prints_usage(capsys):
    """`pipeplan plan --help` prints argparse's usage and option list and exits 0."""
    with pytest.raises(SystemExit) as e:
        cli_main(["plan", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: pipeplan plan") and "--stages N" in out


# --------------------------------------------------------------------------- stdout that cannot be written (QA 2/2b/10)
class _FullStdout:
    """A stdout like ``/dev/full``: every write fails with ENOSPC."""

    encoding = "utf-8"

    def write(self, text):
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass

    def isatty(self):
        return False


@pytest.fixture()
def own_stories(tmp_path):
    import shutil

    from tests.conftest import STORIES

    shutil.copyfile(STORIES, tmp_path / "s.gguf")
    return tmp_path / "s.gguf"


@pytest.mark.parametrize("closed", [False, True], ids=["enospc", "closed"])
def test_stdout_that_fails_is_one_write_failed_line(capsys, monkeypatch, own_stories, closed):
    """QA 2/2b: ``plan M > /dev/full`` and ``run M ... >&-`` are one ``error[write_failed]: stdout: ...``
    line, exit 2, never an OSError/AttributeError traceback."""
    for argv in (["plan", str(own_stories), "--stages", "1"],
                 ["run", str(own_stories), "--prompt", "Once", "--max-tokens", "2", "--backend", "direct"]):
        capsys.readouterr()
        monkeypatch.setattr("sys.stdout", None if closed else _FullStdout())
        rc = cli_main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error[write_failed]: stdout: ") and err.count("\n") == 1, (argv, err)


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_onto_a_full_stdout(capsys, monkeypatch, argv):
    """QA 10: ``--version``/``--help`` > /dev/full exits 2 with the error line (not a silent 0)."""
    monkeypatch.setattr("sys.stdout", _FullStdout())
    try:
        rc = cli_main(argv)
    except SystemExit as e:  # argparse's exit after a buffered write
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error[write_failed]: stdout: "), err


def test_bogus_cpu_kernels_variable_is_one_error_line(capsys, monkeypatch, own_stories):
    """QA 8: ``PIPEPLAN_CPU_KERNELS=bogus pipeplan run ...`` is one ``error[invalid_env]`` line naming the
    variable and its allowed values, before any work; ``portable`` and ``auto`` are accepted."""
    from pipeplan.runtime.kernels.cpu import check_kernel_env

    monkeypatch.setenv("PIPEPLAN_CPU_KERNELS", "bogus")
    rc = cli_main(["run", str(own_stories), "--prompt", "Once", "--max-tokens", "2", "--backend", "direct"])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == "" and cap.err.count("\n") == 1, cap
    assert cap.err.startswith("error[invalid_env]: PIPEPLAN_CPU_KERNELS='bogus'") and "portable" in cap.err
    assert check_kernel_env({"PIPEPLAN_CPU_KERNELS": " Portable "}) == "portable"
    assert check_kernel_env({}) == "auto"
