"""`pipeplan calibrate --target cpu` (the default), the transport hop it caches, and the concurrent prediction
of `compile --parallel` / `compare` with a throughput measurement (issue 14 item 4).

One cpu calibration of stories260K (2 stages, 2 decode tokens, 20 ring round trips) per module, in a private
cache.
"""

from __future__ import annotations

import json

import pytest
from pipeplan.tools import cli
from pipeplan.tools.calibrate import (
    calibration_key,
    calibration_path,
    hop_seconds,
    machine_fingerprint,
    plan_request_keys,
    select_evidence,
)


@pytest.fixture(scope="module")
def cpu_calibrated(stories_path, tmp_path_factory):
    """``(cache dir, calibration path, written document, plan path)`` after one `pipeplan calibrate` (cpu)."""
    root = tmp_path_factory.mktemp("calib-cpu")
    cache = root / "cache"
    assert cli.main(["calibrate", str(stories_path), "--stages", "2", "--tokens", "2", "--max-seq-len", "32",
                     "--round-trips", "20", "--cache-dir", str(cache)]) == 0
    files = list((cache / "calibration").glob("*.json"))
    assert len(files) == 1
    plan = root / "plan.mlir"
    assert cli.main(["plan", str(stories_path), "--stages", "2", "--max-seq-len", "32", "-o", str(plan)]) == 0
    return cache, files[0], json.loads(files[0].read_text()), plan


def test_cpu_calibration_prices_every_key_with_the_cpu_kernels_and_the_ring(cpu_calibrated):
    """AB-C-2: the default target is cpu: the table, cached under the cpu machine fingerprint, prices every
    request key of the plan; the hops come from the ring measurement of the plan's frame sizes (an
    inter-stage send + recv = one hop; the token-in recv a whole hop)."""
    cache, path, doc, plan = cpu_calibrated
    from pipeplan.compiler.replay_package import _parse_plan

    machine = machine_fingerprint("cpu", 1)
    assert doc["calibration"]["machine"] == machine
    assert path == calibration_path(cache, calibration_key(machine, doc["calibration"]["model"]))
    assert doc["machine"]["kernels"] == "pipeplan.runtime.kernels.cpu"
    table = {e["key"]: e["seconds"] for e in doc["entries"]}
    assert set(table) == set(plan_request_keys(_parse_plan(plan), prompt_len=8))
    assert all(v > 0 for k, v in table.items() if not k.startswith("recv|f32"))
    hops = doc["transport"]["hops"]
    assert doc["transport"]["kind"] == "shm_ring" and {h["bytes"] for h in hops} >= {4, 256}
    assert all(h["hop_s"] > 0 and h["round_trips"] == 20 for h in hops)
    hop, _ = hop_seconds(hops, 256)
    assert table["send|f32,f32|1x64"] + table["recv|f32,f32|1x64"] == pytest.approx(hop, rel=1e-9)
    assert table["recv|i32,i32|1"] == pytest.approx(hop_seconds(hops, 4)[0], rel=1e-9)


def test_hop_seconds_interpolates_between_sizes():
    """The hop of an unmeasured size: linear between the nearest two, the nearest outside the range."""
    rows = [{"bytes": 100, "hop_s": 1e-5, "send_s": 1e-6}, {"bytes": 300, "hop_s": 3e-5, "send_s": 3e-6}]
    assert hop_seconds(rows, 200) == pytest.approx((2e-5, 2e-6))
    assert hop_seconds(rows, 50) == (1e-5, 1e-6) and hop_seconds(rows, 1000) == (3e-5, 3e-6)


@pytest.fixture(scope="module")
def cpu_pkg(cpu_calibrated, tmp_path_factory):
    """``(package, stdout, stderr)`` of one `compile --parallel 3 --decode-tokens 24` against the calibration."""
    import contextlib
    import io

    cache, _, _, plan = cpu_calibrated
    pkg = tmp_path_factory.mktemp("cpu-pkg") / "pkg"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["compile", str(plan), "-o", str(pkg), "--cache-dir", str(cache), "--parallel", "3",
                       "--decode-tokens", "24"])
    assert rc == 0
    return pkg, out.getvalue(), err.getvalue()


