"""A submission's measuring children (warm_pool): as few as allowed, the first one warm, each serving
one submission only; unused ones are killed without reading anything, nothing is left behind.
Real child processes (jailed where bwrap works)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

from autograder.measure import warm_pool, worker_process
from autograder.measure.onnx_load import LoadLimits, run_model_worker

X = np.arange(8, dtype=np.float32).reshape(4, 2)


def add_model(k: float = 1.0) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "one"], ["Y"])],
        "add_one",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [k])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture
def served(monkeypatch):
    """(child's pid, model bytes) of every job, and every child started, as they happen."""
    jobs: list[tuple[int, bytes]] = []
    started: list[worker_process.WorkerProcess] = []
    run, start = worker_process.WorkerProcess.run, worker_process.start

    def counting_run(self, files):
        jobs.append((self.proc.pid, files["model.onnx"]))
        return run(self, files)

    def counting_start(limits):
        child = start(limits)
        started.append(child)
        return child

    monkeypatch.setattr(worker_process.WorkerProcess, "run", counting_run)
    monkeypatch.setattr(worker_process, "start", counting_start)
    return jobs, started


def _wait_for(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout_s:.0f} s")


def _gone(children) -> None:
    for child in children:
        assert child.proc.poll() is not None and not child.job_dir.exists(), "a child outlived its submission"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_one_child_measures_all_of_a_submissions_models_one_after_another(served):
    jobs, started = served
    limits = LoadLimits()
    with warm_pool.warm_workers(1, limits) as children:
        for k in (1.0, 2.0, 3.0):
            run = run_model_worker(add_model(k), inputs={"set": X}, facts=("graph",), limits=limits, children=children)
            assert run.ok, run.reason
            np.testing.assert_array_equal(run.outputs["set__Y"], X + k)  # its own result, not the previous job's
    assert len(started) == 1 and len({pid for pid, _ in jobs}) == 1 and len(jobs) == 3
    _gone(started)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_side_by_side_jobs_use_at_most_the_allowed_children(served):
    jobs, started = served
    limits = LoadLimits()
    with warm_pool.warm_workers(2, limits) as children:
        threads = [
            threading.Thread(
                target=lambda k=k: run_model_worker(add_model(k), inputs={"set": X}, limits=limits, children=children)
            )
            for k in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(jobs) == 6 and 1 <= len(started) <= 2, [pid for pid, _ in jobs]
    _gone(started)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_child_never_measures_two_submissions(served):
    """Two grades in one process (a batch worker's threads), each with its own children, measuring
    at the same time: every child's jobs come from one submission only."""
    jobs, started = served
    limits = LoadLimits()
    models = {name: [add_model(k) for k in ks] for name, ks in {"a": (1.0, 2.0, 3.0), "b": (10.0, 20.0, 30.0)}.items()}
    errors: list[str] = []

    def grade(name: str) -> None:
        with warm_pool.warm_workers(2, limits) as children:
            for model, k in zip(models[name], (1, 2, 3)):
                run = run_model_worker(model, inputs={"set": X}, limits=limits, children=children)
                if not run.ok or not np.array_equal(run.outputs["set__Y"], X + k * (1 if name == "a" else 10)):
                    errors.append(f"{name}: {run.reason or run.outputs}")

    threads = [threading.Thread(target=grade, args=(name,)) for name in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    owner = {model: name for name, ms in models.items() for model in ms}
    by_child: dict[int, set[str]] = {}
    for pid, model in jobs:
        by_child.setdefault(pid, set()).add(owner[model])
    assert len(jobs) == 6 and all(len(s) == 1 for s in by_child.values()), by_child
    _gone(started)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_submission_without_models_starts_at_most_one_child_and_kills_it_unused(served):
    import psutil

    jobs, started = served
    with warm_pool.warm_workers(3, LoadLimits()) as children:
        _wait_for(lambda: children._idle, "the warm child did not start")
        (child,) = children._idle
        folder = child.job_dir
        assert child.proc.poll() is None, "a warm child should wait for its job"
        tree = [child.proc.pid] + [p.pid for p in psutil.Process(child.proc.pid).children(recursive=True)]
        time.sleep(0.5)  # no second child starts without a job asking for it
        assert len(started) == 1
    assert not jobs and len(started) == 1
    assert child.proc.returncode not in (None, 0), "an unused child is killed, not left to exit on its own"
    assert not folder.exists()
    left = []
    for pid in tree:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert not left, f"processes of the killed child are still running: {left}"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_job_with_other_limits_gets_a_fresh_child_of_its_own(served):
    jobs, started = served
    with warm_pool.warm_workers(1, LoadLimits(timeout_s=30.0)) as children:
        _wait_for(lambda: children._idle, "the warm child did not start")
        (warm,) = children._idle
        run = run_model_worker(add_model(), inputs={"set": X}, limits=LoadLimits(), children=children)
        assert run.ok and children._idle == [warm] and warm.jobs == 0
        assert len(started) == 2 and started[1].proc.poll() is not None, "the fresh child outlived its job"
    _gone(started)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_without_children_every_job_gets_a_fresh_child(served):
    """The grader's own models and re-timings: never in a child that measured a student's model."""
    jobs, started = served
    for k in (1.0, 2.0):
        assert run_model_worker(add_model(k), inputs={"set": X}, limits=LoadLimits()).ok
    assert len({pid for pid, _ in jobs}) == 2 and len(started) == 2
    _gone(started)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_children_wait_for_the_start_signal_and_none_start_when_it_never_comes(served):
    jobs, started = served
    go = threading.Event()
    with warm_pool.warm_workers(1, LoadLimits(), start_when=go) as children:
        time.sleep(0.3)
        assert not started, "a child started before the signal (it would delay the kernel's start)"
        go.set()
        _wait_for(lambda: children._idle, "the warm child did not start")
    assert len(started) == 1
    _gone(started)
    never = threading.Event()
    with warm_pool.warm_workers(2, LoadLimits(), start_when=never):
        pass
    assert len(started) == 1


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_job_before_the_signal_starts_its_child_at_once(served):
    """A kernel that never started: measuring does not wait for a signal that will not come."""
    jobs, started = served
    never = threading.Event()
    limits = LoadLimits()
    with warm_pool.warm_workers(1, limits, start_when=never) as children:
        assert run_model_worker(add_model(), inputs={"set": X}, limits=limits, children=children).ok
    assert len(started) == 1
    _gone(started)
