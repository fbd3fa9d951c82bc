"""``pipeplan-opt`` as a user meets it (tools/opt.py): one-line diagnostics for a bad pass pipeline, input
or output, the pass catalog of ``--help``, and ``-o`` written atomically."""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import subprocess
import sys

import pytest
from pipeplan.files import atomic
from pipeplan.tools import opt
from pipeplan.universe import PIPEPLAN_UNIVERSE

from tests.conftest import STORIES

PIPEPLAN_PASSES = dict(PIPEPLAN_UNIVERSE.all_passes)


def _opt(capsys, argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        opt.main([str(a) for a in argv])
        raise SystemExit(0)
    cap = capsys.readouterr()
    return int(e.value.code or 0), cap.out, cap.err


def _one_line_error(rc: int, err: str, code: str, status: int = 1) -> str:
    assert rc == status, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error[{code}]: "), err
    return lines[0]


@pytest.fixture(scope="module")
def runplan(tmp_path_factory):
    """A 1-stage RunPlan of stories260K on a pool file whose node states its peaks: (plan path, pool path)."""
    d = tmp_path_factory.mktemp("opt")
    pool = d / "pool.toml"
    pool.write_text('[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\n'
                    'flops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n')
    plan = d / "plan.mlir"
    from pipeplan.tools.cli import main as cli_main

    assert cli_main(["plan", str(STORIES), "--nodes", str(pool), "--stages", "1", "--max-seq-len", "64",
                     "-o", str(plan)]) == 0
    return plan, pool


PIPELINE_MISTAKES = [
    # (spec, code, substrings of the one line)
    ("runplan-verfy", "unknown_pass", ["'runplan-verfy'", "did you mean 'runplan-verify'"]),
    ("convert-runplan-to-ppln", "unknown_pass", ["did you mean 'convert-runplan-to-pplan'"]),
    ("no-such-thing-at-all", "unknown_pass", ["'no-such-thing-at-all'", "--help"]),
    ("convert-runplan-to-pplan{pol=1}", "unknown_option", ["'pol'", "did you mean 'pool'",
                                                            "options: prompt_len, decode_pos, pool"]),
    ("runplan-verify{x=1}", "unknown_option", ["'x'", "options: none"]),
    ("convert-runplan-to-pplan{pool=a/b.toml}", "pipeline_syntax",
     ["column 32", "'/'", 'convert-runplan-to-pplan{pool="a/b.toml"}']),
    ("convert-runplan-to-pplan{pool=plan.toml}", "pipeline_syntax", ['{pool="plan.toml"}']),
    ("convert-runplan-to-pplan{pool=", "pipeline_syntax", ["at its end", "quotes"]),
    ("cplan-verify,,", "pipeline_syntax", ["column 14"]),
    ("pplan-legalize{target=1}", "invalid_option_value", ["option target expects str, got 1",
                                                          'pplan-legalize{target="1"}']),
    ("pplan-select-implementations{keep=abc}", "invalid_option_value", ['keep expects int, got "abc"']),
    ("pplan-select-implementations{keep=1.5}", "invalid_option_value", ["keep expects int, got 1.5"]),
    ("convert-pplan-to-cplan{keep_source}", "invalid_option_value",
     ["keep_source expects bool, got no value", "keep_source=true"]),
    ("convert-pplan-to-cplan{keep-source=3}", "invalid_option_value", ["keep_source expects bool, got 3"]),
    ("pplan-resolve-costs{evidence=1}", "invalid_option_value", ["evidence expects tuple[str, ...]"]),
]


@pytest.mark.parametrize(("spec", "code", "parts"), PIPELINE_MISTAKES, ids=[m[0] for m in PIPELINE_MISTAKES])
def test_pass_pipeline_mistakes_are_one_line(capsys, runplan, spec, code, parts):
    """A misspelled pass (closest names suggested), unknown option, bad option value or unquoted path in
    ``-p`` is one ``error[<code>]: ...`` line and exit status 1, before any pass runs."""
    rc, out, err = _opt(capsys, [runplan[0], "-p", spec])
    line = _one_line_error(rc, err, code)
    for p in parts:
        assert p in line, line
    assert out == ""


def test_quoted_options_and_dashes_still_work(capsys, runplan):
    """The checks accept what xDSL accepts: quoted paths, `-` for `_` in option names, tuple values."""
    plan, pool = runplan
    spec = (f'convert-runplan-to-pplan{{pool="{pool}" prompt-len=4}},pplan-legalize{{target=virtual-queue}},'
            "pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{keep-source=true}")
    rc, out, err = _opt(capsys, [plan, "-p", spec])
    assert rc == 0 and err == "" and "cplan.plan" in out


@pytest.fixture(scope="module")
def hostile_inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    (d / "binary.mlir").write_bytes(bytes(range(256)) * 4)
    (d / "deep-regions.mlir").write_text("builtin.module {" * 5000 + "}" * 5000 + "\n")
    (d / "deep-attrs.mlir").write_text('"test.op"() {a = ' + "[" * 5000 + "]" * 5000 + "} : () -> ()\n")
    (d / "plan.txt").write_text("builtin.module {}\n")
    (d / "adir").mkdir()
    os.mkfifo(d / "fifo.mlir")
    return d


INPUTS = [
    ("missing.mlir", [], "file_not_found", "missing.mlir: no such file"),
    ("adir", [], "bad_input_path", "is a directory, not a regular file"),
    ("binary.mlir", [], "input_not_text", "not UTF-8 text (byte 0x80 at offset 128)"),
    ("deep-regions.mlir", [], "input_too_deep", "deep-regions.mlir nests regions or attributes too deeply"),
    ("deep-attrs.mlir", ["--allow-unregistered-dialect"], "input_too_deep", "deep-attrs.mlir nests"),
    ("plan.txt", [], "input_not_mlir", "unrecognized file extension 'txt'"),
    ("fifo.mlir", [], "bad_input_path", "is a FIFO, not a regular file"),
]


@pytest.mark.parametrize(("name", "flags", "code", "part"), INPUTS, ids=[i[0] for i in INPUTS])
def test_hostile_inputs_are_one_line(capsys, hostile_inputs, name, flags, code, part):
    """A missing file, a directory, a binary file, 5000-deep nested regions or attributes, a file that is
    not .mlir: one diagnostic line, exit status 1 (no traceback, no RecursionError dump); a FIFO is refused
    before any open (files.paths.check_input_file), so it cannot block."""
    rc, out, err = _opt(capsys, [hostile_inputs / name, *flags])
    assert part in _one_line_error(rc, err, code)
    assert out == ""


def test_text_without_an_op_is_an_empty_module_and_dash_is_stdin(capsys, tmp_path, monkeypatch):
    """As ``mlir-opt``: a file that is empty or holds only comments is an empty module (exit 0, the module
    printed, passes and --observe run on it), and ``-`` names stdin."""
    import io

    (tmp_path / "empty.mlir").write_text("")
    (tmp_path / "comments.mlir").write_text("\n// nothing but a comment\n")
    for name, flags in (("empty.mlir", []), ("comments.mlir", ["-p", "runplan-verify", "--observe"])):
        rc, out, err = _opt(capsys, [tmp_path / name, *flags])
        assert rc == 0 and err == "" and out.split() == ["builtin.module", "{", "}"], (name, out, err)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"builtin.module {}\n")))
    rc, out, err = _opt(capsys, ["-"])
    assert rc == 0 and err == "" and out.split() == ["builtin.module", "{", "}"], (out, err)