def test_compile_prefers_the_cpu_calibration_and_predicts_n_sequences(cpu_calibrated, cpu_pkg):
    """AB-C-2, AB-T-2: compile without --evidence uses the cpu calibration and says so; --parallel 3 prints
    the predicted aggregate tok/s and p50/p99 of N = 1..3 naming that evidence: the package's calibrated
    prediction. With the calibrated costs, N = 2 on 2 stages is faster than N = 1 where the ring consumers
    spin (enough cores) and the stages do not contend (whether the 2 cores here pay a wake-up or a memory
    contention is the loop's measurement, noisy on a busy machine)."""
    _, path, _, _ = cpu_calibrated
    _, out, err = cpu_pkg
    assert f"evidence: calibrated ({path}) for the cpu kernels" in err
    lines = out.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("predicted for concurrent sequences"))
    assert str(path) in lines[head]
    rows = [x.split() for x in lines[head + 2:head + 5]]
    assert [r[0] for r in rows] == ["1", "2", "3"]
    import dataclasses
    import re

    from pipeplan.analysis.concurrency import predict_concurrent, stage_costs

    pkg = cpu_pkg[0]
    prompt, generated = map(int, re.search(r"\((\d+) prompt \+ (\d+) generated", lines[head]).groups())
    costs = stage_costs(pkg)
    for r in rows:
        assert float(r[1]) == pytest.approx(predict_concurrent(costs, int(r[0]), prompt, generated,
                                                               micro_batches=int(r[-1])).aggregate_tok_s, abs=0.06)
    wide = dataclasses.replace(costs, cores=8, contention=0.0)
    one, two = (predict_concurrent(wide, n, prompt, generated).aggregate_tok_s for n in (1, 2))
    assert two > 1.3 * one, (one, two)


def test_reference_kernels_without_their_calibration_is_roofline(cpu_calibrated, stories_path):
    """AB-G-1: `--kernels reference` (and run's --target reference) finds no reference calibration here:
    roofline with the reason; `run`'s default --target cpu finds this one."""
    from pipeplan.tools.calibrate import plan_evidence

    cache, path, _, plan = cpu_calibrated
    assert plan_evidence(None, plan, target=("reference",), cache_dir=cache).kind == "roofline"
    choice = select_evidence(None, [str(stories_path)], target="cpu", cache_dir=cache)
    assert choice.kind == "calibrated" and choice.path == path
    assert select_evidence(None, [str(stories_path)], target="reference", cache_dir=cache).kind == "roofline"


@pytest.mark.parametrize("argv, code", [(["--parallel", "0"], "invalid_request"),
                                        (["--parallel", "2", "--prompt-tokens", "0"], "invalid_request")])
