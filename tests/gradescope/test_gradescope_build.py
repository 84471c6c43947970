"""``autograder gradescope build``: what goes into the autograder zip and its wheel, what never
does, reproducible bytes, and the shipped shell scripts and Dockerfile.
"""

from __future__ import annotations

import ast
import email.parser
import io
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from typer.testing import CliRunner

from autograder.gradescope.build import INSTRUCTOR_ONLY, build_wheel, build_zip

from gradescope_testlib import ASSIGNMENT

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def names(zip_path: Path) -> list[str]:
    with zipfile.ZipFile(zip_path) as zf:
        return zf.namelist()


@pytest.fixture
def fake_checkout(tmp_path) -> Path:
    """A small checkout with everything that must stay out of the zip: solution and master
    notebooks, example submissions, tests, caches, non-package files."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "gradescope", root / "gradescope")
    for name in ("pyproject.toml", "constraints.txt", "README.md"):
        shutil.copy(ROOT / name, root / name)
    pkg = root / "autograder"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "schema.json").write_text("{}")
    (pkg / "sub" / "notes.txt").write_text("not package data")
    (pkg / "sub" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "gradescope" / "sim" / "deep").mkdir(parents=True)  # the instructor's tools
    for name in (
        "gradescope/__init__.py",
        "gradescope/run.py",
        "gradescope/sim/__init__.py",
        "gradescope/sim/container.py",
        "gradescope/sim/profile.json",
        "gradescope/sim/deep/__init__.py",
    ):
        (pkg / name).write_text("{}" if name.endswith(".json") else "")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test(): pass\n")
    a = root / "assignments" / "demo"
    (a / "grading" / "__pycache__").mkdir(parents=True)
    (a / "examples").mkdir()
    (a / "assignment.toml").write_text('id = "demo"\nnotebook = "demo.ipynb"\n')
    (a / "rubric.toml").write_text("")
    (a / "demo.ipynb").write_text("{}")
    (a / "grading" / "__init__.py").write_text("")
    (a / "grading" / "hidden_cases.npz").write_bytes(b"PK")
    (a / "grading" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (a / "examples" / "reference.ipynb").write_text("{}")
    r = root / "reference" / "demo"
    r.mkdir(parents=True)
    for name in ("tolerances.toml", "solution.ipynb", "master.ipynb", "derive_tolerances.py"):
        (r / name).write_text("x = 1\n" if name.endswith(".toml") else "secret")
    return root


# ------------------------------------------------------------------------------ the zip's content


def test_zip_holds_exactly_the_grader_side_files(fake_checkout, tmp_path):
    report = build_zip("demo", tmp_path / "a.zip", root=fake_checkout)
    assert names(report.zip_path) == sorted(
        [
            "assignments/demo/assignment.toml",
            "assignments/demo/demo.ipynb",
            "assignments/demo/grading/__init__.py",
            "assignments/demo/grading/hidden_cases.npz",
            "assignments/demo/rubric.toml",
            "autograder-0.1.0-py3-none-any.whl",
            "constraints.txt",
            "gradescope.json",
            "hidden-data.secret",
            "reference/demo/tolerances.toml",
            "run_autograder",
            "setup.sh",
        ]
    )


def test_wheel_holds_modules_and_package_data_only_and_no_instructor_tool(fake_checkout):
    name, data = build_wheel(fake_checkout)
    assert name == "autograder-0.1.0-py3-none-any.whl"
    wheel = tmp_wheel = fake_checkout / name
    tmp_wheel.write_bytes(data)
    assert sorted(n for n in names(wheel) if not n.startswith("autograder-0.1.0.dist-info/")) == [
        "autograder/__init__.py",
        "autograder/gradescope/__init__.py",
        "autograder/gradescope/run.py",
        "autograder/sub/__init__.py",
        "autograder/sub/schema.json",
    ]


def _scramble(tree: Path, seed: int) -> None:
    """The same content with other modes and timestamps (another clone, another umask, later)."""
    for i, path in enumerate(sorted(p for p in tree.rglob("*") if p.is_file())):
        path.chmod((0o600, 0o644, 0o755, 0o664)[(i + seed) % 4])
        os.utime(path, (1_700_000_000 + 86_400 * seed + i, 1_700_000_000 + 86_400 * seed + i))


def test_wheel_bytes_depend_on_the_content_alone(fake_checkout, tmp_path):
    other = tmp_path / "elsewhere" / "clone"
    shutil.copytree(fake_checkout, other)
    _scramble(fake_checkout / "autograder", 1)
    _scramble(other / "autograder", 2)
    name, first = build_wheel(fake_checkout)
    old_umask = os.umask(0o002)
    try:
        again_name, again = build_wheel(other)
    finally:
        os.umask(old_umask)
    assert (again_name, again) == (name, first)
    (other / "autograder" / "sub" / "__init__.py").write_text("CHANGED = True\n")
    assert build_wheel(other)[1] != first, "a change of content must change the wheel"
    wheel = tmp_path / name
    wheel.write_bytes(first)
    with zipfile.ZipFile(wheel) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}  # SOURCE_DATE_EPOCH
        modes = {(i.external_attr >> 16) & 0o777 for i in zf.infolist() if not i.filename.endswith("/RECORD")}
    assert modes == {0o644}  # whatever the checkout's modes and the caller's umask


def test_a_missing_build_backend_is_one_clear_error(fake_checkout):
    """An environment without the build backend pyproject.toml asks for: the build stops and says
    what is missing (no network fetch, no half-built zip)."""
    from autograder.errors import AutograderError

    pyproject = fake_checkout / "pyproject.toml"
    text = pyproject.read_text()
    assert 'requires = ["setuptools>=' in text
    pyproject.write_text(text.replace('requires = ["setuptools>=', 'requires = ["setuptools>=9999,>=', 1))
    with pytest.raises(AutograderError, match=r"could not build the Gradescope wheel.*setuptools>=9999"):
        build_wheel(fake_checkout)


def test_real_zip_has_scripts_wheel_pins_and_assignment(gradescope_zip):
    entries = names(gradescope_zip)
    assert {
        "setup.sh",
        "run_autograder",
        "constraints.txt",
        "gradescope.json",
        f"assignments/{ASSIGNMENT}/assignment.toml",
        f"assignments/{ASSIGNMENT}/rubric.toml",
        f"assignments/{ASSIGNMENT}/grading/__init__.py",
        f"reference/{ASSIGNMENT}/tolerances.toml",
    } <= set(entries)
    assert entries == sorted(entries)
    assert not [e for e in entries if e.startswith(f"reference/{ASSIGNMENT}/") and not e.endswith("tolerances.toml")]
    assert not [e for e in entries if "/examples/" in e or "__pycache__" in e or e.startswith("tests/")]
    with zipfile.ZipFile(gradescope_zip) as zf:
        assert zf.read("constraints.txt") == (ROOT / "constraints.txt").read_bytes()
        manifest = json.loads(zf.read("gradescope.json"))
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        dates = {i.date_time for i in zf.infolist()}
    assert manifest["assignment"] == ASSIGNMENT and manifest["wheel"] in entries
    assert manifest["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755 and modes["constraints.txt"] == 0o644
    assert dates == {(1980, 1, 1, 0, 0, 0)}


def test_build_is_byte_for_byte_reproducible(gradescope_zip, tmp_path):
    again = build_zip(ASSIGNMENT, tmp_path / "again.zip").zip_path
    assert again.read_bytes() == gradescope_zip.read_bytes()


# ------------------------------------------------------------------------------------ the wheel


def test_wheel_metadata_matches_pyproject(gradescope_zip):
    project = PYPROJECT["project"]
    with zipfile.ZipFile(gradescope_zip) as outer:
        wheel_name = json.loads(outer.read("gradescope.json"))["wheel"]
        wheel_bytes = outer.read(wheel_name)
    wheel_path = gradescope_zip.parent / wheel_name
    wheel_path.write_bytes(wheel_bytes)
    info = f"autograder-{project['version']}.dist-info"
    with zipfile.ZipFile(wheel_path) as zf:
        metadata = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        modules = {n for n in zf.namelist() if n.endswith(".py")}
    assert metadata["Version"] == project["version"]
    assert SpecifierSet(metadata["Requires-Python"]) == SpecifierSet(project["requires-python"])
    plain = [Requirement(d) for d in metadata.get_all("Requires-Dist") if "extra ==" not in d]
    assert plain == [Requirement(d) for d in project["dependencies"]]
    assert "autograder = autograder.cli:main" in entry_points
    instructor_only = tuple(f"{folder}/" for folder in INSTRUCTOR_ONLY)
    every = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder").rglob("*.py") if "__pycache__" not in p.parts
    }
    left_out = {m for m in every if m.startswith(instructor_only)}
    assert "autograder/gradescope/sim/container.py" in left_out and "autograder/gradescope/run.py" not in left_out
    assert modules == every - left_out
    assert not [m for m in modules if m.startswith("tests/")]


def test_wheel_carries_the_stage_schemas_the_judge_validates_with(gradescope_zip):
    from autograder.contracts import KINDS

    with zipfile.ZipFile(gradescope_zip) as outer:
        wheel_name = json.loads(outer.read("gradescope.json"))["wheel"]
        with zipfile.ZipFile(io.BytesIO(outer.read(wheel_name))) as zf:
            shipped = {n for n in zf.namelist() if n.startswith("autograder/schemas/")}
    assert shipped == {f"autograder/schemas/{kind}.schema.json" for kind in KINDS}


def test_wheel_installs_with_pip_and_imports(gradescope_zip, tmp_path):
    with zipfile.ZipFile(gradescope_zip) as outer:
        wheel_name = json.loads(outer.read("gradescope.json"))["wheel"]
        (tmp_path / wheel_name).write_bytes(outer.read(wheel_name))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(tmp_path / wheel_name),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert (target / "bin" / "autograder").is_file()
    probe = "import autograder, importlib.metadata as m; print(autograder.__file__); print(m.version('autograder'))"
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    file_, version = done.stdout.split()
    assert Path(file_).is_relative_to(target) and version == PYPROJECT["project"]["version"]


# ------------------------------------------------------------------------- scripts and commands


@pytest.mark.parametrize("script", ["setup.sh", "run_autograder"])
def test_shell_scripts_are_shellcheck_clean(script):
    path = ROOT / "gradescope" / script
    done = subprocess.run(["shellcheck", "--severity=style", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, f"shellcheck {script}:\n{done.stdout}{done.stderr}"
    assert path.read_bytes().startswith(b"#!/usr/bin/env bash\n") and b"\r\n" not in path.read_bytes()


def test_dockerfile_builds_on_a_pinned_gradescope_base_and_installs_the_zip():
    text = (ROOT / "grader.Dockerfile").read_text()
    froms = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    assert froms == ["gradescope/autograder-base:ubuntu-22.04"], froms
    assert "/autograder/source/setup.sh" in text and "/autograder/run_autograder" in text


def test_cli_build_writes_the_zip_and_rejects_unknown_assignments(tmp_path):
    import typer

    from autograder.gradescope.cli import register

    app = typer.Typer()
    register(app)
    ok = CliRunner().invoke(app, ["gradescope", "build", ASSIGNMENT, "-o", str(tmp_path / "z.zip")])
    assert ok.exit_code == 0, ok.output
    assert "wrote" in ok.output and zipfile.is_zipfile(tmp_path / "z.zip")
    bad = CliRunner().invoke(app, ["gradescope", "build", "no-such-assignment", "-o", str(tmp_path / "n.zip")])
    assert bad.exit_code == 2 and "no assignment 'no-such-assignment'" in bad.output
    assert not (tmp_path / "n.zip").exists()


def _imports(path: Path, package: str) -> list[tuple[str, bool]]:
    """(absolute module name, at module level?) for every module an import statement in ``path``
    (a module of ``package``) may load: ``from .a import b`` names both ``pkg.a`` and ``pkg.a.b``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parent = package.rsplit(".", node.level - 1)[0] if node.level else ""
            base = ".".join(part for part in (parent, node.module) if part)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [(name, id(node) in top_level) for name in names]
    return found


@pytest.mark.parametrize("folder", INSTRUCTOR_ONLY)
def test_only_the_simulate_command_reaches_the_instructor_tools(folder):
    """No module of the wheel imports an instructor's tool, except the ``gradescope simulate``
    command, lazily (inside the command): importing the grader never needs one."""
    tool = folder.replace("/", ".")
    reaching: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.as_posix().startswith(tuple(f"{f}/" for f in INSTRUCTOR_ONLY)):
            continue
        package = ".".join(rel.parent.parts)
        hits = [(m, top) for m, top in _imports(path, package) if m == tool or m.startswith(f"{tool}.")]
        if hits:
            reaching[rel.as_posix()] = hits
    assert set(reaching) == {"autograder/gradescope/cli.py"}, reaching
    assert not [m for m, top in reaching["autograder/gradescope/cli.py"] if top], "a module-level import"
