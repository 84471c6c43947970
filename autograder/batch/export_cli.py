"""CLI command ``export``: a graded class's scores as Canvas or Moodle import them
(autograder/report/lms_export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..cli_checks import CommandError, command_errors


def export(
    out: Path = typer.Argument(..., metavar="OUT", help="The --out folder of a batch (its gradebook.csv)."),
    to: str = typer.Option(..., "--to", help="canvas or moodle."),
    output: Path = typer.Option(..., "--output", "-o", help="The CSV to write."),
    title: Optional[str] = typer.Option(
        None, "--title", help="The assignment's column, as the platform names it (default: the assignment id)."
    ),
    due: Optional[str] = typer.Option(
        None, "--due", help="The due date, ISO 8601 with its time zone: counts late submissions (Moodle: a column)."
    ),
) -> None:
    """Write OUT's scores as a CSV that Canvas's or Moodle's grade import takes as it is."""
    from ..report.lms_export import ExportError, export as export_csv, parse_due
    from ..safe_files import write_atomic
    from .run import read_batch_file

    with command_errors(ExportError):
        batch = read_batch_file(out)
        if batch is None:
            raise CommandError(f"{out} holds no batch.json: give the --out folder of `autograder batch`")
        if output.exists() and output.is_dir():
            raise CommandError(f"--output {output} is a folder: give a file name")
        made = export_csv(
            out / "gradebook.csv", to, title or str(batch.get("assignment", "score")), parse_due(due) if due else None
        )
        write_atomic(output, made.text)
    typer.echo(
        f"{made.rows} students · wrote {output}"
        + (f" · {made.left_out} left out: no student id or email to match them by" if made.left_out else "")
        + (f" · {made.late} submissions after the due date" if due else "")
    )


def register(app: typer.Typer) -> None:
    app.command()(export)
