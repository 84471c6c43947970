"""Points are evidence of work: how a notebook ran earns points only beside graded work
(autograder/attempt.py, applied by the judge). A table of rubrics and measurements, each with the
score and ``attempted`` flag the rule gives."""

from __future__ import annotations

import pytest

from autograder.attempt import NO_WORK_MESSAGE, nothing_to_grade
from autograder.contracts import validate
from autograder.judge import judge

RAN = {"name": "ran to the end", "measure": "execution.completed", "op": "is_true", "points": 2}
NO_ERROR = {"name": "no cell raised", "measure": "execution.cells_errored", "op": "==", "value": 0, "points": 1}


def _rubric(*, work_visibility: str = "visible", with_work: bool = True) -> dict:
    checks = [{"id": "runs", "title": "The notebook runs", "points": 3, "parts": [RAN, NO_ERROR]}]
    if with_work:
        checks.insert(
            0,
            {
                "id": "work",
                "title": "quantize agrees",
                "points": 7,
                "visibility": work_visibility,
                "parts": [
                    {"name": "agrees", "measure": "functions.agree_share", "op": ">=", "value": 1.0, "points": 7}
                ],
            },
        )
    return {"assignment": "t", "checks": checks}


def _with_hidden() -> dict:
    """A visible part about work that fails (it reads ``functions.missing``) beside a hidden one that passes."""
    rubric = _rubric(work_visibility="hidden")
    visible = {
        "id": "visible_work",
        "title": "dequantize agrees",
        "points": 4,
        "parts": [{"name": "agrees", "measure": "functions.missing", "op": ">=", "value": 1.0, "points": 4}],
    }
    return {**rubric, "checks": [visible, *rubric["checks"]]}


def _measurements(agree: float | None) -> dict:
    m: dict = {"execution": {"completed": True, "cells_errored": 0}}
    if agree is not None:
        m["functions"] = {"agree_share": agree}
    return m


CASES = [
    # (id, rubric, agree share, score, attempted)
    ("work passed: everything counts", _rubric(), 1.0, 10.0, True),
    ("untouched: work failed, ran to the end", _rubric(), 0.0, 0.0, False),
    ("untouched: work not measured at all", _rubric(), None, 0.0, False),
    ("only a hidden part about work passed: hidden checks never decide", _with_hidden(), 1.0, 7.0, False),
    (
        "no visible part about work at all: the rule has nothing to judge",
        _rubric(work_visibility="hidden"),
        0.0,
        3.0,
        True,
    ),
    ("a rubric about running only: the rule has nothing to judge", _rubric(with_work=False), None, 3.0, True),
]


@pytest.mark.parametrize("case_id, rubric, agree, score, attempted", CASES, ids=[c[0] for c in CASES])
def test_running_earns_points_only_beside_graded_work(case_id, rubric, agree, score, attempted):
    grade = judge(rubric, {}, _measurements(agree))
    validate("grade", grade)
    assert grade["score"] == score, case_id
    assert grade.get("attempted", True) is attempted
    assert nothing_to_grade(grade) is (not attempted)
    running = next(c for c in grade["checks"] if c["id"] == "runs")
    if attempted:
        assert running["score"] == 3.0 and running["passed"]
    else:
        assert running["score"] == 0 and not running["passed"]
        assert all(p["message"] == NO_WORK_MESSAGE and p["hint"] == "" for p in running["parts"])


def test_a_part_about_running_that_failed_keeps_its_own_message():
    measurements = {"execution": {"completed": True, "cells_errored": 3}, "functions": {"agree_share": 0.0}}
    grade = judge(_rubric(), {}, measurements)
    parts = {p["name"]: p for c in grade["checks"] for p in c["parts"]}
    assert parts["no cell raised"]["message"] != NO_WORK_MESSAGE  # failed on its own account
    assert parts["ran to the end"]["message"] == NO_WORK_MESSAGE
