"""How many measuring children a real grade starts (lesson 07, real kernel, jail and ONNX Runtime).

The submission's children are started by its set's own thread (``autograder-warm-workers``); the
grader's re-timings start fresh children of their own elsewhere and are not counted here.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from autograder.measure import worker_process
from autograder.pipeline import grade_notebook

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture
def submission_children(monkeypatch):
    """Every child started for a submission's set, and every job given to one of them."""
    started: list[worker_process.WorkerProcess] = []
    jobs: list[int] = []
    start, run = worker_process.start, worker_process.WorkerProcess.run

    def counting_start(limits):
        child = start(limits)
        if threading.current_thread().name == "autograder-warm-workers":
            started.append(child)
        return child

    def counting_run(self, files):
        if any(self is child for child in started):
            jobs.append(self.proc.pid)
        return run(self, files)

    monkeypatch.setattr(worker_process, "start", counting_start)
    monkeypatch.setattr(worker_process.WorkerProcess, "run", counting_run)
    return started, jobs


def test_a_submission_without_models_starts_one_child_even_when_three_could_run(
    assignment07, tmp_path, monkeypatch, submission_children
):
    started, jobs = submission_children
    monkeypatch.setenv("AUTOGRADER_MEASURE_JOBS", "3")
    grade_notebook(EXAMPLES / "untouched.ipynb", assignment07, tmp_path / "out", workspace=tmp_path / "ws")
    assert len(started) <= 1 and not jobs, (len(started), jobs)
    assert all(child.proc.poll() is not None and not child.job_dir.exists() for child in started)


def test_one_core_for_measuring_means_one_child_for_the_three_models(
    assignment07, tmp_path, monkeypatch, submission_children
):
    started, jobs = submission_children
    monkeypatch.setenv("AUTOGRADER_MEASURE_JOBS", "1")
    grade = grade_notebook(EXAMPLES / "reference.ipynb", assignment07, tmp_path / "out", workspace=tmp_path / "ws")
    assert grade["score"] == grade["max_score"], "the reference lost points with its models in one child"
    assert len(started) == 1 and len(jobs) == 3 and len(set(jobs)) == 1, (len(started), jobs)
    assert started[0].proc.poll() is not None and not started[0].job_dir.exists()
