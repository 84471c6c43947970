"""The judge's ops, formats, templates and path lookup, case by case on one-part rubrics."""

from __future__ import annotations

import math

import pytest

from autograder.dotted import lookup
from autograder.grade_text import format_value
from autograder.judge import judge

TOLERANCES = {"dyn": {"drop_max": 0.012}, "cov": {"min": {"value": 0.95, "derived": "20 seeds"}}}


def one_part(measured, **part):
    """Judge a single part measuring ``m.x`` = ``measured``; returns the graded part."""
    spec = {"name": "p", "measure": "m.x", "points": 4, **part}
    rubric = {"checks": [{"id": "c", "title": "C", "points": spec["points"], "parts": [spec]}]}
    return judge(rubric, TOLERANCES, {"m": {"x": measured, "y": 66817, "z": 0.0312}})["checks"][0]["parts"][0]


# (op, measured, threshold, passes)
OP_CASES = [
    ("==", "dynamic", "dynamic", True),
    ("==", "static_qdq", "dynamic", False),
    ("==", 0, 0, True),
    ("==", 0.0, 0, True),
    ("==", True, 1, False),  # a bool is never equal to a number
    ("==", ["int8"], ["int8"], True),
    ("==", ["int8", "uint8"], ["int8"], False),
    ("!=", "fp32", "dynamic", True),
    ("!=", "dynamic", "dynamic", False),
    ("<=", 0.012, 0.012, True),
    ("<=", 0.0121, 0.012, False),
    ("<", 0.011, 0.012, True),
    ("<", 0.012, 0.012, False),
    (">=", 1.0, 1.0, True),
    (">=", 0.975, 1.0, False),
    (">", 2, 1, True),
    (">", 1, 1, False),
    ("<=", float("nan"), 0.012, False),
    (">=", float("nan"), 0.0, False),
    ("in", "dynamic", ["dynamic", "static_qdq"], True),
    ("in", "fp32", ["dynamic", "static_qdq"], False),
    ("in", ["int8"], ["int8"], True),
    ("in", ["int8", "float32"], ["int8"], False),
    ("in", [], ["int8"], False),  # an empty measured list proves nothing
    ("in", 1, [True], False),
]


@pytest.mark.parametrize(
    "op, measured, threshold, passes", OP_CASES, ids=[f"{op} {m!r} {t!r}" for op, m, t, _ in OP_CASES]
)
def test_check_op_literal_value(op, measured, threshold, passes):
    part = one_part(measured, op=op, value=threshold)
    assert part["passed"] is passes, f"{measured!r} {op} {threshold!r}: expected passed={passes}"
    assert part["score"] == (4 if passes else 0)
    assert part["reason"] is None


@pytest.mark.parametrize(
    "op, measured, passes",
    [("is_true", True, True), ("is_true", False, False), ("is_false", False, True), ("is_false", True, False)],
)
def test_check_op_bool(op, measured, passes):
    part = one_part(measured, op=op)
    assert part["passed"] is passes
    assert part["threshold"] is (op == "is_true")


@pytest.mark.parametrize(
    "op, measured, value, reason_part",
    [
        ("<=", "fast", 1.0, "not a number"),
        (">=", True, 1, "not a number"),
        ("is_true", 1, None, "not true or false"),
        ("is_false", "no", None, "not true or false"),
    ],
)
def test_check_op_wrong_kind_of_measurement_fails_with_reason(op, measured, value, reason_part):
    part = one_part(measured, op=op, **({} if value is None else {"value": value}))
    assert part["passed"] is False and part["score"] == 0
    assert reason_part in part["reason"] and "m.x" in part["reason"]


def test_check_tolerance_is_looked_up_by_dotted_path():
    assert one_part(0.012, op="<=", tolerance="dyn.drop_max")["passed"] is True
    failed = one_part(0.013, op="<=", tolerance="dyn.drop_max")
    assert failed["passed"] is False and failed["threshold"] == 0.012


def test_check_tolerance_table_with_value_key():
    part = one_part(0.9, op=">=", tolerance="cov.min", format="percent")
    assert part["threshold"] == 0.95 and part["threshold_text"] == "95.0%" and part["passed"] is False


