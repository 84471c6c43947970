"""``autograder build ID``: the student notebook, the solution and the examples.

Two ways to author an assignment:

- **otter-assign master** (``reference/<id>/master.ipynb`` exists): the steps below make the
  student notebook and the solution from it;
- **plain notebooks** (no master): the student notebook ``assignments/<id>/<notebook>`` and the
  solution ``reference/<id>/solution.ipynb`` are written by hand; the build normalises both (step
  3) and makes the examples. Self-checks, if any, are plain ``assert`` cells.

Either way the build writes ``metadata.autograder.assignment = <id>`` into the student notebook
and the solution (so the examples carry it too): the grader uses it to tell which assignment a
notebook is for (autograder/assignment_match.py).

The master notebook is in otter-assign format (``# ASSIGNMENT CONFIG``, ``# BEGIN QUESTION`` /
``SOLUTION`` / ``TESTS`` raw cells). The build is a thin wrapper around ``otter assign``, run in a
temporary folder, plus three deterministic steps of our own:

1. **Self-checks that work anywhere.** otter keeps public tests either in the notebook's metadata
   (read back from the ``.ipynb`` file, which breaks on Colab and when the file is renamed) or in a
   ``tests/`` folder that students would have to download. The master therefore has one
   placeholder code cell starting with :data:`INIT_MARKER`; the build replaces it, in the student
   notebook and in the solution alike, with a cell that writes the public tests to ``tests/`` and
   creates ``grader = otter.Notebook(tests_dir="tests")``. ``grader.check("q1")`` then needs only
   ``pip install otter-grader``. Hidden otter tests are not used: the harness grades.
2. **A clean solution.** otter's autograder notebook still carries the solution markers and the
   student prompts (as dead string literals); the build removes both.
3. **Normalisation, so that building twice changes nothing.** otter gives new cells random ids
   and ``otter assign`` never executes anything here (``--no-run-tests``; the master sets
   ``run_tests: false`` and ``generate: false``, so there is no timestamped zip either). Every
   written notebook has its outputs and execution counts stripped (they hold timings that differ
   at every run), cell ids derived from the cell's content, and is serialised by nbformat
   (sorted keys), ending in a newline.

Examples: when ``reference/<id>/make_examples.py`` defines ``make_examples(solution, student)``
returning ``{file name: notebook}``, the build writes them, normalised, to
``assignments/<id>/examples/``, so they stay in sync with the solution.

The rubric against the reference (``build --check``): :func:`rubric_paths_missing` lists every
rubric ``measure`` and ``requires`` path that the reference run's measurements do not hold (a
typo would otherwise surface only when a student is graded, as "measurement missing");
:func:`reference_measurements` runs the solution once through the real pipeline, jail included,
with a fresh hidden-data secret (never the deployment's). :func:`rubric_text_problems` renders
every text of the rubric the judge fills in (``message``, ``hint``: :func:`autograder.grade_text.render`)
and names each lone brace, unknown format and placeholder that names nothing (with the reference
run's measurements, a lesson's own paths too), and an ``expected`` holding a brace (it is shown as
written). The conformance checks (:mod:`autograder.authoring.conformance`) apply the same
functions to every lesson.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import pprint
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat

from ..assignment import Assignment
from ..assignment_match import METADATA_KEY
from ..errors import AssignmentError
from ..safe_files import write_atomic

MASTER_NAME = "master.ipynb"
SOLUTION_NAME = "solution.ipynb"
EXAMPLES_SCRIPT = "make_examples.py"
INIT_MARKER = "# AUTOGRADER: PUBLIC TESTS"
OTTER_TIMEOUT_S = 300

_PROMPT_BEGIN = re.compile(r"#\s*BEGIN PROMPT\s*$")
_PROMPT_END = re.compile(r"#\s*END PROMPT\s*$")
_SOLUTION_MARK = re.compile(r"^\s*#\s*(BEGIN SOLUTION( NO PROMPT)?|END SOLUTION)\s*$")
_SOLUTION_SUFFIX = re.compile(r"\s*#\s*SOLUTION( NO PROMPT)?\s*$")

INIT_TEMPLATE = """\
# Self-checks: grader.check("qN") runs the public tests of question N (otter-grader). They are
# written to tests/ here, so the checks work in Jupyter, on Colab and in the grading run alike.
# They are a first check only: the grader uses its own, stricter measurements.
import os

