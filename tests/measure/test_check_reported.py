"""check_reported: one honesty check for every lesson's reported numbers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.measure.compare import Tolerance
from autograder.measure.reported import Expected, Hint, check_reported, close

ROUNDING = Tolerance(rtol=1e-5, atol=1e-6)
PERCENT = Hint("a percentage?", "the contract asks for a share in [0, 1]")

CASES = [  # (reported value, Expected, ok, words in the reason)
    (0.95, Expected(0.95, ROUNDING), True, ""),
    (0.95 + 1e-7, Expected(0.95, ROUNDING), True, ""),
    (0.96, Expected(0.95, ROUNDING), False, "reported 0.96, measured 0.95"),
    (95.0, Expected(0.95, ROUNDING, alternatives=((95.0, PERCENT),)), False, "(the contract asks for a share"),
    (1234, Expected(1234, 0), True, ""),
    (1234.0, Expected(1234, 0), True, ""),
    (1235, Expected(1234, 0, unit="bytes"), False, "reported 1,235 bytes, measured 1,234 bytes"),
    (10**400, Expected(1234, 0), False, "an integer of 401 digits, not a finite number"),
    (float("nan"), Expected(0.5, ROUNDING), False, "reported nan, not a finite number"),
    (float("inf"), Expected(0.5, ROUNDING, nonfinite_hint=Hint("h", "why")), False, "not a finite number (why)"),
    ("0.95", Expected(0.95, ROUNDING), False, "a string of 4 characters"),
    (True, Expected(1, 0), False, "a boolean (true)"),
    (None, Expected(0.95, ROUNDING), False, "reported null"),
    ([1, 2], Expected(0.95, ROUNDING), False, "a list of 2 items"),
    (3.2, Expected(2.9, None, positive=True, unit="ms"), True, ""),  # form only
    (-1.0, Expected(2.9, None, positive=True, unit="ms"), False, "reported -1 ms, it must be positive"),
    (
        3.2,
        Expected(None, ROUNDING, why_not="the model did not run"),
        False,
        "cannot be re-measured: the model did not run",
    ),
    (0.5, Expected(float("nan"), ROUNDING), False, "the grader's value is not a finite number"),
    (0.95, Expected(0.95, ROUNDING, not_judged="not judged: not quantized"), False, "not judged: not quantized"),
    (0.5, Expected(0.4, 0.3), True, ""),  # a float tolerance is relative
    (0.5, Expected(0.4, 0.2), False, "reported 0.5, measured 0.4"),
]


@pytest.mark.parametrize(("value", "expected", "ok", "words"), CASES)
def test_one_field(value, expected, ok, words):
    facts = check_reported({"a": value}, {"a": expected})
    field = facts["fields"]["a"]
    assert field["ok"] is ok and facts["honest"] == int(ok) and facts["honest_share"] == float(ok)
    backed = expected.measured is not None  # typed in beside nothing the grader could measure: not present
    assert facts["present"] is backed and facts["checked"] == 1
    if not ok:
        assert words in field["reason"] and facts["problems"][-1] == f"a: {field['reason']}"
        assert len(facts["problems"]) == (1 if backed else 2)


@pytest.mark.parametrize(
    "measured, present",
    [((None, None), False), ((None, 0.5), True), ((0.5, 0.5), True)],
)
def test_results_are_present_only_when_something_of_the_notebook_backs_them(measured, present):
    expected = {k: Expected(m, ROUNDING, why_not="the model is missing") for k, m in zip("ab", measured)}
    facts = check_reported({"a": 0.5, "b": 0.5}, expected)
    assert facts["present"] is present
    assert any("nothing the notebook produced backs" in p for p in facts["problems"]) is not present


def test_nothing_reported():
    facts = check_reported(None, {"a": (1.0, ROUNDING)}, missing_reason="RESULTS is not defined")
    assert facts == {
        "present": False,
        "problems": ["RESULTS is not defined"],
        "checked": 0,
        "honest": 0,
        "honest_share": 0.0,
        "fields": {},
    }


def test_nested_keys_extra_keys_and_containers():
    expected = {"fp32.size": (10, 0), "fp32.acc": (0.5, ROUNDING), "int8.size": (5, 0), "int8.acc": (0.4, ROUNDING)}
    facts = check_reported({"fp32": {"size": 10, "acc": 0.5}, "int8": [1], "secret text": 1}, expected)
    assert facts["checked"] == 4 and facts["honest"] == 2 and facts["honest_share"] == 0.5
    assert "RESULTS['int8'] is not a dict" in facts["problems"]
    assert "RESULTS has 1 key(s) besides fp32, int8; they are ignored" in facts["problems"]
    assert not any("secret text" in p for p in facts["problems"])  # the notebook's text is never echoed
    facts = check_reported({"fp32": {"size": 10}}, expected)
    assert facts["fields"]["fp32.acc"]["reason"] == "missing from RESULTS"
    assert "RESULTS['int8'] is missing" in facts["problems"]
    facts = check_reported([0.5], {"a": (0.5, ROUNDING)})
    assert facts["problems"][0] == "RESULTS is a list of 1 items, expected a dict with the keys a"
    assert facts["honest"] == 0


def test_a_repeated_hint_is_said_once():
    hint = Hint("element-wise?", "the contract normalises per row")
    e = lambda m: Expected(m, ROUNDING, alternatives=((2 * m, hint),))  # noqa: E731
    facts = check_reported({"a": 2.0, "b": 4.0, "c": 9.0}, {"a": e(1.0), "b": e(2.0), "c": e(3.0)})
    assert facts["problems"] == [  # the explanation first: a message lists only the first few
        "element-wise?: the contract normalises per row",
        "a: reported 2, measured 1 (element-wise?)",
        "b: reported 4, measured 2 (element-wise?)",
        "c: reported 9, measured 3",
    ]
    once = check_reported({"a": 2.0}, {"a": e(1.0)})
    assert once["problems"] == ["a: reported 2, measured 1 (the contract normalises per row)"]


@given(measured=st.floats(-1e6, 1e6, allow_nan=False), rel=st.floats(-1e-3, 1e-3))
def test_honest_within_the_tolerance_and_not_beyond(measured, rel):
    tol = Tolerance(rtol=1e-4, atol=1e-9)
    reported = measured * (1 + rel)
    facts = check_reported({"x": reported}, {"x": (measured, tol)})
    assert facts["fields"]["x"]["ok"] == close(reported, measured, tol)
    assert facts["fields"]["x"]["ok"] == (abs(reported - measured) <= 1e-9 + 1e-4 * abs(measured))
    assert math.isfinite(facts["honest_share"])
