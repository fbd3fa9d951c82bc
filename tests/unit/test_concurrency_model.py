"""N concurrent sequences through S stages (analysis/concurrency.py): closed forms, properties, costs from
a plan and a package, and the typed rejections (AB-T-2: the same costs the single-sequence simulation uses)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeplan.analysis.concurrency import (
    ConcurrencyError,
    StageCosts,
    costs_from_model,
    predict_concurrent,
    read_throughput,
    simulate_sequences,
    steady_state_tok_s,
    throughput_summary,
)


def test_one_sequence_token_latency_is_the_sum_of_steps_and_hops():
    """AB-T-2: N = 1: every decode token takes sum(decode steps) + sum(hops); the first token takes the
    prefill chunks (ceil(prompt / rows)) each through every stage and hop; request latency adds them."""
    c = StageCosts((1e-3, 2e-3, 0.5e-3), (1e-4, 2e-4, 3e-4), (4e-3, 5e-3, 6e-3), (1e-4, 1e-4, 1e-4), prefill_rows=4)
    p = predict_concurrent(c, 1, 10, 20)
    step = 3.5e-3 + 6e-4
    assert p.per_token_p50_s == pytest.approx(step, rel=1e-12)
    assert p.per_token_p99_s == pytest.approx(step, rel=1e-12)
    assert p.ttft_s == pytest.approx(3 * (15e-3 + 3e-4), rel=1e-12)
    assert p.request_latency_s == pytest.approx(p.ttft_s + 19 * step, rel=1e-12)
    assert p.aggregate_tok_s == pytest.approx(1 / step, rel=1e-9)
    assert len(p.token_times[0]) == 20
    assert p.cycle_s == pytest.approx(step) and p.bottleneck_s == 2e-3


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_equal_stages_with_at_least_s_sequences_run_at_the_stage_rate(stages, extra):
    """AB-T-2: equal stages, no hop, N >= S: aggregate = 1 / stage step, every stage ~fully busy, and a
    sequence's token gap is max(N, S) steps."""
    t = 2e-3
    n = stages + extra
    p = predict_concurrent(StageCosts.uniform(stages, t), n, 8, 64)
    assert p.aggregate_tok_s == pytest.approx(1 / t, rel=1e-9)
    assert p.per_token_p50_s == pytest.approx(n * t, rel=1e-9)
    assert all(u > 0.9 for u in p.stage_utilisation)


def test_hops_delay_saturation_until_enough_sequences():
    """AB-T-2: with hops h the cycle is S (t + h): N = S stays below the stage rate (N / cycle), and
    N >= cycle / t reaches 1 / t."""
    t, h, s = 1e-3, 5e-4, 3
    c = StageCosts.uniform(s, t, h)
    assert predict_concurrent(c, s, 1, 64).aggregate_tok_s == pytest.approx(s / (s * (t + h)), rel=1e-9)
    assert predict_concurrent(c, 5, 1, 64).aggregate_tok_s == pytest.approx(1 / t, rel=1e-9)


COSTS = st.integers(1, 4).flatmap(lambda s: st.tuples(
    st.lists(st.floats(1e-4, 5e-3), min_size=s, max_size=s),
    st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1e-3)), min_size=s, max_size=s),
    st.lists(st.floats(1e-4, 2e-2), min_size=s, max_size=s)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(COSTS, st.integers(1, 20), st.integers(32, 64))
def test_aggregate_is_monotone_in_n_and_bounded_by_the_bottleneck(costs, prompt, tokens):
    """AB-T-2: for N = 1..8 the aggregate decode rate does not fall as N grows and never exceeds
    1 / max(stage step); it is within 2% of the steady state min(N / cycle, 1 / max) (the estimator's
    window over whole rounds of sequence 0 leaves a transient of at most that, tokens >= 32)."""
    d, h, p = costs
    c = StageCosts(tuple(d), tuple(h), tuple(p), tuple(h), prefill_rows=8)
    prev = 0.0
    for n in range(1, 9):
        a = predict_concurrent(c, n, prompt, tokens).aggregate_tok_s
        assert a >= prev * (1 - 0.01)
        assert a <= (1 / max(d)) * 1.02
        assert a == pytest.approx(steady_state_tok_s(c, n), rel=0.02)
        prev = a


def test_costs_from_a_plan_split_work_and_hops():
    """AB-T-2: from the hand-made 2-stage plan of test_simulate: stage work is every command but send/recv
    (k0 + k0b = 5 s, k1 = 4 s); the hop into stage 1 is send.e1 + recv.e1, into stage 0 the loop
    (recv.e0 + the last stage's send.e2); N = 1 then takes 13 s per token, the single-sequence
    simulation's decode step."""
    from pipeplan.analysis.simulate import build_model, run_schedule, simulate

    from tests.unit.test_simulate import _plan

    model = build_model(_plan())
    c = costs_from_model(model)
    assert c.decode_s == (5.0, 4.0) and c.decode_hop_s == (2.0, 2.0)
    assert c.prefill_s == c.decode_s  # a plan without a prefill step prefills with its decode step
    p = predict_concurrent(model, 1, 1, 6)
    sim = simulate(model, run_schedule(model, 1, 6))
    ends = sorted(iv.end for iv in sim.intervals if model.commands[iv.node.cmd].id == "cmd.decode.s1.send.e2")
    assert p.per_token_p50_s == pytest.approx(13.0) == pytest.approx(ends[1] - ends[0])
    assert predict_concurrent(model, 2, 1, 40).aggregate_tok_s == pytest.approx(2 / 13, rel=1e-9)


