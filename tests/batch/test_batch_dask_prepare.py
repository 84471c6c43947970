"""Dask workers are prepared as the local pool's processes are, however the cluster was started.

- On a ``local:2`` cluster (``DaskExecutor`` starts it) and on a running cluster reached by
  ``tcp://`` (a real ``dask scheduler`` and two ``dask worker`` processes started with Dask's
  default settings), every worker measures at most cores // (worker threads of its machine) models
  at a time, as ``-j 2`` does, and does not profile the job it runs nor poll at Dask's default
  intervals (the profiler's samples are counted on the worker after a job).
- ``quiet_worker`` and ``share_measuring_cores`` over tables and generated inputs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest
from batchkit import ASSIGNMENT_ID, make_assignment_tree
from dask_procs import running_workers
from hypothesis import given
from hypothesis import strategies as st

from autograder.assignment import load_assignment
from autograder.batch.executor import share_measuring_cores
from needs import needs

pytest.importorskip("distributed")

from autograder.batch.dask_executor import (  # noqa: E402 - needs distributed
    PLUGIN_NAME,
    PROFILER_CALLBACKS,
    QUIET_CALLBACKS,
    QUIET_CONFIG,
    DaskExecutor,
    quiet_worker,
)

JOB_S = 0.6  # long enough for Dask's default profiler (every 10 ms) to take dozens of samples


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_assignment_tree(tmp_path_factory.mktemp("dask-prepare-project"))


@pytest.fixture(scope="module")
@needs("dask")
def running_cluster(tmp_path_factory, project):
    with running_workers(
        tmp_path_factory.mktemp("dask-prepare-cluster"), env={"AUTOGRADER_ROOT": str(project)}
    ) as procs:
        yield procs


@pytest.mark.dask
@pytest.mark.parametrize("kind", ["local:2", "tcp"])
def test_every_worker_is_prepared_like_the_local_pools(kind, project, monkeypatch, request):
    from dask.utils import parse_timedelta

    plugin_name = PLUGIN_NAME

    def _state(dask_worker) -> dict:
        """What a worker looks like after its job, read there (``client.run``; defined here, so that it
        travels by value to a worker that cannot import this test module)."""
        plugin = dask_worker.plugins.get(plugin_name)
        return {
            "cores": len(os.sched_getaffinity(0)),
            "measure_jobs": os.environ.get("AUTOGRADER_MEASURE_JOBS"),
            "plugin_measure_jobs": getattr(plugin, "measure_jobs", None),
            "callbacks": sorted(dask_worker.periodic_callbacks),
            "intervals_ms": {k: c.callback_time for k, c in dask_worker.periodic_callbacks.items()},
            "profile_samples": dask_worker.profile_recent.get("count", 0) + len(dask_worker.profile_history),
        }

    monkeypatch.setenv("AUTOGRADER_ROOT", str(project))
    monkeypatch.delenv("AUTOGRADER_MEASURE_JOBS", raising=False)  # a local:N worker inherits ours
    assignment = load_assignment(ASSIGNMENT_ID, project)
    spec = "local:2" if kind == "local:2" else request.getfixturevalue("running_cluster").address
    executor = DaskExecutor(spec, assignment)
    try:
        workers = sorted(executor.client.scheduler_info(n_workers=-1)["workers"])
        assert len(workers) == 2
        jobs = [executor.client.submit(time.sleep, JOB_S, workers=[w], pure=False) for w in workers]
        executor.client.gather(jobs)
        states = executor.client.run(_state)
    finally:
        executor.close()
    for address, state in states.items():
        share = str(max(1, state["cores"] // 2))  # two one-thread workers on this machine, as -j 2
        assert state["measure_jobs"] == share and str(state["plugin_measure_jobs"]) == share, address
        assert state["profile_samples"] == 0, f"{address} profiled its job"
        assert not set(PROFILER_CALLBACKS) & set(state["callbacks"])
        for name, key in QUIET_CALLBACKS.items():
            if name in state["intervals_ms"]:
                assert state["intervals_ms"][name] >= parse_timedelta(QUIET_CONFIG[key]) * 1000, (address, name)
        assert "tick" in state["intervals_ms"] and "monitor" in state["intervals_ms"]


class _Callback:
    def __init__(self, ms: float) -> None:
        self.callback_time, self.stopped = ms, False

    def stop(self) -> None:
        self.stopped = True


class _Worker:
    def __init__(self, intervals: dict[str, float]) -> None:
        self.periodic_callbacks = {name: _Callback(ms) for name, ms in intervals.items()}


@pytest.mark.parametrize(
    "before, after",
    [
        # Dask's defaults: the profiler goes, the checks slow down
        (
            {"profile": 10, "profile-cycle": 1000, "tick": 20, "monitor": 500, "memory_monitor": 100, "heartbeat": 500},
            {"tick": 1000, "monitor": 5000, "memory_monitor": 1000, "heartbeat": 500},
        ),
        # already slower than ours (an instructor's settings): kept
        ({"tick": 2000, "monitor": 60000}, {"tick": 2000, "monitor": 60000}),
        # a worker started with the profiler off, with no memory monitor: nothing missing is added
        ({"tick": 20}, {"tick": 1000}),
        ({}, {}),
    ],
)
def test_quiet_worker_stops_the_profiler_and_never_speeds_anything_up(before, after):
    worker = _Worker(before)
    removed = [worker.periodic_callbacks[n] for n in PROFILER_CALLBACKS if n in worker.periodic_callbacks]
    quiet_worker(worker)
    assert {k: c.callback_time for k, c in worker.periodic_callbacks.items()} == after
    assert all(c.stopped for c in removed)
    assert not any(c.stopped for c in worker.periodic_callbacks.values())


@given(cores=st.integers(1, 256), jobs=st.integers(0, 300), preset=st.one_of(st.none(), st.integers(1, 64)))
def test_each_worker_measures_with_its_share_of_the_cores(cores, jobs, preset):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
        if preset is None:
            m.delenv("AUTOGRADER_MEASURE_JOBS", raising=False)
        else:
            m.setenv("AUTOGRADER_MEASURE_JOBS", str(preset))
        value = share_measuring_cores(jobs)
        assert os.environ["AUTOGRADER_MEASURE_JOBS"] == str(value)
    if preset is not None:
        assert value == preset, "the instructor's setting is kept"
    else:
        assert value == max(1, cores // max(1, jobs))
        assert 1 <= value <= cores and (jobs <= 1 or value * jobs <= cores or value == 1)


@pytest.mark.dask
def test_a_closing_worker_ends_at_once_after_its_cleanups(project, monkeypatch, tmp_path):
    """The local pool's forked workers end with ``os._exit``; a Dask worker's spawned process skips
    its interpreter's teardown too (once a worker has graded, that teardown outlasted the nanny's
    patience, which then killed it), but only after the plugin removed its folder. An exit handler
    left on the worker before it closes shows whether the teardown ran."""
    monkeypatch.setenv("AUTOGRADER_ROOT", str(project))
    executor = DaskExecutor("local:2", load_assignment(ASSIGNMENT_ID, project))
    plugin_name = PLUGIN_NAME

    def leave_an_exit_handler(marker: str, dask_worker=None) -> tuple[int, str]:
        import atexit

        path = marker.format(pid=os.getpid())
        atexit.register(lambda: open(path, "w").close())
        return os.getpid(), str(dask_worker.plugins[plugin_name].tmp)

    try:
        left = executor.client.run(leave_an_exit_handler, str(tmp_path / "teardown-ran-{pid}"))
    finally:
        executor.close()
    assert len(left) == 2
    for pid, folder in left.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not Path(folder).exists(), "the plugin's cleanups ran first"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no worker ran its interpreter's teardown"
