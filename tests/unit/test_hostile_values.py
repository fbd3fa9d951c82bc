"""Hostile values (issue 11 items 3, 5 and 11): integers beyond 64 bits, thread counts that crash torch,
Unicode digits, fault injections naming missing stages, subnormal temperatures, infinite peaks, non-finite
timeline times, prompts that are not UTF-8 and unusable caches are one typed ``error[...]`` line (exit 2),
never a traceback, a crash or memory exhaustion."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from pipeplan.tools.cli import main

from tests.conftest import REPO, STORIES

BIG = str(10**30)


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    old = os.environ.get("PIPEPLAN_CACHE")
    os.environ["PIPEPLAN_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("PIPEPLAN_CACHE", None)
    else:
        os.environ["PIPEPLAN_CACHE"] = old


def _cli(capsys, argv, timeout_s=30.0):
    t0 = time.monotonic()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert time.monotonic() - t0 < timeout_s
    return rc, out, err


def _one_error(rc, out, err, code):
    assert rc == 2 and out == "" and err.startswith(f"error[{code}]: ") and err.count("\n") == 1, (rc, out, err)


@pytest.fixture(scope="module")
def pkg(tmp_path_factory) -> Path:
    """A one-stage stories260K package (max_seq_len 32)."""
    d = tmp_path_factory.mktemp("pkg")
    assert main(["plan", str(STORIES), "--max-seq-len", "32", "-o", str(d / "plan.mlir")]) == 0
    assert main(["compile", str(d / "plan.mlir"), "-o", str(d / "pkg"), "--decode-tokens", "2",
                 "--binder", "reference-queue"]) == 0
    return d / "pkg"


# --------------------------------------------------------------------------- run / replay options
RUN_CASES = [
    (["--seed", BIG, "--temperature", "0.5"], "sampling"),
    (["--seed", "-1", "--temperature", "0.5"], "sampling"),
    (["--top-k", BIG, "--temperature", "0.5"], "sampling"),
    (["--max-tokens", BIG], "invalid_request"),
    (["--max-seq-len", BIG], "invalid_runtime_config"),
    (["--stages", BIG], "invalid_stage_count"),
    (["--stages", "-1"], "invalid_stage_count"),
    (["--threads", "100000"], "invalid_request"),
    (["--threads", "0"], "invalid_request"),
    (["--inject-fault", "\u0661:bind"], "bad_fault_injection"),  # ARABIC-INDIC DIGIT ONE passes str.isdigit()
    (["--inject-fault", "\u00b2:bind"], "bad_fault_injection"),  # SUPERSCRIPT TWO: isdigit() but int() fails
    (["--inject-fault", "0:runtime:\u0663"], "bad_fault_injection"),
    (["--inject-fault", "1" * 5000 + ":bind"], "bad_fault_injection"),
    (["--inject-fault", "7:bind"], "bad_fault_injection"),  # a stage the run does not have
    (["--prompt", "\udcff\udcfe"], "invalid_prompt"),  # $'\xff\xfe' as Python sees it (PEP 383)
    (["--backend", "inproc", "--ray-address", "127.0.0.1:1"], "bad_backend"),
    (["--backend", "direct", "--ray-address", "127.0.0.1:1"], "bad_backend"),
]


@pytest.mark.parametrize("argv, code", RUN_CASES, ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_run_hostile_options(capsys, argv, code):
    """Item 11: `pipeplan run` with out-of-range integers, thread counts, Unicode digits, an injection naming a
    stage that does not exist, a non-UTF-8 prompt, or options the backend cannot honour: one error line, exit 2,
    within seconds, no stage started."""
    import multiprocessing as mp

    base = [str(STORIES), "--prompt", "Hi", "--backend", "inproc", "--max-tokens", "2"]
    rc, out, err = _cli(capsys, ["run", *base, *argv])
    _one_error(rc, out, err, code)
    assert mp.active_children() == []


REPLAY_CASES = [
    (["--threads", "100000"], "invalid_request"),
    (["--threads", "100000", "--backend", "direct"], "invalid_request"),
    (["--seed", BIG, "--temperature", "1"], "sampling"),
    (["--top-k", BIG, "--temperature", "1"], "sampling"),
    (["--max-tokens", BIG], "invalid_request"),
    (["--max-seq-len", "64"], "bad_option"),  # the package was compiled for 32
    (["--inject-fault", "\u0661:bind"], "bad_fault_injection"),
    (["--inject-fault", "3:bind"], "bad_fault_injection"),
    (["--prompt", "\udcff\udcfe"], "invalid_prompt"),
]


@pytest.mark.parametrize("argv, code", REPLAY_CASES, ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_replay_hostile_options(capsys, pkg, argv, code):
    """Item 11: `pipeplan replay --threads 100000` (a segfault in torch before) and the other hostile options are
    one error line, exit 2."""
    rc, out, err = _cli(capsys, ["replay", str(pkg), "--model", str(STORIES), "--prompt", "Hi", "--backend", "inproc",
                                 "--max-tokens", "2", *argv])
    _one_error(rc, out, err, code)


def test_replay_package_checks_threads(pkg):
    """Item 11: the API (replay_package) range-checks its thread count too, before torch sees it."""
    from pipeplan.runtime.limits import LimitError, max_threads
    from pipeplan.runtime.replay import replay_package

    for n in (0, max_threads() + 1, 100000):
        with pytest.raises(LimitError):
            replay_package(pkg, STORIES, "Hi", 1, num_threads=n)


def test_fault_injection_from_env_names_a_missing_stage(capsys, monkeypatch):
    """Item 11: $PIPEPLAN_INJECT_FAULT naming a stage the run does not have is rejected, not ignored."""
    monkeypatch.setenv("PIPEPLAN_INJECT_FAULT", "4:bind")
    rc, out, err = _cli(capsys, ["run", str(STORIES), "--prompt", "Hi", "--stages", "2", "--backend", "inproc",
                                 "--max-tokens", "1"])
    _one_error(rc, out, err, "bad_fault_injection")
    assert "stage 4" in err and "2 stages" in err


def test_fault_injection_parse_is_ascii_only():
    """Item 11: FaultInjection.parse accepts ASCII decimal digits only."""
    from pipeplan.runtime.stage import FaultInjection, FaultInjectionError

    assert FaultInjection.parse("1:runtime:12") == FaultInjection(1, "runtime", 12)
    for bad in ("\u0661:bind", "\uff11:bind", "1:runtime:\u00b3", "+1:bind", "1 :bind", "-1:bind", ":bind"):
        with pytest.raises(FaultInjectionError):
            FaultInjection.parse(bad)


def test_real_command_line_with_invalid_utf8(tmp_path):
    """Item 5, as a user meets it: `pipeplan run MODEL --prompt $'\\xff\\xfe'` (bytes that are not UTF-8 on a
    real command line) is one error[invalid_prompt] line naming the byte, exit 2, no traceback."""
    exe = REPO / ".venv" / "bin" / "pipeplan"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli"]
    for sub in (["run", str(STORIES)], ["replay", str(tmp_path), "--model", str(STORIES)]):
        p = subprocess.run([*cmd, *sub, "--prompt", b"ok \xff\xfe"], capture_output=True, timeout=60,
                           env={**os.environ, "PIPEPLAN_CACHE": str(tmp_path)})
        assert p.returncode == 2 and p.stdout == b""
        assert p.stderr == b"error[invalid_prompt]: --prompt is not valid UTF-8 text: byte 0xff at byte offset 3 " \
                           b"(pass the prompt as UTF-8)\n", p.stderr


# --------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-30, 1e300])
def test_tiny_and_huge_temperatures_are_safe(temperature):
    """Item 11: a subnormal-range temperature (1e-300, the smallest subnormal) samples the best token instead of
    failing deep in torch (NaN probabilities); a huge one samples from a near-uniform distribution."""
    from pipeplan.runtime.sampling import Sampler

    logits = torch.tensor([0.5, 3.0, -1.0, 2.9, float("-inf")])
    s = Sampler(temperature, seed=1)
    picks = {s.sample(logits) for _ in range(200)}
    if temperature < 1:
        assert picks == {1}
    else:
        assert picks <= {0, 1, 2, 3} and len(picks) >= 3


def test_cli_tiny_temperature_is_greedy(capsys, expected_cases):
    """Item 11: `pipeplan run --temperature 1e-300` generates (exit 0) llama.cpp's greedy tokens."""
    c = expected_cases[0]
    rc, out, err = _cli(capsys, ["run", str(STORIES), "--prompt", c["prompt"], "--backend", "inproc", "--max-tokens",
                                 "6", "--temperature", "1e-300", "--json"], 120)
    assert rc == 0, err
    assert json.loads(out)["token_ids"] == c["greedy_ids"][:6]


