"""Status words live in autograder/statuses.py only, and each enum there is its schema's list.

- every ``StrEnum`` of statuses equals the ``enum`` of the schema field it fills, and a member is
  its string (it compares, hashes, formats and JSON-serialises as the value);
- no module of the package spells a status: a string constant compared with something named
  ``status`` (``status == "ok"``, ``x.status in ("a", "b")``, ``d.get("status") != "x"``), or given
  as the value of a ``"status"`` key (``{"status": "passed"}``, ``status="passed"``), is an error:
  the enum's member says it.
"""

from __future__ import annotations

import ast
import json
from enum import StrEnum
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import autograder
from autograder import statuses
from autograder.statuses import CellStatus, ProbeStatus, RunStatus, SubmissionStatus, TestStatus, Visibility

PACKAGE = Path(autograder.__file__).resolve().parent
SCHEMAS = PACKAGE / "schemas"
STATUS_ENUMS = [RunStatus, ProbeStatus, CellStatus, TestStatus, SubmissionStatus]
ENUMS = [*STATUS_ENUMS, Visibility]


def _schema_enum(schema: str, *path: str) -> list[str]:
    node = json.loads((SCHEMAS / f"{schema}.schema.json").read_text(encoding="utf-8"))
    for step in path:
        node = node[step]
    return node["enum"]


@pytest.mark.parametrize(
    "enum, schema, path",
    [
        (RunStatus, "execution", ("$defs", "record", "properties", "status")),
        (ProbeStatus, "execution", ("$defs", "record", "properties", "probe")),
        (CellStatus, "execution", ("$defs", "cell", "properties", "status")),
        (Visibility, "rubric", ("$defs", "check", "properties", "visibility")),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_each_status_enum_is_its_schemas_list(enum, schema, path):
    assert [m.value for m in enum] == _schema_enum(schema, *path)


def test_a_batch_row_status_is_a_run_status_or_why_there_was_no_run():
    runs = {s.value for s in RunStatus} - {RunStatus.COMPLETED}
    assert runs | {"ok", "grader_error", "worker_lost", "not_graded"} == {s.value for s in SubmissionStatus}


@given(st.sampled_from([m for enum in ENUMS for m in enum]))
def test_a_member_is_its_string(member):
    value = member.value
    assert member == value and hash(member) == hash(value) and value in {member} and {value: 1}[member] == 1
    assert str(member) == f"{member}" == value
    assert json.dumps({member: member}) == json.dumps({value: value})


@pytest.mark.parametrize(
    "run, expected",
    [("completed", "ok"), ("timeout", "timeout"), ("sandbox_error", "sandbox_error"), ("weird", "weird")],
)
def test_a_runs_status_becomes_the_rows(run, expected):
    assert statuses.submission_status(run) == expected


# ── no status spelled outside statuses.py ──────────────────────────────────────────────────────
# a name holding this word -> the words of its vocabulary
VOCABULARIES = {
    "status": {m.value for enum in STATUS_ENUMS for m in enum},
    "visibility": {m.value for m in Visibility},
}


def _vocabulary(node: ast.AST) -> set[str]:
    """The words ``node`` may hold when it names a status or a visibility (``status``,
    ``x.probe_status``, ``d["status"]``, ``d.get("visibility", ...)``, ``STATUSES``), else none."""
    if isinstance(node, ast.Constant):
        return set()
    text = ast.unparse(node).lower()
    return set().union(*(words for name, words in VOCABULARIES.items() if name in text))


def _constants(node: ast.AST, words: set[str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in node.elts for v in _constants(e, words)]
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("frozenset", "set", "tuple"):
        return [v for a in node.args for v in _constants(a, words)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return [v for a in node.args[1:] for v in _constants(a, words)]  # d.get("status", "ok")
    if isinstance(node, ast.IfExp):
        return _constants(node.body, words) + _constants(node.orelse, words)
    return []


def spelled_statuses(tree: ast.Module) -> list[str]:
    """``line: word`` for every status (or visibility) word written as a string where one is meant."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            words = set().union(*(_vocabulary(s) for s in sides))
            found += [f"{node.lineno}: {w}" for s in sides for w in _constants(s, words)]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found += [f"{node.lineno}: {w}" for w in _constants(value, _vocabulary(ast.Name(key.value)))]
        elif isinstance(node, ast.keyword) and node.arg:
            found += [f"{node.value.lineno}: {w}" for w in _constants(node.value, _vocabulary(ast.Name(node.arg)))]
        elif isinstance(node, ast.Assign):
            words = set().union(*(_vocabulary(t) for t in node.targets))
            found += [f"{node.lineno}: {w}" for w in _constants(node.value, words)]
    return found


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(PACKAGE.parent)), ast.parse(p.read_text(encoding="utf-8"), str(p)))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "statuses.py"
    ]


# where a word is another vocabulary's (the probe's case records, which measuring reads; Dask's
# futures): not a status of the grader's files
OTHER_VOCABULARIES = (
    "autograder/batch/dask_executor.py",  # distributed.Future.status: "finished", "error"
    "autograder/measure/",  # a probe case's status (probe_format)
    "autograder/probe_format.py",
    "autograder/sandbox/probe",  # probe.py, probe_kernel.py, probe_run.py: the case records
)


@pytest.mark.parametrize(
    "path, tree",
    [m for m in _modules() if not m[0].startswith(OTHER_VOCABULARIES)],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_no_module_spells_a_status(path, tree):
    assert spelled_statuses(tree) == [], f"{path}: use the member of autograder.statuses"


@pytest.mark.parametrize(
    "source, expected",
    [
        ('status == "completed"', 1),
        ('x.status in ("timeout", "kernel_died")', 2),
        ('execution.get("status") != "completed"', 1),
        ('self.probe_status == "not_run"', 1),
        ('{"status": "passed" if ok else "failed"}', 2),
        ('dict(status="unreadable")', 1),
        ('record["status"] = "worker_lost"', 1),
        ('UNCACHED_STATUSES = frozenset({"sandbox_error", "startup_failed"})', 2),
        ("status == RunStatus.COMPLETED", 0),
        ('{"status": TestStatus.PASSED}', 0),
        ('kind == "error"', 0),  # not a status
        ('{"reason": "timeout"}', 0),
        ('status == "finished-ish"', 0),  # not a status word
        ('check.get("visibility", "visible") != "visible"', 2),
        ('{"stdout_visibility": "hidden"}', 1),
        ('{"visibility": Visibility.VISIBLE, "status": "hidden"}', 0),  # another vocabulary's word
        ('{"inputs": {"hidden": rows}}', 0),
        ('row.get("status", "not_graded")', 0),  # read, not compared, assigned or given
        ('status = row.get("status", "not_graded")', 1),
        ('x = row.get("status", "not_graded")', 0),
    ],
)
def test_the_check_finds_every_spelled_status(source, expected):
    assert len(spelled_statuses(ast.parse(source))) == expected


def test_every_status_enum_is_a_str_enum():
    found = [v for v in vars(statuses).values() if isinstance(v, type) and issubclass(v, StrEnum) and v is not StrEnum]
    assert sorted(e.__name__ for e in found) == sorted(e.__name__ for e in ENUMS)
