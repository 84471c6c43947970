"""End to end, through the real jail and ONNX Runtime: every bundled example gets exactly the
grade its first cell promises.

``tests/assignment/expected_examples.toml`` maps each example to the one check it must lose
points at and the parts of it that fail (or to full marks / a low score). Each example is graded once per module.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from autograder.pipeline import grade_notebook

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"
EXPECTED = tomllib.loads((ROOT / "tests" / "assignment" / "expected_examples.toml").read_text())

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(assignment07, tmp_path_factory):
    cache: dict[str, tuple[dict, Path]] = {}

    def grade(name: str) -> tuple[dict, Path]:
        if name not in cache:
            out = tmp_path_factory.mktemp(name.replace(".", "_"))
            cache[name] = (grade_notebook(EXAMPLES / name, assignment07, out), out)
        return cache[name]

    return grade


def _scores(grade: dict) -> dict[str, float]:
    return {c["id"]: c["score"] for c in grade["checks"]}


def _max(grade: dict) -> dict[str, float]:
    return {c["id"]: c["max_score"] for c in grade["checks"]}


def test_reference_solution_gets_every_autograded_point(graded, results_validator):
    grade, out = graded("reference.ipynb")
    failed = {c["id"]: [p["message"] for p in c["parts"] if not p["passed"]] for c in grade["checks"] if not c["passed"]}
    assert grade["score"] == grade["max_score"] == 100, f"reference lost points: {failed}"
    results = json.loads((out / "results.json").read_text())
    results_validator(results)
    assert results["score"] == 100
    assert {t["tags"][0] for t in results["tests"] if t["tags"] != ["figure"]} == set(_scores(grade))


def test_untouched_notebook_gets_a_low_score_and_a_reason_for_every_check(graded, results_validator):
    grade, out = graded("untouched.ipynb")
    results = json.loads((out / "results.json").read_text())
    results_validator(results)
    assert grade["score"] <= EXPECTED["untouched.ipynb"]["max_score"]
    for check in grade["checks"]:
        if check["passed"]:
            continue
        for part in check["parts"]:
            if not part["passed"]:
                assert (part["message"] or part["reason"]), f"{check['id']}: a failed part without a message"
    feedback = (out / "feedback.md").read_text()
    assert "quantize" in feedback


MISTAKES = sorted(k for k, v in EXPECTED.items() if "loses" in v)


@pytest.mark.parametrize("example", MISTAKES)
def test_each_mistake_loses_points_at_its_check_and_nowhere_else(graded, example):
    expected_check = EXPECTED[example]["loses"]
    grade, _ = graded(example)
    scores, maxima = _scores(grade), _max(grade)
    lost = {cid for cid in scores if scores[cid] < maxima[cid]}
    details = {c["id"]: [p["message"] or p["reason"] for p in c["parts"] if not p["passed"]]
               for c in grade["checks"] if c["id"] in lost}
    assert lost == {expected_check}, f"{example}: lost points at {details}, expected only at {expected_check}"
    failed = sorted(p["name"] for c in grade["checks"] for p in c["parts"] if not p["passed"])
    assert failed == sorted(EXPECTED[example]["parts"]), f"{example}: failed parts {failed}"
    assert grade["score"] == EXPECTED[example]["score"], f"{example}: score {grade['score']}"


def test_grading_is_reproducible(graded, assignment07, tmp_path):
    first, _ = graded("reference.ipynb")
    again = [grade_notebook(EXAMPLES / "reference.ipynb", assignment07, tmp_path / f"run{i}") for i in range(2)]
    for g in again:
        assert _scores(g) == _scores(first)
        assert [[p["passed"] for p in c["parts"]] for c in g["checks"]] == \
               [[p["passed"] for p in c["parts"]] for c in first["checks"]]


def test_untouched_notebook_gets_one_short_paragraph(graded):
    """Issue 13: not ~35 "not measured" lines each with a hint, but why, what to do, the checks in one line."""
    grade, out = graded("untouched.ipynb")
    feedback = (out / "feedback.md").read_text()
    assert "## Nothing to grade yet" in feedback and "## Checks" not in feedback
    assert "Hint" not in feedback and "not measured" not in feedback
    assert "artifacts/fp32.onnx is missing" in feedback
    line = next(l for l in feedback.splitlines() if l.startswith("Checks with nothing to grade yet"))
    assert "The dynamic int8 model" in line and "quantize" in line
    assert len(feedback) < 3000, len(feedback)
    results = json.loads((out / "results.json").read_text())
    assert "Nothing to grade yet" in results["output"]
    assert all("Hint" not in t["output"] for t in results["tests"])


def test_error_in_last_cell_is_named_once_and_truly(graded):
    """Issue 13: "Cell 41 of 20 (counting markdown cells too)" next to "cell 40", and "the cells after
    it still ran" about the last cell."""
    grade, out = graded("error_in_last_cell.ipynb")
    feedback = (out / "feedback.md").read_text()
    assert ("- Code cell 20 (cell 41 of the notebook) raised `KeyError: 'latency'` at line 6. "
            "It is your notebook's last code cell.") in feedback      # placed by cell and line
    assert "cells after it still ran" not in feedback and "of 20" not in feedback
    check = next(c for c in grade["checks"] if c["id"] == "execution")
    part = next(p for p in check["parts"] if not p["passed"])
    assert part["message"] == ("1 cell(s) raised an error; the first: code cell 20 (cell 41 of the notebook), "
                               "KeyError: 'latency' (line 6)")


def test_function_failures_name_the_students_own_error_without_the_hidden_input(graded):
    """Through the real kernel and probe: the exception of the student's code and the call's
    argument types reach the student (issue 13); an import that replaced quantize is named."""
    grade, out = graded("quantize_loop_uint8_zero_point.ipynb")
    part = next(p for c in grade["checks"] for p in c["parts"] if p["name"] == "saturates outside the range")
    assert "raised OverflowError: Python integer <n> out of bounds for uint8" in part["message"]
    assert "zero_point a numpy.uint8 scalar" in part["message"]
    results = (out / "results.json").read_text()
    assert "Python integer &lt;n&gt; out of bounds for uint8" in results   # escaped for Gradescope's Markdown
    grade, _ = graded("quantize_shadowed_by_import.ipynb")
    quantize = next(c for c in grade["checks"] if c["id"] == "quantize")
    assert quantize["score"] == 0
    assert all("quantize is not the function defined in the notebook: it is quantize(model_input, model_output, "
               "quant_config) from module onnxruntime.quantization.quantize" in p["message"] for p in quantize["parts"])
