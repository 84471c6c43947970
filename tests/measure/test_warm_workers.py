"""Measuring children started ahead of their jobs (warm_pool): each runs one job, unused ones are
killed without reading anything, nothing is left behind. Real child processes (jailed where bwrap works)."""

from __future__ import annotations

import time

import numpy as np
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