def test_bad_command_line_flag_is_one_line(capsys, runplan):
    """An unknown flag is one `error[invalid_argument]` line (exit status 2, as `pipeplan`); --help works."""
    rc, out, err = _opt(capsys, [runplan[0], "--no-such-flag"])
    assert "--no-such-flag" in _one_line_error(rc, err, "invalid_argument", status=2)


def test_help_lists_every_pass_with_its_options(capsys):
    """`pipeplan-opt --help` lists each pipeplan pass with its one-line description (the class docstring's
    first line) and each option with type and default, derived from the pass class; it says which options
    are required and which pass must run first."""
    rc, out, err = _opt(capsys, ["--help"])
    assert rc == 0 and err == ""
    catalog = out[out.index("\npipeplan passes (") + 1:]
    blocks: dict[str, str] = {}
    for line in catalog.splitlines()[2:]:
        if line.startswith("  ") and not line.startswith("   "):
            current = line.strip()
            blocks[current] = ""
        else:
            blocks[current] += line + "\n"
    assert list(blocks) == list(PIPEPLAN_PASSES)
    for name, factory in PIPEPLAN_PASSES.items():
        cls = factory()
        block = blocks[name]
        assert opt.summary_line(cls) in block
        for f in dataclasses.fields(cls):
            assert f"      {f.name}: " in block, (name, f.name)
    assert "      model: str = \"\"  required unless the module holds a vmachine.abi" in catalog
    assert "      keep_source: bool = false" in catalog
    assert "after: convert-pplan-to-cplan{keep_source=true}" in catalog
    assert "      evidence: tuple[str, ...] = (none)  required unless" in catalog


