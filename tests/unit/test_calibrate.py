"""`pipeplan calibrate` and the default evidence of `pipeplan compile` (issue 14 item 4).

One calibration of stories260K (2 stages, 2 decode tokens, one replay per prompt) is made per module into a
private cache; the tests read it, compile against it, and break copies of it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from pipeplan.analysis.evidence import TABLE_FORMAT
from pipeplan.errors import PipeplanError
from pipeplan.frontend.gguf_facts import read_model_facts, sha256_file
from pipeplan.tools import cli
from pipeplan.tools.calibrate import (
    calibration_key,
    calibration_path,
    machine_fingerprint,
    model_fingerprint,
    plan_request_keys,
    select_evidence,
    write_calibration,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def calibrated(stories_path, tmp_path_factory):
    """``(cache dir, calibration path, written document, plan path)`` after one `pipeplan calibrate
    --target reference`."""
    root = tmp_path_factory.mktemp("calib")
    cache = root / "cache"
    rc = cli.main(["calibrate", str(stories_path), "--stages", "2", "--tokens", "2", "--max-seq-len", "32",
                   "--target", "reference", "--cache-dir", str(cache)])
    assert rc == 0
    files = list((cache / "calibration").glob("*.json"))
    assert len(files) == 1
    plan = root / "plan.mlir"
    assert cli.main(["plan", str(stories_path), "--stages", "2", "--max-seq-len", "32", "-o", str(plan)]) == 0
    return cache, files[0], json.loads(files[0].read_text()), plan


def test_calibrate_writes_every_request_key_of_the_plan(calibrated, stories_path):
    """AB-C-2: the table prices exactly the plan's EstimateRequest keys (kernels and hops), under the
    machine + model fingerprint key."""
    cache, path, doc, plan = calibrated
    from pipeplan.compiler.replay_package import _parse_plan

    want = set(plan_request_keys(_parse_plan(plan), prompt_len=8))
    got = {e["key"] for e in doc["entries"]}
    assert doc["format"] == TABLE_FORMAT
    assert got == want
    assert any(k.startswith("recv|") for k in got) and any(k.startswith("matmul|") for k in got)
    assert all(e["seconds"] > 0 and e["samples"] >= 1 for e in doc["entries"])
    machine = machine_fingerprint("reference", 1)
    assert doc["calibration"]["machine"] == machine
    assert doc["calibration"]["model"]["sha256"] == [sha256_file(stories_path)]
    assert path == calibration_path(cache, calibration_key(machine, doc["calibration"]["model"]))


def _events(pkg: Path) -> dict[str, float]:
    d = json.loads((pkg / "predicted.timeline.json").read_text())
    return {e["command"]: e["end_s"] - e["start_s"] for e in d["events"] if e["iteration"] == 0}


def test_compile_uses_the_calibration_by_default(calibrated, tmp_path, capsys):
    """AB-C-2, AB-M-3: a compile without --evidence says `evidence: calibrated (<path>)`, its costs come
    from the table and differ from roofline; an explicit --evidence keeps precedence."""
    cache, path, doc, plan = calibrated
    assert cli.main(["compile", str(plan), "-o", str(tmp_path / "cal"), "--cache-dir", str(cache)]) == 0
    err = capsys.readouterr().err
    assert f"evidence: calibrated ({path})" in err
    assert cli.main(["compile", str(plan), "-o", str(tmp_path / "roof"), "--cache-dir", str(cache),
                     "--evidence", "roofline"]) == 0
    assert "evidence: roofline (--evidence)" in capsys.readouterr().err
    cal, roof = _events(tmp_path / "cal"), _events(tmp_path / "roof")
    table = {e["key"]: e["seconds"] for e in doc["entries"]}
    cmd = "cmd.decode.s0.b0.matmul.attn_q"
    key = "matmul|f32,f32,f32|1x64x64"
    assert cal[cmd] == pytest.approx(table[key], rel=1e-9)
    assert cal[cmd] != pytest.approx(roof[cmd], rel=0.05)
    manifest = json.loads((tmp_path / "cal" / "manifest.json").read_text())
    assert manifest["evidence"]["statuses"].get("direct", 0) > 0


def test_no_calibration_is_roofline_with_the_hint(calibrated, tmp_path, capsys, stories_path):
    """AB-G-1: without a calibration the line names roofline and the command that makes one."""
    _, _, _, plan = calibrated
    assert cli.main(["compile", str(plan), "-o", str(tmp_path / "p"), "--cache-dir", str(tmp_path / "empty")]) == 0
    err = capsys.readouterr().err
    assert "evidence: roofline (no calibration for this machine+model: run `pipeplan calibrate" in err
    assert str(stories_path) in err


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "other_machine", "other_model", "bad_entry"])
def test_unusable_calibration_falls_back_to_roofline(calibrated, tmp_path, damage, stories_path):
    """AB-C-3: a corrupt file or one of another machine / model is never used: roofline, with the reason."""
    cache, path, doc, _ = calibrated
    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    p = mine / "calibration" / path.name
    d = json.loads(p.read_text())
    if damage == "corrupt":
        p.write_text("{not json")
    elif damage == "truncated":
        p.write_bytes(path.read_bytes()[:100])
    elif damage == "other_machine":
        d["calibration"]["machine"]["cpu"] = "another CPU"
        p.write_text(json.dumps(d))
    elif damage == "other_model":
        d["calibration"]["model"]["sha256"] = ["0" * 64]
        p.write_text(json.dumps(d))
    else:
        d["entries"][0]["seconds"] = "fast"
        p.write_text(json.dumps(d))
    choice = select_evidence(None, [str(stories_path)], cache_dir=mine)
    assert choice.kind == "roofline" and choice.providers == ("roofline",)
    why = {"corrupt": "is unusable", "truncated": "is unusable", "other_machine": "another machine",
           "other_model": "another model", "bad_entry": "is unusable"}[damage]
    assert why in choice.message and str(p) in choice.message
    assert f"run `pipeplan calibrate {stories_path}`" in choice.message
    ok = select_evidence(None, [str(stories_path)], cache_dir=cache)
    assert ok.kind == "calibrated" and ok.providers == (f"measured:{path}", "roofline")


def test_write_calibration_is_atomic_and_merges(tmp_path, monkeypatch, stories_path):
    """A failed write leaves the old table whole and no temporary file; a new write merges keys."""
    path = tmp_path / "calibration" / "k.json"
    machine, model = machine_fingerprint("reference", 1), model_fingerprint([stories_path])
    entry = {"key": "add|f32,f32,f32|1x64", "op": "add", "seconds": 1e-6, "flops": 64, "bytes": 768, "samples": 1}
    first = {"format": TABLE_FORMAT, "created_unix": 1.0, "entries": [entry]}
    write_calibration(path, first, machine, model)
    before = path.read_bytes()

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(PipeplanError) as e:
        write_calibration(path, {**first, "entries": [{**entry, "seconds": 2e-6}]}, machine, model, force=True)
    assert e.value.code == "write_failed"
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(x.name for x in path.parent.iterdir()) == ["k.json"]
    other = {**entry, "key": "add|f32,f32,f32|8x64", "seconds": 3e-6}
    doc = write_calibration(path, {**first, "entries": [other]}, machine, model)
    assert [x["key"] for x in doc["entries"]] == ["add|f32,f32,f32|1x64", "add|f32,f32,f32|8x64"]
    doc = write_calibration(path, {**first, "entries": [other]}, machine, model, force=True)
    assert [x["key"] for x in doc["entries"]] == ["add|f32,f32,f32|8x64"]


@pytest.mark.parametrize("argv,code", [
    (["--target", "cuda"], "unsupported_target"),
    (["--round-trips", "0"], "invalid_request"),
    (["--tokens", "0"], "invalid_request"),
    (["--stages", "99"], "invalid_stage_count"),
    (["--max-seq-len", "4"], "invalid_request"),
    (["--threads", "0"], "invalid_request"),
])
def test_calibrate_rejections(stories_path, tmp_path, capsys, argv, code):
    """Bad calibrate options are one error line, exit 2, and write no table."""
    cache = tmp_path / "c"
    assert cli.main(["calibrate", str(stories_path), "--cache-dir", str(cache), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error[{code}]: ")
    assert not list(cache.glob("calibration/*.json"))


def test_calibrate_cache_that_is_a_file(stories_path, tmp_path, capsys):
    """A cache directory that is a file is error[cache_unusable] before any measuring; the file stays."""
    f = tmp_path / "cache"
    f.write_text("mine")
    assert cli.main(["calibrate", str(stories_path), "--cache-dir", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error[")
    assert f.read_text() == "mine"


def test_calibrate_missing_model(tmp_path, capsys):
    """A missing model is a typed error naming it."""
    assert cli.main(["calibrate", str(tmp_path / "nope.gguf"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "nope.gguf" in capsys.readouterr().err


def test_facts_name_the_same_files(stories_path):
    """The fingerprint hashes the files the plan names (ModelFacts.files)."""
    facts = read_model_facts(str(stories_path))
    assert model_fingerprint(facts.files)["sha256"] == [sha256_file(stories_path)]


def test_run_timeline_says_and_records_the_evidence(calibrated, stories_path, tmp_path, capsys):
    """AB-T-4: `pipeplan run --backend direct --timeline` compiles with the calibration, says so on stderr
    and records it in the measured bundle's meta and in --json."""
    cache, path, _, _ = calibrated
    tl = tmp_path / "m.json"
    assert cli.main(["run", str(stories_path), "--prompt", "Hi", "--max-tokens", "2", "--backend", "direct",
                     "--max-seq-len", "32", "--prefill-rows", "8", "--cache-dir", str(cache), "--timeline", str(tl),
                     "--json"]) == 0
    cap = capsys.readouterr()
    assert f"evidence: calibrated ({path})" in cap.err
    doc = json.loads(cap.out)
    ev = doc["package"]["evidence"]
    assert ev["kind"] == "calibrated" and ev["path"] == str(path)
    meta = json.loads(tl.read_text())["meta"]
    assert meta["evidence"]["providers"] == [f"measured:{path}", "roofline"]


