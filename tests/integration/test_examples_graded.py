"""End to end, through the real jail and ONNX Runtime: what lesson 07's example submissions tell
the student, beyond their scores. That every example of every lesson gets the grade its table
states (``reference/<id>/expected_examples.toml``), the reference full marks and the untouched
template a low score, is the conformance suite's (tests/conformance/); the examples are graded
once per session, as one batch, and read here through the same ``lessons`` fixture.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.pipeline import grade_notebook

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ID = "07-quantization"
EXAMPLES = ROOT / "assignments" / ID / "examples"


@pytest.fixture(scope="module")
def graded(lessons):
    """``graded(name)`` → (grade, folder of its results.json and feedback.md)."""
    lesson = lessons(ROOT, ID)

    def one(name: str) -> tuple[dict, Path]:
        return lesson.grade_of(name).grade, lesson.workdir / "batch" / Path(name).stem

    return one


def _scores(grade: dict) -> dict[str, float]:
    return {c["id"]: c["score"] for c in grade["checks"]}


def test_grading_is_reproducible(graded, assignment07, tmp_path):
    """The reference graded again, alone, through ``grade`` (the batch graded it beside the other
    examples, two at a time): the same scores and the same parts passed (one more grading proves
    it; a second one, as before, proved nothing more)."""
    first, _ = graded("reference.ipynb")
    again = grade_notebook(EXAMPLES / "reference.ipynb", assignment07, tmp_path / "again")
    assert _scores(again) == _scores(first)
    assert [[p["passed"] for p in c["parts"]] for c in again["checks"]] == [
        [p["passed"] for p in c["parts"]] for c in first["checks"]
    ]


def test_untouched_notebook_gets_one_short_paragraph(graded):
    """Not ~35 "not measured" lines each with a hint, but why, what to do, the checks in one line."""
    grade, out = graded("untouched.ipynb")
    feedback = (out / "feedback.md").read_text()
    assert "## Nothing to grade yet" in feedback and "## Checks" not in feedback
    assert "Hint" not in feedback and "not measured" not in feedback
    assert "artifacts/fp32.onnx is missing" in feedback
    line = next(ln for ln in feedback.splitlines() if ln.startswith("Checks with nothing to grade yet"))
    assert "The dynamic int8 model" in line and "quantize" in line
    assert len(feedback) < 3000, len(feedback)
    results = json.loads((out / "results.json").read_text())
    assert "Nothing to grade yet" in results["output"]
    assert all("Hint" not in t["output"] for t in results["tests"])


def test_error_in_last_cell_is_named_once_and_truly(graded):
    """Not "Cell 41 of 20 (counting markdown cells too)" next to "cell 40", and "the cells after
    it still ran" about the last cell."""
    grade, out = graded("error_in_last_cell.ipynb")
    feedback = (out / "feedback.md").read_text()
    assert (
        "- Code cell 20 (cell 41 of the notebook) raised `KeyError: 'latency'` at line 6. "
        "It is your notebook's last code cell."
    ) in feedback  # placed by cell and line
    assert "cells after it still ran" not in feedback and "of 20" not in feedback
    check = next(c for c in grade["checks"] if c["id"] == "execution")
    part = next(p for p in check["parts"] if not p["passed"])
    assert part["message"] == (
        "1 cell(s) raised an error; the first: code cell 20 (cell 41 of the notebook), KeyError: 'latency' (line 6)"
    )


def test_function_failures_name_the_students_own_error_without_the_hidden_input(graded):
    """Through the real kernel and probe: the exception of the student's code and the call's
    argument types reach the student; an import that replaced quantize is named."""
    grade, out = graded("quantize_loop_uint8_zero_point.ipynb")
    part = next(p for c in grade["checks"] for p in c["parts"] if p["name"] == "saturates outside the range")
    # the exception's type only (leak_budget: no message of a call that held hidden inputs)
    assert "raised OverflowError (the call: " in part["message"] and "out of bounds" not in part["message"]
    assert "zero_point a numpy.uint8 scalar" in part["message"]
    results = (out / "results.json").read_text()
    assert "raised OverflowError (the call: " in results
    grade, _ = graded("quantize_shadowed_by_import.ipynb")
    quantize = next(c for c in grade["checks"] if c["id"] == "quantize")
    assert quantize["score"] == 0
    assert all(
        "quantize is not the function defined in the notebook: it is quantize(model_input, model_output, "
        "quant_config) from module onnxruntime.quantization.quantize" in p["message"]
        for p in quantize["parts"]
    )
