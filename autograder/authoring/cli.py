"""CLI commands for authors: ``new-assignment ID`` (a minimal working lesson), ``build ID`` (notebooks
from the master, and ``--check``) and ``calibrate ID`` (tolerances)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..assignment_match import resolve_assignment
from ..cli_checks import CommandError, check_out_dir, command_errors
from ..errors import SandboxUnavailableError


def build(
    assignment: Optional[str] = typer.Argument(
        None, help="Assignment id (a folder under assignments/); may be left out when there is only one."
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Write nothing; exit 1 when a built file is out of date "
        "or a rubric path is not in the reference run's measurements "
        "(runs the solution once, in the jail).",
    ),
    unsafe_no_sandbox: bool = typer.Option(
        False, "--unsafe-no-sandbox", help="With --check: run the (trusted) reference without the jail."
    ),
) -> None:
    """Build the student notebook, the solution and the examples (from reference/ID/master.ipynb with
    otter assign, or from a hand-written student notebook and reference/ID/solution.ipynb)."""
    from .build import build_assignment, reference_measurements, rubric_paths_missing, stale_files

    with command_errors(SandboxUnavailableError):
        a = resolve_assignment(assignment, option="the ID argument")
        if check:
            stale = stale_files(a)
            for rel in stale:
                typer.echo(f"out of date: {rel}")
            if stale:
                typer.echo(f"run `autograder build {a.id}` and commit the result")
                raise typer.Exit(1)
            typer.echo("all built files are up to date")
            missing = rubric_paths_missing(
                a.rubric(), reference_measurements(a, unsafe_no_sandbox=unsafe_no_sandbox), a.rubric_path
            )
            for m in missing:
                typer.echo(f"error: {m}", err=True)
            if missing:
                typer.echo(f"fix the path in {a.rubric_path}, or make the grading code measure it", err=True)
                raise typer.Exit(1)
            typer.echo("every rubric path is in the reference run's measurements")
            return
        result = build_assignment(a)
    for path in result.written:
        typer.echo(f"{'wrote    ' if path in result.changed else 'unchanged'} {path}")


def calibrate(
    assignment: Optional[str] = typer.Argument(
        None, help="Assignment id (a folder under assignments/); may be left out when there is only one."
    ),
    runs: int = typer.Option(
        10, "--runs", "-n", min=1, help="Runs of the reference solution, each with its own seeds."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Where to write tolerances.toml (default: reference/ID/tolerances.toml)."
    ),
    unsafe_no_sandbox: bool = typer.Option(
        False, "--unsafe-no-sandbox", help="Run the (trusted) reference without the jail."
    ),
) -> None:
    """Run the reference solution over many seeds and derive tolerances.toml from the worst runs."""
    from .calibrate import calibrate as run_calibration

    with command_errors(SandboxUnavailableError):
        if output is not None:
            check_out_dir(output.parent, what="--output folder")
            if output.is_dir():
                raise CommandError(f"--output {output} is a folder: give the path of the tolerances.toml to write")
        a = resolve_assignment(assignment, option="the ID argument")
        path = run_calibration(a, runs=runs, output=output, unsafe_no_sandbox=unsafe_no_sandbox, progress=typer.echo)
    typer.echo(f"wrote {path}")


def new_assignment(
    assignment: str = typer.Argument(
        ...,
        metavar="ID",
        help="The new assignment's id: its folder name under assignments/ and reference/, e.g. 12-my-lesson.",
    ),
    title: Optional[str] = typer.Option(None, "--title", help="The lesson's title (default: from the id)."),
) -> None:
    """Write a minimal working lesson (assignments/ID/ and reference/ID/: notebook, solution, rubric,
    grading package, one example mistake) that passes the conformance suite; then make it yours."""
    from ..project import project_root
    from .scaffold import new_assignment as scaffold

    with command_errors():
        root = project_root()
        written = scaffold(assignment, root, title=title)
    for path in written:
        typer.echo(f"wrote {path.relative_to(root)}")
    typer.echo(
        f"next: edit them, then `autograder build {assignment} --check` and the conformance suite "
        "(docs/ADDING-AN-ASSIGNMENT.md)"
    )


def register(app: typer.Typer) -> None:
    app.command("new-assignment")(new_assignment)
    app.command()(build)
    app.command()(calibrate)