def test_a_local_calibration_keeps_the_ray_loop(tmp_path, stories_path):
    """Issue 14 item 4: calibrating again without ``--backend ray`` renews a stage count's loop and keeps the relay
    chain ``--backend ray`` measured for it (other stage counts stay too); ``--force`` replaces the table."""
    path = tmp_path / "calibration" / "k.json"
    machine, model = machine_fingerprint("cpu", 1), model_fingerprint([stories_path])
    entry = {"key": "add|f32,f32,f32|1x64", "op": "add", "seconds": 1e-6, "flops": 64, "bytes": 768, "samples": 1}
    ray = {"loop_s": 7e-4, "relay_cpu_s": 1e-4, "driver_cpu_s": 1e-4}
    first = {"format": TABLE_FORMAT, "created_unix": 1.0, "entries": [entry],
             "runtime": {"2": {"loop": {"frame_s": 1e-5}, "ray_loop": ray}, "3": {"loop": {"frame_s": 3e-5}}}}
    write_calibration(path, first, machine, model)
    again = {**first, "runtime": {"2": {"loop": {"frame_s": 2e-5}}}}
    doc = write_calibration(path, again, machine, model)
    assert doc["runtime"]["2"] == {"loop": {"frame_s": 2e-5}, "ray_loop": ray}
    assert doc["runtime"]["3"] == {"loop": {"frame_s": 3e-5}}
    doc = write_calibration(path, again, machine, model, force=True)
    assert doc["runtime"] == {"2": {"loop": {"frame_s": 2e-5}}}


