"""The Gradescope settings (autograder/gradescope/budget.py): the worst legal notebook's time and
memory, what ``gradescope build`` prints, and docs/GRADESCOPE.md's "Settings" line, kept equal."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from autograder.cli import app
from autograder.gradescope import budget as budget_mod
from autograder.gradescope.budget import budget, settings_line
from autograder.measure.onnx_load import LoadLimits
from autograder.sandbox import execute
from autograder.sandbox.probe_run import probe_budget_s

ROOT = Path(__file__).resolve().parents[2]


def test_the_timeout_covers_every_limit_of_the_worst_legal_notebook(assignment07):
    b = budget(assignment07)
    limits = assignment07.limits
    # every part of one execution's hard bound, one measuring child per artifact, the grader's own work
    assert b.execution_s == (
        execute.STARTUP_TIMEOUT_S
        + limits.notebook_timeout_s
        + probe_budget_s(limits, len(assignment07.grading.probe_cases()))
        + execute.RECOVER_GRACE_S
        + 10
    )
    assert b.measuring_s == len(assignment07.artifacts) * LoadLimits().timeout_s
    assert b.timeout_s >= b.ceiling_s * (1 + budget_mod.TIME_MARGIN) and b.timeout_s % 60 == 0
    assert b.timeout_s - 60 < b.ceiling_s * (1 + budget_mod.TIME_MARGIN), "rounded up to the next minute only"
    assert b.timeout_s > 600, "the worst legal notebook does not fit Gradescope's 10 min default"
    assert b.memory_mb >= limits.memory_mb + budget_mod.GRADER_MEMORY_MB and b.memory_mb % 256 == 0


def test_a_longer_notebook_deadline_raises_the_timeout(assignment07):
    from dataclasses import replace

    longer = replace(
        assignment07,
        config={**assignment07.config, "execution": {**assignment07.config["execution"], "notebook_timeout_s": 900}},
    )
    assert budget(longer).timeout_s > budget(assignment07).timeout_s


def test_build_prints_the_settings_and_the_readme_shows_the_same(assignment07, tmp_path):
    line = settings_line(budget(assignment07))
    result = CliRunner().invoke(app, ["gradescope", "build", assignment07.id, "-o", str(tmp_path / "a.zip")])
    assert result.exit_code == 0, result.output
    assert line in result.output
    readme = (ROOT / "docs" / "GRADESCOPE.md").read_text()
    assert f"- **Settings:** {line}." in readme, (
        f'docs/GRADESCOPE.md\'s "Settings" must be what `gradescope build` prints:\n{line}'
    )


def test_no_lesson_is_told_that_its_reference_fits_without_a_measurement_of_it(project_root):
    """The settings follow from each lesson's own limits; the reference's fit is not claimed from
    another lesson's measurement: each is named, with the command that measures its own."""
    from autograder.assignment import assignment_ids, load_assignment
    from autograder.gradescope.budget import explain

    ids = assignment_ids(project_root)
    assert len(ids) >= 2
    for assignment_id in ids:
        lines = explain(budget(load_assignment(assignment_id, project_root)))
        text = "\n".join(lines)
        assert "alone fits Gradescope's defaults (768 MB, 0.5 CPU):" not in text, assignment_id
        assert f"follow from the limits of {assignment_id}" in text
        assert f"reference/{assignment_id}/solution.ipynb" in text
        for other in set(ids) - {assignment_id}:
            assert other not in text, f"{assignment_id}'s advice names {other}"
