"""CLI commands for authors: ``new-assignment ID`` (a minimal working lesson), ``build ID`` (notebooks
from the master, and ``--check``), ``calibrate ID`` (tolerances) and ``check-assignment ID`` (the
conformance checks, :mod:`autograder.authoring.conformance`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..assignment import Assignment
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
    from .build import (
        build_assignment,
        reference_measurements,
        rubric_paths_missing,
        rubric_text_problems,
        stale_files,
    )

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
            _fail_on(rubric_text_problems(a.rubric(), None, a.rubric_path), f"fix the text in {a.rubric_path}")
            _note_uncalibrated(a)
            measurements = reference_measurements(a, unsafe_no_sandbox=unsafe_no_sandbox)
            _fail_on(
                rubric_paths_missing(a.rubric(), measurements, a.rubric_path),
                f"fix the path in {a.rubric_path}, or make the grading code measure it",
            )
            typer.echo("every rubric path is in the reference run's measurements")
            _fail_on(rubric_text_problems(a.rubric(), measurements, a.rubric_path), f"fix the text in {a.rubric_path}")
            typer.echo("every rubric text renders with the reference run's measurements")
            return
        result = build_assignment(a)
    for path in result.written:
        typer.echo(f"{'wrote    ' if path in result.changed else 'unchanged'} {path}")
    _note_uncalibrated(a)


def _fail_on(problems: list, advice: str) -> None:
    """Each problem as an error line, then ``advice``, and exit 1; nothing when there is none."""
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if problems:
        typer.echo(advice, err=True)
        raise typer.Exit(1)


def _note_uncalibrated(a: Assignment) -> None:
    """One line when the lesson's tolerances lack a key its rubric names (never calibrated, or not
    since the rubric changed): not a failure of the build, which comes before calibration."""
    note = a.uncalibrated()
    if note is not None:
        typer.echo(f"note: {note}")


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


def check_assignment(
    assignment: Optional[str] = typer.Argument(
        None, help="Assignment id (a folder under assignments/); may be left out when there is only one."
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Only the checks that grade nothing (seconds, no kernel); leave out the examples' grades.",
    ),
) -> None:
    """Run every conformance check on one lesson (docs/ADDING-AN-ASSIGNMENT.md): one line per check,
    passed or FAILED with the reason; exit 1 when one fails. The checks that grade the examples run
    them in the jail, as one batch (minutes)."""
    import tempfile

    from .conformance import Lesson, run_checks, selected

    with command_errors(SandboxUnavailableError):
        a = resolve_assignment(assignment, option="the ID argument")
        failed = 0
        with tempfile.TemporaryDirectory(prefix="autograder-check-assignment-") as tmp:
            lesson = Lesson(a.folder.parent.parent, a.id, Path(tmp))
            for outcome in run_checks(lesson, selected(quick=quick)):
                typer.echo(outcome.line())
                failed += not outcome.passed
    if failed:
        typer.echo(f"{a.id}: {failed} check{'s' if failed > 1 else ''} failed", err=True)
        raise typer.Exit(1)
    typer.echo(f"{a.id}: every check passed" + (" (--quick: the examples were not graded)" if quick else ""))


def register(app: typer.Typer) -> None:
    app.command("new-assignment")(new_assignment)
    app.command()(build)
    app.command()(calibrate)
    app.command("check-assignment")(check_assignment)
