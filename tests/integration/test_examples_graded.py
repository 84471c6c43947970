"""End to end, through the real jail and ONNX Runtime: every bundled example of every assignment
gets exactly the grade its table promises.

Each assignment ``<NN>-<name>`` has a table ``tests/assignment/expected_examples_<NN>.toml``: for a
mistake, the one check it must lose points at (``loses``), and, as the table states them, the parts
that fail (``parts``), the total (``score``) or every check's points (``scores``); a mistake that
costs a point anywhere else fails here. Valid examples state ``full_marks`` (or the checks'
``scores``), the untouched notebook a ``max_score``. Each example is graded once per module.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from autograder.assignment import load_assignment
from autograder.pipeline import grade_notebook
from needs import needs

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "assignments").iterdir() if (p / "assignment.toml").is_file())


def table_path(assignment_id: str) -> Path:
    path = ROOT / "reference" / assignment_id / "expected_examples.toml"
    if path.is_file():
        return path
    return ROOT / "tests" / "assignment" / f"expected_examples_{assignment_id.split('-')[0]}.toml"  # 03's, 07's on this branch


TABLES = {a: tomllib.loads(table_path(a).read_text()) for a in ASSIGNMENTS if table_path(a).is_file()}
ROWS = [(a, name) for a in ASSIGNMENTS for name in sorted(TABLES.get(a, {}))]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"
EXPECTED = TABLES["07-quantization"]


@pytest.fixture(scope="module")
@needs("kernel")
def graded_any(tmp_path_factory):
    cache: dict[tuple[str, str], tuple[dict, Path]] = {}
    loaded: dict = {}

    def grade(assignment_id: str, name: str) -> tuple[dict, Path]:
        if (assignment_id, name) not in cache:
            assignment = loaded.setdefault(assignment_id, load_assignment(assignment_id, ROOT))
            out = tmp_path_factory.mktemp(f"{assignment_id[:2]}_{name.replace('.', '_')}")
            cache[(assignment_id, name)] = (grade_notebook(ROOT / "assignments" / assignment_id / "examples" / name,
                                                           assignment, out), out)
        return cache[(assignment_id, name)]

    return grade


@pytest.fixture(scope="module")
def graded(graded_any):
    return lambda name: graded_any("07-quantization", name)


def _scores(grade: dict) -> dict[str, float]:
    return {c["id"]: c["score"] for c in grade["checks"]}


def _max(grade: dict) -> dict[str, float]:
    return {c["id"]: c["max_score"] for c in grade["checks"]}


@pytest.mark.slow
def test_reference_solution_gets_every_autograded_point(graded, results_validator):
    grade, out = graded("reference.ipynb")
    failed = {c["id"]: [p["message"] for p in c["parts"] if not p["passed"]] for c in grade["checks"] if not c["passed"]}
    assert grade["score"] == grade["max_score"] == 100, f"reference lost points: {failed}"
    results = json.loads((out / "results.json").read_text())
    results_validator(results)
    assert results["score"] == 100
    assert {t["tags"][0] for t in results["tests"] if t["tags"] != ["figure"]} == set(_scores(grade))


@pytest.mark.slow
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


def problems(expected: dict, grade: dict) -> list[str]:
    """How ``grade`` differs from a row of an assignment's table (empty: as expected)."""
    scores, maxima = _scores(grade), _max(grade)
    lost = {cid for cid in scores if scores[cid] < maxima[cid]}
    details = {c["id"]: [p["message"] or p["reason"] for p in c["parts"] if not p["passed"]]
               for c in grade["checks"] if c["id"] in lost}
    out = []
    if expected.get("full_marks") and (lost or grade["score"] != grade["max_score"]):
        out.append(f"expected full marks, lost points at {details}")
    if "max_score" in expected and not grade["score"] <= expected["max_score"]:
        out.append(f"expected at most {expected['max_score']}, got {grade['score']}")
    if "loses" in expected and lost != {expected["loses"]}:
        out.append(f"lost points at {details}, expected only at {expected['loses']}")
    if "parts" in expected:
        failed = sorted(p["name"] for c in grade["checks"] for p in c["parts"] if not p["passed"])
        if failed != sorted(expected["parts"]):
            out.append(f"failed parts {failed}, expected {sorted(expected['parts'])}")
    if "score" in expected and grade["score"] != expected["score"]:
        out.append(f"score {grade['score']}, expected {expected['score']}")
    if "scores" in expected and scores != expected["scores"]:
        out.append(f"scores {scores}, expected {expected['scores']}")
    return out


def test_every_assignment_has_a_table_of_exactly_its_examples():
    for a in ASSIGNMENTS:
        assert a in TABLES, f"{a} has no {table_path(a).name}"
        assert sorted(TABLES[a]) == sorted(p.name for p in (ROOT / "assignments" / a / "examples").glob("*.ipynb")), a
        mistakes = [n for n, row in TABLES[a].items() if "loses" in row]
        assert mistakes, f"{a}: a table without a mistake tests nothing"


def test_problems_sees_a_point_lost_outside_the_mistakes_check():
    grade = {"score": 97, "max_score": 100, "checks": [
        {"id": "a", "score": 8, "max_score": 10, "parts": [{"name": "p", "passed": False, "message": "m", "reason": None}]},
        {"id": "b", "score": 4, "max_score": 5, "parts": [{"name": "q", "passed": False, "message": "n", "reason": None}]}]}
    assert problems({"loses": "a", "parts": ["p"]}, grade)
    assert problems({"loses": "a", "scores": {"a": 8, "b": 5}}, grade)
    assert problems({"full_marks": True}, grade)
    assert not problems({"max_score": 97}, grade)


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id, example", ROWS)
def test_each_example_gets_the_grade_its_table_states(graded_any, assignment_id, example):
    """A mistake loses points at its check, at its parts, and nowhere else; a valid example keeps them all."""
    grade, _ = graded_any(assignment_id, example)
    assert not problems(TABLES[assignment_id][example], grade), f"{assignment_id}/{example}: " \
        f"{problems(TABLES[assignment_id][example], grade)}"


@pytest.mark.slow
def test_grading_is_reproducible(graded, assignment07, tmp_path):
    first, _ = graded("reference.ipynb")
    again = [grade_notebook(EXAMPLES / "reference.ipynb", assignment07, tmp_path / f"run{i}") for i in range(2)]
    for g in again:
        assert _scores(g) == _scores(first)
        assert [[p["passed"] for p in c["parts"]] for c in g["checks"]] == \
               [[p["passed"] for p in c["parts"]] for c in first["checks"]]


@pytest.mark.slow
def test_untouched_notebook_gets_one_short_paragraph(graded):
    """Not ~35 "not measured" lines each with a hint, but why, what to do, the checks in one line."""
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


@pytest.mark.slow
def test_error_in_last_cell_is_named_once_and_truly(graded):
    """Not "Cell 41 of 20 (counting markdown cells too)" next to "cell 40", and "the cells after
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


@pytest.mark.slow
def test_function_failures_name_the_students_own_error_without_the_hidden_input(graded):
    """Through the real kernel and probe: the exception of the student's code and the call's
    argument types reach the student; an import that replaced quantize is named."""
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
