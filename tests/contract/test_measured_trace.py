"""The measured timeline comes from the instructions the stages executed, the same way on every backend
(issue 13 item 5; :mod:`pipeplan.runtime.trace`)."""

from __future__ import annotations

import json

import pytest
from pipeplan.tools.cli import main


def _run(tmp_path, stories_path, capsys, backend: str, name: str) -> tuple[dict, dict]:
    tl = tmp_path / f"{name}.json"
    assert main(["run", str(stories_path), "--prompt", "Once upon a time", "--max-tokens", "5", "--stages", "2",
                 "--max-seq-len", "32", "--backend", backend, "--timeline", str(tl), "--trace",
                 str(tmp_path / f"{name}.trace.json"), "--json", "--cache-dir", str(tmp_path / "cache")]) == 0
    out = json.loads(capsys.readouterr().out)
    return out, json.loads(tl.read_text())


@pytest.mark.parametrize("backend", ["inproc", "local", "direct"])
def test_every_backend_records_the_executed_instructions(tmp_path, stories_path, capsys, backend):
    """AB-D-2, AB-D-1: `pipeplan run --timeline` on inproc, local and direct: every event is an instruction of the
    package's vmachine program with its command and lineage; each stage step run executes the step's kernel
    instructions once each, in program order, between its recv and its send; and `pipeplan compare` of the
    package's prediction with it reaches level "order" (same events, same order on every queue)."""
    from pipeplan.dialects.vmachine import KernelOp
    from pipeplan.runtime.replay import load_package, stage_programs

    out, tl = _run(tmp_path, stories_path, capsys, backend, backend)
    assert tl["kind"] == "measured" and tl["meta"]["backend"] == backend
    pkg = load_package(out["package"]["path"])
    progs = stage_programs(pkg.program, pkg.lineage)
    ids = {o.id.data: o for s in progs.values() for sp in s.values() for o in sp.order}
    assert {e["instruction"] for e in tl["events"]} <= set(ids)
    for e in tl["events"]:
        assert e["command"] == ids[e["instruction"]].cmd.data and e["lineage"].endswith(f"instruction {e['instruction']}")
    runs: dict[tuple[int, str, int], list[dict]] = {}
    for e in tl["events"]:
        runs.setdefault((e["stage"], e["step"], e["iteration"]), []).append(e)
    n_decode = sum(1 for k in runs if k[0] == 0 and k[1] == "decode")
    assert n_decode == len(out["token_ids"]) - 1 and tl["schedule"].count("decode") == n_decode
    for (stage, step, _), evs in runs.items():
        sp = progs[stage][step]
        got = [e["instruction"] for e in evs if e["op"] not in ("recv", "send", "argmax")]
        assert got == [k.id.data for k in sp.order if isinstance(k, KernelOp)], (stage, step)
        assert evs[0]["op"] == "recv" and evs[-1]["op"] == "send"
        assert all(a["start_s"] <= b["start_s"] for a, b in zip(evs, evs[1:]))
    assert "traceEvents" in json.loads((tmp_path / f"{backend}.trace.json").read_text())
    assert main(["compare", out["package"]["path"], str(tmp_path / f"{backend}.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["level"] == "order"
