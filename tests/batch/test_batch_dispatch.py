"""The dispatcher, whatever the engine: timeouts regraded alone, the cache keeps only outcomes that do
not depend on the neighbours, lost workers, and what a third engine must provide (executor.py).

The local pool runs batchkit's fake stages (forked workers inherit the monkeypatch); the engine
contract is exercised with a small in-process engine that grades synchronously.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from batchkit import GOOD, executions, read_gradebook, write_notebook

from autograder.batch import run_batch
from autograder.batch.dispatch import run_tasks
from autograder.batch.executor import WorkerLost
from autograder.batch.worker import Job, Reply, grade_job
from autograder.grade_options import GradeOptions


def cache_entries(cache: Path) -> dict[str, dict[str, Any]]:
    return {
        json.loads((e / "entry.json").read_text())["name"]: json.loads((e / "entry.json").read_text())
        for e in cache.iterdir()
        if (e / "entry.json").is_file()
    }


def test_timeout_with_a_neighbour_is_regraded_alone_before_it_is_recorded_or_cached(
    tmp_path, fake_assignment, exec_log
):
    src = tmp_path / "src"
    write_notebook(src / "slowpoke.ipynb", **GOOD, timeout_once=True, sleep=0.3)
    write_notebook(src / "hang.ipynb", status="timeout", reason="stopped after 10 s", sleep=0.3)
    write_notebook(src / "neighbour.ipynb", **GOOD, sleep=0.6)
    cache = tmp_path / "cache"
    summary = run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=2, progress=False, cache_dir=cache)

    assert sorted(executions(exec_log)) == ["hang", "hang", "neighbour", "slowpoke", "slowpoke"]
    rows = {r["name"]: r for r in summary.rows}
    assert (rows["slowpoke"]["status"], rows["slowpoke"]["score"]) == ("ok", 35.0), "the regrade alone counts"
    assert (rows["hang"]["status"], rows["hang"]["score"]) == ("timeout", 0.0), "timed out alone too: final"
    record = json.loads((tmp_path / "out" / "slowpoke" / "submission.json").read_text())
    assert record["alone"] is True and record["first_attempt"]["status"] == "timeout"
    entries = cache_entries(cache)
    assert entries["slowpoke"]["status"] == "completed" and entries["slowpoke"]["alone"] is True
    assert entries["hang"]["alone"] is True, "a timeout is cached only once it happened alone"


def test_a_timeout_that_had_its_cpu_is_final_and_a_starved_one_is_regraded_alone(tmp_path, fake_assignment, exec_log):
    """An infinite loop that had a core of its own is not run twice (execution.json's
    cpu_denied_share below STARVED_SHARE); one that waited for a CPU, or whose share is unknown, is."""
    src = tmp_path / "src"
    write_notebook(src / "loops.ipynb", status="timeout", reason="stopped after 5 s", cpu_denied_share=0.02, sleep=0.3)
    write_notebook(src / "starved.ipynb", status="timeout", reason="stopped after 5 s", cpu_denied_share=0.6, sleep=0.3)
    write_notebook(src / "unknown.ipynb", status="timeout", reason="stopped after 5 s", sleep=0.3)
    write_notebook(src / "a_long_neighbour.ipynb", **GOOD, sleep=10)  # beside each of them on the other worker
    cache = tmp_path / "cache"
    summary = run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=2, progress=False, cache_dir=cache)

    runs = sorted(executions(exec_log))
    assert runs == ["a_long_neighbour", "loops", "starved", "starved", "unknown", "unknown"], runs
    statuses = {r["name"]: r["status"] for r in summary.rows if r["name"] != "a_long_neighbour"}
    assert statuses == dict.fromkeys(("loops", "starved", "unknown"), "timeout")
    entries = cache_entries(cache)
    assert entries["loops"]["alone"] is False, "final at once: cached although neighbours ran"
    assert entries["starved"]["alone"] is True and entries["unknown"]["alone"] is True


def test_timeout_alone_is_final_at_once_and_a_cached_alone_timeout_is_replayed(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "hang.ipynb", status="timeout", reason="stopped after 10 s")
    cache = tmp_path / "cache"
    run_batch(src, tmp_path / "out1", assignment=fake_assignment, jobs=1, progress=False, cache_dir=cache)
    assert executions(exec_log) == ["hang"], "with -j 1 nothing ran beside it: not regraded"
    again = run_batch(src, tmp_path / "out2", assignment=fake_assignment, jobs=2, progress=False, cache_dir=cache)
    assert executions(exec_log) == ["hang"] and again.cache_hits == 1
    assert read_gradebook(tmp_path / "out2")[0]["status"] == "timeout"


class InlineEngine:
    """A third engine in a few lines: grades each job at once, in this process; it can also pretend
    that the worker of a named job died (``lose``: name → (how many times, final?))."""

    def __init__(
        self, assignment, lose: dict[str, tuple[int, bool]] | None = None, machines: tuple[str, ...] = ("here",)
    ) -> None:
        self.assignment, self.lose, self.machines = assignment, dict(lose or {}), list(machines)
        self.hosts_asked: list[tuple[str, str | None, int]] = []  # (job, host, jobs in flight)
        self.ready: list[tuple[int, Reply | BaseException]] = []
        self.submitted: list[str] = []
        self.closed = self.stopped = False

    def describe(self) -> str:
        return "inline"

    def capacity(self) -> int:
        return 2

    def hosts(self) -> list[str]:
        return self.machines

    def submit(self, job: Job, *, host: str | None = None) -> int:
        self.submitted.append(job.name)
        self.hosts_asked.append((job.name, host, len(self.ready)))
        times, final = self.lose.get(job.name, (0, False))
        if times:
            self.lose[job.name] = (times - 1, final)
            outcome: Reply | BaseException = WorkerLost(f"{job.name}'s worker vanished", final=final)
        else:
            outcome = grade_job(job, self.assignment, slot=0)
        self.ready.append((len(self.submitted), outcome))
        return len(self.submitted)

    def wait(self, handles, timeout):
        done = [(h, o) for h, o in self.ready if h in handles]
        self.ready = [(h, o) for h, o in self.ready if h not in handles]
        return done

    def close(self) -> None:
        self.closed = True

    def stop(self) -> None:
        self.stopped = True


def tasks_of(tmp_path, fake_assignment, names: dict[str, dict]) -> list:
    from autograder.batch.run import _make_tasks
    from autograder.batch.sources import discover

    src = tmp_path / "src"
    for name, fake in names.items():
        write_notebook(src / f"{name}.ipynb", **fake)
    found = discover(src, tmp_path / "staged")
    return _make_tasks(found.submissions, tmp_path / "out", fake_assignment, None, GradeOptions())


def test_an_engine_that_already_retried_a_lost_job_gets_worker_lost_at_once(tmp_path, fake_assignment, exec_log):
    tasks = tasks_of(tmp_path, fake_assignment, {"pill": GOOD, "fine": GOOD})
    engine = InlineEngine(fake_assignment, lose={"pill": (1, True)})
    records = run_tasks(tasks, fake_assignment, lambda n: engine, progress=False, dedupe=False)
    assert sorted((r["name"], r["status"]) for r in records) == [("fine", "ok"), ("pill", "worker_lost")]
    assert engine.submitted.count("pill") == 1, "the engine's own retries are not repeated"
    assert "vanished" in json.loads((tmp_path / "out" / "pill" / "submission.json").read_text())["reason"]
    assert engine.closed and not engine.stopped


def test_a_job_lost_without_blame_is_retried_alone_and_graded(tmp_path, fake_assignment, exec_log):
    tasks = tasks_of(tmp_path, fake_assignment, {"a": GOOD, "b": GOOD, "c": GOOD})
    engine = InlineEngine(fake_assignment, lose={"b": (1, False)})
    records = run_tasks(tasks, fake_assignment, lambda n: engine, progress=False, dedupe=False)
    assert sorted((r["name"], r["status"]) for r in records) == [("a", "ok"), ("b", "ok"), ("c", "ok")]
    assert engine.submitted.count("b") == 2 and len(records) == 3, "retried once, recorded once"


def test_a_job_lost_again_when_alone_is_worker_lost(tmp_path, fake_assignment, exec_log):
    tasks = tasks_of(tmp_path, fake_assignment, {"a": GOOD, "pill": GOOD})
    engine = InlineEngine(fake_assignment, lose={"pill": (5, False)})
    records = run_tasks(tasks, fake_assignment, lambda n: engine, progress=False, dedupe=False)
    assert sorted((r["name"], r["status"]) for r in records) == [("a", "ok"), ("pill", "worker_lost")]
    assert engine.submitted.count("pill") == 2, "once with a neighbour, once alone"


def test_grade_job_refuses_a_client_with_other_versions(tmp_path, fake_assignment, exec_log):
    nb = write_notebook(tmp_path / "a.ipynb", **GOOD)
    from autograder.environment import environment_versions

    job = Job(
        name="a",
        notebook=nb.read_bytes(),
        assignment=fake_assignment.id,
        fingerprint=fake_assignment.fingerprint(),
        versions={**environment_versions(), "onnxruntime": "0.9"},
    )
    reply = grade_job(job, fake_assignment)
    assert reply.fatal_kind == "mismatch" and reply.files == {}
    assert f"onnxruntime {environment_versions()['onnxruntime']} here, 0.9 on the client" in reply.fatal
    assert executions(exec_log) == [], "nothing was executed"
    other = Job(
        name="a",
        notebook=nb.read_bytes(),
        assignment=fake_assignment.id,
        fingerprint="0" * 16,
        versions=dict(environment_versions()),
    )
    assert "fingerprint" in grade_job(other, fake_assignment).fatal


def test_timeouts_are_regraded_alone_on_each_machine_at_once(tmp_path, fake_assignment, exec_log):
    tasks = tasks_of(tmp_path, fake_assignment, {n: {**GOOD, "timeout_once": True} for n in "abcd"})
    engine = InlineEngine(fake_assignment, machines=("node1", "node2"))
    records = run_tasks(tasks, fake_assignment, lambda n: engine, progress=False, dedupe=False)
    assert sorted((r["name"], r["status"], r["alone"]) for r in records) == [(n, "ok", True) for n in "abcd"]
    assert [h for _, h, _ in engine.hosts_asked[:4]] == [None] * 4, "first runs: anywhere, two at a time"
    regrades = engine.hosts_asked[4:]
    assert [h for _, h, _ in regrades] == ["node1", "node2", "node1", "node2"], "one regrade per machine at a time"
    assert regrades[1][2] == 1, "the second machine's regrade ran beside the first's, on another machine"
