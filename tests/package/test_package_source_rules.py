"""Rules of the package's source, checked over every module of autograder/ (tests may break them):

- the layers of running student code (the jail, the kernel template, running a notebook) and the
  notebook reader are used through their declared APIs: outside a package (and outside the
  packages that build on its modules, :data:`API_PACKAGES`), an import of it names only what its
  ``__all__`` declares, never a module inside it;
- one atomic writer: ``os.replace`` (or ``Path.replace``) is called in safe_files.atomic_replace
  only; the kernel-side probe's source (a string run in the student's kernel, which imports
  nothing of the grader, as written there) holds the only other one;
- mounts, cgroups and the process table are read from ``/proc`` by autograder/proc_info.py only;
- a text file is never written in the locale's encoding: every ``write_text`` and every ``open``
  in a text mode that writes names its encoding (the grader's own files go through
  safe_files.write_atomic, UTF-8);
- every ONNX Runtime session the grader makes (the package and every lesson's grading code) gets
  its options from ``ort_platform.session_options`` in the same function: the one place that
  makes int8 products exact on every CPU (the jail's ``sitecustomize`` wraps the notebook's own).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import autograder
import autograder.jail
import autograder.kernel_template
import autograder.notebook_reader
import autograder.sandbox

PACKAGE = Path(autograder.__file__).resolve().parent
# package used through its __all__ -> the packages that build on its modules (may import past it)
API_PACKAGES = {
    "autograder.jail": ("autograder.kernel_template", "autograder.sandbox"),
    "autograder.kernel_template": ("autograder.sandbox",),
    "autograder.sandbox": (),
    "autograder.notebook_reader": (),
}
DECLARED = {
    name: set(package.__all__)
    for name, package in (
        ("autograder.jail", autograder.jail),
        ("autograder.kernel_template", autograder.kernel_template),
        ("autograder.sandbox", autograder.sandbox),
        ("autograder.notebook_reader", autograder.notebook_reader),
    )
}
# the probe's module, run in the student's kernel (it imports nothing of the grader): (module, function)
KERNEL_SIDE_REPLACE = {("autograder.sandbox.probe_kernel", "write", "os.replace")}


def _modules() -> list[tuple[str, Path, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return found


MODULES = _modules()


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    package = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
    base = ".".join(package[: len(package) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports_past_the_api(module: str, path: Path, tree: ast.Module, package: str) -> list[str]:
    """Where ``module`` reaches into ``package`` past its ``__all__``: ``line: what``."""
    declared = DECLARED[package]
    parent, _, last = package.rpartition(".")
    bad, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + "."):
                    bad.append(f"{node.lineno}: import {a.name}")
                elif a.name == package and a.asname:
                    aliases.add(a.asname)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path, node)
            if target.startswith(package + "."):
                bad.append(f"{node.lineno}: from {target} import ...")
            elif target == package:
                bad += [f"{node.lineno}: from {package} import {a.name}" for a in node.names if a.name not in declared]
            elif target == parent:
                aliases |= {a.asname or a.name for a in node.names if a.name == last}
    for node in ast.walk(tree):  # package.<name> through the package object
        if (
            isinstance(node, ast.Attribute)
            and node.attr not in declared
            and ((isinstance(node.value, ast.Name) and node.value.id in aliases) or ast.unparse(node.value) == package)
        ):
            bad.append(f"{node.lineno}: {ast.unparse(node)}")
    return bad


@pytest.mark.parametrize(
    "package, module, path, tree",
    [
        (package, *m)
        for package, builders in API_PACKAGES.items()
        for m in MODULES
        if not any(_inside(m[0], p) for p in (package, *builders))
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_outside_a_layer_only_its_declared_api_is_imported(package, module, path, tree):
    assert imports_past_the_api(module, path, tree, package) == [], (
        f"{module} imports past {package}'s __all__ (add the name to its __init__.py)"
    )


def test_the_declared_apis_exist():
    for package, names in DECLARED.items():
        for name in names:
            assert hasattr(importlib.import_module(package), name), (package, name)


@pytest.mark.parametrize(
    "package, source, expected",
    [
        ("autograder.sandbox", "from ..sandbox.execute import run_submission", 1),
        ("autograder.sandbox", "from ..sandbox import execute", 1),
        ("autograder.sandbox", "from ..sandbox import run_submission, execute", 1),
        ("autograder.sandbox", "import autograder.sandbox.runfolder", 1),
        ("autograder.sandbox", "from autograder.sandbox.workspace import prepared_workspace", 1),
        ("autograder.sandbox", "def f():\n    from ..sandbox.execute import run_submission", 1),
        ("autograder.sandbox", "from .. import sandbox\nsandbox.execute.run_submission()", 1),
        ("autograder.sandbox", "import autograder.sandbox as sb\nsb.runfolder.make_run_folder()", 1),
        ("autograder.sandbox", "import autograder.sandbox\nautograder.sandbox.execute.STARTUP_TIMEOUT_S", 1),
        ("autograder.sandbox", "from .. import sandbox\nsandbox.run_submission()", 0),
        ("autograder.sandbox", "from .sandbox import x", 0),
        ("autograder.sandbox", "from ..sandbox import run_submission, prepared_workspace", 0),
        ("autograder.sandbox", "from autograder.sandbox import run_submission", 0),
        ("autograder.sandbox", "from ..measure.sandbox_thing import x", 0),
        ("autograder.jail", "from ..jail.jail import worker_command", 1),
        ("autograder.jail", "from ..jail import jail", 1),
        ("autograder.jail", "import autograder.jail.procs", 1),
        ("autograder.jail", "from .. import jail\njail.procs.stop_jail()", 1),
        ("autograder.jail", "from ..jail import stop_jail, worker_command", 0),
        ("autograder.jail", "from .. import jail\njail.stop_jail()", 0),
        ("autograder.jail", "from ..sandbox import jail", 0),  # another package's name
        ("autograder.kernel_template", "from ..kernel_template.template_slot import for_run", 1),
        ("autograder.kernel_template", "from ..kernel_template import for_run", 0),
        ("autograder.notebook_reader", "from ..notebook_reader.reader import read_each", 1),
        ("autograder.notebook_reader", "from ..notebook_reader import reader", 1),
        ("autograder.notebook_reader", "from ..notebook_reader import read_each, MAX_NOTEBOOK_BYTES", 0),
    ],
)
def test_the_api_check_catches_every_way_past_it(package, source, expected):
    probe = Path(PACKAGE / "report" / "x.py")
    found = imports_past_the_api("autograder.report.x", probe, ast.parse(source), package)
    assert len(found) == expected, (source, found)


# ── one atomic writer ─────────────────────────────────────────────────────────────────────────


def _replace_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """``os.replace(...)`` and ``<path>.replace(one argument)`` (a str's or bytes' replace takes two,
    datetime's takes keywords), and ``from os import replace``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
            f = node.func
            if isinstance(f.value, ast.Name) and f.value.id == "os":
                found.append((node.lineno, "os.replace"))
            elif len(node.args) == 1 and not node.keywords and not isinstance(f.value, ast.Constant):
                found.append((node.lineno, f"{ast.unparse(f.value)}.replace"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name == "replace" for a in node.names):
            found.append((node.lineno, "from os import replace"))
    return found


def _enclosing_function(tree: ast.Module, line: int) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            return node.name
    return None


def _strings_with_replace(module: str, tree: ast.Module) -> set[tuple[str, str]]:
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            if "os.replace(" in node.value.value:
                found |= {(module, t.id) for t in node.targets if isinstance(t, ast.Name)}
    return found


def test_os_replace_is_called_in_the_atomic_writer_only():
    calls = {
        (module, _enclosing_function(tree, line), what)
        for module, _, tree in MODULES
        for line, what in _replace_calls(tree)
    }
    assert calls == {("autograder.safe_files", "atomic_replace", "os.replace")} | KERNEL_SIDE_REPLACE


def test_the_kernel_side_probe_holds_the_only_other_os_replace_and_says_why():
    strings = set().union(*(_strings_with_replace(module, tree) for module, _, tree in MODULES))
    assert strings == set()  # no source string of the package replaces a file
    from autograder.sandbox import probe_kernel

    assert "imports nothing of the grader" in (probe_kernel.write.__doc__ or "")


@pytest.mark.parametrize(
    "source, expected",
    [
        ("os.replace(a, b)", 1),
        ("tmp.replace(path)", 1),
        ("Path(t).replace(out)", 1),
        ("from os import replace", 1),
        ("text.replace('a', 'b')", 0),
        ("now.replace(microsecond=0)", 0),
        ("'x'.replace(y)", 0),
    ],
)
def test_the_replace_check_tells_a_file_replace_from_a_string_replace(source, expected):
    assert len(_replace_calls(ast.parse(source))) == expected


# ── no text written in the locale's encoding ──────────────────────────────────────────────────


def _text_writes_without_encoding(tree: ast.Module) -> list[str]:
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f, keywords = node.func, {k.arg for k in node.keywords}
        if "encoding" in keywords:
            continue
        if isinstance(f, ast.Attribute) and f.attr == "write_text":
            bad.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
            continue
        method = f.attr if isinstance(f, ast.Attribute) else None
        receiver = ast.unparse(f.value) if method else None
        opener = (
            (isinstance(f, ast.Name) and f.id == "open")
            or method == "fdopen"
            or (method == "open" and receiver != "os")
        )  # os.open takes flags, not a mode
        at = 0 if method == "open" and receiver not in ("io", "codecs") else 1  # Path.open(mode)
        mode = node.args[at] if len(node.args) > at else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if (
            opener
            and isinstance(mode, ast.Constant)
            and isinstance(mode.value, str)
            and set(mode.value) & set("wax+")
            and "b" not in mode.value
        ):
            bad.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return bad


def test_every_text_write_names_its_encoding():
    found = {module: bad for module, _, tree in MODULES if (bad := _text_writes_without_encoding(tree))}
    assert found == {}, "write text with an explicit encoding (or through safe_files.write_atomic)"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("p.write_text(s)", 1),
        ("open(p, 'w')", 1),
        ("os.fdopen(fd, 'w')", 1),
        ("open(p, mode='a')", 1),
        ("open(p, 'r+')", 1),
        ("path.open('x')", 1),
        ("io.open(p, 'w')", 1),
        ("(d / 'f').open(mode='a')", 1),
        ("p.write_text(s, encoding='utf-8')", 0),
        ("open(p, 'w', encoding='ascii')", 0),
        ("open(p, 'wb')", 0),
        ("open(p)", 0),
        ("open(p, 'r')", 0),
        ("os.fdopen(fd, 'ab')", 0),
        ("p.write_bytes(b)", 0),
        ("os.open(p, os.O_WRONLY)", 0),
        ("path.open('rb')", 0),
        ("path.open()", 0),
    ],
)
def test_the_encoding_check_tells_text_writes_from_the_rest(source, expected):
    assert len(_text_writes_without_encoding(ast.parse(source))) == expected


