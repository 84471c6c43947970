"""Every assignment under assignments/ against every conformance check (the package's
``autograder.authoring.conformance``, what ``autograder check-assignment ID`` runs; parametrized by
conformancekit.py), with no per-lesson test code: a new folder is tested by being there. The checks
that grade (reference, untouched template, examples, rubric paths) carry the ``kernel`` and ``slow``
markers; each lesson's examples are graded once per run, as one batch shared by the xdist workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.assignment import assignment_ids
from conformancekit import CHECKS, ConformanceFailure, Lesson, parametrize_with_checks, problems

ROOT = Path(__file__).resolve().parents[2]


@parametrize_with_checks(ROOT)
def test_conformance(lessons, lesson_id, conformance_check):
    conformance_check(lessons(ROOT, lesson_id))


def test_the_suite_covers_every_folder_with_an_assignment_toml(tmp_path):
    (tmp_path / "assignments" / "b-two").mkdir(parents=True)
    (tmp_path / "assignments" / "b-two" / "assignment.toml").write_text('id = "b-two"\n')
    (tmp_path / "assignments" / "a-one").mkdir()
    (tmp_path / "assignments" / "a-one" / "assignment.toml").write_text('id = "a-one"\n')
    (tmp_path / "assignments" / "notes").mkdir()  # no assignment.toml: not a lesson
    assert assignment_ids(tmp_path) == ["a-one", "b-two"]
    assert len(assignment_ids(ROOT)) >= 2
    mark = parametrize_with_checks(tmp_path)
    params = mark.args[1]
    assert len(params) == 2 * len(CHECKS)
    for p in params:
        kinds = {m.name for m in p.marks}
        assert kinds == ({"kernel", "slow"} if p.values[1].graded else set()), p.id
    assert [p.id for p in params[: len(CHECKS)]] == [f"a-one-{c.name.removeprefix('check_')}" for c in CHECKS]


def test_a_lesson_without_its_table_fails_with_the_path(tmp_path):
    lesson = Lesson(tmp_path, "x-one", tmp_path / "work")
    with pytest.raises(ConformanceFailure, match="reference/x-one/expected_examples.toml"):
        _ = lesson.table


def test_problems_sees_a_point_lost_outside_the_mistakes_check():
    grade = {
        "score": 97,
        "max_score": 100,
        "checks": [
            {
                "id": "a",
                "score": 8,
                "max_score": 10,
                "parts": [{"name": "p", "passed": False, "message": "m", "reason": None}],
            },
            {
                "id": "b",
                "score": 4,
                "max_score": 5,
                "parts": [{"name": "q", "passed": False, "message": "n", "reason": None}],
            },
        ],
    }
    assert problems({"loses": "a", "parts": ["p"]}, grade)
    assert problems({"loses": "a", "scores": {"a": 8, "b": 5}}, grade)
    assert problems({"full_marks": True}, grade)
    assert problems({"score": 98}, grade)
    assert not problems({"max_score": 97}, grade)
    assert not problems({"loses": "a", "parts": ["p"], "score": 97}, {**grade, "checks": grade["checks"][:1]})