def test_catalog_notes_name_real_passes_and_options():
    """PASS_NOTES covers exactly the registered pipeplan passes; every required option is a field of its
    pass and every `after` names a registered pass (or `pipeplan plan`); every summary is one sentence."""
    assert set(opt.PASS_NOTES) == set(PIPEPLAN_PASSES)
    for name, note in opt.PASS_NOTES.items():
        cls = PIPEPLAN_PASSES[name]()
        fields = {f.name for f in dataclasses.fields(cls)}
        assert {o for o, _ in note.required} <= fields, name
        first = note.after.split("{")[0].split(" (")[0]
        assert first == "pipeplan plan" or first in PIPEPLAN_PASSES, (name, note.after)
        line = opt.summary_line(cls)
        assert line.endswith(".") and 20 < len(line) <= 100, (name, line)


def test_notes_match_what_the_passes_require(capsys, runplan):
    """The catalog's notes are what the passes enforce: convert-cplan-to-triton without
    `keep_source=true` upstream, and convert-cplan-to-vmachine without `model=` (or a vmachine.abi), fail
    naming that requirement."""
    plan, pool = runplan
    head = (f'convert-runplan-to-pplan{{pool="{pool}" prompt_len=4}},pplan-legalize{{target=TARGET}},'
            "pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=reference-queue}")
    rc, out, err = _opt(capsys, [plan, "-p", head.replace("TARGET", "cuda-triton") + ",convert-cplan-to-triton"])
    assert rc == 1 and "keep_source=true" in err and "Traceback" not in err
    rc, out, err = _opt(capsys, [plan, "-p", head.replace("TARGET", "virtual-queue") + ",convert-cplan-to-vmachine"])
    assert rc == 1 and "model=" in err and "Traceback" not in err


# --------------------------------------------------------------------------- -o
def test_output_replaces_a_regular_file_atomically(capsys, runplan, tmp_path):
    """`-o OUT` replaces a regular file (keeping its mode) and leaves no temporary file; a failing pipeline
    leaves an existing OUT untouched and creates none."""
    out_file = tmp_path / "out.mlir"
    out_file.write_text("old\n")
    os.chmod(out_file, 0o640)
    rc, out, err = _opt(capsys, [runplan[0], "-p", "runplan-project-provisioning", "-o", out_file])
    assert rc == 0 and out == "" and err == ""
    assert "runplan.provision_stage" in out_file.read_text()
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]
    before = out_file.read_text()
    rc, out, err = _opt(capsys, [runplan[0], "-p", "runplan-verfy", "-o", out_file])
    assert rc == 1 and out_file.read_text() == before
    rc, out, err = _opt(capsys, [runplan[0], "-p", "runplan-verfy", "-o", tmp_path / "new.mlir"])
    assert rc == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]


