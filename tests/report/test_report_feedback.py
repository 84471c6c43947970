"""feedback.md for the student, and the console tables for the instructor."""

from __future__ import annotations

import io
import re

import pytest
from judge_report_fixtures import (
    HIDDEN_IDS,
    HIDDEN_TITLES,
    MEASUREMENTS,
    RUBRIC,
    SECRET_HINT,
    TOLERANCES,
    all_visible,
    failing_measurements,
    with_values,
)
from rich.console import Console

from autograder.judge import judge
from autograder.report import failure_feedback_markdown, feedback_markdown
from autograder.report.console import print_grade_table, print_scores_table


@pytest.fixture(scope="module")
def failing():
    measurements = failing_measurements()
    return judge(RUBRIC, TOLERANCES, measurements), measurements


def test_feedback_shows_every_visible_check(failing):
    grade, measurements = failing
    text = feedback_markdown(grade, measurements)
    for c in RUBRIC["checks"]:
        if c["visibility"] == "visible":
            assert f"### ✗ {c['title']}" in text or f"### ✓ {c['title']}" in text


def test_feedback_shows_the_total_when_every_check_is_visible():
    measurements = failing_measurements()
    text = feedback_markdown(judge(all_visible(RUBRIC), TOLERANCES, measurements), measurements)
    assert "**Score: 25 / 60**" in text
    assert "not shown here" not in text


def test_feedback_shows_measured_threshold_and_hint_for_failed_parts(failing):
    text = feedback_markdown(*failing)
    assert "measured `not ≥ 100.0%`, expected ≥ `100.0%`" in text
    assert "**Hint:** round half to even with np.rint" in text
    assert "not measured: artifacts/int8_qdq.onnx is missing" in text
    assert "your model has 66,817 parameters" not in text  # the size part that uses it passed


def test_feedback_with_hidden_checks_shows_neither_the_total_nor_their_results(failing):
    """Gradescope's rule: while a test is hidden the total is too (1 of the 2 hidden checks fails)."""
    text = feedback_markdown(*failing)
    assert "2 more checks are not shown here" in text
    assert "Score" not in text and "/ 60" not in text and "25" not in text
    assert "failed" not in text.split("## Running")[0]
    for secret in (*HIDDEN_IDS, *HIDDEN_TITLES, SECRET_HINT, "95.0%", "calibration", "per channel", "static_qdq"):
        assert secret not in text, f"feedback.md leaks {secret!r}"


def test_feedback_hidden_results_do_not_change_the_visible_text():
    """Passing or failing, the hidden checks leave the same words (only their number)."""
    passing = judge(RUBRIC, TOLERANCES, MEASUREMENTS)
    failing_hidden = with_values(MEASUREMENTS, models__int8_qdq__per_channel=False, reported__honest_share=0.5)
    other = judge(RUBRIC, TOLERANCES, failing_hidden)
    assert passing["score"] != other["score"]
    assert feedback_markdown(passing, MEASUREMENTS) == feedback_markdown(other, failing_hidden)
    assert "Hint" not in feedback_markdown(passing, MEASUREMENTS)  # nothing visible failed, so no hints


def test_feedback_lists_manual_items_as_graded_by_hand(failing):
    text = feedback_markdown(*failing)
    assert "## Graded by hand" in text
    assert "- Reflection on edge drift: graded by hand" in text


def test_feedback_execution_notes(failing):
    text = feedback_markdown(*failing)
    assert "Your notebook ran to the end (14.2 s)." in text
    assert "- Code cell 6 (cell 12 of the notebook) raised `ValueError:" in text
    assert "The cells after it still ran, so later checks could still earn points" in text


@pytest.mark.parametrize(
    "execution, words",
    [
        (
            {"status": "timeout", "reason": "timed out after 600 s", "cells_run": 12},
            ["ran out of time", "12 of 23 code cells ran"],
        ),
        ({"status": "completed", "output_truncated": True}, ["more output than the grader keeps"]),
        ({"status": "completed", "probe": "failed"}, ["could not call your functions"]),
        ({"status": "unreadable", "reason": "not a notebook"}, ["could not be read", "not a notebook"]),
    ],
)
def test_feedback_execution_variants(execution, words):
    measurements = with_values(MEASUREMENTS, execution={**MEASUREMENTS["execution"], **execution})
    text = feedback_markdown(judge(RUBRIC, TOLERANCES, measurements), measurements)
    for word in words:
        assert word in text


