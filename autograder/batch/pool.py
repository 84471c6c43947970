"""The local engine (``-j N``, the default): N forked worker processes on this machine.

- Workers are forked once, when the pool is made (before the progress bar's thread starts);
  worker i takes sandbox slot i, so concurrent jails use different sandbox uids.
- A worker that dies (OOM killer, a crash) breaks the whole ``ProcessPoolExecutor``: every job in
  flight comes back as a (non-final) ``WorkerLost`` and the pool is rebuilt; the dispatcher then
  retries those jobs alone, so the culprit is found.
- ``stop`` (Ctrl-C): pending jobs are cancelled, each worker gets one SIGTERM (it unwinds through
  its cleanups: kernels shut down, workspaces removed), stragglers are killed after a grace period.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..assignment import Assignment
from .executor import WorkerLost
from .progress import note
from .worker import Job, Reply, init_worker, run_job

STOP_GRACE_S = 30.0


def default_jobs() -> int:
    return os.cpu_count() or 1


class LocalPool:
    """A ProcessPoolExecutor whose worker i holds sandbox slot i; rebuilt when broken."""

    def __init__(self, n: int, assignment: Assignment) -> None:
        self.n = n
        # The workers' temporary folders (jailed workspaces) live here, so that whatever a worker
        # killed mid-grade leaves behind is removed with the pool. Traversable by the sandbox uids.
        self.tmp = Path(tempfile.mkdtemp(prefix="autograder-batch-"))
        os.chmod(self.tmp, 0o711)
        self.args = (assignment.id, str(assignment.folder.parent.parent), str(self.tmp))
        self.ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        self.futures: set[Future] = set()
        self.executor = self._start()

    def describe(self) -> str:
        return f"{self.n} local worker(s)"

    def capacity(self) -> int:
        return self.n

    def hosts(self) -> list[str]:
        return ["localhost"]

    def submit(self, job: Job, *, host: str | None = None) -> Future:
        future = self.executor.submit(run_job, job)
        self.futures.add(future)
        future.add_done_callback(self.futures.discard)
        return future

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Reply | BaseException]]:
        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
            wait(handles)  # the pool is broken: its other futures fail fast
            note(
                f"a worker process of the local pool died (killed, out of memory or crashed) with "
                f"{len(handles)} submission(s) in flight: the pool restarts and grades them again, each alone"
            )
            self._restart()
            lost = WorkerLost("a worker process of the local pool died (killed, out of memory or crashed)")
            return [(f, lost if isinstance(f.exception(), BrokenProcessPool) else _outcome(f)) for f in handles]
        return [(f, _outcome(f)) for f in done]

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self) -> None:
        for f in list(self.futures):
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

    def _start(self) -> ProcessPoolExecutor:
        slots = self.ctx.SimpleQueue()
        for i in range(self.n):
            slots.put(i)
        return ProcessPoolExecutor(
            self.n, mp_context=self.ctx, initializer=init_worker, initargs=(slots, *self.args, self.n)
        )

    def _restart(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = self._start()


def _outcome(future: Future) -> Reply | BaseException:
    error = future.exception()
    return error if error is not None else future.result()