def test_output_refuses_what_is_not_a_regular_file(capsys, runplan, tmp_path):
    """`-o /dev/null`, `-o DIR` or `-o` in a missing directory is one line, exit status 1; nothing is replaced."""
    rc, _, err = _opt(capsys, [runplan[0], "-o", "/dev/null"])
    assert "character device" in _one_line_error(rc, err, "bad_output_path")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    d = tmp_path / "adir"
    d.mkdir()
    rc, _, err = _opt(capsys, [runplan[0], "-o", d])
    assert "is a directory" in _one_line_error(rc, err, "bad_output_path")
    assert d.is_dir() and list(d.iterdir()) == []
    rc, _, err = _opt(capsys, [runplan[0], "-o", tmp_path / "nope" / "x.mlir"])
    assert "does not exist" in _one_line_error(rc, err, "bad_output_path")


@pytest.mark.parametrize("failure", ["enospc", "eacces"])
def test_failed_write_leaves_no_partial_file(capsys, runplan, tmp_path, monkeypatch, failure):
    """A write that fails (a full file system mid-write: ENOSPC from fsync, mocked; a directory we may not
    write: EACCES from mkstemp, mocked, as root ignores permissions) is one `error[write_failed]` line, exit
    status 1, the old OUT intact and no temporary file left."""
    out_file = tmp_path / "out.mlir"
    out_file.write_text("old\n")
    if failure == "enospc":
        def fail(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(atomic.os, "fsync", fail)
    else:
        def fail(*a, **k):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        monkeypatch.setattr(atomic.tempfile, "mkstemp", fail)
    rc, out, err = _opt(capsys, [runplan[0], "-o", out_file])
    line = _one_line_error(rc, err, "write_failed")
    assert os.strerror(errno.ENOSPC if failure == "enospc" else errno.EACCES) in line
    assert out_file.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mlir"]


def test_installed_script_prints_one_line(tmp_path):
    """The installed `pipeplan-opt` script itself: a misspelled pass is one line on stderr, exit status 1."""
    script = os.path.join(os.path.dirname(sys.executable), "pipeplan-opt")
    r = subprocess.run([script, "-p", "runplan-verfy"], input="builtin.module {}\n", capture_output=True,
                       text=True, timeout=120)
    assert "did you mean 'runplan-verify'" in _one_line_error(r.returncode, r.stderr, "unknown_pass")


def test_stdout_onto_dev_full_is_one_error_line(tmp_path):
    """QA 2: ``pipeplan-opt PLAN > /dev/full`` is one ``error[write_failed]: stdout: ...`` line (exit 1,
    as every pipeplan-opt diagnostic), not an OSError traceback."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    plan = tmp_path / "plan.mlir"
    plan.write_text('builtin.module {\n}\n')
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "pipeplan.tools.opt", str(plan)], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error[write_failed]: stdout: "), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize(("spec", "code", "part"), [
    ("convert-runplan-to-pplan{pool=POOL},pplan-legalize{target=nope}", "pass_failed", "unknown target 'nope'"),
    ("cplan-verify", "pass_failed", "cplan-verify: the module holds no cplan.plan"),
    ("convert-cplan-to-vmachine", "no_concrete_plan", "convert-cplan-to-vmachine: expected exactly one"),
    ('convert-runplan-to-pplan{pool="/nonexistent/pool.toml"}', "invalid_pool", "convert-runplan-to-pplan: pool: "),
])
def test_pass_failures_are_one_coded_line(capsys, runplan, spec, code, part):
    """QA 7: a pass that fails (bad target, wrong input dialect, missing option, a pool that cannot be
    read) is one ``error[<code>]: ...`` line, the nested code lifted to the front (never ``error: ...
    error[x]: ...``), exit status 1."""
    plan, pool = runplan
    rc, out, err = _opt(capsys, [plan, "-p", spec.replace("POOL", f'"{pool}"')])
    line = _one_line_error(rc, err, code)
    assert part in line and line.count("error[") == 1, line
