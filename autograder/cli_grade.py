"""CLI commands ``grade`` (one notebook) and ``demo`` (the bundled examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .assignment import DEFAULT_ASSIGNMENT, load_assignment
from .errors import AssignmentError, AutograderError, SandboxUnavailableError

ASSIGNMENT_OPT = typer.Option(DEFAULT_ASSIGNMENT, "--assignment", "-a", help="Assignment id (a folder under assignments/).")
UNSAFE_OPT = typer.Option(False, "--unsafe-no-sandbox",
                          help="Run even when no isolation layer is available. Only for trusted notebooks.")


def grade(
    notebook: Path = typer.Argument(..., help="The submitted notebook (.ipynb)."),
    assignment: str = ASSIGNMENT_OPT,
    out: Path = typer.Option(Path("out"), "--out", "-o", help="Where results.json, feedback.md and the stage files go."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help="Keep the jailed working directory here for inspection."),
    tolerances: Optional[Path] = typer.Option(None, "--tolerances", help="Judge with this tolerances.toml instead of the assignment's."),
    unsafe_no_sandbox: bool = UNSAFE_OPT,
) -> None:
    """Grade one notebook: execute it in the jail, measure, judge, and write results.json + feedback.md.

    Exits 0 whenever a grade was produced, whatever the score.
    """
    from .pipeline import grade_notebook
    from .report.console import print_grade_table

    try:
        a = load_assignment(assignment)
        grade_ = grade_notebook(notebook, a, out, workspace=workspace, tolerances=tolerances,
                                unsafe_no_sandbox=unsafe_no_sandbox)
    except (AssignmentError, SandboxUnavailableError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    print_grade_table(grade_)
    typer.echo(f"score {grade_['score']:g}/{grade_['max_score']:g} · wrote {out / 'results.json'} and {out / 'feedback.md'}")


def demo(
    assignment: str = ASSIGNMENT_OPT,
    out: Path = typer.Option(Path("demo-out"), "--out", "-o", help="Where each example's results go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel submissions (0: the number of cores)."),
) -> None:
    """Grade the assignment's bundled example submissions and print a table of scores per check."""
    from .batch import run_batch
    from .report.console import print_scores_table

    try:
        a = load_assignment(assignment)
        summary = run_batch(a.folder / "examples", out, assignment=a, jobs=jobs or None)
    except (AutograderError, SandboxUnavailableError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    print_scores_table(summary.rows)
    typer.echo(f"wrote {out}/gradebook.csv and {out}/summary.html")


def register(app: typer.Typer) -> None:
    app.command()(grade)
    app.command()(demo)
