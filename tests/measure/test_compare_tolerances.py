"""Comparison tolerances per value, per call and per group of cases (measure/compare.py, measure/functions.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.measure.compare import FLOAT32_ROUNDING, FLOAT_RTOL, Expect, Tolerance, compare_output
from autograder.measure.functions import measure_functions
from autograder.probe_format import Arg, CaseOutput, ProbeCase, ProbeResult

FLOAT64_ROUNDING = Tolerance(rtol=float(4 * np.finfo(np.float64).eps), atol=0.0)


def ok(*values: np.ndarray) -> CaseOutput:
    return CaseOutput("ok", [np.asarray(v) for v in values], is_tuple=len(values) > 1)


def softmax64(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_an_exact_softmax_rounded_to_float32_needs_more_than_the_default():
    """The case that set the default: float64 softmax rounded once to float32 vs ONNX Runtime's float32 Softmax."""
    from autograder.measure.reference_ops import ort_node

    x = np.random.default_rng(1).normal(0.0, 3.0, (200, 10)).astype(np.float32)  # up to ~8 eps apart
    ort = ort_node("Softmax", x, axis=-1)
    student = softmax64(x).astype(np.float32)
    default = compare_output(ort, ok(student))
    loose = compare_output(ort, ok(student), tolerance=Tolerance(rtol=1e-5, atol=1e-12))
    assert not default["agree"] and default["reason"] == "values"
    assert loose["agree"], loose


def test_the_default_is_float32_rounding_and_its_message_is_unchanged():
    e = np.array([1.0, 2.0], np.float32)
    g = e * (1 + 3 * np.finfo(np.float32).eps)
    assert compare_output(e, ok(g.astype(np.float32)))["agree"]
    bad = compare_output(e, ok(np.array([1.0, 2.1], np.float32)))
    assert bad["got"].endswith(f"allowed {FLOAT_RTOL:.2g}·|expected|)")
    assert Tolerance() == FLOAT32_ROUNDING


def test_a_value_keeps_its_own_tolerance_over_the_calls():
    e = np.array(0.1, np.float64)
    g = np.array(0.1 + 1e-12)
    tight = Expect(e, tolerance=FLOAT64_ROUNDING)
    assert not compare_output(tight, ok(g), tolerance=Tolerance(rtol=1e-3))["agree"]
    assert compare_output(Expect(e), ok(g), tolerance=Tolerance(rtol=1e-3))["agree"]
    assert "allowed 0 + 8.9e-16·|expected|" in compare_output(tight, ok(g))["got"]


def test_tolerances_must_be_finite_and_not_negative():
    for rtol, atol in ((-1.0, 0.0), (float("nan"), 0.0), (0.0, float("inf"))):
        with pytest.raises(ValueError):
            Tolerance(rtol=rtol, atol=atol)


def test_per_group_tolerances_in_measure_functions():
    cases = [
        ProbeCase("f/loose", "f", (Arg.array(np.array([1.0])),), {}, "float32_inputs"),
        ProbeCase("f/tight", "f", (Arg.array(np.array([1.0])),), {}, "float64_inputs"),
    ]
    answer = np.array([1.0 + 1e-9])  # off by 1e-9 relative: float32-honest, not float64
    probe = ProbeResult(True, None, {c.id: ok(answer) for c in cases}, {"f": "defined"}, None, None)
    expect = {"f": lambda case: np.array([1.0])}
    plain = measure_functions(cases, probe, expect)["f"]
    assert plain["agree"] == 2, "the default (float32 rounding) accepts both"
    grouped = measure_functions(cases, probe, expect, tolerances={"f": {"float64_inputs": FLOAT64_ROUNDING}})["f"]
    assert {g: (v["cases"], v["agree"]) for g, v in grouped["groups"].items()} == {
        "float32_inputs": (1, 1),
        "float64_inputs": (1, 0),
    }
    assert grouped["first_mismatch"]["case"] == "f/tight" and grouped["first_mismatch"]["reason"] == "values"


def test_functions_without_an_expectation_are_data_not_checks():
    cases = [ProbeCase("f/1", "f", (1,)), ProbeCase("collect/1", "collect", (2,))]
    probe = ProbeResult(
        True,
        None,
        {"f/1": ok(np.array(1.0)), "collect/1": ok(np.array(5.0))},
        {"f": "defined", "collect": "defined"},
        None,
        None,
    )
    section = measure_functions(cases, probe, {"f": lambda c: np.array(1.0)})
    assert list(section) == ["f"] and section["f"]["agree"] == 1
    assert measure_functions(cases, ProbeResult(False, "no probe", {}, {}, None, None), {"f": None}) == {
        "error": "no probe"
    }
