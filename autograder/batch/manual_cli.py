"""CLI commands ``manual gather`` and ``manual import``: a hand-graded question read across a
class, and the points course staff give back (autograder/batch/manual.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli_checks import CommandError, command_errors

manual_app = typer.Typer(
    help="Hand-graded questions of a graded class: read the answers together, record the points.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _batch(out: Path):
    from .manual import ManualError
    from .run import _batch_assignment, read_batch_file
    from .worker import task_from_json

    batch = read_batch_file(out)
    if batch is None:
        raise ManualError(f"{out} holds no batch.json: give the --out folder of `autograder batch`")
    return _batch_assignment(batch), [task_from_json(t) for t in batch.get("submissions", [])]


@manual_app.command()
def gather(
    out: Path = typer.Argument(..., metavar="OUT", help="The --out folder of a batch."),
    question: str = typer.Option(..., "--question", "-q", help="The [[manual]] item's id (rubric.toml)."),
    anonymous: bool = typer.Option(False, "--anonymous", help="Number the answers in a shuffled order, no names."),
) -> None:
    """Write OUT/manual-QUESTION.html (every answer to the question) and OUT/manual-QUESTION.csv (points to fill in)."""
    from .manual import ManualError, gather as gather_answers

    with command_errors(ManualError):
        assignment, tasks = _batch(out)
        notebooks = {t.name: Path(t.notebook) for t in tasks if t.notebook}
        page, sheet = gather_answers(out, assignment, question, notebooks, anonymous=anonymous)
    typer.echo(f"{len(notebooks)} answers · wrote {page} and {sheet}")


@manual_app.command("import")
def import_(
    out: Path = typer.Argument(..., metavar="OUT", help="The --out folder of a batch."),
    sheet: Path = typer.Argument(..., metavar="CSV", help="The points: columns submission, points, comment."),
    question: str = typer.Option(..., "--question", "-q", help="The [[manual]] item's id (rubric.toml)."),
) -> None:
    """Record the points of CSV for the question: in OUT/manual.json, gradebook.csv and each results.json."""
    from .manual import ManualError, import_points
    from .run import rescore

    with command_errors(ManualError):
        if not sheet.is_file():
            raise CommandError(f"{sheet} does not exist")
        assignment, tasks = _batch(out)
        recorded = import_points(out, assignment, question, sheet, [t.name for t in tasks])
        rescore(out, partial=True)  # judges nothing new: rewrites the gradebook and results with the points
    typer.echo(f"recorded {recorded} submissions' points for '{question}' · updated {out / 'gradebook.csv'}")


def register(app: typer.Typer) -> None:
    app.add_typer(manual_app, name="manual")
