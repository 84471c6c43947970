"""metrics: the contract's definitions on literal arrays whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.measure import metrics, probabilities

R = np.array([[0.9999, 0.0001], [0.5, 0.5], [0.2, 0.8]], dtype=np.float32)  # fp32 outputs
P = np.array([[0.9990, 0.0010], [0.4, 0.6], [0.2, 0.8]], dtype=np.float32)  # a variant's


def test_accuracy_and_label_agreement():
    y = np.array([0, 1, 1])
    assert probabilities.accuracy(R, y) == pytest.approx(2 / 3)  # row 1 is a tie: argmax picks class 0
    assert probabilities.accuracy(P, y) == 1.0
    assert probabilities.label_agreement(P, R) == pytest.approx(2 / 3)


def test_max_rel_drift_is_per_row_not_element_wise():
    # rows: 0.0009/0.9999, 0.1/0.5, 0 → max is row 1: 0.2
    assert metrics.max_rel_drift(P, R) == pytest.approx(0.2, rel=1e-6)
    # element-wise, row 0 column 1: 0.0009 / 0.0001 = 9: the measure the contract rules out
    assert metrics.elementwise_max_rel_drift(P, R) == pytest.approx(9.0, rel=1e-3)
    assert metrics.max_rel_drift(R, R) == 0.0


def test_elementwise_drift_is_none_when_it_explodes():
    r = np.array([[1.0, 0.0]], dtype=np.float32)
    p = np.array([[0.99, 0.01]], dtype=np.float32)
    assert metrics.elementwise_max_rel_drift(p, r) is None
    assert metrics.max_rel_drift(p, r) == pytest.approx(0.01, rel=1e-5)


def test_abs_dp_max_and_p99():
    assert metrics.max_abs_dp(P, R) == pytest.approx(0.1, rel=1e-6)
    rows = np.array([[0.0, 0.0]] * 99 + [[0.5, 0.5]], dtype=np.float32)
    ref = np.zeros_like(rows)
    # per-row max |Δp|: 99 zeros and one 0.5 → the 99th percentile interpolates to 0.005
    assert metrics.p99_abs_dp(rows, ref) == pytest.approx(0.005)
    assert metrics.max_abs_dp(rows, ref) == 0.5


def test_ratios_and_coverage():
    assert metrics.size_ratio(72_381, 268_674) == pytest.approx(0.2694, abs=1e-4)
    assert metrics.latency_ratio(0.3, 0.6) == 0.5
    x = np.array([[0.0, 0.0], [2.0, 0.0], [-1.0, 1.0], [0.5, 3.0]], dtype=np.float32)
    assert metrics.coverage(x, -1.0, 2.0) == 0.75


@pytest.mark.parametrize(
    "p, fragment",
    [
        (np.array([[np.nan, 0.5]], dtype=np.float32), "NaN"),
        (np.array([[1.5, -0.5]], dtype=np.float32), "outside [0, 1]"),
        (np.array([[0.5, 0.6]], dtype=np.float32), "sum to"),
    ],
)
def test_probability_problems(p, fragment):
    assert any(fragment in m for m in probabilities.probability_problems(p))


def test_qdq_rounding_of_probabilities_is_not_a_problem():
    step = 1 / 255
    p = np.array([[0.5 + step, 0.5 + step], [0.2 - step, 0.8]], dtype=np.float32)
    assert probabilities.probability_problems(p) == []


def test_interleaved_medians_alternate_the_callables():
    calls = []
    out = metrics.interleaved_medians(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=3, warmup=1
    )
    assert calls == ["a", "b"] + ["a", "b"] * 3
    assert set(out) == {"a", "b"} and all(v >= 0 for v in out.values())


@pytest.mark.parametrize("shape", [(5,), (5, 1), (5, 3), (5, 2, 4)])
def test_output_metrics_take_any_shape_row_by_row(shape):
    rng = np.random.default_rng(0)
    r = rng.standard_normal(shape).astype(np.float32)
    p = r.copy()
    p[2] += np.float32(0.5)  # one row moved by 0.5 everywhere
    rows = len(r)
    assert metrics.row_abs_dp(p, r).shape == (rows,)
    assert metrics.max_abs_dp(p, r) == pytest.approx(0.5, rel=1e-6)
    assert metrics.row_abs_dp(p, r)[[0, 1, 3, 4]].max() == 0.0
    den = np.abs(r[2].astype(np.float64)).max()
    assert metrics.max_rel_drift(p, r) == pytest.approx(0.5 / den, rel=1e-5)
    assert metrics.max_abs_dp(p[:0], r[:0]) == 0.0 and metrics.max_rel_drift(p[:0], r[:0]) == 0.0
