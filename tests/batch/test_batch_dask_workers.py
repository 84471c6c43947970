"""A Dask cluster that loses its workers: each departure is one line, and with none left the batch
says so and, after a bounded wait, ends the submissions still to grade as ``worker_lost`` (a re-run
grades them) instead of waiting forever. A real ``dask scheduler`` and ``dask worker`` on 127.0.0.1,
with batchkit's fake stages in the worker; the worker is killed by this test (its own processes)."""

from __future__ import annotations

import signal
import threading
import time

import psutil
import pytest
from batchkit import ASSIGNMENT_ID, GOOD, make_assignment_tree, write_notebook
from dask_procs import FAKE_PRELOAD, DaskProcs

from autograder.assignment import load_assignment
from autograder.batch import run_batch

pytestmark = pytest.mark.dask

pytest.importorskip("distributed")


def _kill_tree(pid: int) -> None:
    """SIGKILL a ``dask worker`` process this test started, and its children (the nanny's worker)."""
    try:
        family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def test_losing_every_worker_is_said_and_ends_as_worker_lost(tmp_path, monkeypatch, capsys):
    import autograder.batch.dask_executor as dask_executor

    monkeypatch.setattr(dask_executor, "WORKERS_CHECK_S", 0.3)
    monkeypatch.setattr(dask_executor, "NO_WORKERS_S", 3.0)
    project = make_assignment_tree(tmp_path / "project")
    monkeypatch.setenv("AUTOGRADER_ROOT", str(project))
    assignment = load_assignment(ASSIGNMENT_ID, project)
    log = tmp_path / "executions.log"
    log.touch()
    procs = DaskProcs(
        tmp_path / "cluster",
        env={"AUTOGRADER_ROOT": str(project), "AUTOGRADER_FAKE_STAGES_LOG": str(log)},
        allowed_failures=3,
    )
    try:
        procs.add_worker("0", preload=FAKE_PRELOAD)
        procs.wait_for_workers(1)
        worker = procs.procs[-1]
        src = tmp_path / "src"
        write_notebook(src / "a_stuck.ipynb", **GOOD, sleep=300, tag="stuck")  # first in line
        for name in ("b_later", "c_later"):
            write_notebook(src / f"{name}.ipynb", **GOOD, tag=name)
        killed: list[bool] = []

        def kill_the_only_worker() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and "a_stuck" not in log.read_text():
                time.sleep(0.05)
            procs._remember_children()
            _kill_tree(worker.pid)
            killed.append(True)

        killer = threading.Thread(target=kill_the_only_worker)
        killer.start()
        try:
            summary = run_batch(src, tmp_path / "out", assignment=assignment, scheduler=procs.address, progress=False)
        finally:
            killer.join()
        assert killed
        assert {r["name"]: r["status"] for r in summary.rows} == {
            "a_stuck": "worker_lost",
            "b_later": "worker_lost",
            "c_later": "worker_lost",
        }
        assert all("no Dask worker was left" in r["reason"] for r in summary.rows)
        err = capsys.readouterr().err
        assert "left the cluster" in err and "none left" in err, err
        assert err.count("no Dask worker is left: waiting 3 s") == 1, err

        procs.add_worker("1", preload=FAKE_PRELOAD)  # a worker again: the re-run grades them
        procs.wait_for_workers(1)
        write_notebook(src / "a_stuck.ipynb", **GOOD, tag="stuck")
        again = run_batch(src, tmp_path / "out", assignment=assignment, scheduler=procs.address, progress=False)
        assert [(r["name"], r["status"]) for r in again.rows] == [
            ("a_stuck", "ok"),
            ("b_later", "ok"),
            ("c_later", "ok"),
        ] and again.skipped == 0
    finally:
        procs.close()
    assert procs.alive() == []
