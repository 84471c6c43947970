"""Hand-graded questions of a class (autograder/batch/manual.py, `autograder manual`): every
answer to one question on one page (by name or anonymised), the points sheet filled in and
imported into gradebook.csv and each student's results.json, kept by a rescore, and every mistake
in the sheet refused before anything is written."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from batchkit import GOOD, notebook_json, read_gradebook
from typer.testing import CliRunner

from autograder.batch import run_batch
from autograder.cli import app

MANUAL = """
[[manual]]
id = "reflection"
title = "Reflection on edge drift"
points = 4
description = "Why the static model drifts at the edges."
question = "Question 7 (reflection"
"""
ANSWERS = {
    "ann": "The static model's input range was fixed by calibration <b>not escaped?</b>",
    "ben": "Dynamic quantization measures each batch's range, so it suffers less.",
}


def _notebook(path: Path, answer: str | None) -> None:
    nb = json.loads(notebook_json(**GOOD))
    if answer is not None:
        nb["cells"] += [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "<!-- BEGIN QUESTION -->\n\n**Question 7 (reflection)**",
            },
            {"cell_type": "markdown", "metadata": {"tags": ["otter_answer_cell"]}, "source": answer},
            {"cell_type": "markdown", "metadata": {}, "source": "<!-- END QUESTION -->\n\nNot part of the answer."},
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


@pytest.fixture
def graded(tmp_path, fake_root, fake_assignment, exec_log):
    rubric = fake_root / "assignments" / fake_assignment.id / "rubric.toml"
    rubric.write_text(rubric.read_text() + MANUAL)
    from autograder.assignment import load_assignment

    assignment = load_assignment(fake_assignment.id, fake_root)
    src = tmp_path / "src"
    for name, answer in ANSWERS.items():
        _notebook(src / f"{name}.ipynb", answer)
    _notebook(src / "cat.ipynb", None)  # no cell asks the question
    out = tmp_path / "out"
    run_batch(src, out, assignment=assignment, jobs=1, progress=False)
    return out


def _run(*args):
    return CliRunner().invoke(app, ["manual", *[str(a) for a in args]])


def test_gather_shows_every_answer_escaped_and_a_sheet_to_fill(graded):
    result = _run("gather", graded, "--question", "reflection")
    assert result.exit_code == 0, result.output
    page = (graded / "manual-reflection.html").read_text()
    assert "Dynamic quantization measures each batch" in page and "Not part of the answer" not in page
    assert "<b>not escaped?</b>" not in page and "&lt;b&gt;not escaped?&lt;/b&gt;" in page
    assert "no answer: the notebook has no cell asking this question" in page
    assert "script-src" not in page and "<script" not in page
    rows = list(csv.DictReader(io.StringIO((graded / "manual-reflection.csv").read_text())))
    assert [r["submission"] for r in rows] == ["ann", "ben", "cat"] and all(r["points"] == "" for r in rows)


def test_anonymised_answers_carry_no_name_and_import_through_the_key(graded, tmp_path):
    assert _run("gather", graded, "--question", "reflection", "--anonymous").exit_code == 0
    page = (graded / "manual-reflection.html").read_text()
    assert not any(f">{name}<" in page for name in ANSWERS), "a name on the anonymised page"
    rows = list(csv.DictReader(io.StringIO((graded / "manual-reflection.csv").read_text())))
    assert sorted(r["submission"] for r in rows) == ["answer 001", "answer 002", "answer 003"]
    key = json.loads((graded / "manual-reflection.key.json").read_text())
    sheet = tmp_path / "points.csv"
    sheet.write_text("submission,points,comment\n" + "".join(f"{a},3,ok\n" for a in key))
    result = _run("import", graded, sheet, "--question", "reflection")
    assert result.exit_code == 0, result.output
    assert {r["name"]: r["manual_reflection"] for r in read_gradebook(graded)} == dict.fromkeys(
        ("ann", "ben", "cat"), "3"
    )


def test_imported_points_reach_the_gradebook_and_results_and_survive_a_rescore(graded, tmp_path):
    before = {r["name"]: float(r["score"]) for r in read_gradebook(graded)}
    sheet = tmp_path / "points.csv"
    sheet.write_text('submission,points,comment\nann,4,"Clear, and right about the range."\nben,2.5,\ncat,,\n')
    result = _run("import", graded, sheet, "--question", "reflection")
    assert result.exit_code == 0, result.output
    for _ in range(2):  # the import, then a rescore: the same, never added twice
        book = {r["name"]: r for r in read_gradebook(graded)}
        assert float(book["ann"]["score"]) == before["ann"] + 4 and book["ann"]["manual_reflection"] == "4"
        assert float(book["ben"]["score"]) == before["ben"] + 2.5
        assert book["cat"]["manual_reflection"] == "" and float(book["cat"]["score"]) == before["cat"]
        results = json.loads((graded / "ann" / "results.json").read_text())
        hand = [t for t in results["tests"] if t["name"].endswith("(graded by hand)")]
        assert [(t["score"], t["max_score"], t["output"]) for t in hand] == [
            (4.0, 4.0, "Clear, and right about the range.")
        ]
        assert results["score"] == pytest.approx(before["ann"] + 4)
        assert CliRunner().invoke(app, ["rescore", str(graded)]).exit_code == 0


@pytest.mark.parametrize(
    "rows, said",
    [
        ("zed,2,\n", "'zed' is no submission of this batch"),
        ("ann,five,\n", "points 'five' is not a number"),
        ("ann,4.5,\n", "outside 0 … 4"),
        ("ann,-1,\n", "outside 0 … 4"),
        ("ann,nan,\n", "outside 0 … 4"),
    ],
    ids=["unknown name", "not a number", "above the item's points", "negative", "nan"],
)
def test_a_wrong_sheet_is_refused_and_nothing_written(graded, tmp_path, rows, said):
    sheet = tmp_path / "points.csv"
    sheet.write_text("submission,points,comment\nben,1,\n" + rows)
    gradebook = (graded / "gradebook.csv").read_text()
    result = _run("import", graded, sheet, "--question", "reflection")
    assert result.exit_code == 2 and said in result.output, result.output
    assert not (graded / "manual.json").exists() and (graded / "gradebook.csv").read_text() == gradebook


def test_an_unknown_question_names_the_choices(graded):
    result = _run("gather", graded, "--question", "essay")
    assert result.exit_code == 2 and "(its [[manual]] items: reflection)" in result.output, result.output
