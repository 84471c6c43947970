"""compare.py on JSON-like results: an Expect that knows the type (dict keys, list lengths, str, bool,
None, exact ints, floats within a tolerance, arrays as before), accounts that name the key or index
path and never a hidden value, and the unit of a count."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.measure.failure import STEP
from autograder.measure.compare import Expect, Tolerance, compare_output
from autograder.probe_format import CaseOutput

COUNTS = {"ai.onnx::Conv": 3, "ai.onnx::Relu": 2, "com.microsoft::FusedConv": 1}


def returned(value) -> CaseOutput:
    return CaseOutput("ok", value=value)


# (expected, returned, reason or None when it agrees, words the student's account holds)
TABLE = [
    (COUNTS, dict(COUNTS), None, ""),
    (COUNTS, {k: np.int64(v) for k, v in COUNTS.items()}, None, ""),  # NumPy ints count as ints
    (COUNTS, {"ai.onnx::Conv": 3, "ai.onnx::Relu": 2}, "keys", "missing the key 'com.microsoft::FusedConv'"),
    (COUNTS, {}, "keys", "missing 3 keys: 'ai.onnx::Conv', 'ai.onnx::Relu', 'com.microsoft::FusedConv'"),
    (COUNTS, {**COUNTS, "Gelu": 1}, "keys", "has a key not expected"),
    (COUNTS, {**COUNTS, "ai.onnx::Relu": 3}, "values", "at ['ai.onnx::Relu']: the value differs, by 1"),
    (COUNTS, {**COUNTS, "ai.onnx::Relu": 2.0}, "type", "at ['ai.onnx::Relu']: returned a float, expected an int"),
    (COUNTS, {**COUNTS, "ai.onnx::Relu": True}, "type", "returned a bool, expected an int"),
    (COUNTS, [3, 2, 1], "type", "returned a list, expected a dict"),
    (COUNTS, None, "type", "returned None, expected a dict"),
    ([1, 2, 3], (1, 2, 3), None, ""),  # a tuple for a list is fine
    ([1, 2, 3], [1, 2], "length", "returned a list of 2 items, expected 3"),
    ([1, 2, 3], list(range(9)), "length", "returned a list of more than 4 items, expected 3"),
    ([1, [2, 3]], [1, [2, 4]], "values", "at [1][1]: the value differs, by 1"),
    ({"a": ["x", "y"]}, {"a": ["x", "z"]}, "values", "at ['a'][1]: the str differs"),
    ("secret", "secreT", "values", "the str differs"),
    (True, False, "values", "the bool differs"),
    (True, np.bool_(True), None, ""),
    (None, None, None, ""),
    (None, 0, "type", "returned an int, expected None"),
    (0.5, 0.5 * (1 + 1e-7), None, ""),  # within float32 rounding
    (0.5, np.float32(0.5), None, ""),
    (0.5, 0.6, "values", "the value differs, by up to 100% of the expected value"),
    (0.5, float("nan"), "values", "NaN among them"),
    (0.5, "0.5", "type", "returned a str, expected a float"),
    ({"p": np.arange(3.0)}, {"p": np.arange(3.0)}, None, ""),
    ({"p": np.arange(3.0)}, {"p": np.arange(4.0)}, "shape", "at ['p']: returned a 1-d shape"),
    (
        {"p": np.arange(3, dtype=np.int8)},
        {"p": np.arange(3, dtype=np.int8) + 1},
        "values",
        "at ['p']: dtype int8 and shape (3,) are right, but all 3 elements differ, by 1",
    ),
]


@pytest.mark.parametrize("expected, got, reason, words", TABLE)
def test_expect_knows_the_type(expected, got, reason, words):
    fact = compare_output(expected, returned(got))
    assert (fact["agree"], fact["reason"]) == (reason is None, reason), fact
    assert words in fact["account"], fact


@pytest.mark.parametrize(
    "diff, words",
    [
        (1, "by 1 node"),
        (3, "by 3 nodes"),
        (-4, "by 4 nodes"),
        (7, "by up to 10 nodes"),
        (500, "by more than 100 nodes"),
    ],
)
def test_a_unit_names_what_an_integer_counts(diff, words):
    fact = compare_output(Expect(COUNTS, unit="node"), returned({**COUNTS, "ai.onnx::Conv": 3 + diff}))
    assert fact["account"] == f"at ['ai.onnx::Conv']: the value differs, {words}"
    arrays = compare_output(Expect(np.array([3, 2]), unit="node"), returned(np.array([3, 2 + diff])))
    assert arrays["account"].endswith(f"1 of 2 elements differ, {words}")


def test_quantization_steps_only_where_the_expect_says_so():
    """Integer arrays read in bare numbers unless their Expect names a unit: "steps" are a
    quantization lesson's words (unit=STEP, or a float value's step), not every lesson's."""
    bare = compare_output(np.array([2, 4, -2], np.int8), returned(np.array([3, 4, -2], np.int8)))
    assert bare["account"].endswith("1 of 3 elements differ, by 1") and "step" not in bare["account"]
    fact = compare_output(Expect(np.array([2, 4, -2], np.int8), unit=STEP), returned(np.array([3, 4, -2], np.int8)))
    assert fact["account"].endswith("1 of 3 elements differ, by 1 step")
    step = compare_output(
        Expect(np.array([0.5, 1.0], np.float32), step=0.5), returned(np.array([0.5, 2.0], np.float32))
    )
    assert step["account"].endswith("by up to 2 steps")


def test_an_inner_expect_sets_its_own_tolerance():
    loose = {"latency": Expect(10.0, tolerance=Tolerance(rtol=0.5)), "nodes": 4}
    assert compare_output(loose, returned({"latency": 14.0, "nodes": 4}))["agree"]
    assert not compare_output({"latency": 10.0, "nodes": 4}, returned({"latency": 14.0, "nodes": 4}))["agree"]


def test_no_hidden_value_in_the_account():
    """What the student reads names the path and the kind of difference, never a value."""
    hidden = {"k": [123456, 0.123456789, "hidden-text-value", np.array([98765.0])]}
    for got in (
        {"k": [123457, 0.123456789, "hidden-text-value", np.array([98765.0])]},
        {"k": [123456, 0.923456789, "hidden-text-value", np.array([98765.0])]},
        {"k": [123456, 0.123456789, "other", np.array([98765.0])]},
        {"k": [123456, 0.123456789, "hidden-text-value", np.array([1.0])]},
    ):
        account = compare_output(hidden, returned(got))["account"]
        assert account and not any(s in account for s in ("123456", "12345", "hidden-text", "98765", "other")), account