def test_compile_parallel_rejections(cpu_calibrated, tmp_path, capsys, argv, code):
    """Bad --parallel / --prompt-tokens are one error line, exit 2, and no package."""
    cache, _, _, plan = cpu_calibrated
    assert cli.main(["compile", str(plan), "-o", str(tmp_path / "p"), "--cache-dir", str(cache), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error[{code}]: ")
    assert not (tmp_path / "p").exists()


def test_compare_a_throughput_measurement(cpu_pkg, tmp_path, capsys):
    """AB-T-2: `compare PKG throughput.json` predicts each row's N and prints predicted, measured and the
    relative error; --json carries the same numbers; another stage count is error[stage_mismatch]."""
    from pipeplan.analysis.concurrency import predict_concurrent

    pkg = cpu_pkg[0]
    want = predict_concurrent(pkg, 2, 8, 32, micro_batches=2)  # a row without micro_batches: one frame per sequence
    meas = {"format": "pipeplan-throughput/1", "rows": [
        {"n_sequences": 2, "stages": 2, "aggregate_tok_s": want.aggregate_tok_s * 0.8, "p50_s": want.per_token_p50_s,
         "p99_s": want.per_token_p99_s * 2, "prompt_tokens": 8, "decode_tokens": 32}]}
    f = tmp_path / "tp.json"
    f.write_text(json.dumps(meas))
    capsys.readouterr()
    assert cli.main(["compare", str(pkg), str(f), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["predicted"]["aggregate_tok_s"] == pytest.approx(want.aggregate_tok_s)
    assert row["error"]["aggregate_tok_s"] == pytest.approx(0.25)
    assert row["error"]["p50_s"] == pytest.approx(0.0, abs=1e-12) and row["error"]["p99_s"] == pytest.approx(0.5)
    assert cli.main(["compare", str(pkg), str(f)]) == 0
    assert " 25.0%" in capsys.readouterr().out
    meas["rows"][0]["stages"] = 3
    f.write_text(json.dumps(meas))
    assert cli.main(["compare", str(pkg), str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error[stage_mismatch]: ")


def test_calibration_records_batched_frames_and_the_pipeline_loop(cpu_calibrated):
    """AB-C-2: the cpu calibration of 2 stages also holds, per stage, a decode frame's cost at 1, 2, 4, 8
    rows (never below one row's), a decode row's attention at KV positions up to the last, and the runtime's own terms fitted on the local pipeline of the plan
    (1 and 2 S + 1 = 5 sequences measured, on this machine's cores)."""
    from pipeplan.runtime.backends import usable_cores

    _, _, doc, _ = cpu_calibrated
    sec = doc["runtime"]["2"]
    assert sec["frame_rows"] == [1, 2, 4, 8]
    assert len(sec["frame_rows_s"]) == 2
    for row in sec["frame_rows_s"]:
        assert len(row) == 4 and row[0] > 0 and all(x >= row[0] for x in row)
    # attention per decode row at KV positions from the calibrated ones (8 .. 8 + 2) to the last (31)
    assert sec["kv_pos"] == [8, 10, 16, 31] and sec["kv_ref_pos"] == 8.5
    assert len(sec["kv_row_s"]) == 2 and all(len(r) == 4 and min(r) > 0 for r in sec["kv_row_s"])
    assert sum(r[-1] for r in sec["kv_row_s"]) > sum(r[0] for r in sec["kv_row_s"])
    loop = sec["loop"]
    assert loop["sequences"] == 5 and loop["cores"] == usable_cores()
    assert loop["rate_one_tok_s"] > 0 and loop["rate_busy_tok_s"] > 0
    assert loop["wake_s"] >= 0 and loop["frame_s"] >= 0 and loop["orch_s"] == loop["frame_s"]
    assert loop["fit_residual"] >= 0


def test_readme_flow_compile_parallel_then_compare_a_bench_document(cpu_calibrated, cpu_pkg, tmp_path, capsys):
    """AB-T-2, AB-C-2 (README "Predicted throughput" flow): compile --parallel names the calibrated evidence
    and its runtime terms and gives each N its micro-batch count; the package's costs carry the calibration's
    terms; compare of a bench/throughput.py-shaped document (rows of 1 and 2 stages, micro_batches given)
    predicts the 2-stage rows with that M, reports the error and skips the other stage count."""
    from pipeplan.analysis.concurrency import predict_concurrent, stage_costs
    from pipeplan.runtime.backends import usable_cores

    _, path, doc, _ = cpu_calibrated
    pkg, out, _ = cpu_pkg
    head = next(x for x in out.splitlines() if x.startswith("predicted for concurrent sequences"))
    assert str(path) in head and "runtime terms: frame" in head and f"{usable_cores()} cores" in head
    assert f"contention {doc['runtime']['2']['loop']['contention']:.2f}" in head
    costs = stage_costs(pkg)
    loop = doc["runtime"]["2"]["loop"]
    assert (costs.frame_s, costs.wake_s, costs.cores) == (loop["frame_s"], loop["wake_s"], loop["cores"])
    k = loop["work_scale"]  # the stages' work, scaled to the one-sequence pipeline where it beat the timed kernels
    assert 0 < k <= 1
    assert [list(r) for r in costs.rows_s] == [pytest.approx([k * x for x in r]) for r in doc["runtime"]["2"]["frame_rows_s"]]
    assert costs.kv_pos == tuple(doc["runtime"]["2"]["kv_pos"]) and costs.kv_ref_pos == 8.5
    want = predict_concurrent(pkg, 4, 8, 32, micro_batches=2)
    rows = [{"n_sequences": 4, "stages": 2, "micro_batches": 2, "aggregate_tok_s": want.aggregate_tok_s / 1.1,
             "p50_s": want.per_token_p50_s, "p99_s": want.per_token_p99_s, "prompt_tokens": 8, "decode_tokens": 32},
            {"n_sequences": 1, "stages": 1, "aggregate_tok_s": 100.0, "p50_s": 0.01, "p99_s": 0.01}]
    f = tmp_path / "throughput.json"
    f.write_text(json.dumps({"format": "pipeplan-throughput/1", "rows": rows}))
    capsys.readouterr()
    assert cli.main(["compare", str(pkg), str(f), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["skipped_rows"] == 1 and got["runtime_terms"] and str(path) in got["evidence"]
    (row,) = got["rows"]
    assert row["micro_batches"] == 2 and row["predicted"]["aggregate_tok_s"] == pytest.approx(want.aggregate_tok_s)
    assert row["error"]["aggregate_tok_s"] == pytest.approx(0.1)
    assert cli.main(["compare", str(pkg), str(f)]) == 0
    text = capsys.readouterr().out
    assert "1 rows of other stage counts skipped" in text and " 10.0%" in text


@pytest.mark.parametrize("row, shown", [({"n_sequences": 1, "decode_tokens": 10 ** 9}, "1 * (8 + 1000000000)"),
                                        ({"n_sequences": 100000}, "100000 * (8 + 64)"),
                                        ({"n_sequences": 1, "prompt_tokens": 10 ** 8, "decode_tokens": 4},
                                         "1 * (100000000 + 4)")])
def test_compare_rejects_a_row_too_large_to_simulate(cpu_pkg, tmp_path, capsys, row, shown):
    """AB-T-2: a throughput row of more than ROW_TOKENS_MAX tokens in all (decode_tokens 1e9, 100000 sequences of
    the default 64 tokens, a prompt of 1e8 tokens) is error[bad_throughput] naming the row, at once, not a
    simulation of minutes."""
    from pipeplan.tools.cmd_compare import ROW_TOKENS_MAX

    rows = [{"n_sequences": 2, "stages": 2, "aggregate_tok_s": 100.0, "p50_s": 0.01, "p99_s": 0.02},
            {"stages": 2, "aggregate_tok_s": 100.0, "p50_s": 0.01, "p99_s": 0.02, **row}]
    f = tmp_path / "tp.json"
    f.write_text(json.dumps({"format": "pipeplan-throughput/1", "rows": rows}))
    capsys.readouterr()
    assert cli.main(["compare", str(cpu_pkg[0]), str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error[bad_throughput]: ") and "row 1" in err and shown in err
    assert str(ROW_TOKENS_MAX) in err


@pytest.mark.parametrize("text, code", [
    ("[]", "bad_throughput"), ("[{}]", "bad_throughput"), ("[null]", "bad_throughput"),
    ("[" * 100000 + "]" * 100000, "bad_throughput"),
    ('{"format": "pipeplan-throughput/1", "rows": ' + "[" * 100000 + "]" * 100000 + "}", "bad_throughput"),
    ("{" + '"a": ' * 50000 + "1" + "}" * 50000, "bad_timeline"),
], ids=["empty-list", "empty-row", "null-row", "deep-list", "deep-rows", "deep-object"])
def test_compare_names_a_bad_measurement_in_one_line(cpu_pkg, tmp_path, capsys, text, code):
    """AB-T-2: a JSON list is read as throughput rows (a timeline bundle is an object), so a bad one is
    error[bad_throughput]; JSON nested too deep to parse is one error line (bad_throughput when it is a list or
    names the throughput format, else bad_timeline), never a RecursionError traceback."""
    f = tmp_path / "m.json"
    f.write_text(text)
    capsys.readouterr()
    assert cli.main(["compare", str(cpu_pkg[0]), str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error[{code}]: ") and err.count("\n") == 1


def test_compare_reads_a_large_throughput_document(cpu_pkg, tmp_path, capsys):
    """AB-T-2: a throughput document of several MiB (here padded with spaces to 6 MiB) is read as one, not
    misread as a timeline because only its head was parsed."""
    row = {"n_sequences": 2, "stages": 2, "aggregate_tok_s": 100.0, "p50_s": 0.01, "p99_s": 0.02}
    f = tmp_path / "big.json"
    f.write_text('{"format": "pipeplan-throughput/1", "rows": [' + json.dumps(row) + " " * (6 << 20) + "]}")
    capsys.readouterr()
    assert cli.main(["compare", str(cpu_pkg[0]), str(f), "--json"]) == 0
    (got,) = json.loads(capsys.readouterr().out)["rows"]
    assert got["n_sequences"] == 2 and got["measured"]["aggregate_tok_s"] == 100.0
