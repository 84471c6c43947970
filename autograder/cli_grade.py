"""CLI commands ``grade`` (one notebook) and ``demo`` (the bundled examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .errors import AssignmentError, AutograderError, SandboxUnavailableError

ASSIGNMENT_HELP = ("Assignment id (a folder under assignments/). Default: the only one, else the one the "
                   "notebook's metadata or file name names.")
UNSAFE_OPT = typer.Option(False, "--unsafe-no-sandbox",
                          help="Run even when no isolation layer is available. Only for trusted notebooks.")


def grade(
    notebook: Path = typer.Argument(..., help="The submitted notebook (.ipynb)."),
    assignment: Optional[str] = typer.Option(None, "--assignment", "-a", help=ASSIGNMENT_HELP),
    out: Path = typer.Option(Path("out"), "--out", "-o", help="Where results.json, feedback.md and the stage files go."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help="Keep the jailed working directory here for inspection."),
    tolerances: Optional[Path] = typer.Option(None, "--tolerances", help="Judge with this tolerances.toml instead of the assignment's."),
    unsafe_no_sandbox: bool = UNSAFE_OPT,
) -> None:
    """Grade one notebook: execute it in the jail, measure, judge, and write results.json + feedback.md.

    Exits 0 whenever a grade was produced, whatever the score.
    """
    from .assignment_match import read_notebook, resolve_assignment
    from .pipeline import grade_notebook
    from .report.console import print_grade_table

    try:
        a = resolve_assignment(assignment, [read_notebook(notebook)])
        grade_ = grade_notebook(notebook, a, out, workspace=workspace, tolerances=tolerances,
                                unsafe_no_sandbox=unsafe_no_sandbox)
    except (AssignmentError, SandboxUnavailableError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    print_grade_table(grade_)
    typer.echo(f"score {grade_['score']:g}/{grade_['max_score']:g} · wrote {out / 'results.json'} and {out / 'feedback.md'}")


def demo(
    assignment: Optional[str] = typer.Option(None, "--assignment", "-a",
                                             help="Assignment id. Default: every assignment, each into OUT/ID/."),
    out: Path = typer.Option(Path("demo-out"), "--out", "-o", help="Where each example's results go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel submissions (0: the number of cores)."),
) -> None:
    """Grade the bundled example submissions and print a table of scores per check.

    Each assignment's examples are graded with that assignment (they live in its folder).
    """
    from .assignment import assignment_ids, load_assignment
    from .batch import run_batch
    from .report.console import print_scores_table

    try:
        ids = [assignment] if assignment else assignment_ids()
        if not ids:
            raise AssignmentError("no assignment under assignments/ to demo")
        runs = [(load_assignment(i), out if assignment else out / i) for i in ids]
        for a, folder in runs:
            summary = run_batch(a.folder / "examples", folder, assignment=a, jobs=jobs or None)
            if len(runs) > 1:
                typer.echo(a.title)
            print_scores_table(summary.rows)
            typer.echo(f"wrote {folder}/gradebook.csv and {folder}/summary.html")
    except (AutograderError, SandboxUnavailableError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command()(grade)
    app.command()(demo)
