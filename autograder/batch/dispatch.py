"""Run a batch's tasks on an executor (the local pool or Dask), the same way whatever the engine.

- The cache is checked here, on the client, before anything is sent: a hit (and a submission with
  no notebook) is judged here and never reaches a worker.
- Duplicates wait: a task whose cache key is being graded waits for it, then is a cache hit, so
  an identical notebook is executed once per batch.
- At most ``executor.capacity()`` jobs are in flight.
- A worker that died: a job the engine already retried (Dask) is ``worker_lost``; otherwise (a
  local pool breaks for every job in flight) the job is retried alone, before anything else, and
  is ``worker_lost`` when it kills its worker again while alone, or ``MAX_LOSSES`` times in all.
- No outcome a neighbour may have caused is final: a ``kernel_died``, or a ``timeout`` whose kernel
  was starved of CPU (``outcomes.neighbour_may_be_to_blame``: execution.json's
  ``cpu_denied_share`` unknown or at least ``STARVED_SHARE``), from a job that had neighbours
  running is regraded once alone before it is recorded or cached: at the end of the batch, one
  regrade per machine (``executor.hosts()``) with nothing else running there. An infinite loop that
  had a core of its own is not run twice. The regrade's
  outcome is the submission's, and the first is kept in its record (``first_attempt``).
- A fatal reply (no sandbox, a worker whose versions differ) stops the batch: it would fail every
  submission alike. The caller stops the executor on any exception (Ctrl-C included).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from ..assignment import Assignment
from ..errors import SandboxUnavailableError
from .cache import ExecutionCache
from .executor import Executor, WorkerLost
from .outcomes import (
    execution_status,
    from_cache,
    from_exception,
    from_lost_worker,
    from_problem,
    from_reply,
    neighbour_may_be_to_blame,
)
from .progress import ProgressBar
from .worker import FATAL_MISMATCH, Reply, Task, WorkerMismatchError, make_job

MAX_LOSSES = 3  # a job in flight when its worker died this many times is worker_lost, alone or not
WAIT_S = 1.0  # how often the loop wakes up with nothing done (engines check their deadlines then)

ExecutorFactory = Callable[[int], Executor]  # called with the number of jobs that need a worker


@dataclass(eq=False)
class _Entry:
    task: Task
    losses: int = 0  # times its worker died under it
    first: dict[str, Any] | None = None  # a neighbour-dependent first outcome, before the regrade
    alone: bool = False  # must run with nothing else in flight (on its host)
    host: str | None = None  # the machine it was sent to; None: any
    solo: bool = False  # no neighbour ran during its whole run


def _neighbours(a: _Entry, b: _Entry) -> bool:
    """Whether two jobs in flight may share a machine (a job sent anywhere may land beside any)."""
    return a.host is None or b.host is None or a.host == b.host


def run_tasks(
    tasks: list[Task],
    assignment: Assignment,
    make_executor: ExecutorFactory,
    *,
    progress: bool = True,
    cache: ExecutionCache | None = None,
    dedupe: bool = True,
    done_before: int = 0,
) -> list[dict[str, Any]]:
    """Grade ``tasks``; returns their submission records (in completion order). ``done_before``:
    the class's submissions an earlier run finished (the progress bar counts the whole class)."""
    if not tasks:
        return []
    dispatcher = _Dispatcher(tasks, assignment, cache, dedupe, make_executor)
    # the engine starts (the local pool forks) before the progress bar's thread does, and only
    # when some task needs a worker: a batch answered from the cache starts none
    needed = dispatcher.jobs_needed()
    if needed:
        dispatcher.start_executor(needed)
    try:
        where = dispatcher.executor.describe() if dispatcher.executor else "this machine (all from the cache)"
        limit = float(assignment.limits.notebook_timeout_s) if assignment is not None else None
        with ProgressBar(progress, len(tasks) + done_before, where, done=done_before, limit_s=limit) as bar:
            dispatcher.run(bar)
    except BaseException:
        if dispatcher.executor is not None:
            dispatcher.executor.stop()
        raise
    if dispatcher.executor is not None:
        dispatcher.executor.close()
    return dispatcher.records


