"""Build the Gradescope autograder zip: ``autograder gradescope build ID -o autograder.zip``.

The zip holds, at its root: ``setup.sh`` and ``run_autograder`` (from ``gradescope/``), a wheel
of this package, ``constraints.txt`` (the same pins as every other install), a small manifest
``gradescope.json``, and the assignment's grader-side files: ``assignments/<id>/`` without its
example submissions, ``reference/<id>/tolerances.toml`` (never the solution or master
notebooks), and the deployment's hidden-data secret (``hidden-data.secret``, mode 0600: the one
local grading uses, so a local regrade of an export equals Gradescope's grade; created on first
use, see autograder/hidden_secret.py). Entries are sorted and carry a fixed timestamp, so the same
tree and secret build the same bytes.

The wheel is written here rather than by a build backend: the package is pure Python, the
format is small (PEP 427), and this needs neither the network nor a ``build/`` folder in a tree
others are editing. Its metadata comes from ``pyproject.toml``.
"""

from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
import io
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import hidden_secret
from ..assignment import load_assignment, load_toml
from ..errors import AutograderError

FIXED_DATE = (1980, 1, 1, 0, 0, 0)   # the earliest date a zip can hold: reproducible bytes
MANIFEST = "gradescope.json"
SCRIPTS = ("setup.sh", "run_autograder")           # under gradescope/ in the checkout; mode 0755
REFERENCE_FILES = ("tolerances.toml",)             # all the grader needs from reference/<id>/
EXCLUDED_DIRS = {"examples", "__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class BuildReport:
    zip_path: Path
    wheel_name: str
    entries: list[str]
    size_bytes: int
    secret_fingerprint: str = ""    # the hidden-data secret in the zip, by its fingerprint
    secret_path: str = ""           # where it was read from


def checkout_root() -> Path:
    """The source checkout this package runs from; building needs one (not an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "gradescope").is_dir():
        raise AutograderError(
            f"cannot build the Gradescope zip: {root} is not a source checkout (no pyproject.toml "
            "or gradescope/). Run `autograder gradescope build` from a clone of the project.")
    return root


# ---------------------------------------------------------------------------------------- zips

def _zipinfo(name: str, mode: int = 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16   # a regular file with these permission bits
    info.create_system = 3                           # Unix, so the mode bits are honoured
    return info


def _write_zip(target: Path | io.BytesIO, files: dict[str, tuple[bytes, int]]) -> None:
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

def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if project.get("description"):
        lines.append(f"Summary: {project['description']}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            requirement, _, marker = dep.partition(";")
            condition = f"extra == '{extra}'"
            if marker.strip():
                condition = f"({marker.strip()}) and {condition}"
            lines.append(f"Requires-Dist: {requirement.strip()}; {condition}")
    return "\n".join(lines) + "\n"


def _package_files(root: Path, package: str, data_globs: list[str]) -> dict[str, bytes]:
    """Every module of ``package`` plus the files its ``package-data`` globs name."""
    pkg_dir = root / package
    files: dict[str, bytes] = {}
    for path in sorted(pkg_dir.rglob("*")):
        rel = path.relative_to(pkg_dir).as_posix()
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in EXCLUDED_SUFFIXES:
            continue
        if path.suffix == ".py" or any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(path.name, g)
                                       for g in data_globs):
            files[f"{package}/{rel}"] = path.read_bytes()
    return files


def build_wheel(root: Path) -> tuple[str, bytes]:
    """A pure-Python wheel of the package described by ``root/pyproject.toml``: (filename, bytes)."""
    pyproject = load_toml(root / "pyproject.toml")
    project = pyproject["project"]
    name, version = project["name"], project["version"]
    dist = f"{name.replace('-', '_')}-{version}"
    data_globs = pyproject.get("tool", {}).get("setuptools", {}).get("package-data", {}).get(name, [])
    files = _package_files(root, name, list(data_globs))
    info = f"{dist}.dist-info"
    files[f"{info}/METADATA"] = _metadata(project).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: autograder.gradescope.build\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    scripts = project.get("scripts", {})
    if scripts:
        body = "".join(f"{k} = {v}\n" for k, v in sorted(scripts.items()))
        files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{body}".encode()
    files[f"{info}/top_level.txt"] = f"{name}\n".encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arc in sorted(files):
        writer.writerow([arc, _record_hash(files[arc]), len(files[arc])])
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    buf = io.BytesIO()
    _write_zip(buf, {arc: (data, 0o644) for arc, data in files.items()})
    return f"{dist}-py3-none-any.whl", buf.getvalue()


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
    tmp = out.with_name(out.name + ".tmp")
    _write_zip(tmp, files)
    tmp.replace(out)
    manifest = json.loads(files[MANIFEST][0])
    return BuildReport(zip_path=out, wheel_name=wheel_name, entries=sorted(files),
                       size_bytes=out.stat().st_size, secret_fingerprint=manifest["hidden_secret"],
                       secret_path=str(hidden_secret.secret_path(root or checkout_root())))
