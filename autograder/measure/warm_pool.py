"""Measuring children started ahead of their jobs, while the notebook runs.

``with warm_workers(n, limits):`` starts ``n`` children (:mod:`.worker_process`; a few ms each,
their imports then overlap the kernel); :func:`take` hands one out to :func:`.onnx_load.run_model_worker`, which gives it exactly one
job and closes it. Whatever is not taken when the block ends is closed unused: such a child never
saw a job, so it only exits. A child taken is never returned. Several grades in one process (a
batch worker's threads) may share the ready children: they are all alike and all fresh.
"""

from __future__ import annotations

import os
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
def warm_workers(count: int, limits) -> Iterator[None]:
    """Start ``count`` children for the duration of the block. They are started from the calling
    thread, which outlives them: the jail's ``--die-with-parent`` follows the thread that forked."""
    mine: list[WorkerProcess] = []
    for _ in range(count):
        try:
            mine.append(worker_process.start(limits))
        except Exception:  # noqa: BLE001 - no warm start here: the jobs start their children cold
            break
    with _lock:
        _ready.extend(mine)
    try:
        yield
    finally:
        with _lock:
            unused = [w for w in mine if w in _ready]
            for w in unused:
                _ready.remove(w)
        for w in unused:
            w.close()
