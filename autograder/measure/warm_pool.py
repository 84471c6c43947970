"""Measuring children started ahead of their jobs, while the notebook runs.

``with warm_workers(n, limits, start_when=event):`` starts ``n`` children (:mod:`.worker_process`)
once ``event`` is set (the pipeline sets it when the kernel has been launched, so that the
children's start does not delay the kernel's; without an event, at once); their imports then
overlap the notebook's execution. :func:`take` hands one out to
:func:`.onnx_load.run_model_worker`, which gives it exactly one job and closes it. Whatever is not
taken when the block ends is closed unused: such a child never saw a job, so it is killed. A child
taken is never returned. Several grades in one process (a batch worker's threads) may share the
ready children: they are all alike and all fresh.

Why at the kernel's launch, one per artifact, although a notebook that writes no model then leaves
them unused (lesson 07's untouched notebook: 3 children, 0.64 s of CPU for nothing): starting them
only once the notebook's first model file exists was measured and rejected. Lesson 07's reference
writes its models in its last half-second, so they started 0.1-0.4 s before the probe, still
importing when their jobs came, and their start overlapped the cells that time the student's
models: in 9 of 16 instrumented ``-j 1`` grades (the CPU budget's) the notebook's own latencies
came out ~30 % slower than the grader's, which then timed them again in 2-5 more children (more
CPU than the unused children cost), against 0 of 8 with the children started here; a
lowest-priority start (nice 19) did not change that. Only cheaper children (a pre-imported template forking one per model) would
make the unused ones cheap without moving their start.
"""

from __future__ import annotations

import os
import subprocess
import threading
from contextlib import contextmanager
from typing import Iterator

from . import worker_process
from .worker_process import WorkerProcess

_lock = threading.Lock()
_ready: list[WorkerProcess] = []


def measure_jobs() -> int:
    """How many models are measured at the same time: ``AUTOGRADER_MEASURE_JOBS``, else the cores
    this process may use (a batch running ``-j N`` sets it to cores // N)."""
    raw = os.environ.get("AUTOGRADER_MEASURE_JOBS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def take(limits) -> WorkerProcess | None:
    """A ready child started with exactly ``limits``, or None (the caller then starts a cold one)."""
    with _lock:
        for i, w in enumerate(_ready):
            if w.limits == limits and w.proc.poll() is None:
                return _ready.pop(i)
    return None


@contextmanager
def warm_workers(count: int, limits, start_when: threading.Event | None = None) -> Iterator[None]:
    """Children for the duration of the block, started once ``start_when`` is set (at once
    without it; never when the block ends first: the jobs then start theirs cold).

    They are started from a thread that lives until the block ends: the jail's
    ``--die-with-parent`` follows the thread that forked, not the process."""
    mine: list[WorkerProcess] = []
    leaving, settled, release = threading.Event(), threading.Event(), threading.Event()

    def start_all() -> None:
        while start_when is not None and not start_when.wait(0.05):
            if leaving.is_set():
                return
        for _ in range(count):
            if leaving.is_set():
                return
            try:
                w = worker_process.start(limits)
            except Exception:  # noqa: BLE001 - no warm start here: the jobs start their children cold
                return
            with _lock:
                mine.append(w)
                _ready.append(w)

    def starter_main() -> None:
        try:
            start_all()
        finally:
            settled.set()
        release.wait()  # alive until its children are closed: their death signal follows this thread

    starter = threading.Thread(target=starter_main, name="autograder-warm-workers", daemon=True)
    starter.start()
    try:
        yield
    finally:
        leaving.set()
        settled.wait()
        with _lock:
            unused = [w for w in mine if w in _ready]
            for w in unused:
                _ready.remove(w)
        for w in unused:
            w.close()
        for w in mine:  # taken by a job (perhaps another grade's in this process): let it finish
            if w not in unused:
                try:
                    w.proc.wait(timeout=float(w.limits.timeout_s) + worker_process.CLOSE_WAIT_S)
                except subprocess.TimeoutExpired:
                    pass  # its death signal ends it when the thread goes
        release.set()
        starter.join()
