"""CLI commands ``batch`` (grade a class) and ``rescore`` (re-judge a graded class, running nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rich.text import Text

from ..cli_checks import EXIT_INTERRUPTED, CommandError, check_file, check_out_dir, check_source, command_errors
from ..errors import SandboxUnavailableError
from ..grade_options import GradeOptions

CALIBRATED_HELP = (
    "Judge with the assignment's calibrated tolerances and its own rubric, dropping an override "
    "an earlier run or rescore of OUT kept."
)


def batch(
    source: Path = typer.Argument(
        ..., metavar="SOURCE", help="A folder of .ipynb files or a Gradescope 'Export Submissions' zip."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Where each submission's results, gradebook.csv and summary.html go."
    ),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Parallel submissions (0: the number of cores)."),
    scheduler: Optional[str] = typer.Option(
        None,
        "--scheduler",
        help="Grade on Dask: tcp://HOST:PORT (a running scheduler) or local:N "
        "(N local single-threaded workers). Needs autograder[dask].",
    ),
    assignment: Optional[str] = typer.Option(
        None,
        "--assignment",
        "-a",
        help="Assignment id (a folder under assignments/). Default: the only "
        "one, else the one the notebooks' metadata or names agree on.",
    ),
    unsafe_no_sandbox: bool = typer.Option(
        False, "--unsafe-no-sandbox", help="Run even when no isolation layer is available. Only for trusted notebooks."
    ),
    fresh_kernels: bool = typer.Option(
        False,
        "--fresh-kernels",
        help="Start a fresh jailed kernel for every submission instead of a child of the worker's kernel "
        "template (the default where the jail allows one; SECURITY.md, The kernel template).",
    ),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", help="Share the execution cache across batches (default: OUT/.cache)."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Execute every notebook, even ones already run."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar (on a terminal)."),
    tolerances: Optional[Path] = typer.Option(
        None, "--tolerances", help="Override some tolerances: a TOML file with only the keys to change."
    ),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Accept a source with no notebook (an empty gradebook) instead of exit 2."
    ),
    calibrated: bool = typer.Option(False, "--calibrated", help=CALIBRATED_HELP),
) -> None:
    """Grade every submission of SOURCE in parallel; re-running resumes where it stopped.

    Writes OUT/<submission>/results.json (+ feedback.md, grade.json, measurements.json,
    execution.json), OUT/gradebook.csv, OUT/integrity.csv and OUT/summary.html. One failing
    submission never stops the batch; identical notebooks run once (cache by content hash).
    Exit 0 when grades were produced, 2 for a mistake in the command (nothing written).
    """
    from .run import run_batch
    from ..assignment_match import resolve_assignment, source_notebooks
    from ..report.console import print_scores_table

    with command_errors(SandboxUnavailableError):
        conflicts = [
            why
            for given, why in (
                (scheduler is not None and jobs, "-j N (the local pool) or --scheduler (Dask)"),
                (no_cache and cache_dir is not None, "--no-cache (execute everything) or --cache-dir (share a cache)"),
                (calibrated and tolerances is not None, "--calibrated or --tolerances (an override)"),
            )
            if given
        ]
        if conflicts:  # every one at once: fixing them one run at a time wastes the instructor's runs
            raise CommandError("give either " + "; either ".join(conflicts) + ", not both")
        if scheduler is not None:
            from .dask_executor import parse_scheduler

            parse_scheduler(scheduler)
        check_source(source)
        check_out_dir(out)
        if cache_dir is not None:
            check_out_dir(cache_dir, what="--cache-dir")
        notebooks = () if assignment else source_notebooks(source)
        if not assignment and not notebooks and not allow_empty:  # nothing to grade says more than "which?"
            raise CommandError(
                f"{source} holds no notebook (.ipynb) that could be read: nothing to grade. Check the path (a "
                "folder of .ipynb files or a Gradescope export zip), or pass --assignment and --allow-empty "
                "to write an empty gradebook"
            )
        a = resolve_assignment(assignment, notebooks, what=f"the notebooks of {source}")
        tolerances = check_file(tolerances, what="--tolerances")
        try:
            options = GradeOptions(
                tolerances=tolerances, unsafe_no_sandbox=unsafe_no_sandbox, kernel_template=not fresh_kernels
            )
            summary = run_batch(
                source,
                out,
                assignment=a,
                options=options,
                jobs=jobs or None,
                scheduler=scheduler,
                progress=progress,
                cache_dir=cache_dir,
                use_cache=not no_cache,
                allow_empty=allow_empty,
                calibrated=calibrated,
            )
        except KeyboardInterrupt:
            typer.secho(
                f"interrupted: finished submissions are kept in {out}; run the same command again to resume",
                fg="yellow",
                err=True,
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None
    for warning in summary.warnings:
        typer.secho(f"warning: {warning}", fg="yellow", err=True)
    for warning in summary.version_drift:
        typer.secho(f"warning: {warning}", fg="yellow")
    typer.echo(summary.grading_note)
    print_scores_table(summary.rows)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary.status_counts().items()))
    typer.echo(
        f"{len(summary.rows)} submissions ({counts or 'none'}) · {summary.executed} executed, "
        f"{summary.cache_hits} from cache, {summary.skipped} already done · {summary.elapsed_s:.1f} s"
    )
    _integrity_line(summary)
    typer.echo(f"wrote {summary.gradebook}, {summary.integrity_csv} and {summary.summary_html}")


def rescore(
    out: Path = typer.Argument(..., metavar="OUT", help="The --out folder of a batch run."),
    tolerances: Optional[Path] = typer.Option(
        None, "--tolerances", help="Override some tolerances: a TOML file with only the keys to change."
    ),
    rubric: Optional[Path] = typer.Option(
        None, "--rubric", help="Judge with this rubric.toml instead of the assignment's."
    ),
    partial: bool = typer.Option(
        False, "--partial", help="Rescore a batch that is not finished (ungraded submissions stay so)."
    ),
    calibrated: bool = typer.Option(False, "--calibrated", help=CALIBRATED_HELP),
) -> None:
    """Re-judge every submission of a batch from its stored measurements: no notebook is executed.

    Rewrites each results.json, feedback.md and grade.json, then gradebook.csv, integrity.csv and
    summary.html, and writes OUT/rescore-diff.csv: every submission whose score changed. Without
    --tolerances or --rubric, the files the batch last used are kept (--calibrated goes back).
    """
    from .run import rescore as rescore_batch
    from ..report.console import print_scores_table

    with command_errors():
        if not out.is_dir():
            raise CommandError(f"{out} is not a folder: give the --out folder of a batch run")
        tolerances = check_file(tolerances, what="--tolerances")
        rubric = check_file(rubric, what="--rubric")
        summary = rescore_batch(
            out, options=GradeOptions(tolerances=tolerances, rubric=rubric), partial=partial, calibrated=calibrated
        )
    for warning in summary.version_drift:
        typer.secho(f"warning: {warning}", fg="yellow")
    typer.echo(summary.grading_note)
    print_scores_table(summary.rows)
    print_score_changes(summary.diff)
    if summary.ungraded:
        typer.secho(
            f"{summary.ungraded} of {len(summary.rows)} submissions are not graded yet (--partial): "
            "they stay at 0 with status not_graded",
            fg="yellow",
        )
    _integrity_line(summary)
    typer.echo(
        f"rescored {summary.graded} of {len(summary.rows)} submissions in {summary.elapsed_s:.1f} s · "
        f"{len(summary.diff)} score(s) changed · wrote {summary.rescore_diff}, {summary.gradebook} "
        f"and {summary.summary_html}"
    )


def print_score_changes(diff: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..report.rescore_diff import moved_text

    if not diff:
        typer.echo("no score changed")
        return
    table = Table(title=f"{len(diff)} score(s) changed", title_justify="left")
    for column, justify in (("submission", "left"), ("old", "right"), ("new", "right"), ("checks that moved", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for change in diff:
        table.add_row(
            Text(change["name"]),
            _pts(change["old_score"]),
            _pts(change["new_score"]),
            Text(moved_text(change["checks_moved"])),
        )
    Console(width=None if Console().is_terminal else 160).print(table)


def _integrity_line(summary) -> None:
    report = summary.integrity
    if report is None:
        return
    flagged = report.flagged
    text = (
        f"integrity: {len(flagged)} pair(s) of notebooks share ≥ {report.threshold:.0%} of their code "
        f"(a lead to read, not a verdict): " + ", ".join(f"{p.a} ~ {p.b} {p.share:.0%}" for p in flagged[:5])
        if flagged
        else f"integrity: no pair of the {report.compared} notebooks compared shares "
        f"≥ {report.threshold:.0%} of its code"
    )
    typer.echo(text + (" …" if len(flagged) > 5 else ""))


def _pts(x) -> str:
    return "–" if x is None else f"{x:g}"


def register(app: typer.Typer) -> None:
    app.command()(batch)
    app.command()(rescore)
