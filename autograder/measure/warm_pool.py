"""The measuring children of one submission: as few as the cores allow, the first one warm.

``with warm_workers(most, limits, start_when=event) as children:`` gives one submission's
measuring a :class:`MeasuringChildren`: at most ``most`` children (the pipeline passes
``min(models the lesson measures, measure_jobs())``: in ``batch -j 2`` on 2 cores, one), each
measuring the submission's models one after another (:mod:`.worker_process`). The first child is
started once ``event`` is set (the pipeline sets it when the kernel has been launched, so that its
start does not delay the kernel's; without an event, at once); its imports then overlap the
notebook's execution. :func:`.onnx_load.run_model_worker` called with ``children=`` takes an idle
child of the set (:meth:`MeasuringChildren.acquire`) and gives it back after the job
(:meth:`MeasuringChildren.release`). When a child is handed out and none is idle or starting, one
more is started (while there is room): it imports while the first job runs, ready for the models
measured side by side. A child whose job ended without a clean result is closed, and the next job
gets a fresh one. A child belongs to one set: it never measures another submission's model (nor
the grader's own models, which run in fresh children). When the block ends every child is closed;
one that never got a job read nothing and is killed.

Why the first child starts at the kernel's launch, although a notebook that writes no model then
leaves it unused (lesson 07's untouched notebook: one child, ~0.2 s of CPU for nothing; with one
child per model, as before, three): starting children only once the notebook's first model file
exists was measured and rejected. Lesson 07's reference writes its models in its last half-second,
so they started 0.1-0.4 s before the probe, still importing when their jobs came, and their start
overlapped the cells that time the student's models: in 9 of 16 instrumented ``-j 1`` grades (the
CPU budget's) the notebook's own latencies came out ~30 % slower than the grader's, which then
timed them again in 2-5 more children (more CPU than the unused children cost), against 0 of 8
with the children started here; a lowest-priority start (nice 19) did not change that. A second
child, when the cores allow one, starts only once measuring has begun (after the notebook's cells),
so it never overlaps the student's timings.

Children are started from the set's own thread, which lives until the set is closed: the jail's
``--die-with-parent`` follows the thread that forked, not the process, and a child outlives the
job (and the thread) that first asked for it.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

from . import worker_process
from .worker_process import WorkerProcess


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


class MeasuringChildren:
    """The measuring children of one submission (see the module's docstring)."""

    def __init__(self, limits, most: int, start_when: threading.Event | None = None) -> None:
        self.limits = limits
        self.most = max(1, most)
        self._warm = most >= 1  # a lesson that measures no model starts none ahead
        self._start_when = start_when
        self._cond = threading.Condition()
        self._children: list[WorkerProcess] = []  # alive: idle or busy
        self._idle: list[WorkerProcess] = []
        self._wanted = 0  # starts asked of the starter thread
        self._starting = 0
        self._start_error: Exception | None = None
        self._closing = False
        self._released = threading.Event()
        self._starter = threading.Thread(target=self._starter_main, name="autograder-warm-workers", daemon=True)
        self._starter.start()

    # ── the starter thread ────────────────────────────────────────────────────────────────────

    def _starter_main(self) -> None:
        try:
            self._serve()
        finally:
            with self._cond:
                self._starting = self._wanted = 0
                self._cond.notify_all()
        self._released.wait()  # alive until its children are closed: their death signal follows this thread

    def _serve(self) -> None:
        while self._start_when is not None and not self._start_when.wait(0.05):
            with self._cond:
                if self._closing or self._wanted:
                    break
        with self._cond:
            if self._warm and not self._wanted and not self._children:
                self._wanted = 1
        while True:
            with self._cond:
                while not self._wanted and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                self._wanted -= 1
                self._starting += 1
            child, error = None, None
            try:
                child = worker_process.start(self.limits)
            except Exception as e:  # noqa: BLE001 - handed to the job that waits for this child
                error = e
            with self._cond:
                self._starting -= 1
                if child is not None:
                    self._children.append(child)
                    self._idle.append(child)
                else:
                    self._start_error = error
                self._cond.notify_all()

    # ── the jobs' side ────────────────────────────────────────────────────────────────────────

    def _room(self) -> bool:
        return len(self._children) + self._starting + self._wanted < self.most

    def acquire(self) -> WorkerProcess:
        """An idle child of this submission, started if there is none and there is room, else the
        first one given back. Raises what starting a child raised (after one more try)."""
        retired: list[WorkerProcess] = []
        retried = False
        try:
            with self._cond:
                while True:
                    if self._closing:
                        raise RuntimeError("this submission's measuring is over")
                    while self._idle:
                        child = self._idle.pop(0)
                        if child.proc.poll() is None:
                            if not self._idle and not self._starting and not self._wanted and self._room():
                                self._wanted += 1  # the next model measured side by side finds it ready
                                self._cond.notify_all()
                            return child
                        self._children.remove(child)  # it died while idle: closed, never handed out
                        retired.append(child)
                    if self._start_error is not None and not self._starting and not self._wanted:
                        error, self._start_error = self._start_error, None
                        if retried:
                            raise error
                        retried = True
                    if self._room():
                        self._wanted += 1
                        self._cond.notify_all()
                    self._cond.wait()
        finally:
            for child in retired:
                child.close()

    def release(self, child: WorkerProcess) -> None:
        """Give ``child`` back after a job: idle for the submission's next model when its job ended
        cleanly (:attr:`.worker_process.WorkerProcess.reusable`), else closed (the next job gets a
        fresh child)."""
        with self._cond:
            keep = child.reusable and not self._closing and child.proc.poll() is None
            if keep:
                self._idle.append(child)
            elif child in self._children:
                self._children.remove(child)
            self._cond.notify_all()
        if not keep:
            child.close()

    def close(self) -> None:
        """Close every idle child (an unused one is killed without having read anything), kill a
        busy one (the grade is being abandoned; its job's release closes it) and end the starter
        thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            while self._starting:
                self._cond.wait()
            idle = list(self._idle)
            busy = [c for c in self._children if c not in idle]  # a job still running: its release closes it
            self._children, self._idle = busy, []
        for child in idle:
            child.close()
        for child in busy:
            child.kill()
        self._released.set()
        self._starter.join()


@contextmanager
def warm_workers(most: int, limits, start_when: threading.Event | None = None) -> Iterator[MeasuringChildren]:
    """One submission's measuring children for the duration of the block (see the module)."""
    children = MeasuringChildren(limits, most, start_when)
    try:
        yield children
    finally:
        children.close()
