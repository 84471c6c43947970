"""Which assignment a command or a notebook is for: no silent default (autograder/assignment_match.py).

A small project with two assignments (``alpha-01``, ``beta-02``) in a temporary folder; the CLI
tests point ``$AUTOGRADER_ROOT`` at it. Nothing here runs a notebook: every refusal happens before.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograder.assignment_match import mismatch_reason, notebook_facts_of, resolve_assignment, source_notebooks
from autograder.cli import app
from autograder.errors import AssignmentError

GRADING = "def probe_cases():\n    return []\n\n\ndef measure(ctx):\n    return {}\n"


def make_project(root: Path, ids=("alpha-01", "beta-02")) -> Path:
    for i in ids:
        folder = root / "assignments" / i
        (folder / "grading").mkdir(parents=True)
        (folder / "assignment.toml").write_text(f'id = "{i}"\nnotebook = "{i}-notebook.ipynb"\n')
        (folder / "grading" / "__init__.py").write_text(GRADING)
        (folder / "rubric.toml").write_text("")
        (root / "reference" / i).mkdir(parents=True)
    return root


def notebook(autograder: str | None = None, otter: str | None = None, **extra) -> bytes:
    meta: dict = dict(extra)
    if autograder is not None:
        meta["autograder"] = {"assignment": autograder}
    if otter is not None:
        meta["otter"] = {"assignment_name": otter}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": meta, "cells": []}).encode()


def facts(name: str, data: bytes):
    """What the bounded reader tells of ``data`` (read in its limited child, as every front end does)."""
    return notebook_facts_of(name, data)


@pytest.fixture
def project(tmp_path) -> Path:
    return make_project(tmp_path / "project")


# ── the rules ─────────────────────────────────────────────────────────────────────────────────


def test_a_single_assignment_is_the_default(tmp_path):
    root = make_project(tmp_path / "one", ids=("alpha-01",))
    assert resolve_assignment(None, root=root).id == "alpha-01"
    assert resolve_assignment(None, [facts("x.ipynb", notebook())], root=root).id == "alpha-01"


def test_several_assignments_and_nothing_to_go_by_is_an_error_listing_them(project):
    with pytest.raises(AssignmentError) as e:
        resolve_assignment(None, root=project)
    assert str(e.value) == "there are 2 assignments; choose one with --assignment: alpha-01, beta-02"
    with pytest.raises(AssignmentError, match=r"cannot tell which assignment x.ipynb is for .*alpha-01, beta-02$"):
        resolve_assignment(None, [facts("x.ipynb", notebook())], root=project)


@pytest.mark.parametrize(
    "nb, name, expected",
    [
        (notebook(autograder="beta-02"), "x.ipynb", "beta-02"),
        (notebook(otter="alpha-01"), "x.ipynb", "alpha-01"),
        (notebook(autograder="beta-02", otter="alpha-01"), "x.ipynb", "beta-02"),  # ours first
        (notebook(), "beta-02-notebook.ipynb", "beta-02"),  # the notebook's name
        (notebook(), "Copy of alpha-01 (final).ipynb", "alpha-01"),  # a name holding the id
        (notebook(autograder="gamma-03"), "beta-02-notebook.ipynb", "beta-02"),  # unknown id: the name decides
    ],
)
def test_metadata_then_name_decide(project, nb, name, expected):
    assert resolve_assignment(None, [facts(name, nb)], root=project).id == expected


def test_a_batch_takes_the_assignment_its_notebooks_agree_on(project):
    agree = [
        facts("a.ipynb", notebook(autograder="alpha-01")),
        facts("b.ipynb", notebook()),
        facts("c.ipynb", notebook(otter="alpha-01")),
    ]
    assert resolve_assignment(None, agree, root=project).id == "alpha-01"
    mixed = agree + [facts("d.ipynb", notebook(autograder="beta-02"))]
    with pytest.raises(AssignmentError) as e:
        resolve_assignment(None, mixed, root=project, what="the notebooks of subs")
    assert str(e.value) == (
        "the notebooks of subs are for different assignments (alpha-01: 2, beta-02: 1); "
        "choose one with --assignment: alpha-01, beta-02"
    )


def test_an_explicit_assignment_refuses_a_notebook_made_for_another(project):
    with pytest.raises(AssignmentError) as e:
        resolve_assignment("alpha-01", [facts("hw.ipynb", notebook(autograder="beta-02"))], root=project)
    assert str(e.value) == (
        "hw.ipynb was made for assignment 'beta-02' (its autograder metadata), not 'alpha-01'; "
        "grade it with --assignment beta-02"
    )
    assert "\n" not in str(e.value)
    assert (
        resolve_assignment("alpha-01", [facts("hw.ipynb", notebook(autograder="alpha-01"))], root=project).id
        == "alpha-01"
    )
    assert resolve_assignment("alpha-01", [facts("beta-02.ipynb", notebook())], root=project).id == "alpha-01", (
        "a file name alone never overrides an explicit choice"
    )


def test_unknown_assignment_lists_the_known_ones(project):
    with pytest.raises(AssignmentError, match=r"no assignment 'nope' .*known: alpha-01, beta-02"):
        resolve_assignment("nope", root=project)
    with pytest.raises(AssignmentError, match="no assignment '../beta-02'"):
        resolve_assignment("../beta-02", root=project)


def test_a_notebook_for_another_lesson_gets_a_one_line_reason(project):
    from autograder.assignment import load_assignment

    alpha = load_assignment("alpha-01", project)
    assert (
        mismatch_reason("The notebook", facts("x.ipynb", notebook(otter="lesson-99")), alpha)
        == "The notebook was made for assignment 'lesson-99' (its otter-assign metadata), not 'alpha-01'"
    )
    assert mismatch_reason("The notebook", facts("x.ipynb", notebook(autograder="alpha-01")), alpha) is None
    assert mismatch_reason("The notebook", facts("x.ipynb", notebook()), alpha) is None


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"metadata": "x"}).encode(),
        notebook(autograder="<script>alert(1)</script>"),
        notebook(autograder="a" * 500),
        notebook(autograder=["alpha-01"]),
        json.dumps({"metadata": {"autograder": {"assignment": 7}}}).encode(),
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_hostile_or_odd_metadata_declares_nothing(data):
    assert facts("x.ipynb", data).declared is None


def test_source_notebooks_of_a_folder_and_a_zip(tmp_path):
    folder = tmp_path / "subs"
    (folder / "deep").mkdir(parents=True)
    (folder / "a.ipynb").write_bytes(notebook(autograder="alpha-01"))
    (folder / "deep" / "b.ipynb").write_bytes(notebook())
    (folder / ".hidden.ipynb").write_bytes(notebook())
    (folder / "notes.txt").write_text("x")
    (folder / "link.ipynb").symlink_to(folder / "a.ipynb")
    assert sorted(f.name for f in source_notebooks(folder)) == ["a.ipynb", "b.ipynb"]
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("submission_1/hw.ipynb", notebook(autograder="beta-02"))
        zf.writestr("__MACOSX/submission_1/._hw.ipynb", b"junk")
        zf.writestr("submission_metadata.yml", "x")
    assert [(f.name, f.declared.id) for f in source_notebooks(archive)] == [("hw.ipynb", "beta-02")]
    assert source_notebooks(tmp_path / "missing") == []


def test_a_notebook_of_another_course_is_told_which_assignment_it_names(project):
    with pytest.raises(AssignmentError) as e:
        resolve_assignment(None, [facts("hw.ipynb", notebook(otter="hw03-pandas"))], root=project)
    assert str(e.value) == (
        "cannot tell which assignment hw.ipynb is for (it names assignment 'hw03-pandas' (its "
        "otter-assign metadata), which is not an assignment of this course); choose one with "
        "--assignment: alpha-01, beta-02"
    )
    with pytest.raises(AssignmentError) as e:
        resolve_assignment("alpha-01", [facts("hw.ipynb", notebook(otter="hw03-pandas"))], root=project)
    assert str(e.value) == (
        "hw.ipynb was made for assignment 'hw03-pandas' (its otter-assign metadata), not "
        "'alpha-01', and it is not an assignment of this course"
    )
    two = [facts("a.ipynb", notebook(otter="hw03-pandas")), facts("b.ipynb", notebook(autograder="hw04"))]
    with pytest.raises(
        AssignmentError,
        match=r"2 of them name assignments this course does not have "
        r"\('hw03-pandas' \(its otter-assign metadata\), 'hw04'",
    ):
        resolve_assignment(None, two, root=project, what="the notebooks of subs")
    with pytest.raises(AssignmentError, match=r"\(it could not be read\)"):
        resolve_assignment(None, [facts("x.ipynb", b"[" * 600_000)], root=project)


# ── the commands: exit 2, one line, nothing written ───────────────────────────────────────────


@pytest.fixture
def cli(project, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ROOT", str(project))
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, list(args))

    return invoke


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_grade_without_assignment_refuses_an_undecidable_notebook(cli, tmp_path):
    nb = tmp_path / "work.ipynb"
    nb.write_bytes(notebook())
    line = _one_error_line(cli("grade", str(nb), "--out", str(tmp_path / "out")))
    assert "cannot tell which assignment work.ipynb is for" in line and "alpha-01, beta-02" in line
    assert not (tmp_path / "out").exists()
    missing = _one_error_line(cli("grade", str(tmp_path / "gone.ipynb"), "--out", str(tmp_path / "out")))
    assert "gone.ipynb does not exist" in missing and not (tmp_path / "out").exists()


def test_grade_refuses_a_notebook_made_for_another_assignment(cli, tmp_path):
    nb = tmp_path / "work.ipynb"
    nb.write_bytes(notebook(autograder="beta-02"))
    line = _one_error_line(cli("grade", str(nb), "--assignment", "alpha-01", "--out", str(tmp_path / "out")))
    assert "made for assignment 'beta-02'" in line and "--assignment beta-02" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["build"], ["build", "--check"], ["calibrate"]])
def test_authoring_commands_need_an_id_when_there_are_several(cli, command):
    line = _one_error_line(cli(*command))
    assert line == "error: there are 2 assignments; choose one with the ID argument: alpha-01, beta-02"


def test_batch_without_assignment_refuses_notebooks_of_two_assignments(cli, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.ipynb").write_bytes(notebook(autograder="alpha-01"))
    (subs / "b.ipynb").write_bytes(notebook(autograder="beta-02"))
    line = _one_error_line(cli("batch", str(subs), "--out", str(tmp_path / "out")))
    assert "are for different assignments (alpha-01: 1, beta-02: 1)" in line
    assert not (tmp_path / "out").exists()


def test_gradescope_build_needs_an_id_in_this_checkout(tmp_path):
    result = CliRunner().invoke(app, ["gradescope", "build", "-o", str(tmp_path / "a.zip")])
    line = _one_error_line(result)
    assert line.startswith("error: there are ") and "choose one with the ID argument" in line
    assert not (tmp_path / "a.zip").exists()


def test_demo_without_assignment_grades_every_assignment_into_its_own_folder(cli, tmp_path, monkeypatch):
    import autograder.batch as batch

    calls = []

    class Summary:
        rows: list = []

    def fake_run_batch(source, out, *, assignment, options, jobs):
        assert options.kernel_template, "the demo grades as `batch` does: kernels from the kernel template"
        calls.append((Path(source).parent.name, Path(out).name, assignment.id))
        return Summary()

    monkeypatch.setattr(batch, "run_batch", fake_run_batch)
    result = cli("demo", "--out", str(tmp_path / "demo"))
    assert result.exit_code == 0, result.output
    assert calls == [("alpha-01", "alpha-01", "alpha-01"), ("beta-02", "beta-02", "beta-02")]
    calls.clear()
    assert cli("demo", "--assignment", "beta-02", "--out", str(tmp_path / "demo")).exit_code == 0
    assert calls == [("beta-02", "demo", "beta-02")]


RUBRIC = """
[[checks]]
id = "execution"
title = "runs"
points = 1
  [[checks.parts]]
  name = "ran to the end"
  measure = "execution.completed"
  op = "is_true"
  points = 1
"""


def test_a_batch_gives_a_notebook_of_another_assignment_its_reason_without_running_it(project, tmp_path, monkeypatch):
    from autograder import pipeline
    from autograder.assignment import load_assignment
    from autograder.batch import run_batch

    (project / "assignments" / "alpha-01" / "rubric.toml").write_text(RUBRIC)
    (project / "reference" / "alpha-01" / "tolerances.toml").write_text("")
    monkeypatch.setattr(pipeline, "grade_notebook", lambda *a, **k: pytest.fail("nothing may run"))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "other.ipynb").write_bytes(notebook(autograder="beta-02"))
    out = tmp_path / "out"
    summary = run_batch(subs, out, assignment=load_assignment("alpha-01", project), jobs=1, progress=False)
    (row,) = summary.rows
    assert row["score"] == 0.0
    results = json.loads((out / row["name"] / "results.json").read_text())
    assert (
        "The notebook was made for assignment 'beta-02' (its autograder metadata), not 'alpha-01'" in results["output"]
    )
