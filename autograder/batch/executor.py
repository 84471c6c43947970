"""Where a batch's jobs run: the small interface every engine implements, and how one is chosen.

An engine only moves jobs and replies (``worker.Job`` in, ``worker.Reply`` back) and says when a
worker died; everything else (the cache, duplicates, retries, the regrade of a timeout alone, the
progress bar, writing ``OUT/``) is the dispatcher's (``dispatch.py``), the same for every engine.

Engines: ``pool.LocalPool`` (``-j N``, the default: forked processes on this machine) and
``dask_executor.DaskExecutor`` (``--scheduler tcp://HOST:PORT`` or ``--scheduler local:N``).
A third one (Ray, say) is one file with a class like these, plus a line in ``make_executor``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..assignment import Assignment
from .worker import Job, Reply, share_measuring_cores  # noqa: F401 - every engine's worker calls it


class WorkerLost(Exception):
    """The worker running a job died or vanished before it replied.

    ``final``: the engine already retried the job on other workers (Dask's ``allowed-failures``)
    and it killed them all: the submission is ``worker_lost``. Otherwise the engine cannot tell
    whether this job was the cause (a local pool breaks for all its jobs at once): the dispatcher
    retries it alone.
    """

    def __init__(self, reason: str, *, final: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.final = reason, final


class Executor(Protocol):
    """An engine that grades ``Job``s on workers. Handles are the engine's own futures."""

    def describe(self) -> str:
        """A few words for the progress bar, e.g. ``2 local workers``."""

    def capacity(self) -> int:
        """How many jobs to keep in flight (enough to keep every worker busy)."""

    def hosts(self) -> list[str]:
        """The machines the workers run on: a job is alone when nothing else runs on its machine."""

    def submit(self, job: Job, *, host: str | None = None) -> Any:
        """Start grading ``job`` on a worker (of machine ``host`` when given); returns a handle."""

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Reply | BaseException]]:
        """Block until at least one handle is done or ``timeout`` s passed; returns the done ones
        with their ``Reply``, a ``WorkerLost``, or the exception the job raised."""

    def close(self) -> None:
        """The batch is over: release the workers (nothing is left running that this started)."""

    def stop(self) -> None:
        """Interrupted (Ctrl-C): stop the jobs in flight, clean up and release, quickly."""


def make_executor(scheduler: str | None, jobs: int | None, assignment: Assignment, n_jobs: int) -> Executor:
    """The local pool (``scheduler`` None) or Dask (``tcp://…``, ``tls://…``, ``local:N``)."""
    if not scheduler:
        from .pool import LocalPool, default_jobs

        return LocalPool(max(1, min(jobs or default_jobs(), n_jobs)), assignment)
    from .dask_executor import DaskExecutor

    return DaskExecutor(scheduler, assignment)
