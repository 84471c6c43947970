"""CLI commands ``batch`` (grade a class) and ``rescore`` (re-judge a graded class, running nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..assignment import DEFAULT_ASSIGNMENT, load_assignment
from ..errors import AutograderError, SandboxUnavailableError


def batch(
    source: Path = typer.Argument(..., help="A folder of .ipynb files or a Gradescope 'Export Submissions' zip."),
    out: Path = typer.Option(..., "--out", "-o", help="Where each submission's results, gradebook.csv and summary.html go."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel submissions (0: the number of cores)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler",
                                            help="Grade on Dask: tcp://HOST:PORT (a running scheduler) or local:N "
                                                 "(N local single-threaded workers). Needs autograder[dask]."),
    assignment: str = typer.Option(DEFAULT_ASSIGNMENT, "--assignment", "-a", help="Assignment id (a folder under assignments/)."),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="Run even when no isolation layer is available. Only for trusted notebooks."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Share the execution cache across batches (default: OUT/.cache)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Execute every notebook, even ones already run."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar (on a terminal)."),
) -> None:
    """Grade every submission of SOURCE in parallel; re-running resumes where it stopped.

    Writes OUT/<submission>/results.json (+ feedback.md, grade.json, measurements.json,
    execution.json), OUT/gradebook.csv and OUT/summary.html. One failing submission never stops
    the batch; identical notebooks run once (cache by content hash).
    """
    from .run import run_batch
    from ..report.console import print_scores_table

    if scheduler is not None and jobs:
        typer.secho("error: give either -j N (the local pool) or --scheduler (Dask), not both", fg="red", err=True)
        raise typer.Exit(2)
    try:
        if scheduler is not None:
            from .dask_executor import parse_scheduler

            parse_scheduler(scheduler)
        a = load_assignment(assignment)
        summary = run_batch(source, out, assignment=a, jobs=jobs or None, unsafe_no_sandbox=unsafe_no_sandbox,
                            progress=progress, cache_dir=cache_dir, use_cache=not no_cache, scheduler=scheduler)
    except (AutograderError, SandboxUnavailableError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:
        typer.secho(f"interrupted: finished submissions are kept in {out}; run the same command again to resume",
                    fg="yellow", err=True)
        raise typer.Exit(130)
    for warning in summary.warnings:
        typer.secho(f"warning: {warning}", fg="yellow", err=True)
    print_scores_table(summary.rows)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary.status_counts().items()))
    typer.echo(f"{len(summary.rows)} submissions ({counts}) · {summary.executed} executed, "
               f"{summary.cache_hits} from cache, {summary.skipped} already done · {summary.elapsed_s:.1f} s")
    typer.echo(f"wrote {summary.gradebook} and {summary.summary_html}")


def rescore(
    out: Path = typer.Argument(..., help="The --out folder of a batch run."),
    tolerances: Optional[Path] = typer.Option(None, "--tolerances", help="Judge with this tolerances.toml instead of the assignment's."),
    rubric: Optional[Path] = typer.Option(None, "--rubric", help="Judge with this rubric.toml instead of the assignment's."),
) -> None:
    """Re-judge every submission of a batch from its stored measurements: no notebook is executed.

    Rewrites each results.json, feedback.md and grade.json, then gradebook.csv and summary.html.
    """
    from .run import rescore as rescore_batch
    from ..report.console import print_scores_table

    try:
        summary = rescore_batch(out, tolerances=tolerances, rubric=rubric)
    except AutograderError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2)
    print_scores_table(summary.rows)
    typer.echo(f"rescored {summary.graded} of {len(summary.rows)} submissions in {summary.elapsed_s:.1f} s · "
               f"wrote {summary.gradebook} and {summary.summary_html}")


def register(app: typer.Typer) -> None:
    app.command()(batch)
    app.command()(rescore)
