"""A part's ``expected``: the threshold in the lesson's words, in place of internal values (an
``in`` list such as ["X_train", "undetermined"] read as "one of X_train, undetermined")."""

from __future__ import annotations

import pytest

from autograder.contracts import validate
from autograder.errors import AssignmentError
from autograder.judge import judge


def _rubric(**part) -> dict:
    base = {"name": "calibrated on training rows", "measure": "m.source", "op": "in", "points": 1}
    base["value"] = ["X_train", "undetermined"]
    return {"assignment": "t", "checks": [{"id": "c", "title": "c", "points": 1, "parts": [{**base, **part}]}]}


@pytest.mark.parametrize("source, passed", [("X_train", True), ("X_test", False)])
def test_the_threshold_reads_in_the_lessons_words(source, passed):
    grade = judge(
        _rubric(expected="rows of X_train", message="not {threshold}: {measured}"), {}, {"m": {"source": source}}
    )
    validate("grade", grade)
    part = grade["checks"][0]["parts"][0]
    assert part["passed"] is passed and part["threshold_text"] == "rows of X_train"
    assert part["message"] == f"not rows of X_train: {source}"
    assert judge(_rubric(), {}, {"m": {"source": source}})["checks"][0]["parts"][0]["threshold_text"] == (
        "X_train, undetermined"
    ), "without it, the values"


def test_an_empty_expected_is_refused_as_a_rubric_mistake():
    with pytest.raises(AssignmentError):
        judge(_rubric(expected=""), {}, {"m": {"source": "X_train"}})
