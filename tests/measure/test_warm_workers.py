"""Measuring children started ahead of their jobs (warm_pool): each runs one job, unused ones are
killed without reading anything, nothing is left behind. Real child processes (jailed where bwrap works)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto, helper

from autograder.measure import warm_pool
from autograder.measure.onnx_load import LoadLimits, run_model_worker


def add_one_model() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "one"], ["Y"])],
        "add_one",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _ready(count: int, timeout_s: float = 60.0) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with warm_pool._lock:
            if len(warm_pool._ready) >= count:
                return list(warm_pool._ready)
        time.sleep(0.05)
    raise AssertionError(f"{count} warm children did not start within {timeout_s:.0f} s")


def test_a_warm_child_runs_one_job_and_the_others_are_closed_unused():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    limits = LoadLimits()
    with warm_pool.warm_workers(2, limits):
        children = _ready(2)
        run = run_model_worker(add_one_model(), inputs={"set": x}, facts=("graph",), limits=limits)
        assert run.ok, run.reason
        np.testing.assert_array_equal(run.outputs["set__Y"], x + 1)
        taken = [w for w in children if w not in warm_pool._ready]
        assert len(taken) == 1, "the job did not use a warm child"
        assert taken[0].proc.poll() is not None and not taken[0].job_dir.exists(), "a used child outlived its job"
        # a child is never handed out twice: the next job takes the other one
        again = run_model_worker(add_one_model(), inputs={"set": x}, facts=("graph",), limits=limits)
        assert again.ok and not warm_pool._ready
    for w in children:
        assert w.proc.poll() is not None and not w.job_dir.exists()


def test_an_unused_warm_child_is_killed_without_a_job_and_nothing_of_it_is_left():
    import psutil

    with warm_pool.warm_workers(1, LoadLimits()):
        (child,) = _ready(1)
        folder = child.job_dir
        assert child.proc.poll() is None, "a warm child should wait for its job"
        tree = [child.proc.pid] + [p.pid for p in psutil.Process(child.proc.pid).children(recursive=True)]
    assert child.proc.returncode not in (None, 0), "an unused child is killed, not left to exit on its own"
    assert not folder.exists() and not warm_pool._ready
    left = []
    for pid in tree:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert not left, f"processes of the killed child are still running: {left}"


def test_a_child_started_with_other_limits_is_not_taken():
    with warm_pool.warm_workers(1, LoadLimits(timeout_s=30.0)):
        _ready(1)
        assert warm_pool.take(LoadLimits()) is None
        child = warm_pool.take(LoadLimits(timeout_s=30.0))
        assert child is not None
        child.close()
        assert child.proc.returncode is not None and not child.job_dir.exists()


def test_children_wait_for_the_start_signal_and_none_start_when_it_never_comes():
    import threading

    go = threading.Event()
    with warm_pool.warm_workers(1, LoadLimits(), start_when=go):
        time.sleep(0.3)
        assert not warm_pool._ready, "a child started before the signal (it would delay the kernel's start)"
        go.set()
        (child,) = _ready(1)
        assert child.proc.poll() is None
    assert child.proc.returncode is not None and not warm_pool._ready
    never = threading.Event()
    with warm_pool.warm_workers(2, LoadLimits(), start_when=never):
        pass
    assert not warm_pool._ready


# ── when children are started: only for jobs there will be (a fake spawn, counted) ──────────────


class _FakeChild:
    """What warm_pool needs of a child: its limits, a process that is alive, close()."""

    def __init__(self, limits) -> None:
        self.limits = limits
        self.closed = False

        class _Proc:
            returncode = None

            def poll(self_inner):
                return None

            def wait(self_inner, timeout=None):
                return 0

        self.proc = _Proc()

    def close(self) -> None:
        self.closed = True


def _fake_spawn(monkeypatch) -> list[_FakeChild]:
    from autograder.measure import worker_process

    spawned: list[_FakeChild] = []

    def start(limits):
        child = _FakeChild(limits)
        spawned.append(child)
        return child

    monkeypatch.setattr(worker_process, "start", start)
    monkeypatch.setattr(warm_pool, "POLL_S", 0.01)
    return spawned


def _settle(spawned: list, count: int, timeout_s: float = 10.0) -> None:
    """Wait until ``count`` children were spawned, then a few more polls (none more may come)."""
    deadline = time.monotonic() + timeout_s
    while len(spawned) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # ten polls at least: a child too many would have been started by now


@pytest.mark.parametrize(
    ("count", "files_over_time", "expected"),
    [
        (3, [0], 0),  # a notebook that writes no model: no child at all
        (3, [0, 1], 1),  # one file written: one child
        (3, [1, 2, 3], 3),  # each file as it appears
        (3, [0, 3], 3),  # several at once
        (3, [5], 3),  # never more than the lesson has artifacts
        (1, [1, 0, 1], 1),  # a file removed and written again: still one job, one child
        (2, [2, 1], 2),  # a file removed after its child started: that child stays (closed unused)
    ],
)
def test_children_are_started_only_for_the_model_files_written(monkeypatch, count, files_over_time, expected):
    spawned = _fake_spawn(monkeypatch)
    files = {"n": 0}
    with warm_pool.warm_workers(count, LoadLimits(), wanted=lambda: files["n"]):
        for n in files_over_time:
            files["n"] = n
            _settle(spawned, min(count, max(files_over_time[: files_over_time.index(n) + 1])))
        assert len(spawned) == expected
    assert len(spawned) == expected and all(c.closed for c in spawned), "an unused child outlived the block"
    assert not warm_pool._ready


def test_no_child_is_started_ahead_once_the_files_are_frozen(monkeypatch):
    """Once measuring begins (the working directory frozen before the probe) the jobs start their
    own: a file seen later would start a child nobody takes."""
    import threading

    spawned = _fake_spawn(monkeypatch)
    files, frozen = {"n": 1}, threading.Event()
    with warm_pool.warm_workers(3, LoadLimits(), wanted=lambda: files["n"], stop_when=frozen):
        _settle(spawned, 1)
        frozen.set()
        files["n"] = 3
        _settle(spawned, 3, timeout_s=0.2)
        assert len(spawned) == 1


def test_a_failing_count_starts_nothing_and_waits_for_the_start_signal(monkeypatch):
    import threading

    spawned = _fake_spawn(monkeypatch)

    def broken() -> int:
        raise OSError("the workspace is gone")

    with warm_pool.warm_workers(2, LoadLimits(), wanted=broken):
        _settle(spawned, 1, timeout_s=0.2)
        assert not spawned
    go = threading.Event()
    with warm_pool.warm_workers(2, LoadLimits(), start_when=go, wanted=lambda: 2):
        _settle(spawned, 1, timeout_s=0.2)
        assert not spawned, "a child started before the kernel was launched"
        go.set()
        _settle(spawned, 2)
        assert len(spawned) == 2


def test_artifacts_written_counts_regular_files_reached_without_links(tmp_path):
    count = warm_pool.artifacts_written(tmp_path, ["artifacts/a.onnx", "artifacts/b.onnx", "c.onnx"])
    assert count() == 0
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "a.onnx").write_bytes(b"x")
    assert count() == 1
    (tmp_path / "c.onnx").symlink_to(tmp_path / "artifacts" / "a.onnx")  # a link is not a model file
    (tmp_path / "artifacts" / "b.onnx").mkdir()  # nor is a folder
    assert count() == 1
    import os

    os.mkfifo(tmp_path / "fifo.onnx")
    assert warm_pool.artifacts_written(tmp_path, ["fifo.onnx"])() == 0  # not opened for reading: no hang
