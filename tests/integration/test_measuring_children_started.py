"""Measuring children are started ahead only for the model files a notebook writes, through the real
pipeline, jail, kernel and model worker (every lesson):

- a notebook that writes no model (each lesson's untouched example) starts no child ahead, and
  every child any grade starts gets a job: none is started for nothing;
- one that writes its models still has each of them measured by a child started ahead (warm), not
  by one started when the measurement begins.

Each child is counted where it is spawned (``worker_process.start``), with the thread that started
it: the warm pool's, or the measurement's own (cold).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from autograder.assignment import load_assignment
from autograder.measure import worker_process
from autograder.pipeline import grade_notebook

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.parent.parent.name for p in (ROOT / "assignments").glob("*/examples/untouched.ipynb"))
WARM_THREAD = "autograder-warm-workers"

pytestmark = [pytest.mark.slow, pytest.mark.kernel]


@pytest.fixture
def spawned(monkeypatch) -> list[tuple[str, worker_process.WorkerProcess]]:
    """Every measuring child started while the test runs, with the name of the thread that started it."""
    seen: list[tuple[str, worker_process.WorkerProcess]] = []
    real_start = worker_process.start

    def start(limits):
        child = real_start(limits)
        seen.append((threading.current_thread().name, child))
        return child

    monkeypatch.setattr(worker_process, "start", start)
    return seen


def _grade(lesson: str, example: str, tmp_path: Path) -> dict:
    assignment = load_assignment(lesson, ROOT)
    assert assignment.artifacts, f"{lesson} has no model files: nothing to test"
    return grade_notebook(ROOT / "assignments" / lesson / "examples" / f"{example}.ipynb", assignment, tmp_path)


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_notebook_that_writes_no_model_starts_no_measuring_child_ahead(lesson, spawned, tmp_path):
    grade = _grade(lesson, "untouched", tmp_path)
    assert grade["score"] < grade["max_score"]
    ahead = [child for thread, child in spawned if thread == WARM_THREAD]
    assert not ahead, f"{len(ahead)} measuring child(ren) started ahead for a notebook that wrote no model"
    unused = [child for _, child in spawned if not child.used]
    assert not unused, f"{len(unused)} measuring child(ren) started and never given a job"


def test_the_models_a_notebook_writes_are_measured_by_children_started_ahead(spawned, tmp_path):
    grade = _grade("07-quantization", "reference", tmp_path)
    assert grade["score"] == grade["max_score"], "the reference lost points"
    ahead = [child for thread, child in spawned if thread == WARM_THREAD]
    artifacts = load_assignment("07-quantization", ROOT).artifacts
    assert len(ahead) == len(artifacts), f"{len(ahead)} children started ahead for {len(artifacts)} model files"
    assert all(child.used for child in ahead), "a child started ahead was never given a job"
    assert all(child.used for _, child in spawned)