def test_feedback_execution_section_error():
    measurements = with_values(MEASUREMENTS, execution={"error": "execution.json is missing"})
    text = feedback_markdown(judge(RUBRIC, TOLERANCES, measurements), measurements)
    assert "could not tell how your notebook ran: execution.json is missing" in text


def test_feedback_untrusted_text_cannot_break_out_of_its_code_span():
    measurements = failing_measurements()
    measurements["execution"]["first_error"]["evalue"] = "`<img src=x onerror=alert(1)>` [click](http://x)\nnext"
    text = feedback_markdown(judge(RUBRIC, TOLERANCES, measurements), measurements)
    line = next(ln for ln in text.splitlines() if "ValueError" in ln)
    assert "``ValueError: `<img src=x onerror=alert(1)>` [click](http://x) next``" in line


def test_feedback_escapes_html_in_messages():
    measurements = with_values(MEASUREMENTS, models__int8_dynamic__classification="<b>x</b>")
    text = feedback_markdown(judge(RUBRIC, TOLERANCES, measurements), measurements)
    assert "the graph is classified as &lt;b&gt;x&lt;/b&gt;, expected dynamic" in text
    assert re.search(r"(?<!`)<b>", text) is None


def test_feedback_is_markdown_with_unix_newlines_and_no_trailing_blank_runs(failing):
    text = feedback_markdown(*failing)
    assert text.startswith("# Feedback · 07-quantization\n") and text.endswith("\n")
    assert "\r" not in text and "\n\n\n" not in text


def test_failure_feedback_says_why():
    text = failure_feedback_markdown("the notebook is not valid JSON")
    assert "could not be graded" in text and "not valid JSON" in text


# ── console ─────────────────────────────────────────────────────────────────────────────────────


def _console() -> Console:
    return Console(file=io.StringIO(), width=160, record=True, color_system=None)


def test_console_grade_table_shows_every_check_measured_threshold_points(failing):
    console = _console()
    print_grade_table(failing[0], console=console)
    out = console.export_text()
    assert "07-quantization: 25 / 60" in out
    assert "Static QDQ model (hidden)" in out and "RESULTS is honest (after_due_date)" in out
    assert re.search(r"✗ accuracy drop\s+│\s+3\.1%\s+│\s+≤ 1\.2%\s+│\s+0 / 5", out)
    assert re.search(r"Dynamic int8 model\s+│\s+│\s+│\s+10 / 15", out)
    assert "Reflection on edge drift (graded by hand)" in out


def test_console_scores_table_has_a_column_per_check_and_a_total():
    console = _console()
    rows = [
        {"name": "reference.ipynb", "score": 60, "max": 60, "checks": {"quantize": 10, "size": 10}},
        {
            "name": "truncating.ipynb",
            "score": 52,
            "max": 60,
            "checks": {"quantize": {"score": 2, "max_score": 10}, "execution": 5},
            "note": "1 cell errored",
        },
    ]
    table = print_scores_table(rows, console=console)
    out = console.export_text()
    assert [c.header for c in table.columns] == ["submission", "quantize", "size", "execution", "total", "note"]
    assert re.search(r"truncating\.ipynb\s+│\s+2/10\s+│\s+–\s+│\s+5\s+│\s+52 / 60\s+│\s+1 cell errored", out)


def test_console_scores_table_takes_batch_rows_with_maxima_and_reason():
    console = _console()
    rows = [
        {
            "name": "a.ipynb",
            "score": 7,
            "max": 15,
            "checks": {"quantize": 2, "size": 5},
            "checks_max": {"quantize": 10, "size": 5},
            "status": "graded",
            "reason": None,
        },
        {"name": "b.ipynb", "score": 0, "max": 15, "checks": {}, "status": "grader_error", "reason": "measure crashed"},
    ]
    table = print_scores_table(rows, console=console)
    out = console.export_text()
    assert [c.header for c in table.columns] == ["submission", "quantize", "size", "total", "note"]
    assert re.search(r"a\.ipynb\s+│\s+2/10\s+│\s+5/5\s+│\s+7 / 15", out)
    assert re.search(r"b\.ipynb\s+│\s+–\s+│\s+–\s+│\s+0 / 15\s+│\s+measure crashed", out)
