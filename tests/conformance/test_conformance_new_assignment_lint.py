"""``autograder new-assignment`` writes a lesson that CI's lint accepts as it is: ``ruff check`` and
``ruff format --check`` (the project's configuration, as ``make lint`` runs them) pass on every
file it writes, for the longest id and any title it accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.authoring.scaffold import ID_MAX, check_title, default_title, new_assignment, render_files
from autograder.errors import AssignmentError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyproject.toml"
CODE = ("autograder", "gradescope", "pyproject.toml", "README.md", "constraints.txt")  # what the build needs
LONGEST_ID = "12-" + "x" * (ID_MAX - 3)


def ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "--config", str(CONFIG)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def lint_problems(paths: list[Path], cwd: Path) -> list[str]:
    """What ``make lint`` would say about ``paths``: ruff check's findings and the files ruff format would change."""
    names = [str(p) for p in paths]
    problems = []
    check = ruff("check", *names, cwd=cwd)
    if check.returncode != 0:
        problems.append(check.stdout + check.stderr)
    fmt = ruff("format", "--diff", *names, cwd=cwd)
    if fmt.returncode != 0:
        problems.append(fmt.stdout + fmt.stderr)
    return problems


def project(tmp: Path) -> Path:
    (tmp / "assignments").mkdir(parents=True)
    for name in CODE:
        (tmp / name).symlink_to(ROOT / name)
    return tmp


@pytest.mark.parametrize(
    "assignment_id, title",
    [
        ("09-softmax", None),
        (LONGEST_ID, None),
        ("1-a", '"Quoted" title · ünïcode, with a trailing quote"'),
        ("12-my-lesson", "  spaces around  "),
        ("12-my-lesson", "x" * 100),
    ],
)
def test_a_fresh_scaffold_passes_ruff_check_and_ruff_format(tmp_path, assignment_id, title):
    root = project(tmp_path)
    written = new_assignment(assignment_id, root, title=title)
    python = [p for p in written if p.suffix == ".py"]
    assert {p.relative_to(root).as_posix() for p in python} == {
        f"assignments/{assignment_id}/grading/__init__.py",
        f"reference/{assignment_id}/make_examples.py",
    }
    # as CI runs it: over the folders, with the project's configuration (notebooks left out there)
    problems = lint_problems([root / "assignments", root / "reference"], root)
    assert not problems, "\n".join(problems)


def test_the_lint_check_fails_on_a_file_ruff_would_reformat(tmp_path):
    """The check above can fail: the scaffold's old layout (aligned comments, a split call) is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text('LARGE = 100.0                 # aligned\nx = {"a": 1,\n     "b": 2}\n')
    unused = tmp_path / "unused.py"
    unused.write_text("import os\n")
    assert len(lint_problems([bad], tmp_path)) == 1 and "aligned" in lint_problems([bad], tmp_path)[0]
    assert len(lint_problems([unused], tmp_path)) == 1 and "F401" in lint_problems([unused], tmp_path)[0]


ids = st.builds(
    lambda words: "-".join(words)[:ID_MAX].strip("-") or "a",
    st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12), min_size=1, max_size=6),
)


@settings(max_examples=25, deadline=None)
@given(assignment_id=ids, title=st.one_of(st.none(), st.text(min_size=1, max_size=100)))
def test_the_python_files_are_lint_clean_for_every_accepted_id_and_title(tmp_path_factory, assignment_id, title):
    title = default_title(assignment_id) if title is None else title
    try:
        check_title(title)
    except AssignmentError:
        return
    folder = tmp_path_factory.mktemp("rendered")
    paths = []
    for target, text in render_files(assignment_id, title).items():
        if target.endswith(".py"):
            path = folder / target.replace("/", "__")
            path.write_text(text, encoding="utf-8")
            paths.append(path)
    assert len(paths) == 2
    problems = lint_problems(paths, folder)
    assert not problems, "\n".join(problems)
