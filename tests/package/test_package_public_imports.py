"""The package imports only the public modules of the libraries it uses.

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
