"""Lessons use the core through one declared surface, ``autograder.lesson``.

- every ``.py`` under ``assignments/*/grading`` (a new lesson's folder too) and every Python file
  ``autograder new-assignment`` writes imports nothing of ``autograder`` but ``autograder.lesson``
  (at the top or inside a function, ``import``, ``from`` or ``importlib.import_module``);
- every name of ``autograder.lesson.__all__`` exists and is documented in its docstring, and every
  name it hands on is declared there;
- the surface stays at the top of the import graph: no module of the core imports it, and
  importing it does not import ONNX Runtime or nbformat (those names come when asked for).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import autograder.lesson as lesson
from autograder.authoring.scaffold import FILES, default_title, render_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "autograder"
SURFACE = "autograder.lesson"
IMPORTERS = {"importlib.import_module", "import_module", "__import__"}


def _is_core(module: str) -> bool:
    return module == "autograder" or module.startswith("autograder.")


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def core_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) for every import of the core other than :data:`SURFACE`, anywhere in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_core(a.name) and a.name != SURFACE]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_core(node.module):
            if node.module == "autograder":  # from autograder import lesson, hidden_secret
                found += [(node.lineno, f"autograder.{a.name}") for a in node.names if a.name != "lesson"]
            elif node.module != SURFACE:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and _call_name(node.func) in IMPORTERS and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if _is_core(name.value) and name.value != SURFACE:
                    found.append((node.lineno, name.value))
    return sorted(found)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from autograder.lesson import Arg, ProbeCase\n", []),
        ("from autograder import lesson\nimport autograder.lesson as L\n", []),
        ("from . import data\nfrom .functions import probe_cases\nimport numpy\n", []),  # the lesson's own
        ("import autograderx\nfrom autograder_extra import y\n", []),  # not the core
        ("from autograder.measure.compare import Expect\n", [(1, "autograder.measure.compare")]),
        ("import autograder.measure.compare as c\n", [(1, "autograder.measure.compare")]),
        ("import autograder\n", [(1, "autograder")]),
        ("from autograder import hidden_secret\n", [(1, "autograder.hidden_secret")]),
        ("from autograder import lesson, errors\n", [(1, "autograder.errors")]),
        (
            "def f():\n    from autograder.measure.quantization import reference_ops\n",
            [(2, "autograder.measure.quantization")],
        ),
        ("class C:\n    def m(self):\n        import autograder.errors\n", [(3, "autograder.errors")]),
        (
            "import importlib\nm = importlib.import_module('autograder.probe_format')\n",
            [(2, "autograder.probe_format")],
        ),
        ("m = __import__('autograder.errors')\n", [(1, "autograder.errors")]),
        ("import importlib\nm = importlib.import_module('autograder.lesson')\n", []),
        (
            "try:\n    pass\nexcept ImportError:\n    from autograder.errors import UnsafeFileError\n",
            [(4, "autograder.errors")],
        ),
    ],
)
def test_the_checker_catches_every_import_of_the_core_but_the_surface(source, expected):
    assert core_imports(source) == expected


def _lesson_sources() -> list[tuple[str, str]]:
    # a lesson's grading plugin, and the script that makes its example submissions
    files = sorted(ROOT.glob("assignments/*/grading/**/*.py")) + sorted(ROOT.glob("reference/*/make_examples.py"))
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files]


def _scaffold_sources() -> list[tuple[str, str]]:
    rendered = render_files("12-my-lesson", default_title("12-my-lesson"))
    return [(f"{path} (from the scaffold)", text) for path, text in rendered.items() if path.endswith(".py")]


def test_every_lesson_folder_and_the_scaffold_are_checked():
    lessons = {Path(name).parts[1] for name, _ in _lesson_sources()}
    assert lessons >= {p.parent.name for p in ROOT.glob("assignments/*/grading") if any(p.rglob("*.py"))}
    assert lessons >= {p.parent.name for p in ROOT.glob("reference/*/make_examples.py")}
    assert {"03-export-parity", "05-graph-optimization", "06-performance", "07-quantization"} <= lessons
    scaffolded = {name.split(" ")[0] for name, _ in _scaffold_sources()}
    assert scaffolded == {t.format(id="12-my-lesson") for t in FILES.values() if t.endswith(".py")}


def test_lessons_and_the_scaffold_import_the_core_only_through_autograder_lesson():
    problems = [
        f"{name}:{line}: imports {module}"
        for name, source in _lesson_sources() + _scaffold_sources()
        for line, module in core_imports(source)
    ]
    assert not problems, (
        "a lesson imports the core past its declared surface; import the name from autograder.lesson "
        "(add it there, documented, if a lesson really needs it):\n" + "\n".join(problems)
    )


# ── the surface itself ────────────────────────────────────────────────────────────────────────

HELPERS = {"annotations", "importlib", "TYPE_CHECKING", "Any"}  # what lesson.py itself uses


def test_every_declared_name_exists_once_and_is_documented():
    assert len(lesson.__all__) == len(set(lesson.__all__)), "a name is declared twice"
    doc = lesson.__doc__ or ""
    undocumented = [name for name in lesson.__all__ if f"``{name}``" not in doc]
    assert not undocumented, (
        f"declared in autograder.lesson.__all__ but not documented in its docstring: {undocumented}"
    )
    for name in lesson.__all__:
        assert getattr(lesson, name) is not None, name


def test_every_name_the_surface_hands_on_is_declared():
    for name in lesson.__all__:
        getattr(lesson, name)  # the lazy ones too
    public = {n for n in vars(lesson) if not n.startswith("_")} - HELPERS
    assert public <= set(lesson.__all__), (
        f"handed on but not declared in __all__: {sorted(public - set(lesson.__all__))}"
    )


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'measure'"):
        lesson.measure  # noqa: B018 - the access is the test


def _module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module ``path`` imports, relative imports resolved (``from . import lesson`` included)."""
    module = _module_of(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def test_no_module_of_the_core_imports_the_surface():
    importers = [
        str(p.relative_to(ROOT))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != PACKAGE / "lesson.py" and SURFACE in _imported_modules(p)
    ]
    assert not importers, f"autograder.lesson is for lessons only; the core imports the module it names: {importers}"


@pytest.mark.parametrize(
    "path, source, imports_it",
    [
        ("autograder/measure/x.py", "from .. import lesson\n", True),
        ("autograder/measure/x.py", "from ..lesson import Arg\n", True),
        ("autograder/x.py", "from .lesson import Arg\n", True),
        ("autograder/measure/__init__.py", "from .. import lesson\n", True),
        ("autograder/x.py", "import autograder.lesson\n", True),
        ("autograder/measure/x.py", "from . import lesson\n", False),  # autograder.measure.lesson
        ("autograder/x.py", "from .errors import AutograderError\n", False),
    ],
)
def test_the_resolver_sees_every_spelling_of_an_import_of_the_surface(tmp_path, path, source, imports_it):
    file = tmp_path / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(source)
    assert (SURFACE in _imported_modules(file, tmp_path)) is imports_it


def test_importing_the_surface_does_not_import_onnx_runtime_or_nbformat():
    code = (
        "import sys, autograder.lesson as L\n"
        "before = sorted(m for m in ('onnx', 'onnxruntime', 'nbformat') if m in sys.modules)\n"
        "from autograder.measure import reference_ops\n"
        "from autograder.measure.quantization import reference_ops as q\n"
        "from autograder.authoring import example_edits\n"
        "assert L.ort_node is reference_ops.ort_node and L.ort_model is reference_ops.ort_model\n"
        "assert L.quantization_ops is q and L.Mistake is example_edits.Mistake\n"
        "assert L.examples_from is example_edits.examples_from\n"
        "print(before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
