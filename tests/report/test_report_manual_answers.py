"""A hand-graded question's answer, read by the bounded reader (autograder/manual_answers.py): the
cells of its BEGIN/END QUESTION block only, escaped nowhere but bounded and cleaned, and as the
0-point Gradescope test that puts it beside the results for Gradescope's manual grading."""

from __future__ import annotations

import json
from pathlib import Path

from autograder.assignment import load_assignment
from autograder.manual_answers import NO_QUESTION, answer_tests, answers_of

ITEM = {"id": "reflection", "title": "Reflection", "points": 0, "question": "Question 7 (reflection"}


def _notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"cell_type": kind, "metadata": {}, "source": text} for kind, text in cells],
    }
    path.write_text(json.dumps(nb))
    return path


def test_the_answer_is_the_block_of_its_question_only(tmp_path):
    nb = _notebook(
        tmp_path / "a.ipynb",
        [
            ("markdown", "<!-- BEGIN QUESTION -->\n**Question 6.** Another one."),
            ("markdown", "not this answer"),
            ("markdown", "<!-- BEGIN QUESTION -->\n\n**Question 7 (reflection).** Why?"),
            ("markdown", "Because the range was fixed.\x1b[31m"),
            ("code", "print('and a cell of code')"),
            ("markdown", "<!-- END QUESTION -->\nafter"),
        ],
    )
    answer = answers_of(nb, [ITEM])["reflection"]
    assert "Because the range was fixed." in answer and "and a cell of code" in answer
    assert "not this answer" not in answer and "after" not in answer and "\x1b" not in answer


def test_no_question_and_an_unreadable_notebook_say_so(tmp_path):
    assert answers_of(_notebook(tmp_path / "b.ipynb", [("code", "x = 1")]), [ITEM]) == {"reflection": NO_QUESTION}
    broken = tmp_path / "c.ipynb"
    broken.write_text("{not json")
    assert answers_of(broken, [ITEM])["reflection"].startswith("(the notebook could not be read")
    assert answers_of(broken, [{**ITEM, "question": ""}]) == {}, "an item without a question is not looked for"


def test_lesson_07_puts_the_reflection_beside_the_results(project_root, results_validator):
    rubric = load_assignment("07-quantization").rubric()
    solution = project_root / "reference" / "07-quantization" / "solution.ipynb"
    tests = answer_tests(solution, rubric)
    assert [t["name"] for t in tests] == [rubric["manual"][0]["title"] + " (graded by hand)"]
    assert tests[0]["score"] == tests[0]["max_score"] == 0.0 and tests[0]["tags"] == ["reflection"]
    assert "calibrat" in tests[0]["output"], tests[0]["output"][:300]
    results_validator({"score": 0.0, "tests": tests})