# ── one /proc reader ──────────────────────────────────────────────────────────────────────────

PROC_READER = "autograder.proc_info"
_PROC_FILE = re.compile(r"^/proc/([^/]+/)?(mountinfo|mounts|cgroup|stat|status)$")


def _proc_reads(tree: ast.Module) -> list[str]:
    """Paths of /proc files that proc_info reads (as a string or an f-string), and listings of /proc."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("scandir", "listdir", "iterdir", "glob")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "/proc"
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
            continue
        if _PROC_FILE.match(text):
            found.append(f"{node.lineno}: {text}")
    return found


def test_mounts_cgroups_and_processes_are_read_from_proc_by_proc_info_only():
    found = {module: reads for module, _, tree in MODULES if module != PROC_READER and (reads := _proc_reads(tree))}
    assert found == {}, "read it through autograder/proc_info.py"
    assert _proc_reads(next(tree for module, _, tree in MODULES if module == PROC_READER)), "the check sees nothing"


@pytest.mark.parametrize(
    "source, expected",
    [
        ('open("/proc/self/mountinfo")', 1),
        ('Path("/proc/self/cgroup").read_text()', 1),
        ('f"/proc/{pid}/status"', 1),
        ('f"/proc/{entry.name}/stat"', 1),
        ('os.scandir("/proc")', 1),
        ('"/proc/mounts"', 1),
        ('"/proc/stat"', 1),
        ('f"/proc/{pid}/fd"', 0),
        ('"/proc/self/oom_score_adj"', 0),
        ('"--proc", "/proc"', 0),
    ],
)
def test_the_proc_check_tells_the_readers_jobs_from_the_rest(source, expected):
    assert len(_proc_reads(ast.parse(source))) == expected


# ── every grader session starts from ort_platform.session_options ─────────────────────────────
# wraps the notebook's sessions and makes none; the probe's module, whose sessions the jail's wrapper configures
NOTEBOOK_SIDE_SESSIONS = ("autograder.jail.jail_site", "autograder.sandbox.probe_kernel")


def _grading_modules() -> list[tuple[str, Path, ast.Module]]:
    lessons = sorted((PACKAGE.parent / "assignments").glob("*/grading/**/*.py"))
    return MODULES + [(str(p), p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in lessons]


def _sessions_without_platform_options(tree: ast.Module) -> list[str]:
    """``InferenceSession(...)`` calls whose options are not made by ``session_options`` in the
    same function (or that pass no options at all)."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) != "InferenceSession":
            continue
        options = (
            node.args[1]
            if len(node.args) > 1
            else next((k.value for k in node.keywords if k.arg == "sess_options"), None)
        )
        inner = [fn for fn in functions if fn.lineno <= node.lineno <= fn.end_lineno]
        scope = min(inner, key=lambda fn: fn.end_lineno - fn.lineno) if inner else tree
        made_here = any(
            isinstance(c, ast.Call)
            and (c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", None)) == "session_options"
            for c in ast.walk(scope)
        )
        if options is None or not made_here:
            bad.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return bad


def test_every_grader_session_gets_the_platforms_options():
    found = {
        module: bad
        for module, _, tree in _grading_modules()
        if module not in NOTEBOOK_SIDE_SESSIONS and (bad := _sessions_without_platform_options(tree))
    }
    assert found == {}, "start the session's options from autograder.ort_platform.session_options"
    seen = sum("InferenceSession(" in ast.unparse(tree) for _, _, tree in _grading_modules())
    assert seen >= 3, "the check sees none of the grader's sessions"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(m):\n    return ort.InferenceSession(m, session_options('ORT_ENABLE_ALL'))", 0),
        ("def f(m):\n    so = session_options()\n    so.x = 1\n    return InferenceSession(m, sess_options=so)", 0),
        ("def f(m):\n    return ort.InferenceSession(m, providers=['CPUExecutionProvider'])", 1),
        ("def f(m):\n    so = ort.SessionOptions()\n    return ort.InferenceSession(m, so)", 1),
        ("so = session_options()\ndef f(m):\n    return ort.InferenceSession(m, so)", 1),
        ("def f(m):\n    return onnxruntime.InferenceSession(m, sess_options=ort.SessionOptions())", 1),
    ],
)
def test_the_session_check_tells_platform_options_from_the_rest(source, expected):
    assert len(_sessions_without_platform_options(ast.parse(source))) == expected
