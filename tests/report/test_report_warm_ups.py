"""The grader's own warm-ups are paid once per process (autograder/warm_ups.py), with small fakes:
a fake assignment whose ``prepare`` counts its calls, and the real figure warm-up counted.

What must hold for every process that grades (``grade``, a pool worker, a Dask worker): each
warm-up runs once for what it depends on (the loaded assignment and the hidden-data secret; each
picture format), a failed one is tried again, concurrent grades warm once, and a process that
draws no picture warms no drawing library. tests/batch/test_batch_worker_warm_ups.py shows it
through a real batch worker grading two submissions.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

from autograder import hidden_secret, warm_ups
from autograder.assignment import load_assignment
from autograder.report import figure

ROOT = Path(__file__).resolve().parents[2]


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


ASSIGNMENTS = sorted(p.parent.parent.name for p in (ROOT / "assignments").glob("*/grading/__init__.py"))


def _arrays_and_records(value):
    """Every NumPy array and dataclass instance in ``value`` (through dataclasses, tuples, lists, dicts)."""
    if isinstance(value, np.ndarray):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield value
        for f in dataclasses.fields(value):
            yield from _arrays_and_records(getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays_and_records(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays_and_records(v)


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_what_prepare_keeps_for_the_next_submissions_is_read_only(assignment_id, project_root):
    """``prepare`` runs once per process, so what it caches serves every later submission of a
    worker: each data set of every assignment (the public builders of its ``grading/data.py``) is the
    same cached object on every call, and read-only: arrays not writeable, records frozen."""
    a = load_assignment(assignment_id, project_root)
    assert a.grading.prepare is not None, f"{assignment_id} has no prepare: its data would be built per submission"
    warm_ups.warm_up(a)
    data = importlib.import_module(f"{a.grading.module.__name__}.data")
    builders = {}  # the public builders: called as the grading code calls them (with the assignment if they take it)
    for name, f in vars(data).items():
        if name.startswith("_") or isinstance(f, type) or getattr(f, "__module__", None) != data.__name__:
            continue
        params = inspect.signature(f).parameters
        args = (a,) if "assignment" in params else ()
        try:
            inspect.signature(f).bind(*args)
        except TypeError:
            continue  # needs arguments only the grading code knows (a seed, a secret)
        builders[name] = args
    assert builders, f"{assignment_id}: no data builder found in grading/data.py"
    for name, args in builders.items():
        first, again = (
            list(_arrays_and_records(getattr(data, name)(*args))),
            list(_arrays_and_records(getattr(data, name)(*args))),
        )
        arrays = [x for x in first if isinstance(x, np.ndarray)]
        assert arrays, f"{assignment_id}: data.{name}() holds no array"
        assert len(first) == len(again) and all(x is y for x, y in zip(first, again)), (
            f"data.{name}() is rebuilt per call"
        )
        assert not [x for x in arrays if x.flags.writeable], f"{assignment_id}: data.{name}() hands out writable arrays"
        records = [x for x in first if not isinstance(x, np.ndarray)]
        assert all(type(r).__dataclass_params__.frozen for r in records), f"data.{name}() returns an unfrozen record"
