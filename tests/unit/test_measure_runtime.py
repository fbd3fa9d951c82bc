"""Runtime-mode evidence (``bench/measure_kernels.py --mode runtime``): task costs charged from replays of a
calibration package, and the replay's measured timeline that they are charged from."""

from __future__ import annotations

import gc
import json
from collections import defaultdict

import pytest
from pipeplan.analysis.evidence import MeasuredTable

from tests.conftest import bench_module


@pytest.fixture(scope="session")
def mk():
    return bench_module("measure_kernels")


@pytest.fixture(scope="session")
def calibration(mk, stories_path, tmp_path_factory):
    """A small runtime-mode table (2 stages, 3 decode tokens, one replay of one prompt) and its work dir."""
    work = tmp_path_factory.mktemp("calibration")
    table = mk.measure_runtime(stories_path, stages=2, tokens=3, repeats=1, prompts=mk.CALIBRATION_PROMPTS[:1],
                               work=work)
    return table, work


def test_runtime_table_prices_every_command_kind_of_the_plan(calibration, tmp_path):
    """AB-C-3: the runtime-mode table is a valid measured table whose keys are task keys of the
    calibration plan: kernels, sampling, and the token-in / activation / token-out hops (recv/send),
    each with positive seconds and its sample count; a key the calibration did not run (the prefill
    token-in recv, the run's first command, is never charged) is absent, so it can only be scaled out
    of domain, never passed off as a measurement."""
    table, _ = calibration
    assert table["method"]["mode"] == "runtime" and table["method"]["stages"] == 2
    keys = {e["key"] for e in table["entries"]}
    for k in ("recv|i32,i32|1", "recv|f32,f32|1x64", "send|f32,f32|1x64", "send|i32,i32|1", "argmax|f32,i32|1",
              "matmul|f32,f32,f32|1x64x64", "attention|f32,f32,f32,f32|1x64x9", "rms_norm|f32,f32,f32|8x64"):
        assert k in keys, k
    assert "recv|i32,i32|8" not in keys
    assert all(e["seconds"] > 0 and e["samples"] >= 1 for e in table["entries"])
    p = tmp_path / "t.json"
    p.write_text(json.dumps(table))
    mt = MeasuredTable(p)
    assert set(mt.entries) == keys


def test_charges_of_an_instance_sum_to_its_wall_time(mk, calibration, stories_path):
    """AB-D-2: the charge rule splits a single-threaded replay's wall time over its commands: per step
    instance the charges sum to (instance end - previous instance end), every command but the run's
    first is charged once, and the entry gap of a stage program goes to its recv, not its first kernel."""
    from pipeplan.runtime.replay import replay_package

    _, work = calibration
    r = replay_package(work / "pkg", stories_path, "Once upon a time", 4)
    evs = r.timeline.events
    charges = mk.charge_commands(evs)
    ordered = sorted(evs, key=lambda e: (e.start_s, e.end_s))
    assert len(charges) == len(evs) - 1
    per_instance: dict[tuple[str, int], float] = defaultdict(float)
    for e, (cmd, secs) in zip(ordered[1:], charges):
        assert e.command == cmd and secs >= 0
        per_instance[(e.step, e.iteration)] += secs
    ends = r.timeline.instance_ends()
    assert len(ends) >= 3
    for k in range(1, len(ends)):
        step, it, end = ends[k]
        assert per_instance[(step, it)] == pytest.approx(end - ends[k - 1][2], rel=1e-9, abs=1e-12)
    i = next(j for j, e in enumerate(ordered) if e.step == "decode" and e.stage == 1 and e.op == "recv")
    recv, first_kernel = ordered[i], ordered[i + 1]
    assert charges[i - 1][1] == pytest.approx(first_kernel.start_s - ordered[i - 1].end_s)  # recv: hop + entry
    assert charges[i][1] == pytest.approx(first_kernel.end_s - first_kernel.start_s)  # kernel: itself
    assert recv.stage == first_kernel.stage == 1


def test_replay_restores_the_garbage_collector(stories_path, calibration):
    """The replay pauses the cyclic garbage collector only for its token loop and restores the caller's
    setting (enabled or disabled) afterwards."""
    from pipeplan.runtime.replay import replay_package

    _, work = calibration
    assert gc.isenabled()
    replay_package(work / "pkg", stories_path, "Hi", 2)
    assert gc.isenabled()
    gc.disable()
    try:
        replay_package(work / "pkg", stories_path, "Hi", 2)
        assert not gc.isenabled()
    finally:
        gc.enable()
