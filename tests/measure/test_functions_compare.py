"""compare.py: the validation order, exact and float32-rounding values, and the near-tie fairness rule."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.measure import compare
from autograder.measure.compare import Expect, compare_output
from autograder.measure.quantization.reference_ops import ort_quantize
from autograder.probe_format import Arg, CaseOutput, ProbeCase

EXPECTED = np.array([2, 4, -2], dtype=np.int8)


def ok(*values, is_tuple=False) -> CaseOutput:
    return CaseOutput("ok", [np.asarray(v) for v in values], is_tuple=is_tuple)


# ---------------------------------------------------------------- validation order


@pytest.mark.parametrize(
    "output, reason",
    [
        (CaseOutput("missing_function"), "missing"),
        (CaseOutput("not_run"), "missing"),
        (CaseOutput("raised", error={"type": "ZeroDivisionError", "message": "division by zero"}), "raised"),
        (CaseOutput("unconvertible", error={"type": "ProbeError", "message": "a generator"}), "type"),
        (ok(EXPECTED, EXPECTED, is_tuple=True), "type"),  # a tuple where one array is due
        (ok(np.array(["2", "4", "-2"])), "type"),  # not numeric
        (ok(np.array([2.0, 4.0], np.float64)), "shape"),  # shape and dtype wrong: shape first
        (ok(np.array([3.0, 4.0, -2.0], np.float64)), "dtype"),  # dtype and values wrong: dtype first
        (ok(np.array([3, 4, -2], np.int8)), "values"),
        (ok(EXPECTED.copy()), None),
    ],
)
def test_validation_order_stops_at_first_failure(output, reason):
    fact = compare_output(EXPECTED, output)
    assert set(fact) == {"agree", "reason", "expected", "got", "account"}
    assert (fact["agree"], fact["reason"]) == (reason is None, reason), fact


def test_raised_names_the_exception():
    fact = compare_output(EXPECTED, CaseOutput("raised", error={"type": "ValueError", "message": "bad dtype"}))
    assert fact["got"] == "raised ValueError: bad dtype"
    assert fact["expected"] == "[2 4 -2] int8 shape (3,)"


def test_values_failure_says_where_and_by_how_much():
    fact = compare_output(EXPECTED, ok(np.array([2, 5, -3], np.int8)))
    assert "2/3 elements differ" in fact["got"], fact["got"]
    assert "first at (1,): 5 instead of 4" in fact["got"], fact["got"]
    assert "allowed 0" in fact["got"]


def test_zero_d_expected_needs_zero_d_result():
    fact = compare_output(np.array(2, np.int8), ok(np.array([2], np.int8)))
    assert fact["reason"] == "shape" and "expected shape ()" in fact["got"]


def test_renderings_are_short():
    big = np.arange(10_000, dtype=np.int8)
    fact = compare_output(big, ok(big.astype(np.int16)))
    assert len(fact["expected"]) <= compare.MAX_TEXT and len(fact["got"]) <= compare.MAX_TEXT
    long_msg = CaseOutput("raised", error={"type": "E", "message": "x" * 5000})
    assert len(compare_output(big, long_msg)["got"]) <= compare.MAX_TEXT


# ---------------------------------------------------------------- integers exact, floats to float32 rounding


def test_integers_are_compared_bit_for_bit():
    assert compare_output(np.array([127], np.int8), ok(np.array([126], np.int8)))["reason"] == "values"


def test_float_tolerance_is_derived_from_float32_eps():
    assert compare.FLOAT_RTOL == 4 * np.finfo(np.float32).eps
    assert compare.FLOAT_ATOL == np.finfo(np.float32).tiny


def test_float_agrees_within_float32_rounding_only():
    e = np.array([0.1, -12.8, 0.0], np.float32)
    # a float64 path rounded once: 0.1 * 1 in float64, cast to float32 → same; one ulp away → agrees
    one_ulp = np.nextafter(e, np.float32(np.inf)).astype(np.float32)
    assert compare_output(e, ok(one_ulp))["agree"]
    assert compare_output(e, ok(e.astype(np.float32)))["agree"]
    off = e.copy()
    off[0] = np.float32(0.1) * np.float32(1.0001)
    fact = compare_output(e, ok(off))
    assert fact["reason"] == "values" and "1/3 elements differ" in fact["got"]
    assert compare_output(e, ok(np.array([np.nan, -12.8, 0.0], np.float32)))["reason"] == "values"


def test_float_kind_rule_accepts_any_float_dtype():
    part = Expect(np.array(0.015686275, np.float32), dtype_kinds="f")
    assert compare_output(part, ok(np.float64(4 / 255)))["agree"]
    assert compare_output(part, ok(np.int64(0)))["reason"] == "dtype"


def test_tuple_results_are_checked_part_by_part():
    expected = (
        Expect(np.array(np.float32(4 / 255)), "f", label="scale"),
        Expect(np.array(64), "iu", label="zero_point"),
    )
    assert compare_output(expected, ok(np.float64(4 / 255), np.int64(64), is_tuple=True))["agree"]
    assert compare_output(expected, ok(np.array([4 / 255, 64.0])))["reason"] == "type"
    fact = compare_output(expected, ok(np.float64(4 / 255), np.float64(64.0), is_tuple=True))
    assert fact["reason"] == "dtype" and fact["got"].startswith("zero_point:"), fact
    fact = compare_output(expected, ok(np.float64(4 / 255), np.int64(63), is_tuple=True))
    assert fact["reason"] == "values" and fact["got"].startswith("zero_point:"), fact


# ---------------------------------------------------------------- the near-tie fairness rule


def test_ambiguous_offsets_accept_only_the_other_neighbour():
    e = np.array([2, 2, 2], np.int8)
    amb = np.array([1, 0, -1], np.int8)
    assert compare_output(e, ok(np.array([3, 2, 1], np.int8)), ambiguous=amb)["agree"]
    assert compare_output(e, ok(np.array([1, 2, 2], np.int8)), ambiguous=amb)["reason"] == "values"
    assert compare_output(e, ok(np.array([2, 3, 2], np.int8)), ambiguous=amb)["reason"] == "values"


def test_near_tie_marks_float32_ties_of_arbitrary_scales_but_not_exact_ties():
    s = np.float32(0.0137)
    x = ((np.arange(-50, 50) + 0.5) * np.float64(s)).astype(np.float32)
    assert compare.near_tie([x / s, x.astype(np.float64) / np.float64(s)]).all()
    exact_q = np.array([2.5, -2.5, 0.5], np.float32)  # 1.25 / 0.5 and friends
    assert not compare.near_tie([exact_q, exact_q.astype(np.float64)], exact=np.ones(3, bool)).any()
    far = np.array([2.3, -7.9, 100.0, 0.0])
    assert not compare.near_tie([far, far.astype(np.float32)]).any()


def test_tie_offsets_never_loosen_saturation():
    # 127.5 with zp 0 in int8: both neighbours saturate to 127; -1e9: both saturate to -128
    q = np.array([127.5, -1e9, 2.5000002])
    e = np.array([127, -128, 3], np.int8)
    off = compare.tie_offsets([q], e, add=0, lo=-128, hi=127)
    assert off.tolist() == [0, 0, -1]


def _quantize_offsets(x: np.ndarray, s: np.float32, expected: np.ndarray) -> np.ndarray:
    t32 = x / s
    t64 = x.astype(np.float64) / np.float64(s)
    exact = t32.astype(np.float64) * np.float64(s) == x.astype(np.float64)
    return compare.tie_offsets([t32, t64], expected, add=0, lo=-128, hi=127, exact=exact)


def test_fairness_float64_division_agrees_round_half_away_does_not():
    s = np.float32(0.0137)
    x = ((np.arange(-120, 120) + 0.5) * np.float64(s)).astype(np.float32)
    expected = ort_quantize(x, s, 0, np.int8)
    amb = _quantize_offsets(x, s, expected)
    float64_student = np.clip(np.rint(x.astype(np.float64) / np.float64(s)), -128, 127).astype(np.int8)
    assert (float64_student != expected).sum() > 0, "the set must contain real near-tie disagreements"
    assert compare_output(expected, ok(float64_student), ambiguous=amb)["agree"]

    ties = np.array([1.25, 1.75, -1.25, 0.25], np.float32)  # exact: x / 0.5 = 2.5, 3.5, -2.5, 0.5
    s2 = np.float32(0.5)
    expected = ort_quantize(ties, s2, 0, np.int8)
    amb = _quantize_offsets(ties, s2, expected)
    assert not amb.any(), "exact ties must not be ambiguous"
    t = ties / s2
    round_away = (np.sign(t) * np.floor(np.abs(t) + 0.5)).astype(np.int8)
    floor_half = np.floor(t + 0.5).astype(np.int8)
    assert compare_output(expected, ok(round_away), ambiguous=amb)["reason"] == "values"
    assert compare_output(expected, ok(floor_half), ambiguous=amb)["reason"] == "values"


# ---------------------------------------------------------------- the call rendering


def test_describe_call_is_one_readable_line():
    case = ProbeCase(
        "quantize/x",
        "quantize",
        (Arg.array(np.array([1.25, 1.75], np.float32)), 0.5, Arg.scalar(np.uint8(128))),
        {"dtype": Arg.dtype("uint8")},
        "ties",
    )
    assert (
        compare.describe_call(case)
        == "quantize(np.array([1.25, 1.75], dtype=float32), 0.5, np.uint8(128), dtype=np.uint8)"
    )
    big = ProbeCase("quantize/y", "quantize", (Arg.list(np.arange(1000, dtype=np.float32)), 1.0, 0))
    text = compare.describe_call(big)
    assert "\n" not in text and len(text) <= compare.MAX_TEXT and "…" in text
