"""The runtime's micro-batch count (issue 14): ``best_micro_batches`` picks the M in 1..min(N, S) that
``predict_concurrent`` predicts fastest, on synthetic StageCosts where batching rows wins and where pipelining
frames wins (each case fails for the old ``min(N, S)`` or a constant M)."""

from __future__ import annotations

import pytest
from pipeplan.analysis.concurrency import (
    StageCosts,
    best_micro_batches,
    choose_micro_batches,
    predict_concurrent,
)

T = 1e-3
HOP = 2e-5


def _costs(stages: int, rows: tuple[float, ...], **terms) -> StageCosts:
    return StageCosts((T,) * stages, (HOP,) * stages, (8 * T,) * stages, (HOP,) * stages, prefill_rows=8,
                      rows_s=(tuple(r * T for r in rows),) * stages, **terms)


def _check_argmax(choice, costs: StageCosts, n: int) -> None:
    """The per-M predictions are predict_concurrent's for M = 1..min(N, S) and the choice has the highest rate."""
    ms = [p.micro_batches for p in choice.predictions]
    assert ms == list(range(1, min(n, costs.stages) + 1))
    for p in choice.predictions:
        assert p.aggregate_tok_s == predict_concurrent(costs, n, 8, 32, micro_batches=p.micro_batches).aggregate_tok_s
    best = max(p.aggregate_tok_s for p in choice.predictions)
    assert next(p for p in choice.predictions if p.micro_batches == choice.micro_batches).aggregate_tok_s == best


def test_memory_bound_rows_batch_into_one_frame():
    """A frame of k rows costs about one row (weights streamed once), 2 cores shared by 3 stages that contend
    for memory: one frame of all 4 rows (M = 1) is predicted fastest, not min(N, S) = 3."""
    costs = _costs(3, (1.0, 1.05, 1.1, 1.2), frame_s=HOP, orch_s=HOP, wake_s=5e-5, cores=2, contention=0.3)
    choice = best_micro_batches(costs, 4, 8, 32)
    _check_argmax(choice, costs, 4)
    assert choice.micro_batches == 1
    rates = [p.aggregate_tok_s for p in choice.predictions]
    assert rates[0] > 1.2 * rates[-1]  # the old default min(N, S) = 3 is clearly slower
    assert best_micro_batches(costs, 4, 8, 32) == choice  # deterministic


@pytest.mark.parametrize("stages, n, cores, want", [(3, 6, 8, 3), (4, 8, 2, 2)])
def test_row_linear_costs_pipeline_frames(stages, n, cores, want):
    """Rows cost linearly (a frame of k rows costs k rows): with a core per stage every stage works on its own
    frame (M = S = 3, not a constant 1); 4 stages on 2 cores keep both cores busy with M = 2 frames, which pay
    the per-frame runtime cost half as often as min(N, S) = 4."""
    costs = _costs(stages, (1.0, 2.0, 4.0, 8.0), frame_s=1e-4, orch_s=1e-4, wake_s=0.0, cores=cores)
    choice = best_micro_batches(costs, n, 8, 32)
    _check_argmax(choice, costs, n)
    assert choice.micro_batches == want
    assert choice.predictions[want - 1].aggregate_tok_s > 1.5 * choice.predictions[0].aggregate_tok_s


def test_ties_go_to_the_lower_latency_then_the_larger_m():
    """Without runtime terms, 4 sequences on 3 stages: M = 2 (frames of 2 rows) and M = 3 (2, 1, 1 rows)
    predict the same rate and p50, so the larger M is chosen; a patched prediction with a lower p50 wins a tie."""
    costs = StageCosts((T,) * 3, (HOP,) * 3, (8 * T,) * 3, (HOP,) * 3, prefill_rows=8,
                       rows_s=((T, 2 * T, 4 * T, 8 * T),) * 3)
    choice = best_micro_batches(costs, 4, 8, 32)
    r2, r3 = choice.predictions[1], choice.predictions[2]
    assert r2.aggregate_tok_s == pytest.approx(r3.aggregate_tok_s, rel=1e-12)
    assert r2.per_token_p50_s == pytest.approx(r3.per_token_p50_s, rel=1e-12)
    assert choice.micro_batches == 3


def test_ties_prefer_lower_p50(monkeypatch):
    """Equal predicted rates: the M with the lower p50 per-token latency wins, whatever its position."""
    import dataclasses

    import pipeplan.analysis.concurrency as cc

    real = cc.predict_concurrent

    def fake(costs, n, prompt, decode, **kw):
        p = real(costs, n, prompt, decode, **kw)
        return dataclasses.replace(p, aggregate_tok_s=100.0, per_token_p50_s={1: 0.02, 2: 0.01, 3: 0.03}[p.micro_batches])

    monkeypatch.setattr(cc, "predict_concurrent", fake)
    choice = best_micro_batches(StageCosts.uniform(3, T), 4, 8, 8)
    assert choice.micro_batches == 2
    assert "micro-batches 2 for --parallel 4" in choice.line() and "M=1 100.0, M=2 100.0, M=3 100.0" in choice.line()
    assert choice.to_json() == {"micro_batches": 2, "predicted_tok_s": {"1": 100.0, "2": 100.0, "3": 100.0}}


def test_choose_for_a_package_or_nothing(tmp_path):
    """choose_micro_batches: None for one sequence or costs it cannot read (the runtime keeps min(N, S))."""
    assert choose_micro_batches(tmp_path, 4) is None  # a directory without a package
    assert choose_micro_batches(tmp_path / "missing", 4) is None
    assert choose_micro_batches(tmp_path, 1) is None
