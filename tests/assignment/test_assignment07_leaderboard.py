"""Lesson 07's Gradescope leaderboard (its grading package's hook): the smallest int8 model that
kept its accuracy. The core has no leaderboard of its own."""

from __future__ import annotations

import pytest

MEASUREMENTS = {
    "models": {
        "int8_dynamic": {"size_bytes": 80_000, "accuracy": 0.96},
        "int8_qdq": {"size_bytes": 72_704, "accuracy": 0.955},
    }
}


def grade_of(dynamic_passed: bool = True, static_passed: bool = True) -> dict:
    def check(cid, passed):
        return {
            "id": cid,
            "passed": passed,
            "parts": [{"name": "int8 weights", "passed": True}, {"name": "accuracy drop", "passed": passed}],
        }

    return {"checks": [check("dynamic_model", dynamic_passed), check("static_model", static_passed)]}


@pytest.fixture(scope="module")
def board(assignment07):
    return assignment07.grading.leaderboard


def test_the_smallest_model_that_kept_its_accuracy_is_ranked(board):
    assert board(grade_of(), MEASUREMENTS) == [
        {"name": "Smallest int8 model (KB)", "value": 71.0, "order": "asc"},
        {"name": "int8 accuracy", "value": 0.955},
    ]


def test_a_model_that_lost_accuracy_is_not_ranked(board):
    assert board(grade_of(static_passed=False), MEASUREMENTS)[0]["value"] == round(80_000 / 1024, 1)


def test_nothing_is_ranked_when_no_model_kept_its_accuracy(board):
    assert board(grade_of(False, False), MEASUREMENTS) == []
    assert board(grade_of(), {"models": {"error": "no artifacts"}}) == []
