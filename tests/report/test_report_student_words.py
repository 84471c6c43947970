"""Feedback a student can act on, unit level: each defect fed as execution.json or
measurements, the corrected words asserted. Real notebooks: tests/integration/test_feedback_words_real.py."""

from __future__ import annotations

import copy
import io
import re

import pytest
from judge_report_fixtures import MEASUREMENTS, RUBRIC, TOLERANCES, with_values
from rich.console import Console

from autograder.judge import judge
from autograder.pipeline import _execution_summary
from autograder.report import feedback_markdown
from autograder.report.console import grade_table, print_grade_table
from autograder.report.execution_text import execution_lines
from autograder.report.gradescope_results import results_json
from autograder.attempt import NO_WORK_MESSAGE, nothing_to_grade


def _lines(**execution):
    return "\n".join(execution_lines({"execution": {**MEASUREMENTS["execution"], **execution}}))


# ── one numbering; no sentence that is not true ──────────────────────────────────────────────

ERROR_LAST = {
    "cell": 40,
    "code_cell": 20,
    "where": "code cell 20 (cell 41 of the notebook)",
    "ename": "KeyError",
    "evalue": "'latency'",
    "summary": "KeyError: 'latency'",
}


def test_an_error_in_the_last_code_cell_does_not_say_later_cells_ran():
    text = _lines(cells_total=20, cells_run=20, cells_errored=1, cells_in_notebook=41, first_error=ERROR_LAST)
    assert "- Code cell 20 (cell 41 of the notebook) raised `KeyError: 'latency'`." in text
    assert "It is your notebook's last code cell" in text
    assert "cells after it still ran" not in text and "of 20" not in text


def test_an_error_before_the_last_code_cell_says_later_cells_ran():
    first = {**ERROR_LAST, "cell": 30, "code_cell": 15, "where": "code cell 15 (cell 31 of the notebook)"}
    text = _lines(cells_total=20, cells_run=20, cells_errored=2, first_error=first)
    assert (
        "Code cell 15 (cell 31 of the notebook) raised `KeyError: 'latency'`; 2 cells raised errors in all. "
        "The cells after it still ran"
    ) in text


def test_an_old_record_without_code_numbers_names_the_notebook_position_only():
    text = _lines(cells_total=4, first_error={"cell": 8, "ename": "ValueError", "evalue": "x"})
    assert "- Cell 9 of the notebook raised `ValueError: x`." in text
    assert "of 4" not in text


@pytest.mark.parametrize("run, total, shown", [(1, 1, False), (3, 3, False), (1, 3, True)])
def test_cells_that_did_not_run_are_counted_only_when_some_did_not(run, total, shown):
    text = _lines(status="timeout", reason="the probe ran out of time", cells_run=run, cells_total=total)
    assert ("1 of 3 code cells ran; checks that need the others got no measurement" in text) is shown
    assert ("got no measurement" in text) is shown


def test_an_error_without_a_name_is_not_nonetype():
    first = {"cell": 2, "code_cell": 1, "ename": "NoneType", "evalue": "None"}
    text = _lines(cells_total=3, first_error=first)
    assert "NoneType" not in text
    assert "raised `the kernel reported an error without a name`" in text


def test_another_language_is_named_in_one_line_escaped():
    text = _lines(language="R")
    line = next(ln for ln in text.splitlines() if "language" in ln)
    assert line == (
        "- Your notebook's metadata names the `R` language, but the grader runs every notebook with "
        "Python, so its cells ran as Python code. Write this assignment in Python (in Jupyter: "
        "Kernel › Change kernel › Python 3)."
    )
    hostile = _lines(language="`x` <b>[y](z)")
    assert "`` `x` <b>[y](z) ``" in hostile  # inside a code span: nothing renders


# ── no code, no credit ───────────────────────────────────────────────────────────────────────


def _execution(**kw):
    base = {
        "status": "completed",
        "reason": None,
        "cells_total": 3,
        "cells_run": 3,
        "cells_errored": 0,
        "cells": [],
        "first_error": None,
        "probe": "completed",
        "duration_s": 1.0,
    }
    return _execution_summary({**base, **kw})


