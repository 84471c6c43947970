"""The grader's own warm-ups are paid once per process (autograder/warm_ups.py), with small fakes:
a fake assignment whose ``prepare`` counts its calls, and the real figure warm-up counted.

What must hold for every process that grades (``grade``, a pool worker, a Dask worker): each
warm-up runs once for what it depends on (the loaded assignment and the hidden-data secret; each
picture format), a failed one is tried again, concurrent grades warm once, and a process that
draws no picture warms no drawing library. tests/batch/test_batch_worker_warm_ups.py shows it
through a real batch worker grading two submissions.
"""

from __future__ import annotations

import threading
import weakref

import pytest

from autograder import hidden_secret, warm_ups
from autograder.report import figure


class FakePlugin:
    def __init__(self, fail: int = 0) -> None:
        self.calls: list[str] = []
        self.fail = fail  # the first ``fail`` calls raise

    def prepare(self, assignment) -> None:
        self.calls.append(hidden_secret.fingerprint())
        if len(self.calls) <= self.fail:
            raise RuntimeError("the data set could not be built")


class FakeAssignment:
    def __init__(self, plugin: FakePlugin | None = None) -> None:
        self.grading = plugin or FakePlugin()


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as a new worker sees it (nothing warmed yet); the figure's warm-ups counted."""
    monkeypatch.setattr(warm_ups, "_prepared", weakref.WeakKeyDictionary())
    monkeypatch.setattr(warm_ups, "_pictures", set())
    drawn: list[list[str]] = []
    real = figure.warm_up
    monkeypatch.setattr(figure, "warm_up", lambda formats=("svg", "png"): drawn.append(list(formats)) or real(formats))
    return drawn


def test_each_warm_up_runs_once_per_process_not_once_per_submission(fresh_process):
    a = FakeAssignment()
    for _ in range(3):  # three submissions graded by one worker
        warm_ups.warm_up(a, ["svg", "png"])
    assert len(a.grading.calls) == 1
    assert fresh_process == [["svg", "png"]]


def test_only_the_formats_not_warmed_yet_are_drawn(fresh_process):
    a = FakeAssignment()
    warm_ups.warm_up(a, ["png"])  # Gradescope: results.json alone
    warm_ups.warm_up(a, ["svg", "png"])
    warm_ups.warm_up(a, [])
    assert fresh_process == [["png"], ["svg"]]


def test_a_grade_that_draws_no_picture_warms_no_drawing_library(fresh_process):
    warm_ups.warm_up(FakeAssignment(), [])
    assert fresh_process == []


def test_another_secret_or_another_loaded_assignment_prepares_again(fresh_process):
    a, b = FakeAssignment(), FakeAssignment()
    warm_ups.warm_up(a)
    other = hidden_secret.HiddenSecret.generate()
    with hidden_secret.using(other):
        warm_ups.warm_up(a)
        warm_ups.warm_up(a)
    warm_ups.warm_up(a)
    warm_ups.warm_up(b)
    assert a.grading.calls == [hidden_secret.fingerprint(), other.fingerprint()]
    assert b.grading.calls == [hidden_secret.fingerprint()]


def test_a_failed_warm_up_is_tried_again_and_does_not_stop_the_other(fresh_process):
    a = FakeAssignment(FakePlugin(fail=1))
    with pytest.raises(RuntimeError, match="could not be built"):
        warm_ups.warm_up(a, ["svg"])
    assert fresh_process == [["svg"]], "the picture is warmed even though prepare failed"
    warm_ups.warm_up(a, ["svg"])
    warm_ups.warm_up(a, ["svg"])
    assert len(a.grading.calls) == 2, "tried again once, then done"
    assert fresh_process == [["svg"]]


def test_concurrent_grades_of_one_process_warm_up_once(fresh_process):
    a = FakeAssignment()
    start = threading.Barrier(4)

    def grade() -> None:
        start.wait()
        warm_ups.warm_up(a, ["svg", "png"])

    threads = [threading.Thread(target=grade) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(a.grading.calls) == 1 and fresh_process == [["svg", "png"]]
