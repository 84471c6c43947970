"""gradebook.csv's ``outcome`` column: what happened to each submission, in an instructor's words."""

from __future__ import annotations

import csv
import io

import pytest

from autograder.report.gradebook import OUTCOMES, gradebook_csv, outcome

ROWS = [
    # (status, attempted, outcome)
    ("ok", True, "graded"),
    ("ok", False, "not attempted"),
    ("timeout", True, "timed out"),
    ("kernel_died", True, "kernel died"),
    ("unreadable", True, "unreadable"),
    ("grader_error", True, "grader failure"),
    ("sandbox_error", True, "grader failure"),
    ("startup_failed", True, "grader failure"),
    ("worker_lost", True, "grader failure"),
    ("not_graded", True, "not graded"),
]


@pytest.mark.parametrize("status, attempted, expected", ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_outcome_says_what_happened(status, attempted, expected):
    row = {"name": "s", "score": 0.0, "max": 100.0, "status": status, "attempted": attempted, "checks": {}}
    assert outcome(row) == expected
    assert expected in OUTCOMES
    text = gradebook_csv([row], ["quantize"])
    (parsed,) = csv.DictReader(io.StringIO(text))
    assert parsed["outcome"] == expected and parsed["status"] == status


def test_every_outcome_is_reachable():
    assert {r[2] for r in ROWS} == set(OUTCOMES)
