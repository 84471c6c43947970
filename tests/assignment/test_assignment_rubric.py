"""rubric.toml of assignment 07: the contract's check ids, 100 points, known tolerances.

Its paths into measurements.json are checked for every assignment in test_rubric_paths.py."""

from __future__ import annotations

import pytest

from autograder.dotted import lookup
from autograder.grade_text import placeholders
from autograder.judge import judge
from autograder.rubric import validate_rubric

CONTRACT_IDS = [
    "quantize",
    "dequantize",
    "choose_qparams",
    "fp32_model",
    "dynamic_model",
    "static_model",
    "size",
    "reported_results",
    "execution",
]


@pytest.fixture(scope="module")
def rubric(assignment07):
    return assignment07.rubric()


@pytest.fixture(scope="module")
def tolerances(assignment07):
    return assignment07.tolerances()


def _parts(rubric):
    for check in rubric["checks"]:
        for part in check["parts"]:
            yield check, part


def test_check_ids_are_the_contracts_in_order(rubric):
    assert [c["id"] for c in rubric["checks"]] == CONTRACT_IDS


def test_points_total_100_and_each_check_adds_up(rubric):
    assert sum(c["points"] for c in rubric["checks"]) == 100
    for check in rubric["checks"]:
        assert check["points"] == sum(p["points"] for p in check["parts"]), check["id"]
        assert len(check["parts"]) >= 2, f"{check['id']}: split a check into parts for partial credit"


def test_reflection_is_a_manual_item_worth_zero_autograded_points(rubric):
    assert [(m["id"], m["points"]) for m in rubric["manual"]] == [("reflection", 0)]


def test_the_judge_accepts_the_rubric_with_these_tolerances(rubric, tolerances):
    validate_rubric(rubric, tolerances)  # raises AssignmentError on any unknown op, key or tolerance


def test_template_placeholders_name_tolerances_that_exist(rubric, tolerances):
    for check, part in _parts(rubric):
        for key in ("message", "hint"):
            for name in placeholders(part.get(key, "")):
                if name.startswith("tolerances."):
                    assert lookup(tolerances, name[len("tolerances.") :])[1] is None, f"{check['id']}: {name}"


def test_every_tolerance_key_exists_and_is_derived(rubric, tolerances):
    for check, part in _parts(rubric):
        if "tolerance" not in part:
            continue
        entry, reason = lookup(tolerances, part["tolerance"])
        assert reason is None, f"{check['id']}: tolerance {part['tolerance']} missing from tolerances.toml"
        assert isinstance(entry, dict) and entry.get("measure") == part["measure"], (
            f"{part['tolerance']} was derived from {entry.get('measure')!r}, the rubric measures {part['measure']!r}"
        )


def test_every_part_has_a_message_and_a_hint_that_does_not_name_the_solution(rubric):
    for check, part in _parts(rubric):
        assert part.get("message") and part.get("hint"), f"{check['id']} / {part['name']}"
        for giveaway in ("np.rint(np.asarray", "astype(np.int32) - np.int32", "weight_type=QuantType.QInt8"):
            assert giveaway not in part["hint"], f"{check['id']} / {part['name']}: the hint gives the code away"


def test_a_perfect_measurement_set_scores_100_and_an_empty_one_0(rubric, tolerances, assignment07, project_root):
    empty = judge(rubric, tolerances, {})
    assert empty["score"] == 0 and all(p["reason"] for c in empty["checks"] for p in c["parts"])