# (format, value, text)
FORMAT_CASES = [
    ("text", "dynamic", "dynamic"),
    ("text", True, "true"),
    ("text", None, "?"),
    ("text", 0.031, "0.031"),
    ("int", 66817, "66,817"),
    ("int", 3.6, "4"),
    ("float3", 0.0312, "0.031"),
    ("float3", 0.0001234, "0.00012"),  # small but non-zero keeps two significant digits
    ("float3", 0.0, "0.000"),
    ("float3", [-1.6, 2.5], "[-1.600, 2.500]"),
    ("percent", 0.031, "3.1%"),
    ("percent", 0.962, "96.2%"),
    ("percent", 0.0004, "0.04%"),
    ("bytes", 512, "512 bytes"),
    ("bytes", 268674, "262.4 KiB (268,674 bytes)"),
    ("bytes", 5 * 1024**2, "5.0 MiB (5,242,880 bytes)"),
    ("ratio", 0.27, "0.27×"),
    ("percent", "n/a", "n/a"),  # the wrong kind of value falls back to text
    ("float3", float("nan"), "nan"),
    ("ratio", float("inf"), "inf"),
    ("auto", 66817, "66,817"),
    ("auto", 0.123456, "0.1235"),
    ("auto", 268674.0, "268,674"),
]


@pytest.mark.parametrize("fmt, value, text", FORMAT_CASES, ids=[f"{f}:{v!r}" for f, v, _ in FORMAT_CASES])
def test_format_value(fmt, value, text):
    assert format_value(value, fmt) == text


@pytest.mark.parametrize(
    "fmt, measured, text",
    [
        ("percent", 0.031, "3.1%"),
        ("bytes", 268674, "262.4 KiB (268,674 bytes)"),
        ("ratio", 0.27, "0.27×"),
        ("int", 66817, "66,817"),
        ("float3", 0.0312, "0.031"),
        ("text", "dynamic", "dynamic"),
    ],
)
def test_check_part_texts_use_the_part_format(fmt, measured, text):
    part = one_part(measured, op="!=", value="never", format=fmt)
    assert part["measured_text"] == text
    assert part["measured"] == measured  # the raw value is kept too


def test_check_in_threshold_text_lists_the_choices():
    part = one_part("fp32", op="in", value=["dynamic", "static_qdq"])
    assert part["threshold_text"] == "dynamic, static_qdq"
    assert part["message"] == "measured fp32, expected one of dynamic, static_qdq"


# (template, rendered) for measured m.x = 0.031 judged <= 0.012 as percent
TEMPLATE_CASES = [
    ("drop {measured}, allowed {threshold}", "drop 3.1%, allowed 1.2%"),
    ("{name}: {measured} {op} {threshold}?", "p: 3.1% ≤ 1.2%?"),
    ("raw {measured:float3}", "raw 0.031"),
    ("params {m.y}", "params 66,817"),
    ("params {m.y:bytes}", "params 65.3 KiB (66,817 bytes)"),
    ("z {m.z:percent}", "z 3.1%"),
    ("tolerance {tolerances.dyn.drop_max:percent}", "tolerance 1.2%"),
    ("{{measured}} stays literal", "{measured} stays literal"),
    ("no placeholders", "no placeholders"),
    ("a dict: {{'fp32': {{...}}, 'int8': {{...}}}}.", "a dict: {'fp32': {...}, 'int8': {...}}."),
    ("drop {m.z:pp}", "drop 3.1 pp"),
    # a sentence with a value missing is left out: no "?" stands in for a number
    ("Try again. Your model has {m.nope:int} parameters.", "Try again."),
    ("Drop {measured}! Params {nothing.here}. Allowed {threshold}.", "Drop 3.1%! Allowed 1.2%."),
]


@pytest.mark.parametrize("template, rendered", TEMPLATE_CASES, ids=[t for t, _ in TEMPLATE_CASES])
def test_check_message_template(template, rendered):
    part = one_part(0.031, op="<=", tolerance="dyn.drop_max", format="percent", message=template, hint=template)
    assert part["message"] == rendered
    assert part["hint"] == rendered