@pytest.mark.parametrize("kw, where", [
    ({"seed": 2**63}, "seed"), ({"seed": -1}, "seed"), ({"seed": 10**30}, "seed"), ({"seed": True}, "seed"),
    ({"top_k": 2**31}, "top_k"), ({"top_k": 10**30}, "top_k"), ({"temperature": math.inf}, "temperature"),
    ({"temperature": math.nan}, "temperature"), ({"top_p": math.nan}, "top_p"),
])
def test_sampler_range_errors(kw, where):
    """Item 11: sampler integers beyond their 64-bit (seed) / 32-bit (top_k) frame fields and non-finite floats
    are SamplingError naming the parameter (never an OverflowError from torch or struct)."""
    from pipeplan.runtime.sampling import Sampler, SamplingError

    with pytest.raises(SamplingError) as ei:
        Sampler(**kw)
    assert ei.value.where == where
    Sampler(seed=2**63 - 1, top_k=2**31 - 1)  # the limits themselves are fine


# --------------------------------------------------------------------------- pools and facts
def _pool(tmp_path, body: str) -> Path:
    p = tmp_path / "pool.toml"
    p.write_text('[[nodes]]\nid = "n0"\n' + body)
    return p


@pytest.mark.parametrize("body, needle", [
    ("memory_bytes = 1073741824\nbandwidth_bytes_per_s = 1e400\n", "'bandwidth_bytes_per_s' must be a finite number"),
    ("memory_bytes = 1073741824\nflops_per_s = -1e400\n", "'flops_per_s' must be a finite number"),
    ("memory_bytes = 1073741824\nflops_per_s = nan\n", "'flops_per_s' must be a finite number"),
    ("memory_bytes = 1073741824\nlink_bandwidth_bytes_per_s = 1e-300\n", "'link_bandwidth_bytes_per_s' = 1e-300 is out "
                                                                        "of range"),
    ("memory_bytes = 1073741824\nflops_per_s = " + "9" * 400 + "\n", "'flops_per_s' must be a finite number"),
    (f"memory_bytes = {10**30}\n", "'memory_bytes' = 1000000000000000000000000000000 is out of range"),
    (f"memory_bytes = {2**63}\n", "'memory_bytes' = 9223372036854775808 is out of range"),
])
def test_pool_rejects_overflowing_values(tmp_path, body, needle):
    """RP-F-1, items 3 and 11: a pool whose peaks overflow to infinity (`1e400`), are NaN/negative or so small that costs
    would overflow, or whose memory_bytes exceeds 64 bits, is invalid_pool naming the file, node and field."""
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.pool import load_pool_toml

    p = _pool(tmp_path, body)
    with pytest.raises(RunPlanRejection) as ei:
        load_pool_toml(p)
    assert ei.value.code == "invalid_pool" and f"{p}: nodes[0]: key {needle}" in ei.value.message, ei.value.message


