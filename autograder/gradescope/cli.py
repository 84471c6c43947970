"""CLI commands ``gradescope build`` (the autograder zip) and ``gradescope run`` (one submission)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..cli_checks import CommandError, check_out_dir, command_errors

gradescope_app = typer.Typer(help="Run on Gradescope: build the autograder zip, grade one submission.",
                             no_args_is_help=True, rich_markup_mode=None)


@gradescope_app.command()
def build(
    assignment: Optional[str] = typer.Argument(None, help="Assignment id (a folder under assignments/); "
                                                          "may be left out when there is only one."),
    output: Path = typer.Option(Path("autograder.zip"), "--output", "-o", help="Where to write the zip."),
) -> None:
    """Build the zip to upload on Gradescope's "Configure Autograder" page (Ubuntu 22.04 base)."""
    from ..assignment_match import resolve_assignment
    from .build import build_zip, checkout_root

    with command_errors():
        check_out_dir(output.parent, what="--output folder")
        if output.is_dir():
            raise CommandError(f"--output {output} is a folder: give the path of the zip to write")
        root = checkout_root()
        report = build_zip(resolve_assignment(assignment, root=root, option="the ID argument").id, output, root=root)
    typer.echo(f"wrote {report.zip_path} ({report.size_bytes / 1024:.0f} KB, {len(report.entries)} files, "
               f"{report.wheel_name})")
    typer.echo(f"hidden-data secret {report.secret_fingerprint} (from {report.secret_path}): the same as "
               "local grading, so a local regrade of an export gives Gradescope's grades")
    from ..assignment import load_assignment
    from .budget import budget, explain
    from .build import checkout_root

    for line in explain(budget(load_assignment(assignment, root=checkout_root()))):
        typer.echo(line)


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
    extra = results.get("extra_data") if isinstance(results.get("extra_data"), dict) else {}
    for warning in extra.get("version_drift") or []:  # stdout: shown to instructors only
        typer.echo(f"[autograder] warning: {warning}")
    typer.echo(f"score {results.get('score', 0):g} · wrote {root / 'results' / 'results.json'}")


@gradescope_app.command()
def simulate(
    zip_path: Path = typer.Argument(..., help="The autograder zip (from `gradescope build`).", metavar="ZIP"),
    submission: Path = typer.Argument(..., help="A notebook, or a folder of the student's files."),
    memory_mb: int = typer.Option(768, "--memory-mb", help="The container's memory (Gradescope's default: 768)."),
    cpus: float = typer.Option(0.5, "--cpus", help="The container's CPUs (Gradescope's default: 0.5)."),
    timeout_s: float = typer.Option(600, "--timeout-s", help="The autograder timeout (Gradescope's default: 600)."),
    base: str = typer.Option("host", "--base", help="host: the host's system folders, read-only (quick); "
                             "debian: a fresh Debian root file system where setup.sh installs everything."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for results.json and the grader's output."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Run setup.sh again even when the image is cached."),
) -> None:
    """Grade SUBMISSION as Gradescope would run it: the zip's image (setup.sh, cached), then a
    Docker-like container of it (root with Docker's capabilities and seccomp profile, a memory and
    CPU cgroup) running /autograder/run_autograder. Needs root and cgroup v1; no Docker."""
    import json

    from .container import ContainerUnavailable
    from .image import ImageBuildError
    from .simulate import simulate as run_simulation

    with command_errors(ContainerUnavailable, ImageBuildError):
        sim = run_simulation(zip_path, submission, memory_mb=memory_mb, cpus=cpus, timeout_s=timeout_s,
                             base=base, rebuild=rebuild)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "stdout.txt").write_text(sim.stdout)
        if sim.results is not None:
            (out / "results.json").write_text(json.dumps(sim.results, indent=2) + "\n")
    typer.echo(sim.stdout.rstrip())
    typer.echo(json.dumps(sim.summary(), indent=2))
    if sim.results is None:
        typer.secho("no valid results.json: Gradescope would show \"The autograder failed to execute correctly\"",
                    fg="red", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(gradescope_app, name="gradescope")
