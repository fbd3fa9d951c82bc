"""``pipeplan run``: plan -> compile -> replay through the stage runtime; text and JSON output, typed errors,
stage faults mapped to exit status 3, ``--target cuda``."""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import pytest
from pipeplan.tools.cli import main

from tests.conftest import REPO, STORIES


@pytest.fixture(scope="module", autouse=True)
def _package_cache(tmp_path_factory):
    """A private weight/package cache for this module (compiled packages are reused across its tests)."""
    import os

    old = os.environ.get("PIPEPLAN_CACHE")
    os.environ["PIPEPLAN_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("PIPEPLAN_CACHE", None)
    else:
        os.environ["PIPEPLAN_CACHE"] = old


def _run(capsys, argv):
    rc = main(["run", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_run_text_matches_expected(expected_cases):
    """The real command (default local backend, one process per stage) prints the prompt followed by
    llama.cpp's greedy continuation."""
    c = expected_cases[0]
    exe = REPO / ".venv" / "bin" / "pipeplan"
    cmd = [str(exe) if exe.exists() else sys.executable, str(STORIES), "--prompt", c["prompt"], "--max-tokens", "40",
           "--stages", "2"]
    if not exe.exists():
        cmd[1:1] = ["-m", "pipeplan.tools.cli", "run"]
    else:
        cmd.insert(1, "run")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == c["prompt"] + c["text"] + "\n"


def test_cli_run_json(capsys, expected_cases):
    """RP-PP-3, WL-R-4: --json prints prompt ids, token ids, the ordered stage events (WeightsReady before
    StageReady per stage) and per-phase timings."""
    c = expected_cases[2]
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", c["prompt"], "--stages", "3", "--backend", "inproc",
                                 "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["prompt_ids"] == c["prompt_ids"] and doc["token_ids"] == c["greedy_ids"] and doc["text"] == c["text"]
    assert [e["seq"] for e in doc["events"]] == list(range(1, 7))
    for s in range(3):
        assert [e["event"] for e in doc["events"] if e["stage"] == s] == ["WeightsReady", "StageReady"]
    assert {"load_s", "prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s"} <= set(doc["timings"])
    pkg = doc["package"]
    assert doc["target"] == "cpu" and pkg["compile_s"] >= 0 and (Path(pkg["path"]) / "manifest.json").exists()


def test_cli_run_compiles_once_then_reuses_the_package(capsys, expected_cases):
    """AB-M-2: `pipeplan run` compiles the plan into a replay package (virtual-queue, roofline evidence on the
    local pool's stated peaks) and a second identical run reuses the verified package instead of recompiling;
    the package's stage programs give EXPECTED's tokens."""
    c = expected_cases[0]
    argv = [str(STORIES), "--prompt", c["prompt"], "--stages", "2", "--backend", "inproc", "--max-tokens", "8",
            "--max-seq-len", "128", "--json"]
    docs = []
    for _ in range(2):
        rc, out, err = _run(capsys, argv)
        assert rc == 0, err
        docs.append(json.loads(out))
    a, b = (d["package"] for d in docs)
    assert a["cached"] is False and a["compile_s"] > 0
    assert b["cached"] is True and b["compile_s"] == 0 and b["path"] == a["path"]
    m = json.loads((Path(a["path"]) / "manifest.json").read_text())
    assert m["target"]["name"] == "virtual-queue" and m["deployment"]["identity"] == "deployment:local0,local1"
    assert [d["token_ids"] for d in docs] == [c["greedy_ids"][:8]] * 2


@pytest.mark.slow
def test_cli_run_target_cuda(capsys, expected_cases):
    """Issue 7 item 3, issue 13 item 5: `--target cuda` runs the compiled program (the lowered tmachine program)
    on the Triton kernels (weights kept in GGUF format; Triton's interpreter here, no GPU) and gives EXPECTED's
    first 3 greedy tokens."""
    c = expected_cases[0]
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", c["prompt"], "--stages", "1", "--max-tokens", "3",
                                 "--backend", "inproc", "--target", "cuda", "--max-seq-len", "32", "--json"])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["target"] == "cuda" and doc["token_ids"] == c["greedy_ids"][:3]


@pytest.mark.parametrize("kind", ["download", "parse", "allocation", "bind", "invalid_range"])
def test_cli_injected_fault_exits_3(capsys, kind):
    """WL-F-1..5: --inject-fault 1:KIND (local backend) exits 3 with error[stage_fault:KIND]: stage 1: ...
    on stderr, and no stage process stays alive."""
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", "Hi", "--stages", "2", "--max-tokens", "2",
                                 "--inject-fault", f"1:{kind}"])
    assert rc == 3 and out == ""
    assert err.startswith(f"error[stage_fault:{kind}]: stage 1: ") and err.count("\n") == 1
    assert mp.active_children() == []


