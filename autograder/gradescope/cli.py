"""CLI commands ``gradescope build`` (the autograder zip), ``gradescope run`` (one submission) and
``gradescope simulate`` (the instructor's rehearsal in a simulated container; not in the zip's wheel)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Optional

import typer

from ..cli_checks import CommandError, check_notebook, check_out_dir, command_errors

ZIP_SCRIPTS = ("setup.sh", "run_autograder")  # at the root of every zip `gradescope build` writes
BASES = ("host", "debian")

gradescope_app = typer.Typer(
    help="Run on Gradescope: build the autograder zip, grade one submission.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@gradescope_app.command()
def build(
    assignment: Optional[str] = typer.Argument(
        None, help="Assignment id (a folder under assignments/); may be left out when there is only one."
    ),
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
        chosen = resolve_assignment(assignment, root=root, option="the ID argument")
        report = build_zip(chosen.id, output, root=root)
    typer.echo(
        f"wrote {report.zip_path} ({report.size_bytes / 1024:.0f} KB, {len(report.entries)} files, {report.wheel_name})"
    )
    typer.echo(
        f"hidden-data secret {report.secret_fingerprint} (from {report.secret_path}): the same as "
        "local grading, so a local regrade of an export gives Gradescope's grades"
    )
    from .budget import budget, explain

    # the assignment chosen above: with the ID left out (the only one), not None
    for line in explain(budget(chosen)):
        typer.echo(line)

    drift = chosen.calibration_drift()  # a warning, not a failure: the zip is written
    if drift is not None:
        typer.echo(f"warning: {drift}", err=True)


@gradescope_app.command()
def run(
    root: Path = typer.Option(
        Path("/autograder"), "--root", help="Gradescope's folder: source/, submission/, results/."
    ),
    assignment: Optional[str] = typer.Option(
        None, "--assignment", "-a", help="Assignment id (default: the one the zip was built for)."
    ),
) -> None:
    """Grade the notebook in ROOT/submission into ROOT/results/results.json (what run_autograder calls).

    Exits 0 whenever a valid results.json was written, even when it reports the grader's own failure.
    """
    from .run import run as run_gradescope

    results = run_gradescope(root, assignment)
    extra = found if isinstance(found := results.get("extra_data"), dict) else {}
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
    base: str = typer.Option(
        "host",
        "--base",
        help="host: the host's system folders, read-only (quick); "
        "debian: a fresh Debian root file system where setup.sh installs everything.",
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for results.json and the grader's output."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Run setup.sh again even when the image is cached."),
) -> None:
    """Grade SUBMISSION as Gradescope would run it: the zip's image (setup.sh, cached), then a
    Docker-like container of it (root with Docker's capabilities and seccomp profile, a memory and
    CPU cgroup) running /autograder/run_autograder. Needs root and cgroup v1; no Docker."""
    import json

    with command_errors():
        check_simulation(zip_path, submission, memory_mb=memory_mb, cpus=cpus, timeout_s=timeout_s, base=base, out=out)
    from .sim.container import ContainerUnavailable
    from .sim.image import ImageBuildError
    from .sim.simulate import simulate as run_simulation
    from ..safe_files import write_atomic, write_json_atomic

    with command_errors(ContainerUnavailable, ImageBuildError):
        sim = run_simulation(
            zip_path,
            submission,
            memory_mb=memory_mb,
            cpus=cpus,
            timeout_s=timeout_s,
            base=base,
            rebuild=rebuild,
            say=lambda line: typer.echo(line, err=True),  # the build's steps as they happen, on stderr
        )
    if out:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "stdout.txt", sim.stdout)
        if sim.results is not None:
            write_json_atomic(out / "results.json", sim.results)
    typer.echo(sim.stdout.rstrip())
    typer.echo(json.dumps(sim.summary(), indent=2))
    if sim.results is None:
        typer.secho(
            'no valid results.json: Gradescope would show "The autograder failed to execute correctly"',
            fg="red",
            err=True,
        )
        raise typer.Exit(1)


def require_simulator() -> None:
    """The simulator is an instructor's tool: the wheel in the Gradescope zip leaves it out, so
    ``gradescope simulate`` there stops with one line instead of a traceback."""
    import importlib.util

    if importlib.util.find_spec(f"{__package__}.sim") is None:
        raise CommandError(
            "gradescope simulate is an instructor's tool and is not in the wheel that ships "
            "to Gradescope: run it from a clone of the project (`make setup`)"
        )


def check_autograder_zip(path: Path) -> Path:
    """A readable zip with ``setup.sh`` and ``run_autograder`` at its root (what ``gradescope build``
    writes); else a CommandError in one line."""
    path = Path(path)
    hint = "give the zip that `autograder gradescope build ID -o autograder.zip` writes"
    if not path.exists():
        raise CommandError(f"{path} does not exist: {hint}")
    if path.is_dir():
        raise CommandError(f"{path} is a folder, not the autograder zip: {hint}")
    if not path.is_file() or not os.access(path, os.R_OK):
        raise CommandError(f"{path} cannot be read as a file: {hint}")
    if not zipfile.is_zipfile(path):
        what = (
            "its name ends in .zip, but its contents are not a zip archive"
            if path.suffix == ".zip"
            else "not a zip archive"
        )
        raise CommandError(f"{path} is not a zip file ({what}): {hint}")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError) as e:
        raise CommandError(f"{path} is a damaged zip ({e}): {hint}") from None
    missing = [n for n in ZIP_SCRIPTS if n not in names]
    if missing:
        raise CommandError(f"{path} is a zip but not an autograder zip (no {' or '.join(missing)} at its root): {hint}")
    return path


def check_simulation(
    zip_path: Path, submission: Path, *, memory_mb: int, cpus: float, timeout_s: float, base: str, out: Path | None
) -> None:
    """Every argument of ``gradescope simulate``, then whether the container can run here, before
    anything is built or written (exit 2 and one line, like every other command); first, that the
    simulator is here at all."""
    require_simulator()
    from .sim.container import unavailable_reason

    check_autograder_zip(zip_path)
    if Path(submission).is_dir():
        if not os.access(submission, os.R_OK | os.X_OK):
            raise CommandError(f"{submission} cannot be read (permission denied)")
    elif Path(submission).exists() or Path(submission).is_symlink():
        check_notebook(submission)
    else:
        raise CommandError(f"{submission} does not exist: give a notebook (.ipynb) or a folder of the student's files")
    for value, flag in ((memory_mb, "--memory-mb"), (cpus, "--cpus"), (timeout_s, "--timeout-s")):
        if not value > 0:
            raise CommandError(f"{flag} must be more than 0, got {value:g}")
    if base not in BASES:
        raise CommandError(f"--base {base!r} is not one of {', '.join(BASES)}")
    if out is not None:
        check_out_dir(out)
    why = unavailable_reason()
    if why:
        raise CommandError(f"gradescope simulate cannot run here: {why}")


def register(app: typer.Typer) -> None:
    app.add_typer(gradescope_app, name="gradescope")
