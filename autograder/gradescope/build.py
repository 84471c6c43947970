"""Build the Gradescope autograder zip: ``autograder gradescope build ID -o autograder.zip``.

The zip holds, at its root: ``setup.sh`` and ``run_autograder`` (from ``gradescope/``), a wheel
of this package, ``constraints.txt`` (the same pins as every other install), a small manifest
``gradescope.json``, and the assignment's grader-side files: ``assignments/<id>/`` without its
example submissions, ``reference/<id>/tolerances.toml`` (never the solution or master
notebooks), and the deployment's hidden-data secret (``hidden-data.secret``, mode 0600: the one
local grading uses, so a local regrade of an export equals Gradescope's grade; created on first
use, see autograder/hidden_secret.py). Entries are sorted and carry a fixed timestamp, so the same
tree and secret build the same bytes.

The wheel is built by ``pip wheel`` with the build backend ``pyproject.toml`` names (setuptools,
from this environment: no network), from a staged copy of the package in a temporary folder (no
``build/`` folder in a tree others are editing), with ``SOURCE_DATE_EPOCH`` set, so two builds
give the same bytes. The staged copy leaves out :data:`INSTRUCTOR_ONLY`: the Gradescope simulator
(:mod:`autograder.gradescope.sim`) is the instructor's tool and never ships to a student's
grading container.
"""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import hidden_secret
from ..assignment import load_assignment, load_toml
from ..errors import AutograderError
from ..safe_files import atomic_replace

FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: reproducible bytes
SOURCE_DATE_EPOCH = calendar.timegm((*FIXED_DATE, 0, 0, 0))  # the same date for the wheel's entries
# Folders of the package that are the instructor's tools, left out of the wheel in the zip
# (relative to the checkout). run_autograder never imports them: a test grades without them.
INSTRUCTOR_ONLY = ("autograder/gradescope/sim",)
MANIFEST = "gradescope.json"
SCRIPTS = ("setup.sh", "run_autograder")  # under gradescope/ in the checkout; mode 0755
REFERENCE_FILES = ("tolerances.toml",)  # all the grader needs from reference/<id>/
EXCLUDED_DIRS = {"examples", "__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class BuildReport:
    zip_path: Path
    wheel_name: str
    entries: list[str]
    size_bytes: int
    secret_fingerprint: str = ""  # the hidden-data secret in the zip, by its fingerprint
    secret_path: str = ""  # where it was read from


def checkout_root() -> Path:
    """The source checkout this package runs from; building needs one (not an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "gradescope").is_dir():
        raise AutograderError(
            f"cannot build the Gradescope zip: {root} is not a source checkout (no pyproject.toml "
            "or gradescope/). Run `autograder gradescope build` from a clone of the project."
        )
    return root


# ---------------------------------------------------------------------------------------- zips


def _zipinfo(name: str, mode: int = 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16  # a regular file with these permission bits
    info.create_system = 3  # Unix, so the mode bits are honoured
    return info


def _write_zip(target: Path, files: dict[str, tuple[bytes, int]]) -> None:
    with zipfile.ZipFile(target, "w") as zf:
        for name in sorted(files):
            data, mode = files[name]
            zf.writestr(_zipinfo(name, mode), data)


def _tree_files(folder: Path, arc_prefix: str) -> dict[str, tuple[bytes, int]]:
    files: dict[str, tuple[bytes, int]] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in EXCLUDED_DIRS for part in rel.parts) or path.suffix in EXCLUDED_SUFFIXES:
            continue
        if path.is_symlink():
            raise AutograderError(f"{path} is a symlink; the Gradescope zip takes regular files only")
        if path.is_file():
            files[f"{arc_prefix}/{rel.as_posix()}"] = (path.read_bytes(), 0o644)
    return files


# --------------------------------------------------------------------------------------- wheel


def _stage(root: Path, stage: Path) -> None:
    """What the wheel is built from: ``pyproject.toml``, its readme, and the package without the
    :data:`INSTRUCTOR_ONLY` folders and without caches; every file mode 0644, so the wheel's bytes
    depend on the content alone (not on the checkout's umask or modes)."""
    project = load_toml(root / "pyproject.toml")["project"]
    names = ["pyproject.toml"]
    if isinstance(project.get("readme"), str):
        names.append(project["readme"])
    for name in names:
        (stage / name).write_bytes((root / name).read_bytes())
    package = root / project["name"]
    left_out = {root / Path(folder) for folder in INSTRUCTOR_ONLY}
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(root)
        if (
            any(path == d or d in path.parents for d in left_out)
            or "__pycache__" in rel.parts
            or path.suffix in EXCLUDED_SUFFIXES
        ):
            continue
        if path.is_symlink():
            raise AutograderError(f"{path} is a symlink; the Gradescope wheel takes regular files only")
        target = stage / rel
        if path.is_dir():
            target.mkdir(mode=0o755, parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
            target.chmod(0o644)


def build_wheel(root: Path) -> tuple[str, bytes]:
    """The wheel of the package described by ``root/pyproject.toml``, built by ``pip wheel`` with
    this environment's build backend (no network, no build isolation) from a staged copy without
    the instructor's tools; ``SOURCE_DATE_EPOCH`` fixes its timestamps. (filename, bytes)."""
    with tempfile.TemporaryDirectory(prefix="autograder-wheel-") as tmp:
        stage, out = Path(tmp) / "src", Path(tmp) / "dist"
        stage.mkdir()
        _stage(root, stage)
        env = {
            **os.environ,
            "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-index",
                "--no-build-isolation",
                "--check-build-dependencies",
                "--wheel-dir",
                str(out),
                str(stage),
            ],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            umask=0o022,
        )  # the modes of the files setuptools writes: not the caller's umask
        wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
        if done.returncode != 0 or len(wheels) != 1:
            backend = ", ".join(load_toml(root / "pyproject.toml")["build-system"]["requires"])
            raise AutograderError(
                f"`pip wheel` could not build the Gradescope wheel (exit {done.returncode}). It builds with "
                f"this environment's {backend} and no network; `make setup` installs it:\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )
        return wheels[0].name, wheels[0].read_bytes()


# ----------------------------------------------------------------------------------------- zip


def zip_contents(assignment_id: str, root: Path | None = None) -> tuple[dict[str, tuple[bytes, int]], str]:
    """Every file of the autograder zip (name → (bytes, mode)) and the wheel's filename."""
    root = root or checkout_root()
    assignment = load_assignment(assignment_id, root=root)
    wheel_name, wheel = build_wheel(root)
    files: dict[str, tuple[bytes, int]] = {wheel_name: (wheel, 0o644)}
    for script in SCRIPTS:
        files[script] = ((root / "gradescope" / script).read_bytes(), 0o755)
    files["constraints.txt"] = ((root / "constraints.txt").read_bytes(), 0o644)
    files.update(_tree_files(assignment.folder, f"assignments/{assignment.id}"))
    for name in REFERENCE_FILES:
        path = assignment.reference_folder / name
        if not path.is_file():
            raise AutograderError(f"{path} is missing: the Gradescope grader needs it to judge")
        files[f"reference/{assignment.id}/{name}"] = (path.read_bytes(), 0o644)
    # at the zip's root = $AUTOGRADER_ROOT on Gradescope, where hidden_secret finds it
    secret = hidden_secret.deployment(root)
    files[hidden_secret.SECRET_FILE] = (secret.text().encode("ascii"), 0o600)
    manifest = {
        "assignment": assignment.id,
        "assignment_version": assignment.version,
        "autograder": load_toml(root / "pyproject.toml")["project"]["version"],
        "hidden_secret": secret.fingerprint(),
        "wheel": wheel_name,
        # setup.sh provisions this Python: the one the pins in constraints.txt were resolved with
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    files[MANIFEST] = ((json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(), 0o644)
    return files, wheel_name


def build_zip(assignment_id: str, out: Path, root: Path | None = None) -> BuildReport:
    """Write the Gradescope autograder zip for ``assignment_id`` to ``out``."""
    files, wheel_name = zip_contents(assignment_id, root)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_replace(out) as tmp:
        _write_zip(tmp, files)
    manifest = json.loads(files[MANIFEST][0])
    return BuildReport(
        zip_path=out,
        wheel_name=wheel_name,
        entries=sorted(files),
        size_bytes=out.stat().st_size,
        secret_fingerprint=manifest["hidden_secret"],
        secret_path=str(hidden_secret.secret_path(root or checkout_root())),
    )
