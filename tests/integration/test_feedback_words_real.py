"""Feedback a student can act on, on real notebooks through the whole pipeline (jail, kernel, lesson 07's measurement):
a notebook that names the R kernel and fails in its last code cell among markdown and raw cells,
and a notebook without any code cell. The bundled examples: test_examples_graded.py."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from autograder.pipeline import grade_notebook

pytestmark = pytest.mark.slow

R_KERNEL = {"kernelspec": {"name": "ir", "display_name": "R", "language": "R"}, "language_info": {"name": "R"}}


def _grade(tmp_path, assignment07, cells, metadata=None):
    path = tmp_path / "submission.ipynb"
    nbformat.write(new_notebook(cells=cells, metadata=metadata or {}), path)
    out = tmp_path / "out"
    grade = grade_notebook(path, assignment07, out)
    return grade, (out / "feedback.md").read_text(), json.loads((out / "results.json").read_text())


@pytest.mark.kernel
def test_an_r_notebook_is_named_and_its_last_cell_error_is_numbered_once(tmp_path, assignment07):
    cells = [
        new_markdown_cell("# My work"),
        new_code_cell("x = 1"),
        new_raw_cell("notes"),
        new_code_cell("y = 2"),
        new_markdown_cell("## last"),
        new_code_cell("1 / 0"),
    ]
    grade, feedback, results = _grade(tmp_path, assignment07, cells, R_KERNEL)
    language = (
        "- Your notebook's metadata names the `R` language, but the grader runs every notebook with "
        "Python, so its cells ran as Python code."
    )
    last = (
        "- Code cell 3 (cell 6 of the notebook) raised `ZeroDivisionError: division by zero` at line 1. "
        "It is your notebook's last code cell."
    )
    for text in (feedback, results["output"]):
        assert language in text and last in text, text
        assert "cells after it still ran" not in text and "NoneType" not in text
        assert "could not be checked" not in text, "nothing graded: the short paragraph says it, not once per function"
    check = next(c for c in grade["checks"] if c["id"] == "execution")
    part = next(p for p in check["parts"] if p["name"] == "no cell raised an error")
    assert part["message"] == (
        "1 cell(s) raised an error; the first: code cell 3 (cell 6 of the notebook), "
        "ZeroDivisionError: division by zero (line 1)"
    )


@pytest.mark.kernel
def test_a_notebook_without_code_earns_nothing(tmp_path, assignment07):
    cells = [
        new_markdown_cell("# Answers\nx = 1"),
        new_raw_cell("import numpy"),
        new_markdown_cell("![plot](attachment:p.png)", attachments={"p.png": {"image/png": "iVBORw0KGgo="}}),
    ]
    grade, feedback, results = _grade(tmp_path, assignment07, cells)
    assert grade["score"] == results["score"] == 0
    assert "Your notebook has no code cell, so nothing ran" in feedback
    assert "## Nothing to grade yet" in feedback and len(feedback) < 3000
