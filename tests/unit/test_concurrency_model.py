"""N concurrent sequences through S stages (analysis/concurrency.py): closed forms, properties, costs from
a plan and a package, and the typed rejections (AB-T-2: the same costs the single-sequence simulation uses)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
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
    with_runtime_terms,
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
    p = predict_concurrent(StageCosts.uniform(stages, t), n, 8, 64, micro_batches=n)
    assert p.aggregate_tok_s == pytest.approx(1 / t, rel=1e-9)
    assert p.per_token_p50_s == pytest.approx(n * t, rel=1e-9)
    assert all(u > 0.9 for u in p.stage_utilisation)


def test_hops_delay_saturation_until_enough_sequences():
    """AB-T-2: with hops h the cycle is S (t + h): N = S stays below the stage rate (N / cycle), and
    N >= cycle / t reaches 1 / t."""
    t, h, s = 1e-3, 5e-4, 3
    c = StageCosts.uniform(s, t, h)
    assert predict_concurrent(c, s, 1, 64, micro_batches=s).aggregate_tok_s == pytest.approx(s / (s * (t + h)), rel=1e-9)
    assert predict_concurrent(c, 5, 1, 64, micro_batches=5).aggregate_tok_s == pytest.approx(1 / t, rel=1e-9)


COSTS = st.integers(1, 4).flatmap(lambda s: st.tuples(
    st.lists(st.floats(1e-4, 5e-3), min_size=s, max_size=s),
    st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1e-3)), min_size=s, max_size=s),
    st.lists(st.floats(1e-4, 2e-2), min_size=s, max_size=s)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(COSTS, st.integers(1, 20), st.integers(32, 64))
@example(([0.003984388077130697, 0.00390625], [0.0, 0.0], [0.015625, 0.015625]), 1, 32)
def test_aggregate_is_monotone_in_n_and_bounded_by_the_bottleneck(costs, prompt, tokens):
    """AB-T-2: for N = 1..8 the aggregate decode rate does not fall as N grows and never exceeds
    1 / max(stage step) by more than the estimator's window allows; it is close to the steady state
    min(N / cycle, 1 / max). The window is w whole rounds of sequence 0 (w = tokens - 1 - 2 * (tokens // 4));
    stage-0 idle time left over from prefill can let the N frames in flight finish inside the window
    faster than the bottleneck, at most one extra token per sequence: a relative excess <= 1 / w."""
    d, h, p = costs
    c = StageCosts(tuple(d), tuple(h), tuple(p), tuple(h), prefill_rows=8)
    w = tokens - 1 - 2 * (tokens // 4)
    slack = 1.0 / w
    prev = 0.0
    for n in range(1, 9):
        a = predict_concurrent(c, n, prompt, tokens, micro_batches=n).aggregate_tok_s
        assert a >= prev * (1 - 0.01)
        assert a <= (1 / max(d)) * (1 + slack) * (1 + 1e-9)
        assert a == pytest.approx(steady_state_tok_s(c, n), rel=slack)
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
    assert predict_concurrent(model, 2, 1, 40, micro_batches=2).aggregate_tok_s == pytest.approx(2 / 13, rel=1e-9)


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
    assert predict_concurrent(stories_pkg, 4, 4, 40, micro_batches=4).aggregate_tok_s > 1.5 * p.aggregate_tok_s


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


# --------------------------------------------------------------------------- the runtime model
RUNTIME_COSTS = st.integers(1, 4).flatmap(lambda s: st.tuples(
    st.lists(st.floats(1e-4, 5e-3), min_size=s, max_size=s),
    st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1e-3)), min_size=s, max_size=s),
    st.lists(st.floats(1e-4, 2e-2), min_size=s, max_size=s)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RUNTIME_COSTS, st.integers(1, 8), st.integers(1, 12), st.integers(1, 24), st.integers(1, 8))
def test_frames_simulation_without_runtime_terms_is_the_sequence_simulation(costs, n, prompt, tokens, rows):
    """AB-T-2: with M = N and no runtime term, the frame simulation (orchestrator server, micro-batches)
    gives the one-frame-per-sequence simulation's token times."""
    from pipeplan.analysis.concurrency import simulate_frames

    d, h, p = costs
    c = StageCosts(tuple(d), tuple(h), tuple(p), tuple(h), prefill_rows=rows)
    a, busy_a = simulate_sequences(c, n, prompt, tokens)
    b, busy_b = simulate_frames(c, n, prompt, tokens, micro_batches=n)
    assert [len(x) for x in a] == [len(x) for x in b] == [tokens] * n
    assert all(x == pytest.approx(y, abs=1e-12) for u, v in zip(a, b, strict=True) for x, y in zip(u, v, strict=True))
    assert busy_a == pytest.approx(busy_b)


@pytest.mark.parametrize("stages, cores", [(3, 2), (3, 1), (2, 1), (4, 2), (3, 3), (2, 4)])
def test_busy_stages_share_the_cores(stages, cores):
    """AB-T-2: S equal stages busy on C cores (processor sharing): with C < S each is slowed by S / C, so the
    aggregate rate is C / (S t) instead of 1 / t; C >= S changes nothing."""
    import dataclasses

    t = 1e-3
    c = dataclasses.replace(StageCosts.uniform(stages, t), cores=cores)
    n = 2 * stages + 2
    got = predict_concurrent(c, n, 1, 64, micro_batches=n).aggregate_tok_s
    assert got == pytest.approx(min(1.0, cores / stages) / t, rel=0.02)
    assert c.runtime_terms


def test_one_sequence_pays_every_runtime_term_once_per_token():
    """AB-T-2: N = 1: a decode token takes the steps, the hops, each stage's frame cost, the orchestrator's
    cost and one wake-up per server (S stages + the orchestrator: each is idle when the frame arrives)."""
    import dataclasses

    base = StageCosts((1e-3, 2e-3), (1e-4, 2e-4), (3e-3, 4e-3), (1e-4, 1e-4), prefill_rows=4)
    c = dataclasses.replace(base, frame_s=5e-5, orch_s=7e-5, wake_s=3e-5, cores=1)
    p = predict_concurrent(c, 1, 4, 16)
    step = 3e-3 + 3e-4 + 2 * 5e-5 + 7e-5 + 3 * 3e-5
    assert p.per_token_p50_s == pytest.approx(step, rel=1e-9)
    assert p.aggregate_tok_s == pytest.approx(1 / step, rel=1e-6)


def test_wake_up_is_paid_only_by_idle_servers():
    """AB-T-2: with enough sequences every stage always has a frame waiting: the wake-up delay no longer
    counts and the rate is the bottleneck stage's 1 / (t + frame_s)."""
    import dataclasses

    c = dataclasses.replace(StageCosts.uniform(2, 1e-3), frame_s=1e-4, wake_s=5e-4)
    assert predict_concurrent(c, 8, 1, 64, micro_batches=8).aggregate_tok_s == pytest.approx(1 / 1.1e-3, rel=0.02)
    slow = predict_concurrent(c, 1, 1, 64).aggregate_tok_s
    assert slow == pytest.approx(1 / (2.2e-3 + 3 * 5e-4), rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 1e-2), st.floats(0.0, 1.0), st.integers(2, 8), st.integers(1, 32))
def test_a_batched_frame_costs_between_one_row_and_r_rows(d, f, prefill_rows, r):
    """AB-T-2: a decode frame of r rows costs between cost(1) and r cost(1) when the prefill step (the
    line's other end) does: from the prefill step, and from calibrated rows at 1, 2, 4, 8 rows."""
    prefill = d * (1 + f * (prefill_rows - 1))
    c = StageCosts((d,), (0.0,), (prefill,), (0.0,), prefill_rows=prefill_rows)
    assert d * (1 - 1e-12) <= c.frame_cost(0, r) <= r * d * (1 + 1e-12)
    rows = tuple(d * (1 + f * (x - 1)) for x in (1, 2, 4, 8))
    cal = StageCosts((d,), (0.0,), (prefill,), (0.0,), prefill_rows=prefill_rows, rows_s=(rows,))
    assert d * (1 - 1e-12) <= cal.frame_cost(0, r) <= r * d * (1 + 1e-12)
    assert cal.frame_cost(0, 4) == pytest.approx(rows[2])


def test_micro_batches_carry_ceil_n_over_m_rows():
    """AB-T-2 (micro-batching): M = min(N, S) frames in flight, each with ceil(N / M) decode rows; rows that
    cost nothing extra multiply the rate by the rows per frame; M = N is one frame per sequence; a prefill
    chunk travels alone (with M = 1 the N prompts are prefilled one after the other)."""
    t = 1e-3
    c = StageCosts((t,) * 3, (0.0,) * 3, (t,) * 3, (0.0,) * 3, prefill_rows=8, rows_s=((t, t, t, t),) * 3)
    p = predict_concurrent(c, 6, 8, 64)
    assert p.micro_batches == 3
    assert p.aggregate_tok_s == pytest.approx(2 / t, rel=0.02)
    assert predict_concurrent(c, 6, 8, 64, micro_batches=6).aggregate_tok_s == pytest.approx(1 / t, rel=0.02)
    one = predict_concurrent(c, 4, 8, 8, micro_batches=1)
    first = sorted(ts[0] for ts in one.token_times)
    assert first == pytest.approx([3 * t * (k + 1) for k in range(4)], rel=1e-9)


def test_runtime_terms_are_checked():
    """Runtime terms out of range are ConcurrencyError(invalid_request) naming the field."""
    import dataclasses

    base = StageCosts.uniform(2, 1e-3)
    for bad, where in ((dict(frame_s=-1.0), "frame_s"), (dict(wake_s=math.inf), "wake_s"), (dict(cores=0), "cores"),
                       (dict(rows_s=((1e-3,),)), "rows_s"), (dict(orch_s=math.nan), "orch_s")):
        with pytest.raises(ConcurrencyError) as ei:
            predict_concurrent(dataclasses.replace(base, **bad), 2, 1, 4)
        assert ei.value.code == "invalid_request" and ei.value.where == where
    with pytest.raises(ConcurrencyError) as ei:
        predict_concurrent(base, 2, 1, 4, micro_batches=0)
    assert ei.value.where == "micro_batches"


def test_fitted_runtime_terms_reproduce_their_rates():
    """AB-C-2: the terms calibrate fits from the measured rates of 1 and 2 S + 1 sequences give those rates
    back (here rates made by known terms: the fit recovers them), whether or not the one-sequence run's
    ring consumers spin (2 cores: they do, and the busy run's stages contend for memory; 1 core: neither
    spins and the busy run pays wake-ups)."""
    import dataclasses

    from pipeplan.tools.calibrate import fit_runtime_terms

    c = StageCosts((4e-4, 3e-4, 2.5e-4), (1e-4, 5e-5, 5e-5), (8e-4, 6e-4, 5e-4), (1e-4, 5e-5, 5e-5))
    for cores, wake, contention in ((2, 0.0, 0.35), (1, 1.5e-4, 0.0)):
        true = dataclasses.replace(c, frame_s=6e-5, orch_s=6e-5, wake_s=wake, cores=cores, contention=contention)
        one = predict_concurrent(true, 1, 8, 24).aggregate_tok_s
        busy = predict_concurrent(true, 7, 8, 24).aggregate_tok_s
        got = fit_runtime_terms(c, one, busy, 7, 8, 24, cores)
        assert got["frame_s"] == pytest.approx(6e-5, rel=0.05)
        assert got["wake_s"] == pytest.approx(wake, rel=0.05, abs=1e-9)
        assert got["contention"] == pytest.approx(contention, rel=0.05, abs=1e-9)
        back = dataclasses.replace(c, frame_s=got["frame_s"], orch_s=got["frame_s"], wake_s=got["wake_s"],
                                   cores=cores, contention=got["contention"])
        assert predict_concurrent(back, 7, 8, 24).aggregate_tok_s == pytest.approx(busy, rel=0.01)
        assert got["work_scale"] == 1.0


def test_a_pipeline_faster_than_its_timed_kernels_scales_the_work(tmp_path):
    """AB-C-2: where the one-sequence pipeline ran faster than the calibrated work and hops allow (the machine's
    speed drifted between the kernel timings and the loop), the fit scales every stage's work to it (no negative
    per-frame term) and the scaled costs give both measured rates back; a package's costs read the scale from
    the loop section."""
    import dataclasses

    from pipeplan.tools.calibrate import fit_runtime_terms

    c = dataclasses.replace(StageCosts((4e-4, 3e-4, 2.5e-4), (1e-4, 5e-5, 5e-5), (8e-4, 6e-4, 5e-4),
                                       (1e-4, 5e-5, 5e-5)), rows_s=((4e-4, 6e-4), (3e-4, 5e-4), (2.5e-4, 4e-4)))
    true = dataclasses.replace(c.scaled(0.8), cores=2, contention=0.3)
    assert true.decode_s[0] == pytest.approx(3.2e-4) and true.rows_s[1][1] == pytest.approx(4e-4)
    assert true.decode_hop_s == c.decode_hop_s
    one = predict_concurrent(true, 1, 8, 24).aggregate_tok_s
    busy = predict_concurrent(true, 7, 8, 24).aggregate_tok_s
    got = fit_runtime_terms(c, one, busy, 7, 8, 24, 2)
    assert got["work_scale"] == pytest.approx(0.8, rel=0.02) and got["frame_s"] == pytest.approx(0.0, abs=1e-9)
    assert got["contention"] == pytest.approx(0.3, rel=0.05)
    one_stage = StageCosts((1e-3,), (1e-4,), (2e-3,), (1e-4,))  # one frame in flight: contention moves nothing
    slow = predict_concurrent(one_stage, 3, 8, 24).aggregate_tok_s * 0.8
    assert fit_runtime_terms(one_stage, 1 / 1.1e-3, slow, 3, 8, 24, 2)["contention"] == 0.0
    table = tmp_path / "cal.json"
    loop = {"frame_s": 0.0, "orch_s": 0.0, "wake_s": 0.0, "cores": 2, "contention": 0.3, "work_scale": 0.8}
    table.write_text(json.dumps({"runtime": {"3": {"frame_rows": [1, 2], "frame_rows_s": [list(r) for r in c.rows_s],
                                                   "loop": loop}}}))
    read = with_runtime_terms(c, f"measured:{table}")
    assert read.decode_s == pytest.approx(true.decode_s) and read.rows_s[2] == pytest.approx(true.rows_s[2])
    assert predict_concurrent(read, 7, 8, 24).aggregate_tok_s == pytest.approx(busy, rel=1e-9)
    table.write_text(json.dumps({"runtime": {"3": {"loop": {**loop, "work_scale": -1.0}}}}))
    assert with_runtime_terms(c, f"measured:{table}").decode_s == c.decode_s  # an invalid scale is not applied


def test_contention_slows_stages_computing_at_once():
    """AB-T-2: with contention c, two stages computing at once on two cores each run 1 + c slower (one frame
    in flight is not slowed: one stage computes at a time); a negative contention is invalid_request."""
    import dataclasses

    base = dataclasses.replace(StageCosts.uniform(2, 1e-3), cores=2)
    slow = dataclasses.replace(base, contention=0.5)
    assert predict_concurrent(slow, 1, 1, 64).token_times == predict_concurrent(base, 1, 1, 64).token_times
    two, free = predict_concurrent(slow, 2, 1, 64), predict_concurrent(base, 2, 1, 64)
    assert free.aggregate_tok_s == pytest.approx(1000, rel=0.02)  # both stages busy, one frame each
    assert two.aggregate_tok_s == pytest.approx(1000 / 1.5, rel=0.02)
    with pytest.raises(ConcurrencyError) as ei:
        predict_concurrent(dataclasses.replace(base, contention=-0.1), 2, 1, 8)
    assert ei.value.code == "invalid_request" and "contention" in ei.value.message


def test_spinning_consumers_pay_no_wake_up():
    """AB-T-2: with a core count, the wake-up is paid only where the runtime's ring consumers cannot spin
    (consumers_spin, the rule runtime.shm_ring.spin_budget follows): 3 stages on 2 cores, one frame in flight
    pays none, three frames in flight pay it; on 8 cores neither does."""
    import dataclasses

    from pipeplan.analysis.concurrency import consumers_spin

    assert consumers_spin(3, 1, 2) and not consumers_spin(3, 3, 2) and consumers_spin(3, 3, 8)
    base = StageCosts.uniform(3, 1e-3)
    c = dataclasses.replace(base, frame_s=1e-4, wake_s=5e-4, cores=2)
    one = predict_concurrent(c, 1, 1, 64)
    assert one.per_token_p50_s == pytest.approx(3e-3 + 3 * 1e-4, rel=1e-6)  # no wake-up: spinning consumers
    woken = predict_concurrent(dataclasses.replace(c, cores=1), 1, 1, 64)
    assert woken.per_token_p50_s == pytest.approx(3e-3 + 3 * 1e-4 + 4 * 5e-4, rel=1e-6)
    three = predict_concurrent(c, 3, 1, 64, micro_batches=3)
    free = predict_concurrent(dataclasses.replace(c, wake_s=0.0), 3, 1, 64, micro_batches=3)
    assert three.aggregate_tok_s < free.aggregate_tok_s  # three frames on 2 cores: consumers sleep, pay it
    wide = predict_concurrent(dataclasses.replace(c, cores=8), 3, 1, 64, micro_batches=3)
    wide_free = predict_concurrent(dataclasses.replace(c, cores=8, wake_s=0.0), 3, 1, 64, micro_batches=3)
    assert wide.token_times == wide_free.token_times  # 8 cores: the consumers spin, wake_s never counts
    with pytest.raises(ValueError):
        consumers_spin(0, 1, 2)


def test_a_decode_row_costs_more_at_a_later_kv_position():
    """AB-T-2: with a KV-position table (``kv_row_s`` at ``kv_pos``, calibrated at ``kv_ref_pos``) a decode row
    at position p costs the table at p minus the table at the reference more (linear between the measured
    positions, flat outside); one sequence's token gaps then grow by exactly that, and the N-sequence rate
    of a long decode falls below the short one's."""
    import dataclasses

    t = 1e-3
    base = StageCosts((t,), (0.0,), (t,), (0.0,), prefill_rows=4)
    kv = dataclasses.replace(base, kv_pos=(4, 104, 1004), kv_row_s=((1e-4, 2.1e-3, 3.1e-3),), kv_ref_pos=4.0)
    assert kv.kv_extra(0, 4) == 0.0 and kv.kv_extra(0, 0) == 0.0
    assert kv.kv_extra(0, 54) == pytest.approx(1e-3) and kv.kv_extra(0, 554) == pytest.approx(2.5e-3)
    assert kv.kv_extra(0, 5000) == pytest.approx(3e-3)
    below = dataclasses.replace(kv, kv_ref_pos=54.0)
    assert below.kv_extra(0, 4) == pytest.approx(-1e-3)
    one = predict_concurrent(kv, 1, 4, 40)
    gaps = [b - a for a, b in zip(one.token_times[0], one.token_times[0][1:], strict=False)]
    # token k + 1 comes out of the decode frame of token k, fed at position 4 + k
    assert gaps == pytest.approx([t + 2e-5 * k for k in range(39)], rel=1e-9)
    plain = dataclasses.replace(base, frame_s=0.0, cores=None)
    assert predict_concurrent(plain, 1, 4, 40).per_token_p50_s == pytest.approx(t)
    short, long = (predict_concurrent(kv, 4, 4, d).aggregate_tok_s for d in (8, 400))
    assert long < 0.5 * short


def test_kv_position_tables_are_checked_and_read_from_the_calibration(tmp_path):
    """A KV-position table out of shape is ConcurrencyError(invalid_request) at ``kv_row_s``; a calibration's
    ``runtime.<S>`` section gives the table to a package's costs (with_runtime_terms), a malformed one is
    left out."""
    import dataclasses

    from pipeplan.analysis.concurrency import with_runtime_terms

    base = StageCosts.uniform(2, 1e-3)
    for bad in (dict(kv_pos=(8, 4), kv_row_s=((1.0, 2.0),) * 2), dict(kv_pos=(4,), kv_row_s=((1.0,),)),
                dict(kv_pos=(4, 8), kv_row_s=((1.0, -2.0),) * 2), dict(kv_row_s=((1.0,),) * 2),
                dict(kv_pos=(4,), kv_row_s=((1.0,),) * 2, kv_ref_pos=math.nan)):
        with pytest.raises(ConcurrencyError) as ei:
            predict_concurrent(dataclasses.replace(base, **bad), 2, 1, 4)
        assert ei.value.code == "invalid_request" and ei.value.where == "kv_row_s"
    table = tmp_path / "t.json"
    sec = {"kv_pos": [8, 16, 64], "kv_row_s": [[1e-5, 2e-5, 8e-5], [1e-5, 1e-5, 1e-5]], "kv_ref_pos": 11.5}
    table.write_text(json.dumps({"runtime": {"2": sec}}))
    got = with_runtime_terms(base, f"measured:{table},roofline")
    assert got.kv_pos == (8, 16, 64) and got.kv_row_s[0] == (1e-5, 2e-5, 8e-5) and got.kv_ref_pos == 11.5
    sec["kv_row_s"] = [[1e-5, 2e-5]]
    table.write_text(json.dumps({"runtime": {"2": sec}}))
    assert with_runtime_terms(base, f"measured:{table}").kv_pos == ()


def test_a_ray_loop_replaces_the_local_hops(tmp_path):
    """AB-C-2, AB-C-3 (issue 14 item 4): a package predicted for Ray takes its calibration's relay chain
    (``runtime.<S>.ray_loop``): the relays' CPU per frame is stage work, the driver's is orchestrator work, the rest
    of the loop is transit spread over the S hops, no wake-up; the evidence names it. A calibration without one
    leaves the local terms and says so; a malformed loop is not applied, and the evidence says it is unusable."""
    import dataclasses

    c = dataclasses.replace(StageCosts((4e-4, 3e-4, 2.5e-4), (1e-4, 5e-5, 5e-5), (8e-4, 6e-4, 5e-4),
                                       (1e-4, 5e-5, 5e-5), evidence="measured:T"), frame_s=2e-5, orch_s=1e-5,
                            wake_s=3e-5, cores=2)
    ray = {"loop_s": 7e-4, "relay_cpu_s": 1e-4, "driver_cpu_s": 1e-4}
    got = c.with_ray_loop(ray)
    assert got.decode_hop_s == pytest.approx((1e-4,) * 3) and got.prefill_hop_s == got.decode_hop_s
    assert got.frame_s == pytest.approx(1.2e-4) and got.orch_s == pytest.approx(1.1e-4) and got.wake_s == 0.0
    assert got.decode_s == c.decode_s and got.cores == 2
    assert c.with_ray_loop({**ray, "loop_s": 1e-4}).decode_hop_s == (0.0,) * 3  # CPU above the loop: no transit
    one = predict_concurrent(got, 1, 8, 24).aggregate_tok_s
    assert one < predict_concurrent(c, 1, 8, 24).aggregate_tok_s  # a slower loop than the ring predicts slower
    for bad in ({**ray, "loop_s": -1.0}, {**ray, "relay_cpu_s": math.nan}, {"loop_s": 1e-3}, {**ray, "loop_s": True}):
        with pytest.raises(ConcurrencyError) as e:
            c.with_ray_loop(bad)
        assert e.value.code == "invalid_request"
    table = tmp_path / "cal.json"
    table.write_text(json.dumps({"runtime": {"3": {"ray_loop": {**ray, "transport": "auto"}}}}))
    read = with_runtime_terms(c, f"measured:{table},roofline", "ray")
    assert read.decode_hop_s == got.decode_hop_s and read.frame_s == got.frame_s
    assert "Ray loop calibrated (3 relays, auto transport: loop 700 us" in read.evidence
    assert with_runtime_terms(c, f"measured:{table}") == c  # the local backend ignores it
    loop = {"frame_s": 2e-5, "orch_s": 2e-5, "wake_s": 0.0, "cores": 2, "contention": 0.1}
    terms = {"frame_s": 3e-4, "orch_s": 3e-4, "wake_s": 0.0, "cores": 2, "contention": 0.2, "work_scale": 0.9}
    table.write_text(json.dumps({"runtime": {"3": {"loop": loop, "ray_loop": {**ray, "terms": terms}}}}))
    fit = with_runtime_terms(c, f"measured:{table}", "ray")  # the terms fitted on the Ray pipeline win
    assert fit.frame_s == 3e-4 and fit.contention == 0.2 and fit.decode_s == pytest.approx(c.scaled(0.9).decode_s)
    assert fit.decode_hop_s == got.decode_hop_s and "runtime terms fitted on Ray" in fit.evidence
    assert with_runtime_terms(c, f"measured:{table}").frame_s == 2e-5  # the local loop for the local backend
    table.write_text(json.dumps({"runtime": {"3": {"loop": loop, "ray_loop": {**ray, "terms": {"frame_s": -1}}}}}))
    bad = with_runtime_terms(c, f"measured:{table}", "ray")  # malformed terms: the chain over the local loop
    assert bad.frame_s == pytest.approx(2e-5 + 1e-4) and "fitted on Ray" not in bad.evidence
    for broken in ({**ray, "loop_s": "fast"}, {"loop_s": 1e-3, "transport": "auto"}):
        table.write_text(json.dumps({"runtime": {"3": {"ray_loop": broken}}}))
        none = with_runtime_terms(c, f"measured:{table}", "ray")  # a malformed chain: local hops, and said so
        assert none.decode_hop_s == c.decode_hop_s and "Ray loop calibrated for 3 stages is unusable" in none.evidence
    table.write_text(json.dumps({"runtime": {}}))
    assert "no Ray loop calibrated" in with_runtime_terms(c, f"measured:{table}", "ray").evidence


@pytest.mark.parametrize("step", [1e-3, 0.3, 0.5, 10.0])
def test_the_frame_simulation_ends_and_is_scale_free(step):
    """AB-T-2: the event simulation of frames ends for any time scale (a server's remaining work that rounding
    leaves too small to move the clock still finishes: with 0.3 s stages it looped forever) and scaling every cost
    by k divides the rates by k."""
    ref = predict_concurrent(StageCosts.uniform(2, 1e-3, 1e-6), 4, 8, 64, micro_batches=2).aggregate_tok_s
    got = predict_concurrent(StageCosts.uniform(2, step, step / 1000), 4, 8, 64, micro_batches=2).aggregate_tok_s
    assert got * step == pytest.approx(ref * 1e-3, rel=1e-9)


@pytest.mark.parametrize("backend", [5, None, ["ray"], "slurm", True])
def test_a_throughput_row_names_a_known_backend(tmp_path, backend):
    """A measured row's ``backend`` is a known runtime (any case, spaces around ignored) or absent; anything else is
    ConcurrencyError(bad_throughput) naming the row and field, never a silent local prediction."""
    row = {"n_sequences": 2, "stages": 1, "aggregate_tok_s": 10.0, "p50_s": 0.1, "p99_s": 0.2}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"rows": [row, {**row, "backend": " RAY "}]}))
    assert [m.backend for m in read_throughput(path)] == ["", "ray"]
    path.write_text(json.dumps({"rows": [row, {**row, "backend": backend}]}))
    with pytest.raises(ConcurrencyError) as e:
        read_throughput(path)
    assert e.value.code == "bad_throughput" and e.value.where == "backend" and "row 1" in str(e.value)