import otter

_PUBLIC_TESTS = {tests}

os.makedirs("tests", exist_ok=True)
for _name, _test in _PUBLIC_TESTS.items():
    with open(os.path.join("tests", _name + ".py"), "w", encoding="utf-8") as _f:
        _f.write("OK_FORMAT = True\\n\\ntest = " + repr(_test) + "\\n")
grader = otter.Notebook(tests_dir="tests")"""


@dataclass
class BuildResult:
    written: list[Path] = field(default_factory=list)
    changed: list[Path] = field(default_factory=list)


# --- otter assign -------------------------------------------------------------------------------


def run_otter_assign(master: Path, notebook_name: str, workdir: Path) -> Path:
    """Run ``otter assign`` on a copy of ``master`` named ``notebook_name``; returns ``dist/``."""
    shutil.copyfile(master, workdir / notebook_name)
    cmd = [sys.executable, "-m", "otter", "assign", "--no-run-tests", "--no-pdfs", notebook_name, "dist"]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=OTTER_TIMEOUT_S)
    dist = workdir / "dist"
    if proc.returncode != 0 or not (dist / "student" / notebook_name).is_file():
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise AssignmentError(f"otter assign failed on {master} (exit {proc.returncode}):\n{tail}")
    return dist


def read_public_tests(tests_dir: Path) -> dict[str, dict]:
    """The OK-format test dicts otter wrote for students (public cases only), by question name."""
    tests = {}
    for path in sorted(tests_dir.glob("*.py")):
        module = ast.parse(path.read_text())
        for node in module.body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["test"]:
                tests[path.stem] = ast.literal_eval(node.value)
        if path.stem not in tests:
            raise AssignmentError(f"{path} is not an OK-format test file (no `test = {{...}}`)")
    return tests


# --- notebook transformations ------------------------------------------------------------------


def init_cell_source(tests: dict[str, dict]) -> str:
    body = pprint.pformat(tests, indent=1, width=100, sort_dicts=True)
    return INIT_TEMPLATE.format(tests=body)


def replace_init_cell(nb: nbformat.NotebookNode, tests: dict[str, dict]) -> None:
    hits = [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith(INIT_MARKER)]
    if len(hits) != 1:
        raise AssignmentError(
            f"the master needs exactly one code cell starting with {INIT_MARKER!r}, found {len(hits)}"
        )
    hits[0].source = init_cell_source(tests)
    hits[0].metadata.setdefault("jupyter", {})["source_hidden"] = True  # long and not for editing


def strip_solution_markup(source: str) -> str:
    """The solution as a student would write it: no solution markers, no prompt blocks."""
    out, in_prompt = [], False
    for line in source.split("\n"):
        if in_prompt:
            in_prompt = not _PROMPT_END.search(line)
            continue
        if _PROMPT_BEGIN.search(line):
            in_prompt = not _PROMPT_END.search(line)
            continue
        if _SOLUTION_MARK.match(line):
            continue
        out.append(_SOLUTION_SUFFIX.sub("", line))
    return "\n".join(out).strip("\n")


def clean_solution(nb: nbformat.NotebookNode) -> None:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = strip_solution_markup(cell.source)


def normalize(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Deterministic form: no outputs or execution counts, content-derived cell ids."""
    nb.nbformat, nb.nbformat_minor = 4, 5
    seen: dict[str, int] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.pop("attachments", None)
        digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:10]
        seen[digest] = seen.get(digest, 0) + 1
        cell.id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
    nbformat.validate(nb)
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(normalize(nb)) + "\n"


