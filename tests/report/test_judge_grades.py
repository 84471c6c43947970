"""The judge on a realistic rubric: full marks, partial credit, missing and errored measurements,
``requires``, manual items, and purity."""

from __future__ import annotations

import copy
import json

import pytest
from judge_report_fixtures import MEASUREMENTS, RUBRIC, TOLERANCES, check, failing_measurements, part, with_values

from autograder.contracts import validate
from autograder.judge import judge


def test_grade_full_marks_for_a_good_submission():
    grade = judge(RUBRIC, TOLERANCES, MEASUREMENTS)
    failed = [(c["id"], p["name"], p["message"]) for c in grade["checks"] for p in c["parts"] if not p["passed"]]
    assert failed == []
    assert grade["score"] == grade["max_score"] == 60.0
    assert grade["assignment"] == "07-quantization"
    assert [c["id"] for c in grade["checks"]] == [c["id"] for c in RUBRIC["checks"]]
    assert all(c["passed"] and c["score"] == c["max_score"] for c in grade["checks"])


@pytest.mark.parametrize(
    "measurements",
    [MEASUREMENTS, {}, {"error": "not a notebook"}, failing_measurements()],
    ids=["good", "empty", "errored", "failing"],
)
def test_grade_fits_the_grade_schema(measurements):
    grade = judge(RUBRIC, TOLERANCES, measurements)
    validate("grade", grade)
    json.dumps(grade, allow_nan=False)  # plain JSON


def test_grade_partial_credit_is_the_sum_of_passed_parts():
    grade = judge(RUBRIC, TOLERANCES, failing_measurements())
    dyn = check(grade, "dynamic_model")
    assert dyn["score"] == 10.0 and dyn["max_score"] == 15.0 and dyn["passed"] is False
    quantize = check(grade, "quantize")
    assert quantize["score"] == 2.0 and quantize["passed"] is False
    assert (
        part(grade, "quantize", "agrees")["message"] == "not all of 40 cases agree (not ≥ 100.0%), expected 100.0%"
    )  # leak_budget: no count
    assert grade["score"] == sum(c["score"] for c in grade["checks"]) == 25.0
    assert grade["max_score"] == 60.0


def test_grade_errored_section_fails_every_dependent_part_with_its_reason():
    grade = judge(RUBRIC, TOLERANCES, failing_measurements())
    reason = "artifacts/int8_qdq.onnx is missing: the notebook did not write it"
    static = check(grade, "static_model")
    assert static["score"] == 0 and static["passed"] is False
    assert [p["reason"] for p in static["parts"]] == [reason] * 3
    assert all(p["measured"] is None and p["message"] == reason for p in static["parts"])
    # a part in another check that measures the same model gets the same reason
    assert part(grade, "size", "static size")["reason"] == reason
    assert part(grade, "size", "dynamic size")["passed"] is True


def test_grade_missing_measurement_gives_a_reason_not_an_exception():
    measurements = with_values(MEASUREMENTS, functions={})
    grade = judge(RUBRIC, TOLERANCES, measurements)
    agrees = part(grade, "quantize", "agrees")
    assert agrees["passed"] is False and agrees["score"] == 0
    assert agrees["reason"] == "measurement missing: functions.quantize.agree_share"


@pytest.mark.parametrize("measurements", [{}, None, [], "not a dict"])
def test_grade_from_no_measurements_is_a_zero_with_reasons(measurements):
    grade = judge(RUBRIC, TOLERANCES, measurements)
    assert grade["score"] == 0 and grade["max_score"] == 60
    assert all(p["reason"] for c in grade["checks"] for p in c["parts"])
    assert grade["assignment"] == "unknown"


def test_grade_requires_blocks_every_part_even_ones_that_would_pass():
    rubric = copy.deepcopy(RUBRIC)
    dyn = next(c for c in rubric["checks"] if c["id"] == "dynamic_model")
    dyn["requires"] = ["models.fp32.interface_ok", "functions.probe_report"]
    grade = judge(rubric, TOLERANCES, MEASUREMENTS)
    parts = check(grade, "dynamic_model")["parts"]
    assert [p["passed"] for p in parts] == [False, False, False]
    assert {p["reason"] for p in parts} == {"measurement missing: functions.probe_report"}


def test_grade_requires_reports_the_section_error():
    measurements = with_values(MEASUREMENTS, models__int8_dynamic={"error": "int8_dynamic.onnx has external data"})
    grade = judge(RUBRIC, TOLERANCES, measurements)
    assert {p["reason"] for p in check(grade, "dynamic_model")["parts"]} == {"int8_dynamic.onnx has external data"}


def test_grade_requires_satisfied_changes_nothing():
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["requires"] = "functions.quantize"
    assert judge(rubric, TOLERANCES, MEASUREMENTS) == judge(RUBRIC, TOLERANCES, MEASUREMENTS)


def test_grade_check_with_zero_point_part_still_needs_it_to_pass():
    rubric = {
        "checks": [
            {
                "id": "c",
                "title": "C",
                "points": 3,
                "parts": [
                    {"name": "scored", "measure": "a", "op": "==", "value": 1, "points": 3},
                    {"name": "informational", "measure": "b", "op": "==", "value": 1, "points": 0},
                ],
            }
        ]
    }
    grade = judge(rubric, {}, {"a": 1, "b": 2})
    assert grade["checks"][0]["score"] == 3 and grade["checks"][0]["passed"] is False


def test_grade_copies_manual_items():
    grade = judge(RUBRIC, TOLERANCES, MEASUREMENTS)
    assert grade["manual"] == [{"id": "reflection", "title": "Reflection on edge drift", "points": 0}]
    assert grade["manual"][0] is not RUBRIC["manual"][0]


def test_grade_assignment_id_from_rubric_wins():
    rubric = {**RUBRIC, "assignment": "07-quantization-fall"}
    assert judge(rubric, TOLERANCES, MEASUREMENTS)["assignment"] == "07-quantization-fall"


def test_grade_fractional_points_sum_exactly():
    parts = [{"name": f"p{i}", "measure": "a", "op": "is_true", "points": 0.1} for i in range(3)]
    rubric = {"checks": [{"id": "c", "title": "C", "points": 0.3, "parts": parts}]}
    grade = judge(rubric, {}, {"a": True})
    assert grade["score"] == grade["max_score"] == 0.3


# ── purity ─────────────────────────────────────────────────────────────────────────────────────


def test_judge_is_pure_same_input_same_output_inputs_untouched():
    inputs = (RUBRIC, TOLERANCES, failing_measurements())
    before = copy.deepcopy(inputs)
    first = judge(*inputs)
    second = judge(*inputs)
    assert first == second
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert inputs == before


def test_judge_output_shares_no_objects_with_its_inputs():
    measurements = copy.deepcopy(MEASUREMENTS)
    rubric = copy.deepcopy(RUBRIC)
    grade = judge(rubric, TOLERANCES, measurements)
    part(grade, "dynamic_model", "int8 weights")["measured"].append("float32")
    part(grade, "dynamic_model", "int8 weights")["threshold"].append("uint8")
    grade["manual"][0]["title"] = "changed"
    assert measurements == MEASUREMENTS and rubric == RUBRIC