@pytest.fixture(scope="module")
def stories_pkg(stories_path, tmp_path_factory):
    """A 2-stage stories260K package compiled with roofline evidence (prompt_len 4)."""
    from pipeplan.compiler.replay_package import compile_plan_to_package
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.plan_types import RuntimeConfig
    from pipeplan.runtime.replay import local_pool_with_peaks

    mod = plan_run(read_model_facts(stories_path), RuntimeConfig(max_seq_len=64), local_pool_with_peaks(2)[0], 2)
    return compile_plan_to_package(mod, "virtual-queue", ["roofline"], tmp_path_factory.mktemp("pkg") / "pkg",
                                   prompt_len=4, decode_tokens=4)


def test_package_costs_agree_with_its_predicted_timeline(stories_pkg):
    """AB-T-2: a package's costs come from its predicted timeline (the plan's resolved costs): N = 1's
    token latency equals the single-sequence simulation's decode step; the prefill frame holds the
    package's 4 rows; the evidence is the manifest's identity."""
    from pipeplan.analysis.timeline import TimelineBundle

    p = predict_concurrent(stories_pkg, 1, 4, 4)
    lat = TimelineBundle.read(stories_pkg / "predicted.timeline.json").token_latencies()
    assert lat and p.per_token_p50_s == pytest.approx(lat[-1], rel=1e-6)
    assert p.stages == 2 and "roofline" in p.evidence
    p2 = predict_concurrent(stories_pkg, 1, 9, 4)
    assert p2.ttft_s == pytest.approx(3 * p.ttft_s, rel=1e-6)  # ceil(9 / 4) = 3 prefill frames
    assert predict_concurrent(stories_pkg, 4, 4, 40).aggregate_tok_s > 1.5 * p.aggregate_tok_s


@pytest.mark.parametrize("call, where", [
    (lambda: predict_concurrent(StageCosts.uniform(2, 1e-3), 0, 8, 8), "n_sequences"),
    (lambda: predict_concurrent(StageCosts.uniform(2, 1e-3), 1, 0, 8), "prompt_tokens"),
    (lambda: predict_concurrent(StageCosts.uniform(2, 1e-3), 1, 8, 0), "decode_tokens"),
    (lambda: predict_concurrent(StageCosts((1e-3, math.nan), (0, 0), (0, 0), (0, 0)), 1, 1, 1), "decode_s"),
    (lambda: predict_concurrent(StageCosts((1e-3,), (0, 0), (0,), (0,)), 1, 1, 1), "decode_hop_s"),
    (lambda: predict_concurrent(StageCosts((), (), (), ()), 1, 1, 1), "decode_s"),
    (lambda: predict_concurrent(StageCosts.uniform(1, 1e-3, prefill_rows=0), 1, 1, 1), "prefill_rows"),
    (lambda: simulate_sequences(StageCosts.uniform(1, 1e-3), 2, 1, 1, arrivals=[0.0]), "arrivals"),
    (lambda: predict_concurrent(object(), 1, 1, 1), ""),
    (lambda: throughput_summary([[0.1, 0.05]]), "token_times"),
    (lambda: throughput_summary([]), "token_times"),
])
def test_bad_requests_are_typed(call, where):
    """Every rejection kind of the concurrency model is a ConcurrencyError(invalid_request) naming the field."""
    with pytest.raises(ConcurrencyError) as ei:
        call()
    assert ei.value.code == "invalid_request"
    assert (ei.value.where or "") == where


def test_throughput_documents(tmp_path):
    """A throughput measurement (pipeplan-throughput/1, a bare list or one row) reads into rows; a missing
    field, a negative figure, a wrong format or non-JSON is ConcurrencyError(bad_throughput) naming it."""
    row = {"n_sequences": 4, "stages": 2, "aggregate_tok_s": 900.0, "p50_s": 0.004, "p99_s": 0.006}
    for doc in ({"format": "pipeplan-throughput/1", "rows": [row]}, [row], row):
        f = tmp_path / "t.json"
        f.write_text(json.dumps(doc))
        (m,) = read_throughput(f)
        assert (m.n_sequences, m.stages, m.aggregate_tok_s) == (4, 2, 900.0)
    bad = [({**row, "p99_s": -1}, "p99_s"), ({k: v for k, v in row.items() if k != "stages"}, "stages"),
           ({**row, "n_sequences": 1.5}, "n_sequences"), ({"format": "other/1", "rows": [row]}, None), ([], None)]
    for doc, where in bad:
        f = tmp_path / "bad.json"
        f.write_text(json.dumps(doc))
        with pytest.raises(ConcurrencyError) as ei:
            read_throughput(f)
        assert ei.value.code == "bad_throughput"
        if where:
            assert ei.value.where == where
    f.write_text("{not json")
    with pytest.raises(ConcurrencyError) as ei:
        read_throughput(f)
    assert ei.value.code == "bad_throughput"
    with pytest.raises(ConcurrencyError) as ei:
        read_throughput(tmp_path / "missing.json")
    assert ei.value.code == "file_not_found"
