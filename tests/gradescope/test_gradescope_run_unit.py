"""``autograder gradescope run`` with a fake ``grade_notebook``: choosing the notebook, the order of
writes, privacy of the grader's folders, failures, metadata and the leaderboard. Fast: no kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from autograder import pipeline
from autograder.grade_options import GradeOptions
from autograder.gradescope import run as gradescope
from autograder.report.gradescope_results import results_json

from gradescope_testlib import mode_of

ID = "demo-01"
RUBRIC = """
[[checks]]
id = "dynamic_model"
title = "Dynamic int8 model"
points = 10
visibility = "visible"
  [[checks.parts]]
  name = "accuracy drop"
  measure = "models.int8_dynamic.accuracy_drop"
  op = "<="
  value = 0.01
  points = 10

[[checks]]
id = "static_model"
title = "Static int8 model"
points = 10
visibility = "visible"
  [[checks.parts]]
  name = "accuracy drop"
  measure = "models.int8_qdq.accuracy_drop"
  op = "<="
  value = 0.01
  points = 10
"""


MINIMAL_GRADING = "def probe_cases():\n    return []\n\n\ndef measure(ctx):\n    return {}\n"


def make_source(source: Path, assignment_id: str = ID, grading: str = MINIMAL_GRADING) -> None:
    folder = source / "assignments" / assignment_id
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text(
        f'id = "{assignment_id}"\ntitle = "Demo"\nversion = "1"\nnotebook = "{assignment_id}.ipynb"\n'
    )
    (folder / "rubric.toml").write_text(RUBRIC)
    (folder / "grading" / "__init__.py").write_text(grading)
    (source / "reference" / assignment_id).mkdir(parents=True)
    (source / "reference" / assignment_id / "tolerances.toml").write_text("[x]\ny = 1\n")
    (source / "gradescope.json").write_text(json.dumps({"assignment": assignment_id}))


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("AUTOGRADER_ROOT", raising=False)
    for name in list(sys.modules):
        if name.startswith("autograder_assignment_demo"):
            monkeypatch.delitem(sys.modules, name)
    root = tmp_path / "autograder"
    make_source(root / "source")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


def grade_of(static_passed: bool = True) -> dict:
    def check(cid, passed, drop):
        return {
            "id": cid,
            "title": cid,
            "visibility": "visible",
            "score": 10.0 if passed else 0.0,
            "max_score": 10.0,
            "passed": passed,
            "parts": [
                {
                    "name": "accuracy drop",
                    "passed": passed,
                    "points": 10,
                    "score": 10 if passed else 0,
                    "measured": drop,
                    "threshold": 0.01,
                    "op": "<=",
                    "message": "drop",
                    "hint": "h",
                    "reason": None,
                }
            ],
        }

    checks = [
        check("dynamic_model", True, 0.002),
        check("static_model", static_passed, 0.002 if static_passed else 0.2),
    ]
    return {
        "assignment": ID,
        "score": sum(c["score"] for c in checks),
        "max_score": 20.0,
        "checks": checks,
        "manual": [],
    }


MEASUREMENTS = {
    "models": {
        "int8_dynamic": {"size_bytes": 80_000, "accuracy": 0.96},
        "int8_qdq": {"size_bytes": 72_704, "accuracy": 0.955},
    }
}


class FakeGrader:
    """Stands in for pipeline.grade_notebook; records what it was given and what it saw."""

    def __init__(self, root: Path, grade: dict | None = None, error: Exception | None = None):
        self.root, self.grade, self.error, self.calls = root, grade or grade_of(), error, []

    def __call__(self, notebook, assignment, out_dir, **kwargs):
        notebook, out_dir = Path(notebook), Path(out_dir)
        self.calls.append(
            {
                "notebook": notebook,
                "name": notebook.name,
                "content": notebook.read_bytes(),
                "notebook_dir_mode": mode_of(notebook.parent),
                "out_dir": out_dir,
                "results_at_start": json.loads((self.root / "results" / "results.json").read_text()),
                "assignment": assignment.id,
                "kwargs": kwargs,
                "workspace_parent_mode": mode_of(Path(kwargs["workspace"]).parent),
                "workspace_existed": Path(kwargs["workspace"]).exists(),
            }
        )
        if self.error:
            raise self.error
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / pipeline.MEASUREMENTS_FILE).write_text(json.dumps(MEASUREMENTS))
        (out_dir / pipeline.RESULTS_FILE).write_text(json.dumps(results_json(self.grade, MEASUREMENTS)))
        return self.grade


@pytest.fixture
def fake(root, monkeypatch) -> FakeGrader:
    f = FakeGrader(root)
    monkeypatch.setattr(pipeline, "grade_notebook", f)
    return f


def written(root: Path) -> dict:
    return json.loads((root / "results" / "results.json").read_text())


def notebook(path: Path, text: str = "nb") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [], "text": text}))
    return path


# ------------------------------------------------------------------------------ the good path


def test_one_notebook_is_graded_and_its_results_written_last(root, fake, results_validator):
    notebook(root / "submission" / "mine.ipynb", "student work")
    returned = gradescope.run(root)
    assert len(fake.calls) == 1
    call = fake.calls[0]
    assert call["content"] == (root / "submission" / "mine.ipynb").read_bytes()
    assert call["name"] == "mine.ipynb" and call["assignment"] == ID
    # only results.json reaches the student on Gradescope: no feedback pages, the picture only as PNG
    assert call["kwargs"]["reports"] == (pipeline.RESULTS_FILE,)
    final = written(root)
    results_validator(final)
    assert final == returned
    assert final["score"] == 20.0
    assert final["extra_data"]["gradescope"] == {"assignment": ID, "notebook": "mine.ipynb"}
    assert [t["tags"] for t in final["tests"]] == [["dynamic_model"], ["static_model"]]


def test_placeholder_zero_is_on_disk_before_grading_starts(root, fake, results_validator):
    (root / "results" / "results.json").write_text('{"score": 100}')  # e.g. left from elsewhere
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    seen = fake.calls[0]["results_at_start"]
    results_validator(seen)
    assert seen["score"] == 0.0
    assert "did not finish" in seen["output"]


def test_grader_works_on_a_private_copy_and_a_fresh_workspace_outside_the_root(root, fake):
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    call = fake.calls[0]
    assert call["notebook_dir_mode"] == 0o700, "the notebook copy and out dir must be root-only"
    workspace = Path(call["kwargs"]["workspace"])
    for path in (call["notebook"], call["out_dir"], workspace):
        assert root not in path.parents, f"{path} lies under the Gradescope root"
    assert workspace.parent not in (call["notebook"].parent, *call["out_dir"].parents), (
        "the sandbox's workspace must not lie in the grader's private folder"
    )
    assert call["workspace_parent_mode"] == 0o711, "the sandbox uid passes through, without listing"
    assert not call["workspace_existed"]
    assert not call["notebook"].exists() and not workspace.parent.exists(), "temp folders are removed"
    assert call["kwargs"]["options"] == GradeOptions(), "the jail, the assignment's own tolerances and rubric"


def test_source_and_results_folders_are_closed_to_other_users(root, fake):
    (root / "source").chmod(0o755)
    (root / "results").chmod(0o777)
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    assert mode_of(root / "source") & 0o077 == 0
    assert mode_of(root / "results") & 0o007 == 0
    assert mode_of(root / "results" / "results.json") == 0o644


# ------------------------------------------------------------------------ choosing the notebook


def test_no_notebook_gives_a_zero_naming_what_was_found(root, fake, results_validator):
    (root / "submission" / "solution.py").write_text("x = 1")
    gradescope.run(root)
    final = written(root)
    results_validator(final)
    assert final["score"] == 0.0 and fake.calls == []
    assert "No notebook" in final["output"] and "It holds solution.py." in final["output"]
    assert "`" not in final["output"], "a file name is plain text: no literal backticks for the student"


def test_empty_or_missing_submission_gives_a_zero(root, fake):
    gradescope.run(root)
    assert "It is empty" in written(root)["output"]
    (root / "submission").rmdir()
    gradescope.run(root)
    assert "nothing was uploaded" in written(root)["output"] and fake.calls == []


def test_two_notebooks_give_a_zero_listing_both(root, fake, results_validator):
    notebook(root / "submission" / "a.ipynb")
    notebook(root / "submission" / "sub" / "b.ipynb")
    gradescope.run(root)
    final = written(root)
    results_validator(final)
    assert final["score"] == 0.0 and fake.calls == []
    assert "2 notebooks" in final["output"] and "(a.ipynb, sub/b.ipynb)" in final["output"]
    assert f"name the one to grade {ID}.ipynb." in final["output"], (
        "the message names the file name that would be chosen"
    )
    assert "`" not in final["output"], "a file name is plain text: no literal backticks for the student"


def test_of_several_notebooks_the_one_named_like_the_assignment_is_graded(root, fake):
    notebook(root / "submission" / "scratch.ipynb", "scratch")
    notebook(root / "submission" / "hw" / f"{ID}.ipynb", "the one")
    gradescope.run(root)
    assert b"the one" in fake.calls[0]["content"]
    final = written(root)
    assert final["extra_data"]["gradescope"]["notebook"] == f"hw/{ID}.ipynb"
    assert final["output"].startswith(f"Your submission has 2 notebooks; graded hw/{ID}.ipynb, ignored scratch.ipynb.")


def test_notebooks_are_found_in_subfolders_but_not_in_hidden_ones(root, fake):
    notebook(root / "submission" / "repo" / "work" / "x.ipynb", "real")
    notebook(root / "submission" / "repo" / ".ipynb_checkpoints" / "x-checkpoint.ipynb")
    notebook(root / "submission" / "__MACOSX" / "x.ipynb")
    gradescope.run(root)
    assert b"real" in fake.calls[0]["content"]


def test_a_symlinked_notebook_is_never_followed(root, fake, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("HIDDEN-TOLERANCE")
    (root / "submission" / "a.ipynb").symlink_to(secret)
    gradescope.run(root)
    final = written(root)
    assert fake.calls == [] and final["score"] == 0.0
    assert "symbolic link" in final["output"] and "HIDDEN-TOLERANCE" not in json.dumps(final)


def test_an_oversized_notebook_is_refused_with_its_size(root, fake, monkeypatch):
    monkeypatch.setattr(gradescope, "NOTEBOOK_MAX_BYTES", 100)
    notebook(root / "submission" / "big.ipynb", "x" * 500)
    gradescope.run(root)
    assert fake.calls == []
    assert "more than the 100 allowed" in written(root)["output"]


# ------------------------------------------------------------------------------------ failures


def test_a_crashing_grader_still_leaves_a_valid_zero_and_logs_the_traceback(
    root, monkeypatch, capsys, results_validator
):
    f = FakeGrader(root, error=RuntimeError("kernel manager exploded"))
    monkeypatch.setattr(pipeline, "grade_notebook", f)
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    final = written(root)
    results_validator(final)
    assert final["score"] == 0.0
    assert "grader itself failed" in final["output"] and "RuntimeError" in final["output"]
    assert "kernel manager exploded" not in final["output"], "no internals in the student's view"
    out = capsys.readouterr().out
    assert "Traceback" in out and "kernel manager exploded" in out


def test_a_broken_assignment_folder_is_a_zero_not_a_missing_file(root, fake, results_validator):
    (root / "source" / "assignments" / ID / "assignment.toml").write_text("not = [valid")
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    final = written(root)
    results_validator(final)
    assert "AssignmentError" in final["output"] and fake.calls == []


def test_cli_exits_0_when_it_wrote_a_failure_result(root, monkeypatch):
    monkeypatch.setattr(pipeline, "grade_notebook", FakeGrader(root, error=ValueError("boom")))
    notebook(root / "submission" / "a.ipynb")
    from autograder.gradescope.cli import register

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["gradescope", "run", "--root", str(root)])
    assert res.exit_code == 0, res.output
    assert "score 0" in res.output and written(root)["score"] == 0.0


# ----------------------------------------------------------------------- metadata, assignment id


def test_submission_metadata_is_recorded_without_personal_data(root, fake):
    meta = {
        "id": 123456,
        "created_at": "2026-07-01T14:22:32-07:00",
        "submission_method": "upload",
        "assignment": {"title": "Lesson 07", "total_points": "100.0"},
        "users": [{"email": "student@example.com", "id": 1, "name": "Student User"}],
        "previous_submissions": [{"score": 3.0, "results": {}}],
    }
    (root / "submission_metadata.json").write_text(json.dumps(meta))
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    final = written(root)
    assert final["extra_data"]["gradescope"] == {
        "assignment": ID,
        "submission_id": 123456,
        "created_at": "2026-07-01T14:22:32-07:00",
        "submission_method": "upload",
        "assignment_title": "Lesson 07",
        "previous_submissions": 1,
        "notebook": "a.ipynb",
    }
    assert "student@example.com" not in json.dumps(final)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"id": true, "assignment": 5}', "\xff"])
def test_odd_submission_metadata_is_ignored(root, fake, content):
    (root / "submission_metadata.json").write_text(content, errors="surrogateescape")
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    assert written(root)["score"] == 20.0
    assert set(written(root)["extra_data"]["gradescope"]) == {"assignment", "notebook"}


def test_symlinked_metadata_is_not_read(root, fake, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"id": 99}))
    (root / "submission_metadata.json").symlink_to(target)
    assert gradescope.read_submission_metadata(root) == {}


def test_assignment_comes_from_the_option_then_the_manifest(root, fake):
    make_source(root / "source", "demo-02")
    (root / "source" / "gradescope.json").write_text(json.dumps({"assignment": ID}))
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    assert fake.calls[-1]["assignment"] == ID
    gradescope.run(root, "demo-02")
    assert fake.calls[-1]["assignment"] == "demo-02"
    (root / "source" / "gradescope.json").unlink()
    calls = len(fake.calls)
    gradescope.run(root)  # two folders, no manifest: ambiguous
    final = written(root)
    assert len(fake.calls) == calls and final["score"] == 0.0
    assert "AssignmentError" in final["output"]
    assert "pass --assignment" in final["extra_data"]["gradescope"]["grader_error"]


def test_autograder_root_env_points_at_the_source(root, fake, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    make_source(elsewhere, "demo-03")
    elsewhere.chmod(0o755)
    monkeypatch.setenv("AUTOGRADER_ROOT", str(elsewhere))
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    assert fake.calls[-1]["assignment"] == "demo-03"
    assert mode_of(elsewhere) == 0o755, "only ROOT/source is closed, never a checkout named by the env"


# ---------------------------------------------------------------------------------- leaderboard


def test_no_leaderboard_without_the_assignments_hook(root, fake, results_validator):
    """The core ranks nothing by itself (lesson 07's rule lives in its grading package)."""
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    final = written(root)
    results_validator(final)
    assert final["score"] == 20.0 and "leaderboard" not in final


def test_an_assignment_may_define_its_own_leaderboard(root, fake, tmp_path, monkeypatch):
    source = tmp_path / "hooked"
    make_source(
        source,
        "demo-hook",
        grading=MINIMAL_GRADING
        + ("def leaderboard(grade, measurements):\n    return [{'name': 'Score', 'value': grade['score']}]\n"),
    )
    monkeypatch.setenv("AUTOGRADER_ROOT", str(source))
    notebook(root / "submission" / "a.ipynb")
    gradescope.run(root)
    assert written(root)["leaderboard"] == [{"name": "Score", "value": 20.0}]


def test_run_raises_only_when_the_results_file_cannot_be_written(root, fake, monkeypatch):
    def unwritable(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(gradescope, "write_json_atomic", unwritable)
    notebook(root / "submission" / "a.ipynb")
    with pytest.raises(PermissionError):
        gradescope.run(root)
    assert fake.calls == []
