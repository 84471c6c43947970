"""The CPU budget per stage (bench/bench_cpu_budget.py): its table's shape, never its numbers.

The smoke test grades one notebook through the real batch (-j 1: a forked worker, the real jail,
kernel and measuring children) with the budget's readings, and checks that every stage is there,
that none is negative, and that kernel + grader (counted in pieces) matches the grade's own cgroup
(counted whole) within a wide margin. No duration is bounded. The other tests are pure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import bench_cpu_budget as budget  # noqa: E402
from bench import cpu_accounting, report_md  # noqa: E402
from bench.common import spread  # noqa: E402

ALL_ROWS = [k for k, _ in budget.KERNEL_ROWS + budget.GRADER_ROWS + budget.TOTAL_ROWS]
# rows computed as "what is left" of a measured whole: a reading's granularity may make them a hair below 0
EPSILON_S = 0.05


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import numpy as np", True),
        ("import numpy as np\nfrom onnx import helper\n", True),
        ('"""The imports."""\n# comment\nimport os, sys', True),
        ("import numpy as np\nx = np.zeros(3)", False),
        ("x = 1", False),
        ("", False),
        ("# only a comment", False),
        ("def f(:\n  import os", False),  # a syntax error is not an import cell
        ("%matplotlib inline\nimport numpy", False),
        ("if True:\n    import numpy", False),  # an import under a condition runs other code first
    ],
)
def test_import_only_cells_are_told_apart(source, expected):
    assert budget.is_import_only(source) is expected


def fake_result(examples=("reference", "untouched")) -> dict:
    rows = {k: spread([0.5, 0.6, 0.7]) for k in ALL_ROWS}
    return {
        "rounds": 3,
        "examples": list(examples),
        "per_example": {e: {**rows, "children": [[0.2, 0.2, True]]} for e in examples},
        "overall": rows,
        "batch": {k: spread([1.0]) for k, _ in budget.BATCH_ROWS},
        "statuses": [{"ok": 2}],
        "hooks_missing": [],
        "cgroup_version": 1,
        "isolation": "bwrap",
        "children_per_submission": 3,
    }


def test_section_has_every_stage_and_every_example():
    lines = budget.section(fake_result(), {"load_average_start": [5.0, 4.0, 3.0]})
    text = "\n".join(lines)
    assert lines[0] == budget.TITLE
    for _, label in budget.KERNEL_ROWS + budget.GRADER_ROWS + budget.TOTAL_ROWS + budget.BATCH_ROWS:
        assert f"| {label} |" in text, label
    assert "| `reference` | `untouched` | all |" in text
    assert "load [5.0, 4.0, 3.0]" in text, "a loaded machine must be said"
    assert "The largest part of the grader's own CPU" in text


def test_section_says_why_nothing_was_measured():
    lines = budget.section({"unavailable": "cgroups need root"})
    assert "Not measured on this machine: cgroups need root." in lines


def test_section_names_a_missing_hook():
    result = {**fake_result(), "hooks_missing": ["autograder.sandbox.execute._Run._execute"]}
    assert "`autograder.sandbox.execute._Run._execute`" in "\n".join(budget.section(result))


def test_dominant_is_the_largest_grader_row():
    result = fake_result()
    result["overall"] = {**result["overall"], "picture": spread([3.0]), "kernel_start": spread([9.0])}
    assert budget.dominant(result)[0] == "picture", "a kernel row is not the grader's"


def test_results_md_gets_the_section_and_splice_replaces_only_it():
    data = {
        "config": {"mode": "full", "only": ["cpu"]},
        "machine": {"date": "2026-01-01", "git": "abc"},
        "cpu": fake_result(),
        "goals": [],
    }
    text = report_md.render(data)
    assert budget.TITLE in text
    before = "## 1 · Overhead of grading vs bare execution\n\nold numbers\n\n## Notes\n\n- a note\n"
    spliced = report_md.splice("| goal | measured | target | result |\n|---|---:|---:|---|\n\n" + before, data)
    assert "old numbers" in spliced and "- a note" in spliced
    assert spliced.index(budget.TITLE) < spliced.index("## Notes")
    again = report_md.splice(spliced, data)
    assert again.count(budget.TITLE) == 1, "a second splice replaces the section, it does not add one"


def test_summarize_takes_medians_per_example():
    def sub(example, value):
        return {"example": example, "rows": {k: value for k in ALL_ROWS}, "children": []}

    runs = [
        {
            "submissions": [sub("a", 1.0), sub("b", 10.0)],
            "batch": {k: 1.0 for k, _ in budget.BATCH_ROWS},
            "statuses": {},
            "hooks_missing": [],
        }
        for _ in range(2)
    ]
    runs.append(
        {
            "submissions": [sub("a", 4.0), sub("b", 10.0)],
            "batch": {k: 3.0 for k, _ in budget.BATCH_ROWS},
            "statuses": {},
            "hooks_missing": [],
        }
    )
    result = budget.summarize(runs, ["a", "b"])
    assert result["per_example"]["a"]["kernel_start"]["median"] == 1.0
    assert result["per_example"]["b"]["total"]["median"] == 10.0
    assert result["batch"]["integrity"]["median"] == 1.0


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.root
def test_budget_of_one_notebook_has_every_stage_and_adds_up(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the jail's CPU is counted by cgroups, which need root")
    hierarchy, why = cpu_accounting.available()
    if hierarchy is None:
        pytest.skip(f"no cgroup to count the jail's CPU: {why}")
    from autograder.assignment import load_assignment
    from autograder.measure.warm_pool import measure_jobs

    run = budget.batch_once(load_assignment("07-quantization"), ["reference"], 0, tmp_path)
    assert run["hooks_missing"] == [], "a patched function of the grader was not found"
    assert run["statuses"] == {"ok": 1}
    (sub,) = run["submissions"]
    rows = sub["rows"]
    assert set(ALL_ROWS) <= set(rows)
    for key in ALL_ROWS:
        assert rows[key] is not None, f"{key} was not measured"
        assert rows[key] >= -EPSILON_S, f"{key} is negative: {rows[key]}"
    # the reference's cells and its three models really ran: their rows are not empty
    for key in ("kernel_start", "kernel_import_cells", "kernel_cells", "kernel_probe", "children_jobs"):
        assert rows[key] > 0, key
    # the submission's children (as many as models are measured at once, at most one per model) share
    # the three models; a busy machine may add cold ones (their start-up is their job: startup 0) when
    # the grader re-times the student's models
    warm = [c for c in sub["children"] if c["startup"] > 0]
    assert 1 <= len(warm) <= min(3, measure_jobs()) and warm[0]["used"], sub["children"]
    assert sum(c["jobs"] for c in sub["children"]) >= 3, sub["children"]
    # two countings of the same CPU: the pieces, and the grade's own cgroup as a whole
    assert rows["sum"] == pytest.approx(rows["total"], rel=0.25, abs=0.5)
    assert rows["kernel_total"] + rows["grader_total"] == pytest.approx(rows["sum"])
    kernel_parts = sum(rows[k] for k, _ in budget.KERNEL_ROWS)
    assert kernel_parts == pytest.approx(rows["kernel_total"], abs=1e-6)
    batch = run["batch"]
    for key, _ in budget.BATCH_ROWS:
        assert batch[key] is not None and batch[key] >= -EPSILON_S, key
    assert batch["integrity"] > 0, "the integrity report ran"
    assert batch["batch_total"] >= batch["submissions"]
    ours = f"{cpu_accounting.PREFIX}{os.getpid()}-"
    leftovers = [p.name for p in hierarchy.parent.iterdir() if p.name.startswith(ours)]
    assert leftovers == [], "every counting cgroup is removed"
