"""A CLI that feels like llama.cpp's (issue 11 item 9): `pipeplan run` and `pipeplan replay` stream the prompt
and then each token's text as it is sampled (flushed per token), end with one summary line on stderr, share
option names and defaults, `--timeline` is the TimelineBundle JSON and `--trace` the Chrome (Perfetto)
trace in every command, and `pipeplan --version` prints the version."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pipeplan.tools.cli import build_parser, main

from tests.conftest import REPO, STORIES

SUMMARY = re.compile(r"pipeplan: prompt (\d+) tokens, (\d+\.\d) tok/s \| generated (\d+) tokens, (\d+\.\d) tok/s \| "
                     r"load (\d+\.\d\d) s \| (\d+) stages?, (\w+)( \| .+)?\n")


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    old = os.environ.get("PIPEPLAN_CACHE")
    os.environ["PIPEPLAN_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("PIPEPLAN_CACHE", None)
    else:
        os.environ["PIPEPLAN_CACHE"] = old


# --------------------------------------------------------------------------- text pieces
def test_piece_decoder_joins_split_utf8():
    """Item 9: text pieces decode correctly across multi-byte UTF-8 splits (stories260K's byte-fallback tokens):
    'é' split over two byte tokens and '€' over three come out whole with the token that completes them; an
    invalid byte is U+FFFD at once; the pieces concatenate to the tokenizer's decode, except the replacement of
    a trailing incomplete sequence."""
    from pipeplan.runtime.token_stream import PieceDecoder
    from pipeplan.runtime.tokenizer import SPMTokenizer

    tok = SPMTokenizer.from_gguf(STORIES)

    def byte(b: int) -> int:
        return tok.tokens.index(f"<0x{b:02X}>")

    word = tok.encode("cat", add_bos=False)
    ids = [*word, byte(0xC3), byte(0xA9), *[byte(b) for b in "€".encode()], byte(0xFF), *word, byte(0xE2), byte(0x82)]
    got: list[tuple[int, str]] = []
    dec = PieceDecoder(tok, lambda i, p: got.append((i, p)))
    for i in ids:
        dec(i)
    cat = tok.decode(word)
    n = len(word)
    assert [i for i, _ in got] == ids
    assert "".join(p for _, p in got[:n]) == cat and cat.strip() == "cat"
    assert [p for _, p in got[n:n + 6]] == ["", "é", "", "", "€", "\ufffd"]
    assert [p for _, p in got[-2:]] == ["", ""]
    streamed = "".join(p for _, p in got)
    full = tok.decode(ids)
    assert full.startswith(streamed) and full[len(streamed):] == "\ufffd"


def test_token_printer_flushes_per_token_and_finishes():
    """Item 9: TokenPrinter writes the prompt first, then each piece followed by a flush; finish() adds what the
    stream could not show (a trailing incomplete character's U+FFFD) and a newline; a terminal encoding that
    cannot show a character gets a replacement instead of a UnicodeEncodeError."""
    from pipeplan.tools.generation import TokenPrinter

    class Stream(io.StringIO):
        def __init__(self):
            super().__init__()
            self.flushes: list[str] = []

        def flush(self):
            self.flushes.append(self.getvalue())

    s = Stream()
    opened = []
    pr = TokenPrinter("Once", s, on_start=lambda: opened.append(s.getvalue()))
    for i, piece in enumerate([" upon", "", " a", " time"]):
        pr(i, piece)
    pr.finish(" upon a time\ufffd")
    assert opened == [""]
    assert s.flushes[:4] == ["Once upon", "Once upon", "Once upon a", "Once upon a time"]
    assert s.getvalue() == "Once upon a time\ufffd\n"
    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii")
    pr = TokenPrinter("caf", ascii_out)
    pr(0, "é")
    pr.finish("é")
    assert raw.getvalue() == b"caf?\n"


def test_generate_on_token_streams_every_token(expected_cases):
    """Item 9: orchestrator.generate(on_token=...) calls back once per generated token, in order, with pieces
    that join to the result's text (inproc backend, 2 stages)."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_pool
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.orchestrator import generate

    c = expected_cases[0]
    facts = read_model_facts(STORIES)
    provisions = project_provisions(plan_run(facts, RuntimeConfig(max_seq_len=64), local_pool(2, 1 << 30), 2))
    calls: list[tuple[int, str]] = []
    r = generate(STORIES, provisions, c["prompt"], max_tokens=12, backend="inproc",
                 on_token=lambda i, p: calls.append((i, p)))
    assert [i for i, _ in calls] == r.token_ids == c["greedy_ids"][:12]
    assert "".join(p for _, p in calls) == r.text == c["text"][:len(r.text)]


# --------------------------------------------------------------------------- the commands
def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def run_pkg(expected_cases) -> Path:
    """The package `pipeplan run` compiled for stories260K on 2 local stages (max_seq_len 64)."""
    c = expected_cases[0]
    buf_out, buf_err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = buf_out, buf_err
    try:
        rc = main(["run", str(STORIES), "--prompt", c["prompt"], "--stages", "2", "--max-seq-len", "64",
                   "--max-tokens", "1", "--backend", "inproc", "--json"])
    finally:
        sys.stdout, sys.stderr = old
    assert rc == 0, buf_err.getvalue()
    return Path(json.loads(buf_out.getvalue())["package"]["path"])


@pytest.mark.parametrize("backend", ["inproc", "direct"])
def test_run_and_replay_print_the_same(capsys, expected_cases, run_pkg, backend):
    """Item 9: `pipeplan run` and `pipeplan replay` of the package it compiled print the same stdout (the prompt,
    then the streamed greedy continuation, then a newline) and each one summary line on stderr: prompt tokens,
    prefill tok/s, generated tokens, decode tok/s, load time, stages and backend."""
    c = expected_cases[0]
    gen = ["--prompt", c["prompt"], "--max-tokens", "20", "--backend", backend]
    rc, out_run, err_run = _run(capsys, ["run", str(STORIES), "--stages", "2", "--max-seq-len", "64", *gen])
    assert rc == 0, err_run
    rc, out_rep, err_rep = _run(capsys, ["replay", str(run_pkg), "--model", str(STORIES), *gen])
    assert rc == 0, err_rep
    assert out_run == out_rep == c["prompt"] + c["text"][:len(out_run) - len(c["prompt"]) - 1] + "\n"
    assert len(out_run) > len(c["prompt"]) + 20
    for err, cmd in ((err_run, "run"), (err_rep, "replay")):
        m = SUMMARY.fullmatch(err)
        assert m is not None, (cmd, err)
        assert int(m.group(1)) == len(c["prompt_ids"]) and int(m.group(3)) == 20
        assert float(m.group(2)) > 0 and float(m.group(4)) > 0 and m.group(6) == "2" and m.group(7) == backend
    assert "package cached" in err_run


def test_run_streams_before_it_finishes(run_pkg):
    """Item 9, as a user meets it: the installed command writes the prompt and the first tokens to stdout while
    it is still generating (one flush per token: the first chunk read from the pipe arrives before the
    process exits)."""
    exe = REPO / ".venv" / "bin" / "pipeplan"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli"]
    p = subprocess.Popen([*cmd, "run", str(STORIES), "--prompt", "Once upon a time", "--max-tokens", "50",
                          "--stages", "2", "--max-seq-len", "64", "--backend", "inproc"],  # run_pkg's cached package
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None
        first = os.read(p.stdout.fileno(), 1 << 16)
        running = p.poll() is None
        rest = p.stdout.read()
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert first.startswith(b"Once upon a time") and running and rest.endswith(b"\n")
    assert SUMMARY.fullmatch(err.decode()) is not None


def test_json_output_is_unchanged(capsys, expected_cases, run_pkg):
    """Item 9: with --json there is no streaming and no summary: stdout is one JSON document, stderr is empty."""
    c = expected_cases[1]
    rc, out, err = _run(capsys, ["run", str(STORIES), "--prompt", c["prompt"], "--max-tokens", "4", "--backend",
                                 "inproc", "--stages", "2", "--max-seq-len", "64", "--json"])
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert list(doc) == ["model", "stages", "backend", "target", "prompt", "prompt_ids", "token_ids", "text", "events",
                         "timings", "package"]
    assert doc["token_ids"] == c["greedy_ids"][:4]


def _options(cmd: str) -> dict[str, object]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    p = sub.choices[cmd]  # type: ignore[index]
    return {s: a.default for a in p._actions for s in a.option_strings if s.startswith("--")}


def test_run_and_replay_options_agree():
    """Item 9: every generation option exists in both `run` and `replay` with the same default (max_seq_len:
    run plans it, default 256; replay takes the package's, so its default is None = the package's)."""
    run, replay = _options("run"), _options("replay")
    shared = ["--prompt", "--max-tokens", "--temperature", "--top-k", "--top-p", "--seed", "--backend", "--ray-address",
              "--target", "--threads", "--timeline", "--trace", "--cache-dir", "--json", "--inject-fault"]
    for opt in shared:
        assert opt in run and opt in replay, opt
        assert run[opt] == replay[opt], (opt, run[opt], replay[opt])
    assert run["--backend"] == "local" and run["--max-tokens"] == 40
    assert "--max-seq-len" in run and "--max-seq-len" in replay and replay["--max-seq-len"] is None


def test_timeline_and_trace_mean_one_thing(capsys, tmp_path, expected_cases):
    """Item 9: in compile, run/replay (direct) and compare, `--timeline FILE` is a TimelineBundle JSON
    (pipeplan-timeline/1) and `--trace FILE` a Chrome trace (traceEvents, Perfetto-openable)."""
    c = expected_cases[0]
    assert main(["plan", str(STORIES), "--max-seq-len", "32", "-o", str(tmp_path / "plan.mlir")]) == 0
    assert main(["compile", str(tmp_path / "plan.mlir"), "-o", str(tmp_path / "pkg"), "--decode-tokens", "3",
                 "--binder", "reference-queue", "--trace", str(tmp_path / "ct.json"),
                 "--timeline", str(tmp_path / "cb.json")]) == 0
    assert main(["run", str(STORIES), "--prompt", c["prompt"], "--max-tokens", "4", "--max-seq-len", "32",
                 "--backend", "direct", "--trace", str(tmp_path / "rt.json"), "--timeline", str(tmp_path / "rb.json")]) == 0
    assert main(["replay", str(tmp_path / "pkg"), "--model", str(STORIES), "--prompt", c["prompt"], "--max-tokens", "4",
                 "--backend", "direct", "--trace", str(tmp_path / "pt.json"), "--timeline", str(tmp_path / "pb.json")]) == 0
    assert main(["compare", str(tmp_path / "cb.json"), str(tmp_path / "pb.json"), "--trace", str(tmp_path / "st.json")]) == 0
    capsys.readouterr()
    for n in ("ct", "rt", "pt", "st"):
        assert "traceEvents" in json.loads((tmp_path / f"{n}.json").read_text()), n
    for n, kind in (("cb", "predicted"), ("rb", "measured"), ("pb", "measured")):
        doc = json.loads((tmp_path / f"{n}.json").read_text())
        assert doc["format"] == "pipeplan-timeline/1" and doc["kind"] == kind, n
    assert (tmp_path / "cb.json").read_text() == (tmp_path / "pkg" / "predicted.timeline.json").read_text()


def test_version(capsys):
    """Item 9: `pipeplan --version` prints `pipeplan <version>` and exits 0."""
    from pipeplan import __version__

    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0 and capsys.readouterr().out == f"pipeplan {__version__}\n"


def test_stdout_on_a_full_disk_is_one_error(tmp_path):
    """Item 4 for stdout: streaming into a file on a full file system (a real ENOSPC on a filled 16 KiB tmpfs;
    a stream raising ENOSPC where no tmpfs can be mounted) is OutputPathError(write_failed) naming stdout, which
    the CLI prints as one error line (exit 2), instead of an OSError traceback."""
    import errno
    import subprocess
    import tempfile

    from pipeplan.files.atomic import OutputPathError
    from pipeplan.tools.generation import TokenPrinter

    d = Path(tempfile.mkdtemp(prefix="pp-full-", dir="/tmp"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(d)], capture_output=True).returncode == 0
    try:
        if mounted:
            with open(d / "filler", "wb") as f:
                try:
                    f.write(b"x" * 65536)
                except OSError as e:
                    assert e.errno == errno.ENOSPC
            stream = open(d / "out.txt", "w")  # noqa: SIM115
        else:
            class Full(io.StringIO):
                def flush(self):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            stream = Full()
        pr = TokenPrinter("Once", stream)
        with pytest.raises(OutputPathError) as ei:
            pr(0, " upon")
        assert ei.value.code == "write_failed" and ei.value.one_line() == \
            "error[write_failed]: stdout: cannot write: No space left on device"
        pr.abort()  # quiet: the error above is the one reported
    finally:
        if mounted:
            try:
                stream.close()
            except OSError:
                pass
            subprocess.run(["umount", str(d)], check=True)
        d.rmdir()
