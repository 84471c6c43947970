"""Run a batch's tasks on N worker processes, with a progress bar, duplicates held back, Ctrl-C handled.

- Workers are forked once (before the progress bar's thread starts); worker i takes sandbox slot i,
  so concurrent jails use different sandbox uids.
- At most N tasks are in flight. A task whose cache key is already being graded waits for it, then
  runs as a cache hit: an identical notebook is executed once per batch.
- A worker that dies (OOM killer, a crash) breaks the pool: the pool is rebuilt and the tasks that
  were in flight become suspects, each retried alone; a suspect that breaks the pool again while
  alone is the culprit and becomes a ``grader_error`` (the others are graded normally).
- Ctrl-C: pending tasks are cancelled, each worker gets one SIGTERM (it unwinds through its
  cleanups: kernels shut down, workspaces removed), stragglers are killed after a grace period,
  and KeyboardInterrupt propagates. Finished submissions keep their stamps; a re-run resumes.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..assignment import Assignment
from .worker import GRADER_ERROR, SUBMISSION_FILE, Task, init_worker, run_task
from ..errors import SandboxUnavailableError
from ..report.gradescope_results import failure_results_json
from ..safe_files import write_json_atomic

STOP_GRACE_S = 30.0
MAX_BREAKS = 3  # a task in flight for this many pool breaks fails, alone or not


def default_jobs() -> int:
    return os.cpu_count() or 1


def run_tasks(tasks: list[Task], assignment: Assignment, *, jobs: int | None = None,
              progress: bool = True, dedupe: bool = True) -> list[dict[str, Any]]:
    """Grade ``tasks`` in parallel; returns their submission records (in completion order)."""
    if not tasks:
        return []
    n = max(1, min(jobs or default_jobs(), len(tasks)))
    scheduler = _Scheduler(tasks, n, dedupe)
    workers = _Workers(n, assignment)
    try:
        scheduler.fill(workers)  # forks the workers, before the progress bar starts its thread
        with _progress_bar(progress, len(tasks), n) as bar:
            while scheduler.pending:
                done, _ = wait(scheduler.pending, return_when=FIRST_COMPLETED)
                for record in scheduler.collect(done, workers):
                    bar.done(record)
                scheduler.fill(workers)
    except BaseException:
        workers.stop(list(scheduler.pending))
        raise
    workers.close()
    return scheduler.records


class _Scheduler:
    """Which task runs next: duplicates wait for their first copy; suspects of a crash run alone."""

    def __init__(self, tasks: list[Task], n: int, dedupe: bool) -> None:
        self.n = n
        self.queue: deque[Task] = deque()
        self.held: dict[str, list[Task]] = {}
        for t in tasks:
            if dedupe and t.problem is None and t.key in self.held:
                self.held[t.key].append(t)
            else:
                self.queue.append(t)
                if dedupe and t.problem is None:
                    self.held[t.key] = []
        self.pending: dict[Future, Task] = {}
        self.records: list[dict[str, Any]] = []
        self.breaks: dict[str, int] = {}   # task name → pool breaks it was in flight for
        self.suspects: set[str] = set()    # in flight when a worker died: re-run alone

    def fill(self, workers: _Workers) -> None:
        while self.queue and len(self.pending) < self.n:
            if self.queue[0].name in self.suspects and self.pending:
                return
            task = self.queue.popleft()
            self.pending[workers.submit(task)] = task
            if task.name in self.suspects:
                return

    def collect(self, done: set[Future], workers: _Workers) -> list[dict[str, Any]]:
        """Records of the finished futures; after a pool break, requeue or fail its tasks."""
        finished, broken = [], []
        for future in done:
            task = self.pending.pop(future)
            record = _outcome(future, task, broken)
            if record is not None:
                finished.append(self._finish(task, record))
        if broken:
            broken += _drain(self.pending)
            alone = len(broken) == 1
            for task in broken:
                self.breaks[task.name] = self.breaks.get(task.name, 0) + 1
                if (task.name in self.suspects and alone) or self.breaks[task.name] >= MAX_BREAKS:
                    finished.append(self._finish(task, worker_died(task)))
                else:
                    self.suspects.add(task.name)
                    self.queue.appendleft(task)
            workers.restart()
        return finished

    def _finish(self, task: Task, record: dict[str, Any]) -> dict[str, Any]:
        self.records.append(record)
        if task.problem is None:
            self.queue.extend(self.held.pop(task.key, []))  # duplicates: now cache hits
        return record


def worker_died(task: Task) -> dict[str, Any]:
    """The record (and failure results.json) of a submission whose worker process kept dying."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reason = ("the grading process died while grading this notebook, and again when it was retried "
              "alone (killed, out of memory or crashed)")
    write_json_atomic(out / "results.json", failure_results_json(
        "The grader itself failed while grading this notebook; this is not a problem with your work, "
        "and course staff can see the error."))
    record = {"name": task.name, "origin": task.origin, "submitters": task.submitters, "sha256": task.sha256,
              "cache_key": task.key, "cached": False, "executed": True, "slot": None,
              "status": GRADER_ERROR, "reason": reason, "error": "BrokenProcessPool: " + reason,
              "duration_s": None, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(out / SUBMISSION_FILE, record)
    return record


def _outcome(future: Future, task: Task, broken: list[Task]) -> dict[str, Any] | None:
    try:
        record = future.result()
    except BrokenProcessPool:
        broken.append(task)
        return None
    if record.get("fatal"):
        raise SandboxUnavailableError(record["fatal"])
    return record


def _drain(pending: dict[Future, Task]) -> list[Task]:
    """After a pool broke: wait for its other futures (they fail fast) and return their tasks."""
    wait(list(pending))
    tasks = list(pending.values())
    pending.clear()
    return tasks


class _Workers:
    """A ProcessPoolExecutor whose worker i holds sandbox slot i; rebuilt when broken."""

    def __init__(self, n: int, assignment: Assignment) -> None:
        self.n = n
        # The workers' temporary folders (jailed workspaces) live here, so that whatever a worker
        # killed mid-grade leaves behind is removed with the pool. Traversable by the sandbox uids.
        self.tmp = Path(tempfile.mkdtemp(prefix="autograder-batch-"))
        os.chmod(self.tmp, 0o711)
        self.args = (assignment.id, str(assignment.folder.parent.parent), str(self.tmp))
        self.ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        self.executor = self._start()

    def _start(self) -> ProcessPoolExecutor:
        slots = self.ctx.SimpleQueue()
        for i in range(self.n):
            slots.put(i)
        return ProcessPoolExecutor(self.n, mp_context=self.ctx, initializer=init_worker,
                                   initargs=(slots, *self.args))

    def submit(self, task: Task) -> Future:
        return self.executor.submit(run_task, task)

    def restart(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = self._start()

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self, pending: list[Future]) -> None:
        for f in pending:
            f.cancel()
        procs = list((getattr(self.executor, "_processes", None) or {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()  # one SIGTERM: the worker raises BatchInterrupted and cleans up
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        self.executor.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


class _progress_bar:
    """A rich progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, enabled: bool, total: int, jobs: int, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.total, self.jobs = total, jobs

    def __enter__(self) -> _progress_bar:
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), console=self.console)
            self.progress.__enter__()
            self.task = self.progress.add_task(f"grading on {self.jobs} worker(s)", total=self.total)
        return self

    def done(self, record: dict[str, Any]) -> None:
        if self.enabled:
            how = "cached" if record.get("cached") else record.get("status", "?")
            self.progress.update(self.task, advance=1, description=f"{record.get('name', '?')[:32]}: {how}")

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)