def test_cli_pool_with_infinite_peak(capsys, tmp_path):
    """Item 3: `pipeplan run --nodes` with `bandwidth_bytes_per_s = 1e400` is one error[invalid_pool] line."""
    p = _pool(tmp_path, "memory_bytes = 1073741824\nbandwidth_bytes_per_s = 1e400\nflops_per_s = 1e12\n")
    rc, out, err = _cli(capsys, ["run", str(STORIES), "--prompt", "Hi", "--nodes", str(p), "--backend", "inproc"])
    _one_error(rc, out, err, "invalid_pool")
    assert "nodes[0]" in err and "bandwidth_bytes_per_s" in err


def test_local_pool_size_is_bounded():
    """Item 11: a local pool of 10**12 nodes is refused instead of being built (memory exhaustion)."""
    from pipeplan.errors import RunPlanRejection
    from pipeplan.frontend.pool import local_pool

    with pytest.raises(RunPlanRejection) as ei:
        local_pool(10**12, memory_bytes=1 << 30)
    assert ei.value.code == "invalid_pool"


FACTS = """[model]
block_count = {blocks}
embedding_length = {hidden}
head_count = 8
feed_forward_length = 1024
vocab_size = 32000
context_length = 2048
rms_norm_eps = 1e-5
weight_type = "Q8_0"
"""