def test_cli_fault_from_env(capsys, monkeypatch):
    """$PIPEPLAN_INJECT_FAULT works like the hidden flag."""
    monkeypatch.setenv("PIPEPLAN_INJECT_FAULT", "0:parse")
    rc, _, err = _run(capsys, [str(STORIES), "--prompt", "Hi", "--backend", "inproc", "--max-tokens", "1"])
    assert rc == 3 and err.startswith("error[stage_fault:parse]: stage 0: ")


@pytest.mark.parametrize("argv, code", [
    (["--inject-fault", "one:bind"], "bad_fault_injection"),
    (["--max-tokens", "300"], "invalid_request"),
    (["--temperature", "-1"], "sampling"),
    (["--stages", "9"], "invalid_stage_count"),
    (["--prefill-rows", "0"], "invalid_request"),
    (["--ray-address", "127.0.0.1:1"], "bad_backend"),
    (["--max-tokens", "0"], "invalid_request"),
    (["--max-tokens", "-3"], "invalid_request"),
    (["--top-p", "2"], "sampling"),
    (["--top-k", "-1"], "sampling"),
    (["--stages", "6"], "invalid_stage_count"),
    (["--max-seq-len", "32", "--prompt", "Once upon a time " * 20], "invalid_request"),
    (["--cache-dir", "/dev/null/cache"], "invalid_request"),
    (["--nodes", "/nonexistent-h16/pool.toml"], "invalid_pool"),
    (["--backend", "ray", "--ray-address", "127.0.0.1:1"], "ray_unavailable"),
])
def test_cli_bad_input_exits_2(capsys, argv, code):
    """Bad requests are typed one-line errors with exit status 2, within seconds (an unreachable Ray address
    is probed, not left to ray.init's minutes of retries), and start no stage."""
    import time

    t0 = time.monotonic()
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", "Hi", "--backend", "inproc", *argv])
    assert rc == 2 and out == "" and err.startswith(f"error[{code}]") and err.count("\n") == 1, err
    assert time.monotonic() - t0 < 15 and mp.active_children() == []


def test_cli_ray_address_names_the_backend_asked_for(capsys):
    """``--ray-address`` with ``--backend direct`` is error[bad_backend] naming 'direct' (the backend the user
    gave, not the inproc one it runs on)."""
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", "Hi", "--backend", "direct", "--ray-address", "1.2.3.4:5"])
    assert rc == 2 and out == "" and err.startswith("error[bad_backend]: --ray-address needs --backend ray (the "
                                                    "backend is 'direct')") and err.count("\n") == 1, err


def test_cli_pool_without_peaks_is_a_compile_diagnostic(capsys, tmp_path):
    """AB-G-4: a --nodes pool without the peaks the roofline evidence needs is a compile diagnostic (exit 2,
    one line), never a silent default; no stage starts."""
    pool = tmp_path / "pool.toml"
    pool.write_text('[[nodes]]\nid = "a"\nmemory_bytes = 1073741824\n')
    rc, out, err = _run(capsys, [str(STORIES), "--prompt", "Hi", "--nodes", str(pool), "--backend", "inproc",
                                 "--max-tokens", "1"])
    assert rc == 2 and out == "" and err.startswith("error[") and err.count("\n") == 1
    assert mp.active_children() == []


def test_cli_missing_model_exits_2(capsys, tmp_path):
    """A model path that does not exist is a typed GGUF error (exit 2)."""
    rc, _, err = _run(capsys, [str(tmp_path / "none.gguf"), "--prompt", "Hi"])
    assert rc == 2 and err.startswith("error[")
