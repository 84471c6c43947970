"""Checks of a command's own arguments, made before anything runs or is written.

A mistake in the command (a path that does not exist, a folder where a notebook is expected, an
``--out`` that is a file or cannot be written, a broken tolerances or rubric file) is the
instructor's to fix: it is one line on stderr and exit code 2 (``EXIT_USAGE``), like a usage
error of any command-line tool. A student's broken notebook is not such a mistake: it is graded
(a zero with its reason) and the command exits 0.

Exit codes of every command: 0 grades were produced (whatever the scores); 1 the grader itself
failed (a bug: a traceback); 2 a mistake in the command, nothing was written; 130 interrupted.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from pathlib import Path
from typing import Any, Iterator, NoReturn

import typer

from .errors import AutograderError

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
NOTEBOOK_SUFFIX = ".ipynb"


class CommandError(AutograderError):
    """A mistake in the command line: reported in one line, exit 2, nothing written."""


def one_line(message: Any, limit: int = 600) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fail(message: Any) -> NoReturn:
    typer.secho(f"error: {one_line(message)}", fg="red", err=True)
    raise typer.Exit(EXIT_USAGE)


@contextlib.contextmanager
def command_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Turn the harness's own errors (and ``kinds``) into one line on stderr and exit 2."""
    caught: tuple[type[BaseException], ...] = (AutograderError, *kinds)
    try:
        yield
    except caught as e:
        fail(e)


# ── paths ─────────────────────────────────────────────────────────────────────────────────────


def check_notebook(path: Path) -> Path:
    """A readable, non-empty ``.ipynb`` file. Its content is the student's: not checked here."""
    path = Path(path)
    if not path.exists():
        raise CommandError(f"{path} does not exist: give the path of a submitted notebook (.ipynb)")
    if path.is_dir():
        raise CommandError(
            f"{path} is a folder, not a notebook: `autograder grade` takes one .ipynb file "
            f"(for a folder of notebooks use `autograder batch {path} --out DIR`)"
        )
    if not path.is_file():
        raise CommandError(f"{path} is not a regular file: give a notebook (.ipynb)")
    if path.suffix.lower() != NOTEBOOK_SUFFIX:
        raise CommandError(f"{path} is not a notebook: expected a .ipynb file, got '{path.suffix or 'no suffix'}'")
    if not os.access(path, os.R_OK):
        raise CommandError(f"{path} cannot be read (permission denied)")
    if path.stat().st_size == 0:
        raise CommandError(f"{path} is empty (0 bytes): is this the file you meant?")
    return path


def check_source(path: Path) -> Path:
    """A batch source: a readable folder, or a zip file."""
    path = Path(path)
    if not path.exists():
        raise CommandError(f"{path} does not exist: give a folder of .ipynb files or a Gradescope export zip")
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise CommandError(f"{path} cannot be read (permission denied)")
        return path
    if not os.access(path, os.R_OK):
        raise CommandError(f"{path} cannot be read (permission denied)")
    if not zipfile.is_zipfile(path):
        raise CommandError(f"{path} is neither a folder nor a zip file (Gradescope's 'Export Submissions' gives a zip)")
    return path


def check_out_dir(path: Path, *, what: str = "--out") -> Path:
    """A folder that exists and is writable, or can be created (its nearest existing parent is a
    writable folder). Nothing is created here."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise CommandError(f"{what} {path} is an existing file, not a folder: give a folder to write into")
        if not os.access(path, os.W_OK | os.X_OK):
            raise CommandError(f"{what} {path} is not writable: give a folder you can write to")
        return path
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CommandError(f"{what} {path} cannot be created: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CommandError(f"{what} {path} cannot be created: {parent} is not writable")
    return path


def create_out_dir(path: Path, *, what: str = "--out") -> Path:
    """The last check before a command runs: make the folder (a mount can refuse what the
    permission bits allow)."""
    check_out_dir(path, what=what)
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CommandError(f"{what} {path} cannot be created: {e.strerror or e}") from None
    return Path(path)


def check_empty_or_absent(path: Path, *, what: str) -> Path:
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise CommandError(f"{what} {path} must be an empty folder or not exist yet")
    return check_out_dir(path, what=what)


def check_file(path: Path | None, *, what: str) -> Path | None:
    """An instructor's input file (tolerances, rubric) that must exist and be readable."""
    if path is None:
        return None
    path = Path(path)
    if not path.is_file():
        raise CommandError(f"{what} {path} does not exist" if not path.exists() else f"{what} {path} is not a file")
    if not os.access(path, os.R_OK):
        raise CommandError(f"{what} {path} cannot be read (permission denied)")
    return path.resolve()


def check_grading_files(assignment: Any, tolerances: Path | None, rubric: Path | None) -> None:
    """The rubric and the (merged) tolerances parse and agree: every tolerance a rubric part names
    exists. Raises AssignmentError/CommandError with the file and the key at fault."""
    check_file(tolerances, what="--tolerances")
    check_file(rubric, what="--rubric")
    assignment.check_grading(tolerances, rubric)