@pytest.mark.parametrize("blocks, hidden, needle", [
    (10**8, 512, "model.block_count = 100000000 is out of range"),
    (10**30, 512, "model.block_count = 1000000000000000000000000000000 is out of range"),
    (4, 2**40, "model.embedding_length = 1099511627776 is out of range"),
])
def test_facts_toml_range_errors(blocks, hidden, needle):
    """Item 11: a facts TOML with block_count = 10^8 (20 GB of tensor index) or an embedding beyond int32 is a typed
    range error within a second, before anything is built from it."""
    from pipeplan.errors import ModelFactsError
    from pipeplan.frontend.facts_toml import loads_facts_toml

    t0 = time.monotonic()
    with pytest.raises(ModelFactsError) as ei:
        loads_facts_toml(FACTS.format(blocks=blocks, hidden=hidden), "f.toml")
    assert time.monotonic() - t0 < 1.0
    assert ei.value.code == "bad_model_facts" and needle in ei.value.message, ei.value.message


def test_facts_toml_tensor_beyond_64_bits():
    """Item 11: an explicit tensor whose byte size or offset passes 2**63 - 1 is a typed error."""
    from pipeplan.errors import ModelFactsError
    from pipeplan.frontend.facts_toml import loads_facts_toml

    head = FACTS.format(blocks=1, hidden=512).replace('weight_type = "Q8_0"\n', "")
    t = '\n[[tensors]]\nname = "blk.0.x.weight"\nggml_type = "F32"\nshape = {shape}\noffset = {offset}\n'
    for shape, offset, needle in (("[2147483647, 2147483647, 2147483647]", 0, "more than 2**63 - 1"),
                                  ("[64]", 2**63 - 64, "ends past 2**63 - 1"),
                                  ("[64]", 10**30, "out of range")):
        with pytest.raises(ModelFactsError, match=needle.replace("*", r"\*")):
            loads_facts_toml(head + t.format(shape=shape, offset=offset), "f.toml")


# --------------------------------------------------------------------------- timelines
def _bundle(**event):
    from pipeplan.analysis.timeline import TimelineBundle, TimelineEvent

    e = {"step": "decode", "iteration": 0, "command": "cmd.decode.s0.b0.matmul.attn_q", "instruction": "i1",
         "op": "matmul", "stage": 0, "device": "n0", "queue": "n0:compute", "engine": "compute", "link": "",
         "start_s": 0.0, "end_s": 1e-3, "lineage": "", **event}
    return TimelineBundle("measured", {"concrete": "sha256:0"}, ["decode"], [TimelineEvent(**e)])


@pytest.mark.parametrize("field, value", [("start_s", math.nan), ("end_s", math.inf), ("start_s", -math.inf)])
def test_trace_files_never_hold_nan(tmp_path, field, value):
    """AB-T-4, item 3: a timeline with a NaN/infinite time is TimelineError(non_finite) naming the event (step#iteration
    and command) when written as a bundle or a Chrome trace; no file appears (no `NaN`/`Infinity` ever)."""
    from pipeplan.analysis.timeline import TimelineError

    b = _bundle(**{field: value})
    for write, name in ((b.write, "m.json"), (b.write_chrome_trace, "t.json")):
        with pytest.raises(TimelineError) as ei:
            write(tmp_path / name)
        assert ei.value.code == "non_finite" and "decode#0 command cmd.decode.s0.b0.matmul.attn_q" in ei.value.message
        assert f"{field} = " in ei.value.message
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TimelineError):
        b.dumps()


def test_trace_meta_nan_is_rejected(tmp_path):
    """Item 3: a NaN in the bundle's projection or meta is non_finite naming the field."""
    from pipeplan.analysis.timeline import TimelineError

    b = _bundle()
    b.projection = {"makespan_s": math.inf}
    with pytest.raises(TimelineError, match="projection.makespan_s"):
        b.write(tmp_path / "m.json")


def test_written_traces_are_strict_json(tmp_path):
    """Item 3: the writers emit strict JSON (Python's parser with NaN/Infinity constants refused reads them)."""
    b = _bundle()
    b.write(tmp_path / "m.json")
    b.write_chrome_trace(tmp_path / "t.json")

    def refuse(name):
        raise ValueError(name)

    for n in ("m.json", "t.json"):
        json.loads((tmp_path / n).read_text(), parse_constant=refuse)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", '"soon"'])
