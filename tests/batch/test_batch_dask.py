"""Batches on a real Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1.

The workers grade with batchkit's fake stages (``dask_fake_preload.py``), so each submission takes
a fraction of a second and can misbehave on cue: the scheduler, workers, nannies, transport,
retries and the client side are all real. Real notebooks: ``test_batch_dask_real.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from batchkit import ASSIGNMENT_ID, GOOD, make_assignment_tree, read_gradebook, write_notebook
from dask_procs import FAKE_PRELOAD, DaskProcs

from autograder.assignment import load_assignment
from autograder.batch import run_batch
from autograder.batch.worker import WorkerMismatchError
from needs import needs

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return make_assignment_tree(tmp_path_factory.mktemp("dask-project"))


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dask-log") / "executions.log"
    path.touch()
    return path


@pytest.fixture(scope="module")
@needs("dask")
def cluster(tmp_path_factory, project, log):
    procs = DaskProcs(
        tmp_path_factory.mktemp("dask-cluster"),
        env={"AUTOGRADER_ROOT": str(project), "AUTOGRADER_FAKE_STAGES_LOG": str(log)},
    )
    try:
        for name in ("0", "1"):
            procs.add_worker(name, preload=FAKE_PRELOAD)
        procs.wait_for_workers(2)
        yield procs
    finally:
        procs.close()
    assert procs.alive() == [], "every scheduler, nanny and worker process ended"


@pytest.fixture
def assignment(project, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ROOT", str(project))
    return load_assignment(ASSIGNMENT_ID, project)


def lines_of(log: Path, names: set[str]) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.split()[0] in names]


def mixed_class(src: Path, prefix: str) -> set[str]:
    names = {f"{prefix}_{n}" for n in ("abe", "alice", "bob", "carol", "dave", "erin")}
    # abe times out the first time only; first in line, so a neighbour runs beside it in both runs
    write_notebook(src / f"{prefix}_abe.ipynb", **GOOD, sleep=0.2, timeout_once=True)
    write_notebook(src / f"{prefix}_alice.ipynb", **GOOD, sleep=0.2)
    write_notebook(src / f"{prefix}_bob.ipynb", agree=0.5, dyn=(0.5, 0.2), qdq=(0.30, 0.05))
    write_notebook(src / f"{prefix}_carol.ipynb", status="timeout", reason="stopped after 10 s")
    write_notebook(src / f"{prefix}_dave.ipynb", **{"raise": "grader bug"})
    write_notebook(src / f"{prefix}_erin.ipynb", **GOOD, first_error={"cell": 3, "ename": "ValueError", "evalue": "x"})
    (src / f"{prefix}_copy.ipynb").write_bytes((src / f"{prefix}_alice.ipynb").read_bytes())
    return names | {f"{prefix}_copy"}


def test_dask_gradebook_equals_the_local_pools(tmp_path, cluster, assignment, log, exec_log):
    src = tmp_path / "src"
    names = mixed_class(src, "eq")
    dask = run_batch(src, tmp_path / "dask", assignment=assignment, scheduler=cluster.address, progress=False)
    local = run_batch(src, tmp_path / "local", assignment=assignment, jobs=2, progress=False)

    assert read_gradebook(tmp_path / "dask") == read_gradebook(tmp_path / "local"), "row for row, score for score"
    book = {r["name"]: r for r in read_gradebook(tmp_path / "dask")}
    assert set(book) == names
    assert [book[f"eq_{n}"]["status"] for n in ("alice", "carol", "dave", "abe")] == [
        "ok",
        "timeout",
        "grader_error",
        "ok",
    ]
    assert (dask.executed, dask.cache_hits) == (local.executed, local.cache_hits) == (6, 1)
    ran = [line.split()[0] for line in lines_of(log, names)]
    assert sorted(ran) == sorted(
        ["eq_abe", "eq_abe", "eq_alice", "eq_bob", "eq_carol", "eq_carol", "eq_dave", "eq_erin"]
    ), "the copy came from the client's cache; timeouts were regraded alone (abe's then passed)"
    pids = {line.split()[2] for line in lines_of(log, names)}
    assert len(pids) == 2 and f"pid={os.getpid()}" not in pids, "graded on both Dask workers, not here"
    record = json.loads((tmp_path / "dask" / "eq_alice" / "submission.json").read_text())
    assert record["executed"] and record["worker"].endswith(tuple(p.split("=")[1] for p in pids))
    for name in names:
        assert (
            json.loads((tmp_path / "dask" / name / "results.json").read_text())["score"]
            == json.loads((tmp_path / "local" / name / "results.json").read_text())["score"]
        )


def test_dask_worker_killed_mid_grade_loses_and_duplicates_nothing(tmp_path, cluster, assignment, log):
    src = tmp_path / "src"
    names = {f"kill_{i}" for i in range(6)}
    for name in names:
        write_notebook(src / f"{name}.ipynb", **GOOD, sleep=1.5 if name == "kill_0" else 0.3, tag=name)
    killed: list[int] = []

    def kill_the_worker_grading_kill_0() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for line in lines_of(log, {"kill_0"}):
                killed.append(int(line.split("pid=")[1]))
                os.kill(killed[0], signal.SIGKILL)  # a Dask worker process this test module started
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker_grading_kill_0)
    killer.start()
    try:
        summary = run_batch(
            src, tmp_path / "out", assignment=assignment, scheduler=cluster.address, progress=False, use_cache=False
        )
    finally:
        killer.join()
    assert killed, "the worker grading kill_0 was killed"
    cluster.known.update(cluster.wait_for_workers(2).values())  # the nanny restarted it
    book = read_gradebook(tmp_path / "out")
    assert sorted(r["name"] for r in book) == sorted(names), "nothing lost, nothing duplicated"
    assert {r["status"] for r in book} == {"ok"} and {r["score"] for r in book} == {"35"}
    runs = [line for line in lines_of(log, {"kill_0"})]
    assert len(runs) == 2 and f"pid={killed[0]}" in runs[0] and f"pid={killed[0]}" not in runs[1], (
        "kill_0 was rerun on another worker process"
    )
    assert len(summary.rows) == len(names) == summary.executed


def test_dask_poison_pill_is_worker_lost_and_the_batch_goes_on(tmp_path, cluster, assignment, log):
    src = tmp_path / "src"
    write_notebook(src / "pill.ipynb", die=True)
    for name in ("pill_ok1", "pill_ok2", "pill_ok3"):
        write_notebook(src / f"{name}.ipynb", **GOOD, tag=name, sleep=0.2)
    summary = run_batch(src, tmp_path / "out", assignment=assignment, scheduler=cluster.address, progress=False)
    cluster.known.update(cluster.wait_for_workers(2).values())
    assert [(r["name"], r["status"]) for r in summary.rows] == [
        ("pill", "worker_lost"),
        ("pill_ok1", "ok"),
        ("pill_ok2", "ok"),
        ("pill_ok3", "ok"),
    ]
    assert len(lines_of(log, {"pill"})) == 2, "killed its worker twice (allowed-failures = 1), then gave up"
    assert "died every time" in summary.rows[0]["reason"]
    results = json.loads((tmp_path / "out" / "pill" / "results.json").read_text())
    assert results["score"] == 0 and "grader itself failed" in results["output"]
    assert not (tmp_path / "out" / ".cache" / "pill").exists()


@pytest.mark.dask
def test_dask_workers_with_other_versions_refuse_with_a_clear_error(tmp_path, project, log, assignment):
    other_root = make_assignment_tree(tmp_path / "other-project")
    toml = other_root / "assignments" / ASSIGNMENT_ID / "assignment.toml"
    toml.write_text(toml.read_text().replace('version = "1"', 'version = "2"'))
    procs = DaskProcs(
        tmp_path / "cluster", env={"AUTOGRADER_ROOT": str(project), "AUTOGRADER_FAKE_STAGES_LOG": str(log)}
    )
    try:
        procs.add_worker("0", preload=FAKE_PRELOAD, env={"AUTOGRADER_FAKE_VERSION": "0.0.1-old"})
        procs.add_worker("1", preload=FAKE_PRELOAD, env={"AUTOGRADER_ROOT": str(other_root)})
        procs.wait_for_workers(2)
        write_notebook(tmp_path / "src" / "mm_a.ipynb", **GOOD)
        with pytest.raises(WorkerMismatchError) as caught:
            run_batch(
                tmp_path / "src", tmp_path / "out", assignment=assignment, scheduler=procs.address, progress=False
            )
        message = str(caught.value)
        assert "2 of 2 Dask worker(s) cannot grade" in message
        assert "autograder 0.0.1-old here, 0.1.0 on the client" in message
        assert "fingerprint" in message and "pip install -c constraints.txt" in message
        assert lines_of(log, {"mm_a"}) == [] and not (tmp_path / "out" / "mm_a" / "submission.json").exists()

        from typer.testing import CliRunner

        from autograder.cli import app

        result = CliRunner().invoke(
            app,
            [
                "batch",
                str(tmp_path / "src"),
                "--out",
                str(tmp_path / "out2"),
                "--scheduler",
                procs.address,
                "-a",
                ASSIGNMENT_ID,
                "--no-progress",
            ],
        )
        assert result.exit_code == 2 and "refuses to grade" in result.output
    finally:
        procs.close()
    assert procs.alive() == []


def test_scheduler_mistakes_are_refused_before_anything_runs(tmp_path, assignment):
    from typer.testing import CliRunner

    from autograder.cli import app

    write_notebook(tmp_path / "src" / "a.ipynb", **GOOD)
    for spec, why in (
        ("local:0", "local:N needs"),
        ("somewhere", "neither tcp://"),
        ("tcp://127.0.0.1:notaport", "its port must be a number"),
        ("tcp://127.0.0.1:99999", "its port must be a number"),
        ("http://127.0.0.1:8786", "http:// is not a protocol Dask speaks"),
        ("tcp://:8786", "it names no host"),
        ("tcp://127.0.0.1:8786/status", "and nothing more"),
    ):
        result = CliRunner().invoke(
            app,
            ["batch", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--scheduler", spec, "-a", ASSIGNMENT_ID],
        )
        assert result.exit_code == 2 and why in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_dask_batch_resumes_and_checks_the_cache_on_the_client(tmp_path, cluster, assignment, log):
    src = tmp_path / "src"
    names = {f"res_{i}" for i in range(4)}
    for name in names:
        write_notebook(src / f"{name}.ipynb", **GOOD, tag=name)
    out = tmp_path / "out"
    run_batch(src, out, assignment=assignment, scheduler=cluster.address, progress=False)
    assert len(lines_of(log, names)) == 4
    (out / "res_2" / "submission.json").unlink()  # interrupted before its stamp
    (out / "res_3" / "submission.json").unlink()
    entry = next(
        p.parent for p in (out / ".cache").glob("*/entry.json") if json.loads(p.read_text())["name"] == "res_3"
    )
    shutil.rmtree(entry)  # and its cache entry is gone
    again = run_batch(src, out, assignment=assignment, scheduler=cluster.address, progress=False)
    assert (again.skipped, again.cache_hits, again.executed) == (2, 1, 1)
    assert [line.split()[0] for line in lines_of(log, names)].count("res_3") == 2, "only res_3 went to a worker"
    assert [r["score"] for r in again.rows] == [35.0] * 4


def test_dask_job_past_the_wall_time_limit_is_retried_alone_then_worker_lost(
    tmp_path, cluster, assignment, log, monkeypatch
):
    import autograder.batch.dask_executor as dask_executor

    monkeypatch.setattr(dask_executor, "wall_limit_s", lambda a: 4.0)  # the client's limit, seconds
    monkeypatch.setattr(dask_executor, "OVERDUE_CHECK_S", 0.5)
    src = tmp_path / "src"
    write_notebook(src / "hung.ipynb", **GOOD, sleep=300)  # a worker that never answers
    write_notebook(src / "hung_ok.ipynb", **GOOD, sleep=0.2)
    summary = run_batch(src, tmp_path / "out", assignment=assignment, scheduler=cluster.address, progress=False)
    cluster.known.update(cluster.wait_for_workers(2).values())  # its worker was restarted by its nanny
    assert [(r["name"], r["status"]) for r in summary.rows] == [("hung", "worker_lost"), ("hung_ok", "ok")]
    assert "wall-time limit" in summary.rows[0]["reason"] or "alone" in summary.rows[0]["reason"]
    assert len(lines_of(log, {"hung"})) == 2, "once beside hung_ok, once alone"