def test_check_template_with_every_sentence_missing_falls_back():
    part = one_part(
        0.031,
        op="<=",
        tolerance="dyn.drop_max",
        format="percent",
        message="missing {m.nope} and {nothing.here}",
        hint="Your model has {m.nope} parameters.",
    )
    assert part["message"] == "measured 3.1%, expected ≤ 1.2%"
    assert part["hint"] == ""
    assert "?" not in part["message"]


def test_check_pp_format_names_percentage_points():
    part = one_part(0.126, op="<=", value=0.012, format="pp")
    assert (part["measured_text"], part["threshold_text"]) == ("12.6 pp", "1.2 pp")


def test_check_default_message_names_measured_and_threshold():
    part = one_part(0.031, op="<=", tolerance="dyn.drop_max", format="percent")
    assert part["message"] == "measured 3.1%, expected ≤ 1.2%"
    assert part["hint"] == ""


# ── lookup ─────────────────────────────────────────────────────────────────────────────────────

DATA = {
    "reported": {"fields": {"fp32.size_bytes": {"ok": True}, "fp32": {"other": 1}}},
    "models": {
        "int8_qdq": {"error": "artifacts/int8_qdq.onnx is missing"},
        "fp32": {"range": [-1.6, 2.5], "accuracy": None, "nested": {"error": "ORT timed out"}},
    },
    "execution": {"reason": None, "status": "completed"},
}


@pytest.mark.parametrize(
    "path, value, reason",
    [
        ("reported.fields.fp32.size_bytes.ok", True, None),  # a key with dots in it
        ("reported.fields.fp32.other", 1, None),
        ("models.fp32.range.0", -1.6, None),  # a list index
        ("models.fp32.range.-1", 2.5, None),
        ("models.fp32.range.2", None, "measurement missing: models.fp32.range.2"),
        ("models.int8_qdq.accuracy", None, "artifacts/int8_qdq.onnx is missing"),  # error on the way
        ("models.int8_qdq", None, "artifacts/int8_qdq.onnx is missing"),  # error at the end
        ("models.fp32.nested", None, "ORT timed out"),
        ("models.fp32.accuracy", None, "measurement missing: models.fp32.accuracy"),  # null
        ("models.fp32.latency", None, "measurement missing: models.fp32.latency"),
        ("execution.status.deeper", None, "measurement missing: execution.status.deeper"),
        ("execution.status", "completed", None),
    ],
)
def test_lookup(path, value, reason):
    assert lookup(DATA, path) == (value, reason)


def test_check_measurement_from_numpy_is_made_plain():
    np = pytest.importorskip("numpy")
    part = one_part(np.float32(0.011), op="<=", tolerance="dyn.drop_max")
    assert part["passed"] is True and type(part["measured"]) is float
    part = one_part(np.array([1, 2], dtype=np.int64), op="==", value=[1, 2])
    assert part["passed"] is True and part["measured"] == [1, 2] and type(part["measured"][0]) is int
    part = one_part(np.bool_(True), op="is_true")
    assert part["passed"] is True


def test_check_nan_threshold_text_and_json_safety():
    part = one_part(float("nan"), op="<=", tolerance="dyn.drop_max", format="percent")
    assert part["passed"] is False and part["measured_text"] == "nan" and math.isnan(part["measured"])


def test_an_absent_field_is_explained_by_its_sibling_error():
    from autograder.dotted import lookup

    section = {
        "models": {
            "int8_qdq": {
                "classification": "static_qdq",
                "comparison_error": "not compared with the fp32 model: artifacts/fp32.onnx is missing",
                "first_error": {"cell": 3},
            }
        }
    }
    value, reason = lookup(section, "models.int8_qdq.accuracy_drop")
    assert value is None
    assert reason == "not compared with the fp32 model: artifacts/fp32.onnx is missing"
    assert lookup({"execution": {"first_error": None}}, "execution.nope")[1] == "measurement missing: execution.nope"
