"""CLI commands ``grade`` (one notebook) and ``demo`` (the bundled examples)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .cli_checks import (
    EXIT_INTERRUPTED,
    check_empty_or_absent,
    check_file,
    check_grading_files,
    check_notebook,
    check_out_dir,
    command_errors,
    create_out_dir,
)
from .errors import AssignmentError, SandboxUnavailableError
from .grade_options import GradeOptions
from .student_text import clean
from .statuses import RunStatus

ASSIGNMENT_HELP = (
    "Assignment id (a folder under assignments/). Default: the only one, else the one the "
    "notebook's metadata or file name names."
)
UNSAFE_OPT = typer.Option(
    False, "--unsafe-no-sandbox", help="Run even when no isolation layer is available. Only for trusted notebooks."
)


def grade(
    notebook: Path = typer.Argument(..., metavar="NOTEBOOK", help="The submitted notebook (.ipynb)."),
    assignment: Optional[str] = typer.Option(None, "--assignment", "-a", help=ASSIGNMENT_HELP),
    out: Path = typer.Option(
        Path("out"), "--out", "-o", help="Where results.json, feedback.md and the stage files go."
    ),
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", help="Keep the jailed working directory here for inspection."
    ),
    tolerances: Optional[Path] = typer.Option(
        None, "--tolerances", help="Override some tolerances: a TOML file with only the keys to change."
    ),
    unsafe_no_sandbox: bool = UNSAFE_OPT,
) -> None:
    """Grade one notebook: execute it in the jail, measure, judge, and write results.json + feedback.md.

    Exits 0 whenever a grade was produced, whatever the score (a notebook that is not valid JSON
    is a zero with its reason); 2 for a mistake in the command, checked before anything runs.
    """
    from .assignment_match import notebook_facts, resolve_assignment
    from .pipeline import EXECUTION_FILE, MEASUREMENTS_FILE, grade_notebook
    from .report.console import print_grade_table

    with command_errors():
        check_notebook(notebook)
        check_out_dir(out)
        if workspace is not None:
            check_empty_or_absent(workspace, what="--workspace")
        a = resolve_assignment(assignment, [notebook_facts(notebook)])
        tolerances = check_file(tolerances, what="--tolerances")
        check_grading_files(a, tolerances, None)
        created = not out.exists()
        create_out_dir(out)
    try:
        with command_errors(SandboxUnavailableError):
            options = GradeOptions(tolerances=tolerances, unsafe_no_sandbox=unsafe_no_sandbox)
            grade_ = grade_notebook(notebook, a, out, options=options, workspace=workspace)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the pipeline removed what this grade wrote
        if created:
            _remove_if_empty(out)
        typer.secho(f"interrupted: nothing was graded; {out} holds no results.json", fg="yellow", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    for line in execution_notes(out / EXECUTION_FILE):
        typer.secho(line, fg="yellow")
    for warning in grade_.get("version_drift", []):
        typer.secho(f"warning: {warning}", fg="yellow")
    print_grade_table(grade_, measurements=_read_json(out / MEASUREMENTS_FILE))
    typer.echo(
        f"score {grade_['score']:g}/{grade_['max_score']:g} · wrote {out / 'results.json'} and {out / 'feedback.md'}"
    )


def execution_notes(execution_file: Path) -> list[str]:
    """One line each: why the notebook did not run to the end, the language its metadata names
    when not Python, and its first failing cell (named as the student reads it)."""
    from .cell_numbers import where_of
    from .report.execution_text import error_text

    execution = _read_json(execution_file)
    if not execution:
        return []
    notes = []
    status = execution.get("status")
    if status not in (None, RunStatus.COMPLETED):
        notes.append(f"{status}: {plain(execution.get('reason') or 'the notebook did not run to the end')}")
    if execution.get("language"):
        notes.append(f"the notebook's metadata names {plain(execution['language'], 40)}; it ran as Python")
    if status == RunStatus.COMPLETED and execution.get("cells_total") == 0:
        notes.append("the notebook has no code cell: nothing ran")
    first = execution.get("first_error")
    if isinstance(first, dict):
        notes.append(f"{where_of(first)} raised {plain(error_text(first), 380)}")
    return notes


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (a --workspace inside it, say) or already gone
        pass


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def plain(text: object, limit: int = 400) -> str:
    """Student-controlled text for the terminal: no control characters, one bounded line."""
    return clean(text or "", limit)


def demo(
    assignment: Optional[str] = typer.Option(
        None, "--assignment", "-a", help="Assignment id. Default: every assignment, each into OUT/ID/."
    ),
    out: Path = typer.Option(Path("demo-out"), "--out", "-o", help="Where each example's results go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel submissions (0: the number of cores)."),
) -> None:
    """Grade the bundled example submissions (as `batch` does, kernel template included) and print
    a table of scores per check.

    Each assignment's examples are graded with that assignment (they live in its folder).
    """
    from .assignment import assignment_ids, load_assignment
    from .batch import run_batch
    from .report.console import print_scores_table

    with command_errors(SandboxUnavailableError):
        check_out_dir(out)
        ids = [assignment] if assignment else assignment_ids()
        if not ids:
            raise AssignmentError("no assignment under assignments/ to demo")
        runs = [(load_assignment(i), out if assignment else out / i) for i in ids]
        for a, folder in runs:
            # as `autograder batch` grades a class: kernels from the slot's kernel template where it holds
            summary = run_batch(
                a.folder / "examples",
                folder,
                assignment=a,
                options=GradeOptions(kernel_template=True),
                jobs=jobs or None,
            )
            if len(runs) > 1:
                typer.echo(a.title)
            print_scores_table(summary.rows)
            typer.echo(f"wrote {folder}/gradebook.csv and {folder}/summary.html")


def register(app: typer.Typer) -> None:
    app.command()(grade)
    app.command()(demo)
