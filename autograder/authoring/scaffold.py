"""``autograder new-assignment ID``: a minimal working lesson to start from.

It writes, from the templates in ``new_assignment/`` (Jinja2), a lesson that passes the
conformance suite (tests/conformance/) before its author changes anything: students write
``softmax(x)`` and save an ONNX model computing it; the grader probes the function on hidden rows
against ONNX Runtime's ``Softmax`` and runs the model on hidden rows.

- ``assignments/<id>/``: ``assignment.toml``, ``rubric.toml``, ``README.md``, the student
  notebook ``<id>.ipynb``, ``grading/__init__.py`` and, made by the build, ``examples/``;
- ``reference/<id>/``: ``solution.ipynb``, ``make_examples.py`` (one example mistake),
  ``expected_examples.toml`` and ``tolerances.toml`` (the rubric uses literal thresholds: no
  tolerance to calibrate yet).

The Python files import from the core only :mod:`autograder.lesson` (the surface declared for
lessons) and are laid out as ``ruff format`` lays them, for any id and title accepted, so the new
lesson passes ``make lint`` as written (tests/conformance/test_conformance_new_assignment_lint.py).

Both notebooks come from one list of cells (``notebook.toml.j2``), so they stay aligned; then
:func:`autograder.authoring.build.build_assignment` normalises them and makes the examples. An
id is refused, with the reason, when it is not a folder name of the course's form or when either
folder exists already; nothing is written then.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jinja2
import nbformat

from ..errors import AssignmentError

TEMPLATES = Path(__file__).with_name("new_assignment")
ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
ID_MAX = 48
TITLE_MAX = 100
ID_RULE = (
    f"lower-case letters and digits in words joined by single hyphens, at most {ID_MAX} characters, e.g. 12-my-lesson"
)

# template → where it goes, relative to the project root ({id}: the assignment id)
FILES = {
    "assignment.toml.j2": "assignments/{id}/assignment.toml",
    "rubric.toml.j2": "assignments/{id}/rubric.toml",
    "README.md.j2": "assignments/{id}/README.md",
    "grading__init__.py.j2": "assignments/{id}/grading/__init__.py",
    "make_examples.py.j2": "reference/{id}/make_examples.py",
    "expected_examples.toml.j2": "reference/{id}/expected_examples.toml",
    "tolerances.toml.j2": "reference/{id}/tolerances.toml",
}
NOTEBOOK_TEMPLATE = "notebook.toml.j2"


def check_new_id(assignment_id: str, root: Path) -> None:
    """Raise AssignmentError unless ``assignment_id`` is a well-formed id that ``root`` does not have."""
    if not (ID_PATTERN.fullmatch(assignment_id) and len(assignment_id) <= ID_MAX):
        raise AssignmentError(f"{assignment_id!r} is not an assignment id: use {ID_RULE}")
    taken = [p for p in (root / "assignments" / assignment_id, root / "reference" / assignment_id) if p.exists()]
    if taken:
        raise AssignmentError(
            f"assignment {assignment_id!r} exists already ({', '.join(map(str, taken))}): "
            "choose another id, or edit that lesson"
        )


def check_title(title: str) -> None:
    """Raise AssignmentError unless ``title`` is one printable line the templates can quote."""
    if (
        not title.strip()
        or len(title) > TITLE_MAX
        or not title.isprintable()
        or "\\" in title
        or '"""' in title
        or "'''" in title
    ):
        raise AssignmentError(
            f"--title {title!r}: give one printable line of at most {TITLE_MAX} characters, "
            "without backslashes or triple quotes"
        )


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["toml_string"] = lambda text: json.dumps(text, ensure_ascii=False)  # a TOML basic string
    return env


def notebooks(env: jinja2.Environment, values: dict[str, str]) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(student notebook, solution) from the one list of cells."""
    cells = tomllib.loads(env.get_template(NOTEBOOK_TEMPLATE).render(**values))["cells"]
    student, solution = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    for cell in cells:
        make = nbformat.v4.new_markdown_cell if cell["type"] == "markdown" else nbformat.v4.new_code_cell
        student.cells.append(make(cell.get("student", cell.get("source", "")).strip("\n")))
        solution.cells.append(make(cell.get("solution", cell.get("source", "")).strip("\n")))
    for nb in (student, solution):
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return student, solution


def default_title(assignment_id: str) -> str:
    return f"Lesson {assignment_id} · softmax and its ONNX model"


def render_files(assignment_id: str, title: str) -> dict[str, str]:
    """The text files of the lesson (not its notebooks), by their path relative to the project root."""
    env = _environment()
    values = {"id": assignment_id, "title": title}
    return {target.format(id=assignment_id): env.get_template(name).render(**values) for name, target in FILES.items()}


def new_assignment(assignment_id: str, root: Path, *, title: str | None = None) -> list[Path]:
    """Write the lesson ``assignment_id`` under ``root`` and build it; returns the files written."""
    from ..assignment import load_assignment
    from .build import build_assignment

    check_new_id(assignment_id, root)
    title = title if title is not None else default_title(assignment_id)
    check_title(title)
    rendered = {root / target: text for target, text in render_files(assignment_id, title).items()}
    student, solution = notebooks(_environment(), {"id": assignment_id, "title": title})
    written = []
    for path, text in rendered.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for nb, path in (
        (student, root / "assignments" / assignment_id / f"{assignment_id}.ipynb"),
        (solution, root / "reference" / assignment_id / "solution.ipynb"),
    ):
        nbformat.write(nb, path)
        written.append(path)
    built = build_assignment(load_assignment(assignment_id, root), out_root=root)
    return sorted(set(written) | set(built.written))
