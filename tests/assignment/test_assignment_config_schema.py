"""assignment.toml is checked against its schema when the assignment loads
(``autograder/schemas/assignment.schema.json`` through ``autograder/contracts.py``): a misspelt or
mistyped key of a core table fails then, naming the file and the key, never later as a TypeError
when the limits are read. Every lesson of the repository loads; a lesson's own tables stay open.
"""

from __future__ import annotations

import pytest

from autograder.assignment import assignment_ids, load_assignment
from autograder.errors import AssignmentError
from autograder.limits import ExecutionLimits

BASE = 'id = "cfg-01"\n'


def _load(tmp_path, toml: str):
    folder = tmp_path / "assignments" / "cfg-01"
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text(BASE + toml, encoding="utf-8")
    (folder / "grading" / "__init__.py").write_text(
        "def probe_cases():\n    return []\ndef measure(ctx):\n    return {}\n"
    )
    (tmp_path / "reference" / "cfg-01").mkdir(parents=True)
    return load_assignment("cfg-01", tmp_path)


@pytest.mark.parametrize(
    "toml, words",
    [
        ("[execution]\ncell_timout_s = 30\n", ["$.execution", "unknown key(s) cell_timout_s", "cell_timeout_s"]),
        ("[execution]\nmemory_mb = 0\n", ["$.execution.memory_mb", "must be > 0"]),
        ("[execution]\nmemory_mb = 1.5\n", ["$.execution.memory_mb", "an integer"]),
        ('[execution]\ncell_timeout_s = "60"\n', ["$.execution.cell_timeout_s", "a number"]),
        ("execution = 5\n", ["$.execution", "a table"]),
        ('[probe]\nfunction = ["f"]\n', ["$.probe", "unknown key(s) function", "functions"]),
        ('[probe]\nfunctions = "f"\n', ["$.probe.functions", "a list"]),
        ("[artifacts]\nfp32 = 1\n", ["$.artifacts.fp32", "a string"]),
        ('[environment]\npackage = ["numpy"]\n', ["$.environment", "unknown key(s) package"]),
        ('[summary.scatter]\nx = "a"\ny = "b"\n', ["$.summary.scatter", "needs series"]),
        ('[summary.scatter]\nx = "a"\ny = "b"\nlabel = "c"\n[summary.scatter.series]\ns = "m"\n', ["label"]),
        ("[integrity]\nthreshold = 2\n", ["$.integrity.threshold", "<= 1"]),
        ('notbook = "x.ipynb"\n', ["$.notbook", "unknown key notbook", "a table of its own"]),
        ("version = 1\n", ["$.version", "a string"]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_bad_config_fails_on_load_naming_the_file_and_the_key(tmp_path, toml, words):
    with pytest.raises(AssignmentError) as raised:
        _load(tmp_path, toml)
    message = str(raised.value)
    assert message.startswith(str(tmp_path / "assignments" / "cfg-01" / "assignment.toml") + ": "), message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    "toml",
    [
        "",
        "[execution]\ncell_timeout_s = 30\nnotebook_timeout_s = 90.5\nmemory_mb = 2048\noutput_cap_kb = 64\nworkspace_mb = 8\n",
        '[probe]\nresults_variable = "R"\nfunctions = ["f", "g"]\n',
        "[hidden]\nn_samples = 2000\n",  # a lesson's own table
        "[model_worker]\nmax_nodes = 10\n",  # checked by model_policy, key by key
        '[summary.scatter]\nx = "a"\ny = "b"\n[summary.scatter.series]\ns = "m"\n',
    ],
)
def test_a_good_config_loads(tmp_path, toml):
    assert isinstance(_load(tmp_path, toml).limits, ExecutionLimits)


def test_the_limits_come_from_the_checked_table(tmp_path):
    limits = _load(tmp_path, "[execution]\ncell_timeout_s = 30\nworkspace_mb = 8\n").limits
    assert limits == ExecutionLimits(cell_timeout_s=30, workspace_mb=8)


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_every_lesson_of_the_repository_fits_the_schema(assignment_id):
    assert isinstance(load_assignment(assignment_id).limits, ExecutionLimits)