@pytest.mark.parametrize("cells_total", [0, 3])
def test_a_notebook_without_code_or_work_earns_nothing_for_running(assignment07, cells_total):
    """No code cell: nothing ran. Code cells that ran but made nothing of the work: running is no work."""
    measurements = {"execution": _execution(cells_total=cells_total, cells_run=cells_total)}
    grade = judge(assignment07.rubric(), assignment07.tolerances(), measurements)
    check = next(c for c in grade["checks"] if c["id"] == "execution")
    assert check["score"] == 0 and grade["score"] == 0
    if not cells_total:
        assert {p["reason"] for p in check["parts"]} == {"the notebook has no code cell, so nothing ran"}
        assert "Your notebook has no code cell, so nothing ran" in feedback_markdown(grade, measurements)
    else:
        assert grade["attempted"] is False
        assert {p["message"] for p in check["parts"]} == {NO_WORK_MESSAGE}


# ── placeholders and garbling, on the real lesson-07 rubric ─────────────────────────────────


def _part(grade, check_id, name):
    check = next(c for c in grade["checks"] if c["id"] == check_id)
    return next(p for p in check["parts"] if p["name"] == name)


def test_no_question_mark_for_a_missing_fp32_model(assignment07):
    measurements = {
        "models": {
            "fp32": {"error": "artifacts/fp32.onnx is missing"},
            "int8_dynamic": {"size": {"ratio": 0.9}},
            "int8_qdq": {"size": {"ratio": 0.9}},
        }
    }
    grade = judge(assignment07.rubric(), assignment07.tolerances(), measurements)
    hints = [p["hint"] for c in grade["checks"] if c["id"] == "size" for p in c["parts"]]
    assert hints and all("?" not in h and "parameters." not in h.split("Your fp32 model")[-1] for h in hints)
    assert not any("Your fp32 model has" in h for h in hints)
    ok = judge(
        assignment07.rubric(),
        assignment07.tolerances(),
        {"models": {**measurements["models"], "fp32": {"param_count": 66817, "canonical_bytes": 267996}}},
    )
    assert "Your fp32 model has 66,817 parameters." in _part(ok, "size", "dynamic model size")["hint"]


def test_the_results_hint_keeps_every_brace(assignment07):
    grade = judge(assignment07.rubric(), assignment07.tolerances(), {"reported": {"present": False, "problems": []}})
    hint = _part(grade, "reported_results", "RESULTS is present")["hint"]
    assert "{'fp32': {...}, 'int8_dynamic': {...}, 'int8_qdq': {...}}." in hint
    assert hint.count("{") == hint.count("}") == 4


def test_an_accuracy_drop_is_in_percentage_points(assignment07):
    measurements = {"models": {"int8_dynamic": {"quality": {"accuracy_drop": 0.126}}}}
    grade = judge(assignment07.rubric(), assignment07.tolerances(), measurements)
    part = _part(grade, "dynamic_model", "accuracy drop")
    # measured on hidden data: shown as its relation to the threshold only (leak_budget)
    assert part["measured_text"] == "not ≤ " + part["threshold_text"] and part["threshold_text"].endswith(" pp")
    assert part["message"].startswith("the accuracy drop against your fp32 model on the hidden test set is not ≤ ")
    assert "%" not in part["message"]


def test_the_elementwise_explanation_is_said_once(assignment07):
    import importlib

    from autograder.measure.reported import Expected, check_reported

    reported = importlib.import_module(assignment07.grading.__name__ + ".reported")
    keys = [f"{v}.{f}" for v in ("fp32", "int8_dynamic", "int8_qdq") for f in ("max_rel_drift", "edge_max_rel_drift")]
    drift = Expected(
        0.1, reported.REPORT_TOLERANCE, where=" on the contract's X_test", alternatives=((0.5, reported.ELEMENTWISE),)
    )
    elementwise = {
        v: {f: 0.5 for f in ("max_rel_drift", "edge_max_rel_drift")} for v in ("fp32", "int8_dynamic", "int8_qdq")
    }
    every = [f"{k}: reported 0.5, measured 0.1 on the contract's X_test ({reported.ELEMENTWISE.text})" for k in keys]

    def message(listed):
        measurements = {
            "reported": {"present": True, "problems": listed, "checked": 15, "honest": 9, "honest_share": 0.6}
        }
        grade = judge(assignment07.rubric(), assignment07.tolerances(), measurements)
        return _part(grade, "reported_results", "every reported number matches the re-measurement")["message"]

    once, before = message(check_reported(elementwise, dict.fromkeys(keys, drift))["problems"]), message(every)
    assert once.count("normalises per row") == 1 and once.count("(element-wise?)") == 3 and "and 3 more" in once
    assert before.count("normalises per row") == 4 and "and 2 more" in before, "a long list stays a paragraph"
    # one problem keeps its explanation
    assert check_reported({"fp32": {"max_rel_drift": 0.5}}, {keys[0]: drift})["problems"] == every[:1]


