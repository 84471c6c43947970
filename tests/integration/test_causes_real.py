"""One model of causes on real kernels (grade_notebook, lesson 07's reference solution changed
the ways a student's first hour goes): functions still the starter's placeholder, a NameError in
the training cell, an infinite loop at the top of it. Each gets one "Fix this first" line, in
notebook order, above the picture; the checks it explains print no hint."""

from __future__ import annotations

import dataclasses

import nbformat
import pytest

from autograder.pipeline import grade_notebook
from autograder.report.feedback_html import FIGURE_HEADING

pytestmark = [pytest.mark.slow, pytest.mark.kernel]

STUB = '    """Not written yet."""\n    raise NotImplementedError\n'


def _solution(project_root):
    nb = nbformat.read(project_root / "reference" / "07-quantization" / "solution.ipynb", as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    training = next(i for i in code if "clf.fit(X_train, y_train)" in nb.cells[i].source)
    return nb, training


def _unfinished(nb, training):
    source = nb.cells[15].source
    head = source[: source.index("def dequantize")]
    nb.cells[15].source = (
        head + "def dequantize(q, scale, zero_point):\n" + STUB + "\n\n"
        "def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):\n" + STUB
    )
    return ["dequantize and choose_qparams are not written yet: their bodies in code cell 9 (cell 16 of the notebook)"]


def _name_error(nb, training):
    nb.cells[training].source = nb.cells[training].source.replace("clf.fit(X_train,", "clf.fit(X_trian,", 1)
    return ["artifacts/fp32.onnx is missing: code cell", "NameError: name 'X_trian' is not defined", "so artifacts/"]


def _loop(nb, training):
    nb.cells[training].source = "while True:\n    pass\n" + nb.cells[training].source
    return ["artifacts/fp32.onnx is missing: code cell", "ran out of time and was interrupted"]


@pytest.mark.parametrize("change", [_unfinished, _name_error, _loop], ids=lambda f: f.__name__)
def test_one_cause_first_above_the_picture(tmp_path, project_root, assignment07, change):
    nb, training = _solution(project_root)
    expected = change(nb, training)
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, path)
    assignment = assignment07
    if change is _loop:  # the loop meets a short cell limit; every other cell keeps a wide one
        limits = {**assignment07.config.get("execution", {}), "cell_timeout_s": 15, "notebook_timeout_s": 600}
        assignment = dataclasses.replace(assignment07, config={**assignment07.config, "execution": limits})
    grade_notebook(path, assignment, tmp_path / "out")
    feedback = (tmp_path / "out" / "feedback.md").read_text()
    fix = feedback.split("## Fix this first\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(fix) == 1, fix
    for words in expected:
        assert words in fix[0], (words, fix[0])
    page = (tmp_path / "out" / "feedback.html").read_text()
    picture = page.find("<svg") if "<svg" in page else page.find(FIGURE_HEADING)
    assert 0 < page.index("Fix this first") < picture, "what to do comes before the picture (or why there is none)"
    checks = feedback.split("## Checks to work on", 1)[-1]
    assert "**Hint:**" not in checks.split("### ✗", 2)[1], "the first failed check is explained by the cause"