# --- the build ----------------------------------------------------------------------------------


def _load_examples_script(path: Path) -> ModuleType:
    name = "autograder_examples_" + hashlib.sha1(str(path).encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    if not hasattr(module, "make_examples"):
        raise AssignmentError(f"{path} must define make_examples(solution, student)")
    return module


def otter_notebooks(assignment: Assignment, master: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(student notebook, solution) from an otter-assign master."""
    name = assignment.notebook.name
    with tempfile.TemporaryDirectory(prefix="autograder-build-") as tmp:
        dist = run_otter_assign(master, name, Path(tmp))
        tests = read_public_tests(dist / "student" / "tests")
        student = nbformat.read(dist / "student" / name, as_version=4)
        solution = nbformat.read(dist / "autograder" / name, as_version=4)
    replace_init_cell(student, tests)
    replace_init_cell(solution, tests)
    clean_solution(solution)
    return student, solution


def plain_notebooks(assignment: Assignment) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(student notebook, solution) as written by hand, when there is no master."""
    solution_path = assignment.reference_folder / SOLUTION_NAME
    missing = [p for p in (assignment.notebook, solution_path) if not p.is_file()]
    if missing:
        raise AssignmentError(
            f"cannot build {assignment.id}: {', '.join(map(str, missing))} missing. The build "
            f"needs {assignment.reference_folder / MASTER_NAME} (otter assign), or a student "
            f"notebook {assignment.notebook} and a solution {solution_path} written by hand"
        )
    try:
        return (nbformat.read(assignment.notebook, as_version=4), nbformat.read(solution_path, as_version=4))
    except Exception as e:  # noqa: BLE001 - nbformat raises several kinds on malformed files
        raise AssignmentError(f"cannot build {assignment.id}: a notebook is not valid nbformat 4: {e}") from None


def mark_assignment(nb: nbformat.NotebookNode, assignment_id: str) -> None:
    """Record in ``nb``'s metadata which assignment it is for (read by autograder.assignment_match)."""
    nb.metadata[METADATA_KEY] = {"assignment": assignment_id}


def build_notebooks(assignment: Assignment) -> dict[str, str]:
    """Everything the build writes, as ``{path relative to the project root: text}``."""
    master = assignment.reference_folder / MASTER_NAME
    student, solution = otter_notebooks(assignment, master) if master.is_file() else plain_notebooks(assignment)
    for nb in (student, solution):
        mark_assignment(nb, assignment.id)
    name = assignment.notebook.name
    rel_a = Path("assignments") / assignment.id
    rel_r = Path("reference") / assignment.id
    files = {
        (rel_a / name).as_posix(): notebook_text(student),
        (rel_r / SOLUTION_NAME).as_posix(): notebook_text(solution),
    }
    script = assignment.reference_folder / EXAMPLES_SCRIPT
    if script.is_file():
        examples = _load_examples_script(script).make_examples(
            nbformat.reads(files[(rel_r / SOLUTION_NAME).as_posix()], as_version=4),
            nbformat.reads(files[(rel_a / name).as_posix()], as_version=4),
        )
        for file_name, nb in sorted(examples.items()):
            files[(rel_a / "examples" / file_name).as_posix()] = notebook_text(nb)
    return files


def build_assignment(assignment: Assignment, out_root: Path | None = None) -> BuildResult:
    """Write the built notebooks under ``out_root`` (default: the project root)."""
    root = Path(out_root) if out_root is not None else assignment.folder.parent.parent
    result = BuildResult()
    for rel, text in build_notebooks(assignment).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old != text:
            write_atomic(path, text)
            result.changed.append(path)
        result.written.append(path)
    return result


def stale_files(assignment: Assignment) -> list[str]:
    """Built files whose committed content differs from a fresh build (empty: up to date)."""
    root = assignment.folder.parent.parent
    stale = []
    for rel, text in build_notebooks(assignment).items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    return stale


# --- the rubric against the reference run -------------------------------------------------------


@dataclass(frozen=True)
class MissingPath:
    """A rubric path the reference run did not produce."""

    rubric: Path
    check: str
    part: str | None  # None: the check's ``requires``
    path: str
    reason: str

    def __str__(self) -> str:
        where = f"part '{self.part}' measure" if self.part is not None else "requires"
        return (
            f"{self.rubric}: check '{self.check}', {where} '{self.path}' is not produced by the "
            f"reference run ({self.reason})"
        )


def rubric_paths(rubric: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """``(check id, part name or None for requires, path)`` for every path the judge reads."""
    out: list[tuple[str, str | None, str]] = []
    for check in rubric.get("checks", []):
        requires = check.get("requires") or []
        for path in [requires] if isinstance(requires, str) else requires:
            out.append((check.get("id", "?"), None, path))
        for part in check.get("parts", []):
            out.append((check.get("id", "?"), part.get("name", "?"), part["measure"]))
    return out


def rubric_paths_missing(rubric: dict[str, Any], measurements: dict[str, Any], rubric_file: Path) -> list[MissingPath]:
    """Every rubric path that ``measurements`` (a reference run's) does not lead to a value."""
    from ..judge import lookup

    missing = []
    for check, part, path in rubric_paths(rubric):
        _, reason = lookup(measurements, path)
        if reason is not None:
            missing.append(MissingPath(rubric_file, check, part, path, _why(measurements, path, reason)))
    return missing


def _why(measurements: dict[str, Any], path: str, reason: str) -> str:
    """``reason``, with the keys found where the path left the measurements (a typo's neighbours);
    a section's own error as it is."""
    from ..judge import lookup

    if not reason.startswith("measurement missing"):
        return reason
    segments = path.split(".")
    for i in range(len(segments) - 1, -1, -1):
        node, err = lookup(measurements, ".".join(segments[:i])) if i else (measurements, None)
        if err is None and isinstance(node, dict):
            keys = ", ".join(sorted(map(str, node))[:20])
            at = ".".join(segments[:i]) or "the top level"
            return f"{reason}; {at} has: {keys or 'nothing'}"
    return reason


TEMPLATE_KEYS = ("message", "hint")  # the part's texts the judge renders (grade_text.render)
LITERAL_KEYS = ("expected",)  # shown as written, in place of {threshold}


@dataclass(frozen=True)
class TextProblem:
    """A rubric text that does not render as its author meant."""

    rubric: Path
    check: str
    part: str
    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.rubric}: check '{self.check}', part '{self.part}' {self.field}: {self.problem}"


def rubric_text_problems(
    rubric: dict[str, Any], measurements: dict[str, Any] | None, rubric_file: Path
) -> list[TextProblem]:
    """Every rubric text that cannot render: a lone brace or an unknown ``:fmt``; a placeholder that
    is not a field of the part (``{measured}``, …), a ``{tolerances.<key>}`` of a key the rubric does
    not name, or a measurement path a core section lacks or, given a reference run's
    ``measurements``, that the run did not produce (the judge would silently drop its sentence for
    every student); a text that raises when rendered; an ``expected`` with a brace."""
    from ..grade_text import TEMPLATE_FIELDS, placeholders, render, template_problem

    tolerance_keys = {
        part["tolerance"]
        for check in rubric.get("checks", [])
        for part in check.get("parts", [])
        if "tolerance" in part
    }
    tolerances: dict[str, Any] = {}
    for key in tolerance_keys:  # a stand-in value for each, at its dotted place
        *sections, last = str(key).split(".")
        node = tolerances
        for s in sections:
            node = node.setdefault(s, {})
        node[last] = 1.0
    out: list[TextProblem] = []
    for check in rubric.get("checks", []):
        for part in check.get("parts", []):

            def problem(field_name: str, text: str, *, c: dict = check, p: dict = part) -> None:
                out.append(TextProblem(rubric_file, str(c.get("id", "?")), str(p.get("name", "?")), field_name, text))

            for key in LITERAL_KEYS:
                text = part.get(key)
                if isinstance(text, str) and ("{" in text or "}" in text):
                    problem(key, f"{text!r} is shown as written, not rendered: a brace would reach the student")
            for key in TEMPLATE_KEYS:
                text = part.get(key)
                if text is None or text == "":
                    continue
                if not isinstance(text, str):
                    problem(key, f"is {type(text).__name__}, not a text")
                    continue
                wrong = template_problem(text)
                if wrong is not None:
                    problem(key, wrong)
                    continue
                for name in placeholders(text):
                    unknown = _unknown_placeholder(name, TEMPLATE_FIELDS, tolerance_keys, measurements)
                    if unknown is not None:
                        problem(key, f"unknown placeholder {{{name}}}: {unknown}")
                if measurements is not None:
                    fields = {"measured": "1", "threshold": "1", "op": "=", "name": str(part.get("name", ""))}
                    try:
                        render(text, fields, {}, measurements, tolerances)
                    except Exception as e:  # noqa: BLE001 - whatever rendering raises is the author's to see
                        problem(key, f"rendering it raised {type(e).__name__}: {e}")
    return out


def _unknown_placeholder(
    name: str, fields: tuple[str, ...], tolerance_keys: set[str], measurements: dict[str, Any] | None
) -> str | None:
    """Why ``{name}`` names nothing a grade can show, or None."""
    from ..contracts import knows_path
    from ..judge import lookup

    if name in fields:
        return None
    if name.startswith("tolerances."):
        key = name.removeprefix("tolerances.")
        if key in tolerance_keys:
            return None
        return f"the rubric names no tolerance '{key}' (it names: {', '.join(sorted(tolerance_keys)) or 'none'})"
    if not knows_path("measurements", name):
        return "not a field of measurements.json (autograder/schemas/measurements.schema.json)"
    if measurements is None:
        return None
    _, reason = lookup(measurements, name)
    if reason is None or not reason.startswith("measurement missing") or _holds_key(measurements, name):
        return None  # a value, a section's error, or a key the run left empty (null): a student's run may fill it
    return (
        f"not in the reference run's measurements ({_why(measurements, name, reason)}); "
        f"a part's own fields are {', '.join('{' + f + '}' for f in fields)}"
    )


def _holds_key(measurements: dict[str, Any], path: str) -> bool:
    """Whether the table deepest along ``path`` holds its next key, whatever its value: a null there
    (``execution.first_error`` when no cell failed) may be a table in a student's run. lookup says
    "missing" for null alike."""
    from ..judge import lookup

    segments = path.split(".")
    for i in range(len(segments) - 1, -1, -1):
        parent, reason = lookup(measurements, ".".join(segments[:i])) if i else (measurements, None)
        if reason is None and isinstance(parent, dict):
            return any(".".join(segments[i:j]) in parent for j in range(i + 1, len(segments) + 1))
    return False


def reference_measurements(assignment: Assignment, *, unsafe_no_sandbox: bool = False) -> dict[str, Any]:
    """measurements.json of one run of ``reference/<id>/solution.ipynb`` through the real pipeline."""
    from .. import hidden_secret
    from ..pipeline import execute_and_measure

    solution = assignment.reference_folder / SOLUTION_NAME
    if not solution.is_file():
        raise AssignmentError(f"{solution} is missing: run `autograder build {assignment.id}` first")
    with tempfile.TemporaryDirectory(prefix="autograder-build-check-") as tmp:
        notebook = Path(tmp) / SOLUTION_NAME
        shutil.copyfile(solution, notebook)
        (Path(tmp) / "out").mkdir()
        with hidden_secret.using(hidden_secret.HiddenSecret.generate()):
            return execute_and_measure(
                notebook, assignment, Path(tmp) / "out", Path(tmp) / "workspace", unsafe_no_sandbox=unsafe_no_sandbox
            )