def test_the_console_shows_a_list_threshold_literally():
    grade = judge(RUBRIC, TOLERANCES, with_values(MEASUREMENTS, models__int8_dynamic__weight_dtypes=["uint8"]))
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(grade_table(grade))
    row = next(ln for ln in out.getvalue().splitlines() if "int8 weights" in ln)
    assert "[uint8]" in row and "one of int8" in row


# ── short when nothing could be graded ───────────────────────────────────────────────────────


def _nothing(**execution):
    """An untouched notebook: every function raises, no model file, no RESULTS."""
    return with_values(
        MEASUREMENTS,
        functions={"quantize": {"defined": False, "agree_share": 0.0, "agree": 0, "cases": 40}},
        models={"error": "artifacts/fp32.onnx is missing"},
        reported={"error": "RESULTS is not defined"},
        execution={**MEASUREMENTS["execution"], **execution},
    )


def test_nothing_to_grade_is_one_paragraph_with_the_checks_in_one_line():
    measurements = _nothing(cells_errored=4, first_error=ERROR_LAST)
    grade = judge(RUBRIC, TOLERANCES, measurements)
    assert nothing_to_grade(grade)
    text = feedback_markdown(grade, measurements)
    assert "## Nothing to grade yet" in text and "## Checks" not in text and "Hint" not in text
    assert (
        "Your notebook ran, but none of the checks found work of yours to measure (artifacts/fp32.onnx is "
        "missing). The first error: code cell 20 (cell 41 of the notebook) raised `KeyError: 'latency'`.\n\n"
        "Complete the notebook's tasks"
    ) in text
    assert (
        "Checks with nothing to grade yet (4): quantize agrees with QuantizeLinear, Dynamic int8 model, "
        "int8 files are smaller, The notebook runs to the end; and 2 hidden checks."
    ) in text
    assert len(text) < 2000 and "not measured" not in text


def test_nothing_to_grade_is_short_on_gradescope_and_in_the_console():
    measurements = _nothing(
        status="unreadable", reason="nb.ipynb is not valid JSON", cells_total=0, cells_run=0, completed=False
    )
    grade = judge(RUBRIC, TOLERANCES, measurements)
    results = results_json(grade, measurements)
    assert (
        "Your notebook could not be read: nb.ipynb is not valid JSON.\n\nOpen the file in Jupyter" in results["output"]
    )
    assert all("Hint" not in t["output"] and len(t["output"]) < 400 for t in results["tests"])
    assert "Not measured: artifacts/fp32.onnx is missing" in next(
        t["output"] for t in results["tests"] if t["tags"] == ["dynamic_model"]
    )
    out = io.StringIO()
    print_grade_table(grade, Console(file=out, width=120, color_system=None), measurements)
    shown = out.getvalue()
    assert "really dynamically quantized" not in shown  # no part rows
    assert "Your notebook could not be read: nb.ipynb is not valid JSON." in shown
    assert "Checks with nothing to grade yet (4)" in shown


def test_one_passing_part_of_the_work_gives_the_full_feedback():
    measurements = _nothing()
    measurements["functions"]["quantize"]["defined"] = True
    grade = judge(RUBRIC, TOLERANCES, measurements)
    assert not nothing_to_grade(grade)
    assert "## Checks" in feedback_markdown(grade, measurements)


def test_hidden_results_never_decide_the_short_form():
    passing_hidden = copy.deepcopy(_nothing())
    passing_hidden["reported"] = copy.deepcopy(MEASUREMENTS["reported"])  # the after_due_date check passes
    grade = judge(RUBRIC, TOLERANCES, passing_hidden)
    assert any(c["passed"] for c in grade["checks"] if c["visibility"] != "visible")
    assert nothing_to_grade(grade)
    text = feedback_markdown(grade, passing_hidden)
    assert "RESULTS is honest" not in text and not re.search(r"\b1 of 2\b", text)
    assert text == feedback_markdown(judge(RUBRIC, TOLERANCES, _nothing()), _nothing())


def test_a_failure_on_the_grader_side_is_not_the_student_s_to_fix():
    measurements = _nothing(status="sandbox_error", reason="bwrap failed", cells_run=0, completed=False)
    text = feedback_markdown(judge(RUBRIC, TOLERANCES, measurements), measurements)
    assert (
        "The grader could not run your notebook (a problem on our side, not in your work): bwrap failed.\n\n"
        "This is not a judgment of your work: submit again"
    ) in text
    assert "Complete the notebook's tasks" not in text