class _Dispatcher:
    def __init__(
        self,
        tasks: list[Task],
        assignment: Assignment,
        cache: ExecutionCache | None,
        dedupe: bool,
        make_executor: ExecutorFactory,
    ) -> None:
        self.tasks, self.assignment, self.cache, self.dedupe = tasks, assignment, cache, dedupe
        self.make_executor = make_executor
        self.fingerprint = assignment.fingerprint()
        self.executor: Executor | None = None
        self.queue: deque[_Entry] = deque(_Entry(t) for t in tasks)
        self.suspects: deque[_Entry] = deque()  # in flight when a worker died: retried alone, first
        self.regrades: deque[_Entry] = deque()  # a neighbour-dependent timeout: regraded alone, last
        self.held: dict[str, list[_Entry]] = {}  # cache key in flight → its duplicates, waiting
        self.pending: dict[Any, _Entry] = {}
        self.records: list[dict[str, Any]] = []
        self.bar: ProgressBar | None = None

    def jobs_needed(self) -> int:
        keys = {
            t.key
            for t in self.tasks
            if t.problem is None and not (self.cache is not None and self.cache.entry(t.key) is not None)
        }
        return len(keys) if self.dedupe else sum(1 for t in self.tasks if t.key in keys)

    def start_executor(self, n_jobs: int) -> Executor:
        if self.executor is None:
            self.executor = self.make_executor(n_jobs)
        return self.executor

    def run(self, bar: ProgressBar) -> None:
        self.bar = bar
        while True:
            self._fill(bar)
            if not self.pending:
                if self.queue or self.suspects or self.regrades:
                    continue
                return
            assert self.executor is not None
            for handle, outcome in self.executor.wait(list(self.pending), WAIT_S):
                self._collect(handle, outcome, bar)
            bar.tick()

    # ── what runs next ──────────────────────────────────────────────────────────────────────

    def _fill(self, bar: ProgressBar) -> None:
        while not any(e.alone and e.host is None for e in self.pending.values()):
            pinned = [e for e in self.pending.values() if e.host is not None]
            if self.suspects:
                if not self.pending:
                    self._submit(self.suspects.popleft(), alone=True)
                return
            if self.queue and not pinned:
                if self.pending and len(self.pending) >= self._capacity():
                    return
                entry = self.queue.popleft()
                record = self._on_client(entry.task)
                if record is not None:
                    self._finish(entry, record, bar)
                elif self.dedupe and entry.task.key in self.held:
                    self.held[entry.task.key].append(entry)
                else:
                    self._submit(entry)
                continue
            if self.regrades and len(pinned) == len(self.pending):  # only regrades in flight, if any
                busy = {e.host for e in pinned}
                free = [h for h in self.start_executor(1).hosts() if h not in busy]
                if free or not self.pending:  # no machine known (no worker at the moment): anywhere, alone
                    self._submit(self.regrades.popleft(), alone=True, host=free[0] if free else None)
                    continue
            return

    def _capacity(self) -> int:
        return self.executor.capacity() if self.executor is not None else 1

    def _on_client(self, task: Task) -> dict[str, Any] | None:
        """The record of a task answered without a worker (no notebook, a cache hit), else None."""
        if task.problem is not None:
            return from_problem(task, self.assignment)
        if self.cache is not None:
            return from_cache(task, self.assignment, self.cache)
        return None

    def _submit(self, entry: _Entry, *, alone: bool = False, host: str | None = None) -> None:
        try:
            job = make_job(entry.task, self.assignment.id, self.fingerprint)
        except OSError as e:  # the staged notebook vanished: this submission's grader_error
            self._finish(entry, from_exception(entry.task, e), None)
            return
        executor = self.start_executor(1)
        entry.alone, entry.host, entry.solo = alone, host, True
        for other in self.pending.values():
            if _neighbours(entry, other):
                other.solo = entry.solo = False
        self.pending[executor.submit(job, host=host)] = entry
        if self.bar is not None:
            self.bar.started(entry.task.name)
        if self.dedupe:
            self.held.setdefault(entry.task.key, [])

    # ── what came back ──────────────────────────────────────────────────────────────────────

    def _collect(self, handle: Any, outcome: Reply | BaseException, bar: ProgressBar) -> None:
        entry = self.pending.pop(handle)
        task = entry.task
        if isinstance(outcome, Reply):
            if outcome.fatal:
                raise (WorkerMismatchError if outcome.fatal_kind == FATAL_MISMATCH else SandboxUnavailableError)(
                    outcome.fatal
                )
            status = execution_status(outcome)
            if neighbour_may_be_to_blame(outcome) and outcome.error is None and not entry.solo and entry.first is None:
                entry.first = {"status": status, "reason": _reason(outcome), "worker": outcome.worker}
                self.regrades.append(entry)
                return
            record = from_reply(task, outcome, self.cache, alone=entry.solo, first=entry.first)
        elif isinstance(outcome, WorkerLost):
            entry.losses += 1
            if outcome.final or (entry.solo and entry.losses > 1) or entry.losses >= MAX_LOSSES:
                reason = (
                    outcome.reason
                    if outcome.final
                    else (
                        f"the grading process died while grading this notebook {entry.losses} times, the last time "
                        "when it was retried alone (killed, out of memory or crashed)"
                    )
                )
                record = from_lost_worker(task, reason)
            else:
                self.suspects.append(entry)
                return
        else:
            record = from_exception(task, outcome)
        self._finish(entry, record, bar)

    def _finish(self, entry: _Entry, record: dict[str, Any], bar: ProgressBar | None) -> None:
        self.records.append(record)
        if bar is not None:
            bar.done(record)
        if self.dedupe and entry.task.problem is None:
            # its duplicates, now (mostly) cache hits, go next
            self.queue.extendleft(reversed(self.held.pop(entry.task.key, [])))


def _reason(reply: Reply) -> str | None:
    try:
        return json.loads(reply.files["execution.json"]).get("reason")
    except (KeyError, ValueError, AttributeError):
        return None
