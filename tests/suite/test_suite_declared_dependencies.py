"""pyproject.toml and constraints.txt say what the code needs, for every module of the tree.

- Every third-party module that the package (``autograder/``, and the assignments' trusted
  ``grading/`` code it loads) imports, anywhere in a file (inside functions and ``try`` blocks too),
  comes from a distribution declared in ``[project] dependencies`` or in a feature extra
  (``dask``); what ``tests/`` and ``bench/`` import beyond that is in the ``test`` extra.
  Imports are read with ``ast`` and mapped to distributions with
  ``importlib.metadata.packages_distributions()``, so a module nobody listed fails here.
- Every declared requirement has one pin in constraints.txt, inside its declared range, and the
  pin is the version installed here (``make setup`` installs with ``-c constraints.txt``).
- ``requires-python``'s lowest version is one every pinned distribution installs on.
- Every file ``[tool.setuptools.package-data]`` names exactly (not a glob) exists.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
TEST_EXTRA = "test"
# imported, but not from PyPI: what provides them instead
NOT_FROM_PYPI = {
    # the simulated container's init runs under Debian's /usr/bin/python3, never the venv
    "seccomp": "Debian's python3-seccomp (make system-packages)",
}


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


RUNTIME = _names(PROJECT["dependencies"])
FEATURES = {name: _names(reqs) for name, reqs in PROJECT.get("optional-dependencies", {}).items()}


def _package_files() -> list[Path]:
    return sorted((ROOT / "autograder").rglob("*.py")) + sorted(ROOT.glob("assignments/*/grading/**/*.py"))


def _test_files() -> list[Path]:
    return sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))


def _local_modules() -> set[str]:
    """What tests and benchmarks import from the tree itself: the package, and every module or
    folder under tests/ and bench/ (pytest puts their folders on sys.path)."""
    local = {"autograder", "bench", "tests"}
    for base in ("tests", "bench"):
        for path in (ROOT / base).rglob("*"):
            if path.suffix == ".py" or path.is_dir():
                local.add(path.stem)
    return local


def third_party_imports(files: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    """``{top-level module: [files importing it]}`` for every absolute import that is not the
    standard library's."""
    found: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.partition(".")[0]
                if top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, []).append(path.relative_to(root).as_posix())
    return found


def undeclared(files: list[Path], allowed: set[str], where: str, local: set[str]) -> list[str]:
    providers = md.packages_distributions()
    problems = []
    for module, importers in sorted(third_party_imports(files).items()):
        if module in local or module in NOT_FROM_PYPI:
            continue
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists:
            problems.append(f"{module} (imported by {importers[0]}) is provided by no installed distribution")
        elif not dists & allowed:
            problems.append(
                f"{module} (imported by {importers[0]}) comes from {', '.join(sorted(dists))}, "
                f"which {where} does not declare"
            )
    return problems


def test_the_package_declares_every_distribution_it_imports():
    allowed = RUNTIME.union(*(names for extra, names in FEATURES.items() if extra != TEST_EXTRA))
    problems = undeclared(_package_files(), allowed, "[project] dependencies (nor a feature extra)", {"autograder"})
    assert not problems, "\n".join(problems)


def test_the_test_extra_declares_what_tests_and_benchmarks_import():
    allowed = RUNTIME.union(*FEATURES.values())
    problems = undeclared(_test_files(), allowed, f"the '{TEST_EXTRA}' extra (nor the package)", _local_modules())
    assert not problems, "\n".join(problems)


def test_the_scan_sees_imports_anywhere_in_a_file(tmp_path):
    """Inside functions, try blocks and from-imports; relative and standard-library ones aside."""
    source = tmp_path / "m.py"
    source.write_text(
        "import os, numpy.linalg\nfrom . import x\ntry:\n    import scipy\nexcept ImportError:\n"
        "    pass\ndef f():\n    from yaml import safe_load\n"
    )
    assert set(third_party_imports([source], tmp_path)) == {"numpy", "scipy", "yaml"}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.partition("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


DECLARED = [Requirement(r) for r in PROJECT["dependencies"]] + [
    Requirement(r) for reqs in PROJECT.get("optional-dependencies", {}).values() for r in reqs
]


@pytest.mark.parametrize("requirement", DECLARED, ids=str)
def test_every_declaration_is_pinned_within_its_range_and_installed_so(requirement):
    pins = _pins()
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{requirement} has no pin in constraints.txt"
    assert requirement.specifier.contains(pins[name], prereleases=True), (
        f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}"
    )
    try:
        installed = md.version(requirement.name)
    except md.PackageNotFoundError:
        pytest.skip(f"{name} is not installed here")
    assert Version(installed) == Version(pins[name]), (
        f"{name} {installed} is installed, constraints.txt pins {pins[name]}: run make setup, or update the pin"
    )


def test_requires_python_is_a_version_every_pin_installs_on():
    ours = SpecifierSet(PROJECT["requires-python"])
    floors = [Version(s.version) for s in ours if s.operator == ">="]
    assert len(floors) == 1, f"requires-python {ours} needs one lower bound"
    floor = floors[0]
    assert sys.version_info[:2] >= (floor.major, floor.minor)
    refused = []
    for name, version in sorted(_pins().items()):
        try:
            meta = md.metadata(name)
        except md.PackageNotFoundError:
            continue
        if (
            md.version(name) == version
            and meta.get("Requires-Python")
            and not SpecifierSet(meta["Requires-Python"]).contains(floor, prereleases=True)
        ):
            refused.append(f"{name}=={version} requires Python {meta['Requires-Python']}")
    assert not refused, f"requires-python {ours} admits Python {floor}, which these pins refuse:\n" + "\n".join(refused)


def test_package_data_named_exactly_exists():
    for pattern in PYPROJECT["tool"]["setuptools"]["package-data"]["autograder"]:
        if not any(c in pattern for c in "*?["):
            assert (ROOT / "autograder" / pattern).is_file(), f"package-data lists {pattern}, absent from autograder/"
