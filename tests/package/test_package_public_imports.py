"""The package imports only the public modules of the libraries it uses, and library code never
imports the command line.

A module whose dotted name has a part with a leading underscore (``typer._click``) is a library's
private code: it moves or vanishes in a minor release (Typer made its Click private in 0.26 and
asks that nobody import it). The grader and every lesson's grading code stay on public names;
this checks every import of ``autograder/`` and ``assignments/*/grading/``, inside functions too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def private_imports(source: str) -> list[str]:
    """``line: module`` for every absolute import of a third-party module's private part."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            top, *rest = module.split(".")
            if top in sys.stdlib_module_names or top == "autograder":
                continue
            if any(part.startswith("_") and not part.startswith("__") for part in rest):
                found.append(f"{node.lineno}: {module}")
                break  # one line each: `from typer._click.core import Context` is one mistake
    return found


def _files() -> list[Path]:
    return sorted((ROOT / "autograder").rglob("*.py")) + sorted(ROOT.glob("assignments/*/grading/**/*.py"))


def test_the_package_imports_no_private_module_of_a_library():
    problems = [
        f"{path.relative_to(ROOT)}:{hit}" for path in _files() for hit in private_imports(path.read_text("utf-8"))
    ]
    assert not problems, "private modules imported (use the library's public names):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from typer._click.core import Context\n", ["1: typer._click.core"]),
        ("def f():\n    import typer._click\n", ["2: typer._click"]),
        ("from typer import _click\n", ["1: typer._click"]),
        ("import typer\nfrom typer.core import TyperGroup\n", []),
        ("from os import _exit\nimport importlib._bootstrap\n", []),  # the standard library's own business
        ("from ._private import x\nfrom autograder._x import y\n", []),  # our own modules
        ("from onnx import __version__\n", []),  # a dunder is public
    ],
)
def test_the_check_tells_private_modules_from_public_ones(source, expected):
    assert private_imports(source) == expected


# ── library code never imports the command line ──────────────────────────────────────────────

CLI_MODULES = ("autograder.cli", "autograder.cli_checks", "autograder.cli_grade")


def is_cli_module(module: str) -> bool:
    """The command line: ``cli.py``, ``cli_*.py``, each front end's ``cli.py`` and its ``*_cli.py``
    (a group of commands beside it, e.g. ``batch/manual_cli.py``)."""
    last = module.rsplit(".", 1)[-1]
    return module in CLI_MODULES or last == "cli" or last.endswith("_cli")


def cli_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    """``line: module`` for every import of typer or of a command-line module by ``module``
    (relative imports resolved against it; a package's ``__init__`` against itself)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "typer" or (target.startswith("autograder") and is_cli_module(target)):
                found.append(f"{node.lineno}: {target}")
                break
    return found


def _package_modules() -> list[tuple[str, Path, bool]]:
    out = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        out.append((".".join(parts[:-1] if is_package else parts), path, is_package))
    return out


def test_library_code_never_imports_the_command_line():
    problems = [
        f"{path.relative_to(ROOT)}:{hit}"
        for module, path, is_package in _package_modules()
        if not is_cli_module(module)
        for hit in cli_imports(module, path.read_text("utf-8"), is_package)
    ]
    assert not problems, "library code imports the command line (move what it needs down):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "module, source, expected",
    [
        ("autograder.batch.run", "def f():\n    from ..cli_checks import check_file\n", ["2: autograder.cli_checks"]),
        ("autograder.batch.run", "import typer\n", ["1: typer"]),
        ("autograder.pipeline", "from . import cli_grade\n", ["1: autograder.cli_grade"]),
        ("autograder.batch.run", "from .cli import register\n", ["1: autograder.batch.cli"]),
        ("autograder.batch.run", "from ..assignment import Assignment\nfrom .client import x\n", []),
        ("autograder.measure.onnx_load", "from ..limits import ExecutionLimits\n", []),
    ],
)
def test_the_layering_check_resolves_relative_imports(module, source, expected):
    assert cli_imports(module, source) == expected


def test_a_package_init_resolves_against_itself():
    assert cli_imports("autograder.batch", "from .cli import register\n", is_package=True) == [
        "1: autograder.batch.cli"
    ]
    assert cli_imports("autograder.batch", "from .run import run_batch\n", is_package=True) == []
