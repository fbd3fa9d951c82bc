"""TimelineBundle JSON, token latencies, Chrome trace and comparison levels (AB-T-4, AB-D-2)."""

from __future__ import annotations

import json

import pytest
from pipeplan.analysis.timeline import (
    TimelineBundle,
    TimelineError,
    TimelineEvent,
    compare,
    side_by_side_trace,
)


def _bundle(kind: str, scale: float = 1.0, swap: bool = False) -> TimelineBundle:
    ev = []
    t = 0.0
    sched = ["prefill", "decode", "decode"]
    it: dict[str, int] = {}
    for step in sched:
        i = it.get(step, 0)
        it[step] = i + 1
        names = ["a", "b"] if not swap or step == "prefill" else ["b", "a"]
        for n in names:
            d = 1.0 * scale
            ev.append(TimelineEvent(step, i, f"cmd.{step}.s0.{n}", f"i_{step}_{n}", "matmul", 0, "n0", "n0:q", "q", "",
                                    t, t + d, "model op x"))
            t += d
    return TimelineBundle(kind, {"concrete": "sha256:1", "evidence": "e", "policy": "p"}, sched, ev)


def test_json_roundtrip_and_token_latencies(tmp_path):
    """AB-T-4: a bundle round-trips through JSON with its digests; per-token latency is the gap between
    consecutive instance ends."""
    b = _bundle("predicted")
    p = b.write(tmp_path / "b.json")
    c = TimelineBundle.read(p)
    assert c.to_json() == b.to_json() and c.digests["concrete"] == "sha256:1"
    assert b.token_latencies() == [2.0, 2.0]
    (tmp_path / "bad.json").write_text(json.dumps({"format": "x"}))
    with pytest.raises(TimelineError):
        TimelineBundle.read(tmp_path / "bad.json")


def test_compare_levels_and_errors():
    """AB-D-2: identical structure reaches 'order' and per-token errors follow the timing ratio; swapped
    order stops at 'instruction'; missing instructions at 'command'; missing events at 'none'."""
    c = compare(_bundle("predicted"), _bundle("measured", 2.0))
    assert c.level == "order" and c.token_errors == (0.5, 0.5) and c.token_median == 0.5
    assert set(c.command_errors.values()) == {-0.5}
    assert compare(_bundle("predicted"), _bundle("measured", swap=True)).level == "instruction"
    m = _bundle("measured")
    m.events = [TimelineEvent(**{**e.__dict__, "instruction": ""}) for e in m.events]
    assert compare(_bundle("predicted"), m).level == "command"
    m.events.pop()
    assert compare(_bundle("predicted"), m).level == "none"


def test_chrome_trace_tracks_and_side_by_side():
    """AB-T-4, AB-D-2: Chrome trace: metadata names a process per device and a track per queue; side-by-side has both."""
    t = _bundle("predicted").chrome_trace()
    names = {e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and "name" in e["args"]}
    assert {"device n0", "queue n0:q"} <= names
    xs = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "command"]
    assert len(xs) == 6 and all(e["dur"] == pytest.approx(1e6) for e in xs)
    s = side_by_side_trace(_bundle("predicted"), _bundle("measured"))
    procs = {e["args"]["name"] for e in s["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {"predicted device n0", "measured device n0"}
