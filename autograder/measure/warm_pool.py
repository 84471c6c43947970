"""Measuring children started ahead of their jobs, while the notebook runs.

``with warm_workers(n, limits, start_when=event, wanted=written):`` starts up to ``n`` children
(:mod:`.worker_process`) once ``event`` is set (the pipeline sets it when the kernel has been
launched, so that the children's start does not delay the kernel's; without an event, at once),
and only as many as ``wanted()`` says there will be jobs for: the pipeline passes
:func:`artifacts_written`, the number of the lesson's model files the notebook has written so far,
polled every :data:`POLL_S` until ``stop_when`` is set (the working directory is frozen before the
probe: the jobs start then, and take what is ready). A notebook that writes no model starts no
child; each file it writes starts one while the notebook runs on, so its imports still overlap
the notebook's execution and the probe. Without ``wanted``, all ``n`` at once. :func:`take` hands one out to
:func:`.onnx_load.run_model_worker`, which gives it exactly one job and closes it. Whatever is not
taken when the block ends is closed unused: such a child never saw a job, so it is killed. A child
taken is never returned. Several grades in one process (a batch worker's threads) may share the
ready children: they are all alike and all fresh.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .. import safe_files
from . import worker_process
from .worker_process import WorkerProcess

POLL_S = 0.2  # how often ``wanted`` is asked while the notebook runs (a few stat calls each time)

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


def artifacts_written(workspace: Path, relpaths: Iterable[str]) -> Callable[[], int]:
    """``wanted`` for :func:`warm_workers`: how many of ``relpaths`` are regular files under
    ``workspace`` now (reached without following a link; nothing is read)."""
    paths = list(relpaths)
    return lambda: sum(safe_files.exists_regular(workspace, p) for p in paths)


@contextmanager
def warm_workers(
    count: int,
    limits,
    start_when: threading.Event | None = None,
    *,
    wanted: Callable[[], int] | None = None,
    stop_when: threading.Event | None = None,
) -> Iterator[None]:
    """Up to ``count`` children for the duration of the block, started once ``start_when`` is set
    (at once without it; never when the block ends first: the jobs then start theirs cold).

    ``wanted``: how many jobs there will be so far (asked every :data:`POLL_S`; a child is started
    whenever it says more than have been started, never beyond ``count``), until ``stop_when`` is
    set or the block ends; without it, all ``count`` at once. A ``wanted`` that raises counts as 0.

    They are started from a thread that lives until the block ends: the jail's
    ``--die-with-parent`` follows the thread that forked, not the process."""
    mine: list[WorkerProcess] = []
    leaving, settled, release = threading.Event(), threading.Event(), threading.Event()

    def how_many() -> int:
        if wanted is None:
            return count
        try:
            return min(count, int(wanted()))
        except Exception:  # noqa: BLE001 - the jobs then start their children cold
            return 0

    def start_all() -> None:
        while start_when is not None and not start_when.wait(0.05):
            if leaving.is_set():
                return
        started = 0
        while started < count and not leaving.is_set():
            if stop_when is not None and stop_when.is_set():
                return
            if how_many() <= started:
                if wanted is None or leaving.wait(POLL_S):
                    return
                continue
            try:
                w = worker_process.start(limits)
            except Exception:  # noqa: BLE001 - no warm start here: the jobs start their children cold
                return
            started += 1
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