def test_ray_address_needs_the_ray_backend(stories_path, tmp_path, capsys):
    """``calibrate --ray-address`` without ``--backend ray`` is ``error[bad_backend]`` (as ``run``, ``replay`` and
    ``serve``), one line, exit 2, before any measuring; with it, an address nobody listens on, or one of no form
    ray.init takes, is ``error[ray_unavailable]`` before any measuring."""
    cache = tmp_path / "c"
    assert cli.main(["calibrate", str(stories_path), "--cache-dir", str(cache), "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error[bad_backend]") and "--ray-address needs --backend ray" in err[0]
    assert not cache.exists()
    # nothing listening, or no address form ray.init takes: ray_unavailable before any measuring, no table
    for addr in ("127.0.0.1:1", "not-an-address"):
        assert cli.main(["calibrate", str(stories_path), "--cache-dir", str(cache), "--backend", "ray",
                         "--ray-address", addr]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error[ray_unavailable]: ") and addr in err[0]
        assert not cache.exists()


@pytest.mark.parametrize("name", ["pipeline loop", "Ray pipeline loop"])
def test_a_loose_loop_fit_warns(name, capsys):
    """AB-C-2: calibrate warns on stderr when a pipeline loop's runtime terms (local, or fitted on Ray) reproduce
    its measured rates only loosely (residual above FIT_WARN, or not a number), and is silent on a tight fit."""
    from pipeplan.tools.cmd_calibrate import FIT_WARN, _warn_loose_fit

    assert not _warn_loose_fit(name, {"fit_residual": FIT_WARN / 2})
    assert capsys.readouterr().err == ""
    for residual, shown in ((0.85, "85%"), (float("nan"), "nan%")):
        assert _warn_loose_fit(name, {"fit_residual": residual})
        err = capsys.readouterr().err
        assert err.startswith(f"warning: the {name}'s runtime terms") and shown in err and "when it is idle" in err
