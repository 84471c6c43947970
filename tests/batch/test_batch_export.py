"""`autograder export`: a graded class as Canvas's and Moodle's grade imports take it, from an
export with submission times (report/lms_export.py): one row per student of a group, formulas
neutralised, students the platform cannot match left out and counted, lateness against --due."""

from __future__ import annotations

import csv
import io

import pytest
from batchkit import GOOD, make_export_zip, notebook_json, read_gradebook
from typer.testing import CliRunner

from autograder.batch import run_batch
from autograder.cli import app

META = (
    "submission_11:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '1815'\n    :email: ada@x.edu\n"
    "  :created_at: 2026-12-01 23:30:00.000000000 -08:00\n"
    "submission_12:\n  :submitters:\n  - :name: '=cmd|calc'\n    :sid: '2'\n    :email: c@x.edu\n"
    "  - :name: Grace Hopper\n    :sid: '1906'\n    :email: g@x.edu\n"
    "  :created_at: 2026-12-02 03:00:00.000000000 -08:00\n"
    "submission_13:\n  :submitters:\n  - :name: Nobody Known\n"
)


@pytest.fixture
def graded(tmp_path, fake_assignment, exec_log):
    src = make_export_zip(
        tmp_path / "export.zip",
        {
            "submission_11": {"hw.ipynb": notebook_json(**GOOD)},
            "submission_12": {"hw.ipynb": notebook_json(agree=0.5)},
            "submission_13": {"hw.ipynb": notebook_json(**GOOD)},
        },
        META,
    )
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=1, progress=False)
    return out


def _export(out, *args):
    return CliRunner().invoke(app, ["export", str(out), *map(str, args)])


def test_the_gradebook_carries_when_each_was_submitted(graded):
    times = {r["name"]: r["submitted_at"] for r in read_gradebook(graded)}
    assert times == {
        "submission_11": "2026-12-01T23:30:00-08:00",
        "submission_12": "2026-12-02T03:00:00-08:00",
        "submission_13": "",
    }


def test_canvas_gets_one_row_per_student_and_the_points_possible(graded, tmp_path):
    target = tmp_path / "canvas.csv"
    result = _export(graded, "--to", "canvas", "-o", target, "--title", "Lesson 7 (1234)")
    assert result.exit_code == 0, result.output
    assert "4 students" not in result.output and "3 students" in result.output and "1 left out" in result.output
    rows = list(csv.reader(io.StringIO(target.read_text())))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 7 (1234)"]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "35"
    assert rows[2:] == [
        ["Ada Lovelace", "", "1815", "ada@x.edu", "", "35"],
        ["'=cmd|calc", "", "2", "c@x.edu", "", "25"],
        ["Grace Hopper", "", "1906", "g@x.edu", "", "25"],
    ]


def test_moodle_gets_lateness_against_the_due_date(graded, tmp_path):
    target = tmp_path / "moodle.csv"
    result = _export(graded, "--to", "moodle", "-o", target, "--due", "2026-12-02T00:00:00-08:00")
    assert result.exit_code == 0 and "1 submissions after the due date" in result.output, result.output
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    late = {r["Email address"]: r["Late (hours)"] for r in rows}
    assert late == {"ada@x.edu": "0", "c@x.edu": "3", "g@x.edu": "3"}


@pytest.mark.parametrize(
    "args, said",
    [
        (["--to", "blackboard"], "choose one of canvas, moodle"),
        (["--to", "moodle", "--due", "next friday"], "is not a time"),
        (["--to", "moodle", "--due", "2026-12-02T00:00:00"], "has no time zone"),
    ],
)
def test_mistakes_are_one_line_and_nothing_written(graded, tmp_path, args, said):
    target = tmp_path / "x.csv"
    result = _export(graded, *args, "-o", target)
    assert result.exit_code == 2 and said in result.output and not target.exists(), result.output
