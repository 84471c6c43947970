"""CLI commands ``gradescope build`` (the autograder zip) and ``gradescope run`` (one submission)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import AutograderError

gradescope_app = typer.Typer(help="Run on Gradescope: build the autograder zip, grade one submission.",
                             no_args_is_help=True)


@gradescope_app.command()
def build(
    assignment: Optional[str] = typer.Argument(None, help="Assignment id (a folder under assignments/); "
                                                          "may be left out when there is only one."),
    output: Path = typer.Option(Path("autograder.zip"), "--output", "-o", help="Where to write the zip."),
) -> None:
    """Build the zip to upload on Gradescope's "Configure Autograder" page (Ubuntu 22.04 base)."""
    from ..assignment_match import resolve_assignment
    from .build import build_zip, checkout_root

    try:
        root = checkout_root()
        report = build_zip(resolve_assignment(assignment, root=root, option="the ID argument").id, output, root=root)
    except AutograderError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    typer.echo(f"wrote {report.zip_path} ({report.size_bytes / 1024:.0f} KB, {len(report.entries)} files, "
               f"{report.wheel_name})")


@gradescope_app.command()
def run(
    root: Path = typer.Option(Path("/autograder"), "--root", help="Gradescope's folder: source/, submission/, results/."),
    assignment: Optional[str] = typer.Option(None, "--assignment", "-a",
                                             help="Assignment id (default: the one the zip was built for)."),
) -> None:
    """Grade the notebook in ROOT/submission into ROOT/results/results.json (what run_autograder calls).

    Exits 0 whenever a valid results.json was written, even when it reports the grader's own failure.
    """
    from .run import run as run_gradescope

    results = run_gradescope(root, assignment)
    typer.echo(f"score {results.get('score', 0):g} · wrote {root / 'results' / 'results.json'}")


def register(app: typer.Typer) -> None:
    app.add_typer(gradescope_app, name="gradescope")
