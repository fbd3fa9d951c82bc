"""``bench/throughput.py --rounds``: a row over its rounds (issue 14, "prediction error of aggregate tok/s")."""

from __future__ import annotations

import pytest

from tests.conftest import bench_module


@pytest.fixture(scope="module")
def tp():
    return bench_module("throughput")


def _row(meas: float, pred: float, p50: float) -> dict:
    return {"stages": 2, "parallel": 4, "agg_tok_s": meas, "p50_ms": p50, "predicted_agg_tok_s": pred,
            "error": (pred - meas) / meas, "predicted_no_kv_agg_tok_s": pred * 1.1}


def test_a_row_over_rounds_is_the_median_measurement_against_the_median_prediction(tp):
    """AB-T-2: the measured figures come from the round with the median measured rate (its p50 too), the
    prediction is the median of the rounds' predictions and the error compares those two; every round's rates
    and errors are kept and the spread is (max - min) / median of the measured rates."""
    rounds = [_row(100.0, 90.0, 10.0), _row(80.0, 120.0, 12.5), _row(90.0, 100.0, 11.0)]
    got = tp.combine_rounds(rounds)
    assert got["agg_tok_s"] == 90.0 and got["p50_ms"] == 11.0
    assert got["predicted_agg_tok_s"] == 100.0
    assert got["error"] == pytest.approx(10 / 90)
    assert got["predicted_no_kv_agg_tok_s"] == pytest.approx(110.0)
    assert got["error_no_kv"] == pytest.approx(20 / 90)
    assert got["rounds_agg_tok_s"] == [100.0, 80.0, 90.0]
    assert got["rounds_predicted_agg_tok_s"] == [90.0, 120.0, 100.0]
    assert got["rounds_error"] == [r["error"] for r in rounds]
    assert got["measured_spread"] == pytest.approx(20 / 90)
    one = tp.combine_rounds([_row(50.0, 55.0, 20.0)])  # one round: that round's row
    assert one["error"] == pytest.approx(0.1) and one["measured_spread"] == 0.0
