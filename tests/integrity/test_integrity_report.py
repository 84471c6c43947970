"""The integrity report on real notebooks of lesson 07: a copy disguised with new names, comments
and whitespace is flagged; independently written solutions are not; what the report shows is
escaped and bounded. Pure file work: nothing is executed."""

from __future__ import annotations

import ast
import csv
import io
import json
import keyword
import re
import tokenize
from pathlib import Path

import pytest

from autograder.assignment import load_assignment
from autograder.report.integrity import THRESHOLD, integrity_report
from autograder.report.integrity_view import highlight, integrity_csv

HERE = Path(__file__).resolve().parent
SECOND = HERE / "second_solution.ipynb"  # written separately from the reference (100/100 when graded)
CONTRACT = {
    "quantize",
    "dequantize",
    "choose_qparams",
    "RESULTS",
    "MoonsCalibrationReader",
    "MODEL_SEED",
    "CALIBRATION_SEED",
    "X",
    "y",
    "X_train",
    "X_test",
    "y_train",
    "y_test",
    "X_edge",
    "mu",
    "grader",
    "get_next",
    "rewind",
    "q_124",
    "x_124",
    "err_124",
    "q_20",
}


@pytest.fixture(scope="module")
def a07():
    return load_assignment("07-quantization")


def disguise(source: str) -> str:
    """The same code with every name it binds renamed, its comments replaced, its spacing changed."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound -= CONTRACT | {"self"} | set(keyword.kwlist)
    out, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind, text = tok.type, tok.string
        if kind == tokenize.COMMENT:
            text = "# (my own note)"
        elif kind == tokenize.NAME and text in bound and previous != ".":
            text = f"my_{text}_v2"
        out.append((kind, text))
        previous = tok.string
    return "# written by me\n\n" + tokenize.untokenize(out)


def disguised_copy(src: Path, dest: Path) -> Path:
    nb = json.loads(src.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = disguise("".join(cell["source"]))
    dest.write_text(json.dumps(nb))
    return dest


def test_a_copy_with_new_names_comments_and_spacing_is_flagged(tmp_path, a07):
    reference = a07.reference_folder / "solution.ipynb"
    copy = disguised_copy(reference, tmp_path / "copy.ipynb")
    assert "my_clf_v2" in copy.read_text() and "# (my own note)" in copy.read_text()
    report = integrity_report(
        {
            "reference": reference,
            "copy": copy,
            "second": SECOND,
            "untouched": a07.folder / "examples" / "untouched.ipynb",
        },
        a07,
    )
    assert [(p.a, p.b) for p in report.flagged] == [("copy", "reference")]
    top = report.flagged[0]
    functions_cell = "code cell 9 (cell 16 of the notebook)"  # the feedback's numbering
    assert top.share > 0.9 and functions_cell in top.cells_a and functions_cell in top.cells_b, (
        "the functions' cell is involved"
    )
    assert "<mark>" in top.snippet_a and "my_" in top.snippet_a
    assert report.no_own_code == ["untouched"], "the starter as handed out has nothing to compare"
    assert all(p.share < THRESHOLD for p in report.pairs if "second" in (p.a, p.b))
    rows = list(csv.DictReader(io.StringIO(integrity_csv(report))))
    assert (rows[0]["rank"], rows[0]["name_a"], rows[0]["name_b"], rows[0]["flagged"]) == (
        "1",
        "copy",
        "reference",
        "yes",
    )
    assert float(rows[0]["overlap_share"]) > 0.9 and re.search(
        r"code cells [0-9, ]*\b9\b.* \(cells [0-9, ]*\b16\b", rows[0]["cells_a"]
    )


def test_independent_solutions_stay_below_the_threshold(a07):
    """The data the threshold comes from: the second solution against the reference and against
    every example (each a different author's code). The examples against the reference are not
    independent: each is the reference with one cell changed (they are flagged, as copies)."""
    notebooks = {p.stem: p for p in (a07.folder / "examples").glob("*.ipynb")}
    notebooks.update(solution=a07.reference_folder / "solution.ipynb", second=SECOND)
    report = integrity_report(notebooks, a07, threshold=0.0, listed_min=0.0)
    independent = [p.share for p in report.pairs if "second" in (p.a, p.b)]
    gamed = {n for n in notebooks if n.startswith("gamed_")}  # not one cell changed: numbers typed in
    derived = [p.share for p in report.pairs if not {"second", *gamed} & {p.a, p.b}]
    # measured: independent ≤ 0.11, reference-derived ≥ 0.91; the threshold keeps 0.3 from both
    paired = {p.a if p.b == "second" else p.b for p in report.pairs if "second" in (p.a, p.b)}
    unpaired = set(notebooks) - paired - {"second"}
    # the starter has no code of its own; a gamed example is the starter with numbers typed in: nothing shared
    assert all(n == "untouched" or n.startswith("gamed_") for n in unpaired), unpaired
    assert max(independent) + 0.3 < THRESHOLD, sorted(independent)[-3:]
    assert min(derived) - 0.3 > THRESHOLD, "an example is the reference with one cell changed: a copy"


def test_highlight_escapes_code_and_marks_only_the_overlap():
    code = "x = 1\ny = '</pre><script>alert(1)</script>'\nz = 3\n"
    start = code.index("y")
    out = highlight(code, [(start, start + 10)])
    assert "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert out.count("<mark>") == 1 and out.startswith("x = 1\n<mark>y = '&lt;/pre</mark>&gt;")
    assert highlight(code, []) == ""


def test_notebooks_that_are_not_json_are_left_out_not_fatal(tmp_path, a07):
    (tmp_path / "bad.ipynb").write_text("{not json")
    report = integrity_report({"bad": tmp_path / "bad.ipynb", "second": SECOND}, a07)
    assert report.no_own_code == ["bad"] and report.pairs == []