def test_compare_rejects_non_finite_times(capsys, tmp_path, value):
    """AB-D-2, item 11: `pipeplan compare` with a measured timeline whose times are NaN/Infinity (or not numbers) is
    error[non_finite] naming the event, not a correspondence level; compare() itself refuses such bundles."""
    from pipeplan.analysis.timeline import TimelineError, compare

    good = tmp_path / "good.json"
    _bundle().write(good)
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text().replace('"end_s": 0.001', f'"end_s": {value}'))
    rc, out, err = _cli(capsys, ["compare", str(good), str(bad)])
    _one_error(rc, out, err, "non_finite")
    assert "cmd.decode.s0.b0.matmul.attn_q" in err
    with pytest.raises(TimelineError):
        compare(_bundle(), _bundle(end_s=math.nan))


@pytest.mark.parametrize("start, end, needle", [(0.0, -5.0, "starts"), (2e-3, 1e-3, "ends before it starts"),
                                                (-1.0, 1e-3, "negative time")])
def test_compare_rejects_events_out_of_order(capsys, tmp_path, start, end, needle):
    """AB-D-2, QA 5: `pipeplan compare` with a measured event ending before it starts (``end_s`` = -5) or
    starting at a negative time is error[bad_event_time] naming the event, not a correspondence level."""
    good = tmp_path / "good.json"
    _bundle().write(good)
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text().replace('"end_s": 0.001', f'"end_s": {end}')
                   .replace('"start_s": 0.0', f'"start_s": {start}'))
    rc, out, err = _cli(capsys, ["compare", str(good), str(bad), "--trace", str(tmp_path / "c.json")])
    _one_error(rc, out, err, "bad_event_time")
    assert "cmd.decode.s0.b0.matmul.attn_q" in err and needle in err and not (tmp_path / "c.json").exists()


# --------------------------------------------------------------------------- caches
def test_cache_that_is_a_file(capsys, tmp_path, monkeypatch):
    """Item 11: PIPEPLAN_CACHE naming a file (or a path below one) is one error[cache_unusable] line before any work."""
    f = tmp_path / "cachefile"
    f.write_text("")
    for cache in (f, f / "sub"):
        monkeypatch.setenv("PIPEPLAN_CACHE", str(cache))
        rc, out, err = _cli(capsys, ["run", str(STORIES), "--prompt", "Hi", "--backend", "inproc", "--max-tokens", "1"])
        _one_error(rc, out, err, "cache_unusable")
        assert "$PIPEPLAN_CACHE" in err and str(cache) in err


def _mount(opts: str):
    d = Path(tempfile.mkdtemp(prefix="pp-cache-", dir="/tmp"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True)
    if r.returncode != 0:
        d.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    return d


def _umount(d: Path) -> None:
    subprocess.run(["umount", str(d)], check=True)
    d.rmdir()


@pytest.mark.parametrize("opts, needle", [("ro,size=64k", "Read-only file system"),
                                          ("size=64k", "No space left on device")])
def test_readonly_or_full_cache(capsys, monkeypatch, opts, needle):
    """Item 11: a read-only cache (a read-only tmpfs: EROFS) or a full one (a 64 KiB tmpfs, smaller than the
    compiled package: a real ENOSPC) is one error[cache_unusable] line, and no partial package is left in it."""
    d = _mount(opts)
    try:
        monkeypatch.setenv("PIPEPLAN_CACHE", str(d / "c") if opts.startswith("ro") else str(d))
        rc, out, err = _cli(capsys, ["run", str(STORIES), "--prompt", "Hi", "--backend", "inproc", "--max-tokens", "1",
                                     "--max-seq-len", "32"], 120)
        _one_error(rc, out, err, "cache_unusable")
        assert needle in err
        left = [p for p in d.rglob("*") if p.is_file()]
        assert left == [], left
    finally:
        _umount(d)


def test_cache_root_api(tmp_path):
    """cache_root: an absent directory is fine (created when written); a file, or a path below a file, is CacheError."""
    from pipeplan.runtime.weights_source import CacheError, cache_root

    assert cache_root(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "f").write_text("")
    for p in (tmp_path / "f", tmp_path / "f" / "x" / "y"):
        with pytest.raises(CacheError) as ei:
            cache_root(p)
        assert ei.value.code == "cache_unusable"
