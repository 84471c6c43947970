"""Feedback that starts with the root cause, on real kernels through ``grade_notebook``: the
reference solution of lesson 07 with the cell that defines quantize, dequantize and
choose_qparams (code cell 9, cell 16 of the notebook) broken three ways. The feedback's first
section names the cause by cell and line, no hint of an unmeasured part is printed anywhere, and
no kernel name of a cell (a temporary file, ``Cell In[9]``) reaches the student."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from autograder.pipeline import grade_notebook

pytestmark = pytest.mark.slow

WHERE = "code cell 9 (cell 16 of the notebook)"
KERNEL_NAMES = re.compile(r"(?<![\w.])\d+\.py\b|Cell In ?\[|ipykernel_")
FUNCTIONS = ("quantize", "dequantize", "choose_qparams")


def _solution(project_root):
    nb = nbformat.read(project_root / "reference" / "07-quantization" / "solution.ipynb", as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert code[8] == 15 and "def quantize(" in nb.cells[15].source  # code cell 9, cell 16
    return nb, code


def _syntax_error(nb, code):
    nb.cells[15].source = nb.cells[15].source.replace("dtype=np.int8):", "dtype=np.int8)", 1)
    return "has a syntax error at line 4: expected ':'", None


def _name_error(nb, code):
    nb.cells[15].source = "QMIN = qmin_for(np.int8)\n" + nb.cells[15].source
    return "stopped at line 1 with NameError: name 'qmin_for' is not defined", None


def _raised_in_a_call(nb, code):
    """The defining cell calls a helper of code cell 8, which raises: two cells in one traceback."""
    nb.cells[code[7]].source += "\n\n\ndef check_setup():\n    raise RuntimeError('set SEED first')\n"
    nb.cells[15].source = "check_setup()\n" + nb.cells[15].source
    helper_line = nb.cells[code[7]].source.splitlines().index("    raise RuntimeError('set SEED first')") + 1
    return (
        "stopped at line 1 with RuntimeError: set SEED first",
        f"code cell 8 (cell {code[7] + 1} of the notebook), line {helper_line}",
    )


@pytest.mark.kernel
@pytest.mark.parametrize("breaks", [_syntax_error, _name_error, _raised_in_a_call], ids=lambda f: f.__name__)
def test_the_feedback_starts_with_the_cause(tmp_path, project_root, assignment07, results_validator, breaks):
    nb, code = _solution(project_root)
    cause, traced = breaks(nb, code)
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "out"
    grade = grade_notebook(path, assignment07, out)
    feedback = (out / "feedback.md").read_text()
    page = (out / "feedback.html").read_text()
    results = json.loads((out / "results.json").read_text())
    execution = json.loads((out / "execution.json").read_text())
    results_validator(results)

    # the first section after the score: the cause, by cell and line, once for the three functions
    first = feedback.split("\n## ")[1]
    assert first.startswith("Fix this first\n"), feedback[:1500]
    assert first.splitlines()[2] == (
        f"- quantize, dequantize and choose_qparams could not be checked: {WHERE}, where they are defined, {cause}"
    ), first
    assert execution["first_error"]["where"] == WHERE
    if traced:  # the helper's frame is placed in its own cell
        assert (
            traced
            in execution["first_error"].get("evalue", "")
            + next(c for c in execution["cells"] if c["index"] == 15)["traceback"]
        )

    # no hint for a part that was not measured, on any channel
    unmeasured = [c for c in grade["checks"] if c["id"] in ("quantize", "dequantize", "choose_qparams")]
    assert unmeasured and all(c["cause"]["where"] == WHERE for c in unmeasured)
    assert all(p["reason"] and p["hint"] == "" for c in unmeasured for p in c["parts"])
    rubric_hints = [
        p["hint"] for c in assignment07.rubric()["checks"] if c["id"] in FUNCTIONS for p in c["parts"] if p.get("hint")
    ]
    outputs = [t["output"] for t in results["tests"]] + [results["output"], feedback, page]
    for hint in rubric_hints:
        assert not any(hint[:40] in text for text in outputs), hint
    # placed by cell and line everywhere: never a temporary file name or an execution count
    for text in outputs + [json.dumps(execution)]:
        assert not KERNEL_NAMES.search(text), KERNEL_NAMES.search(text)


@pytest.mark.kernel
def test_a_kernel_ended_by_sigterm_is_told_the_signal(tmp_path, assignment07):
    """The notebook signals its own kernel (inside the jail): the student reads which signal, not
    "often: it ran out of memory"."""
    from nbformat.v4 import new_code_cell, new_notebook

    path = tmp_path / "sigterm.ipynb"
    nbformat.write(
        new_notebook(
            cells=[
                new_code_cell("x = 1"),
                new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"),
                new_code_cell("y = 2"),
            ]
        ),
        path,
    )
    out = tmp_path / "out"
    grade_notebook(path, assignment07, out)
    execution = json.loads((out / "execution.json").read_text())
    feedback = (out / "feedback.md").read_text()
    assert execution["status"] == "kernel_died", execution
    assert (
        "signal 15 (SIGTERM)" in execution["reason"] and "code cell 2 (cell 2 of the notebook)" in execution["reason"]
    )
    assert "signal 15 (SIGTERM)" in feedback and "ran out of memory" not in feedback, feedback
