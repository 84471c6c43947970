"""One submission of a batch, graded in a worker process (or in-process for rescoring).

``grade_task`` always ends with ``OUT/<name>/results.json`` and, last of all, ``submission.json``:
the stamp that says this submission is finished (a re-run skips it). Three paths:

- no gradable notebook (a ``problem`` from the source): a zero with that reason, through the
  normal judge so every check says why;
- a cache hit: the stored execution and measurements are copied, then judged (nothing runs);
- otherwise ``pipeline.grade_notebook`` in the jail, whose stage files then feed the cache.

A grader exception becomes status ``grader_error`` (results.json says so to the student); only a
missing sandbox (``SandboxUnavailableError``) is reported back as fatal, since it would fail
every submission alike.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import pipeline
from ..assignment import Assignment, load_assignment
from .cache import ExecutionCache
from ..errors import SandboxUnavailableError
from ..safe_files import write_json_atomic

SUBMISSION_FILE = "submission.json"
GRADER_ERROR = "grader_error"
STAGE_FILES = (pipeline.EXECUTION_FILE, pipeline.MEASUREMENTS_FILE, pipeline.GRADE_FILE,
               pipeline.RESULTS_FILE, pipeline.FEEDBACK_FILE, pipeline.FEEDBACK_HTML_FILE)


class BatchInterrupted(BaseException):
    """The batch was stopped (Ctrl-C in the parent); unwinds a worker through its cleanups."""


@dataclass(frozen=True)
class Task:
    name: str
    notebook: str | None
    problem: str | None
    sha256: str
    key: str
    out_dir: str
    origin: str = ""
    submitters: list[dict[str, str]] = field(default_factory=list)
    cache_dir: str | None = None
    tolerances: str | None = None
    rubric: str | None = None
    unsafe_no_sandbox: bool = False


# ── worker process ──────────────────────────────────────────────────────────────────────────

_WORKER: dict[str, Any] = {"slot": 0, "assignment": None}


def init_worker(slots: Any, assignment_id: str, root: str, tmp: str) -> None:
    """ProcessPoolExecutor initializer: take a sandbox slot, load the assignment, set signals,
    and keep temporary folders under the pool's own ``tmp`` (removed with the pool)."""
    _WORKER["slot"] = slots.get()
    tempfile.tempdir = tmp
    signal.signal(signal.SIGINT, lambda *_: None)  # the parent handles Ctrl-C and stops us
    signal.signal(signal.SIGTERM, _interrupted)
    _die_with_parent()
    _WORKER["assignment"] = load_assignment(assignment_id, Path(root))


def run_task(task: Task) -> dict[str, Any]:
    _WORKER["busy"] = True
    try:
        return grade_task(task, _WORKER["assignment"], slot=_WORKER["slot"])
    except BatchInterrupted:
        os._exit(128 + signal.SIGTERM)  # cleanups ran while the exception unwound
    finally:
        _WORKER["busy"] = False


def _interrupted(signum: int, frame: Any) -> None:
    if not _WORKER.get("busy"):
        os._exit(128 + signum)  # idle: nothing to clean up
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: let cleanups finish
    raise BatchInterrupted()


def _die_with_parent() -> None:
    try:  # Linux: SIGTERM us when the batch process dies, so nothing is left running
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# ── one submission ──────────────────────────────────────────────────────────────────────────

def grade_task(task: Task, assignment: Assignment, *, slot: int = 0) -> dict[str, Any]:
    """Grade one submission into ``task.out_dir``; returns the record written to submission.json."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SUBMISSION_FILE).unlink(missing_ok=True)
    started = time.monotonic()
    record: dict[str, Any] = {
        "name": task.name, "origin": task.origin, "submitters": task.submitters, "sha256": task.sha256,
        "cache_key": task.key, "cached": False, "executed": False, "slot": slot, "error": None,
    }
    cache = ExecutionCache(Path(task.cache_dir)) if task.cache_dir else None
    tolerances = Path(task.tolerances) if task.tolerances else None
    rubric = Path(task.rubric) if task.rubric else None
    try:
        if task.problem is not None:
            _grade_problem(task.problem, assignment, out, tolerances, rubric)
        elif cache is not None and _restore(cache, task.key, out):
            record["cached"] = True
            _judge_own(out, assignment, tolerances, rubric)
        else:
            record["executed"] = True
            try:
                pipeline.grade_notebook(Path(task.notebook or ""), assignment, out, slot=slot,
                                        unsafe_no_sandbox=task.unsafe_no_sandbox,
                                        tolerances=tolerances, rubric=rubric)
            finally:
                if cache is not None:
                    cache.store(task.key, out, info={"name": task.name, "sha256": task.sha256})
    except SandboxUnavailableError as e:
        record["fatal"] = str(e)
        return record
    except Exception as e:  # noqa: BLE001 - one submission's failure never stops the batch
        record["error"] = f"{type(e).__name__}: {e}"[:2000]
        record["traceback"] = traceback.format_exc(limit=12)[-6000:]
    record["status"], record["reason"] = submission_status(out, record["error"])
    record["duration_s"] = round(time.monotonic() - started, 3)
    record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json_atomic(out / SUBMISSION_FILE, record)
    return record


def submission_status(out: Path, error: str | None) -> tuple[str, str | None]:
    """(gradebook status, reason): ``ok`` for a completed execution, else its status."""
    if error is not None or not (out / pipeline.GRADE_FILE).is_file():
        return GRADER_ERROR, error or "no grade.json was written"
    try:
        execution = json.loads((out / pipeline.EXECUTION_FILE).read_text())
    except (OSError, ValueError):
        return GRADER_ERROR, "execution.json is missing or unreadable"
    status = str(execution.get("status") or "unknown")
    return ("ok" if status == "completed" else status), execution.get("reason")


def _restore(cache: ExecutionCache, key: str, out: Path) -> bool:
    _clear(out)
    return cache.restore(key, out)


def _judge_own(out: Path, assignment: Assignment, tolerances: Path | None, rubric: Path | None) -> None:
    """rejudge, with a failure results.json left behind when it raises."""
    from ..report.gradescope_results import failure_results_json

    try:
        pipeline.rejudge(out, assignment, tolerances=tolerances, rubric=rubric)
    except Exception as e:
        write_json_atomic(out / pipeline.RESULTS_FILE, failure_results_json(
            "The grader itself failed while grading this notebook; this is not a problem with your "
            f"work, and course staff can see the error ({type(e).__name__})."))
        raise


def _grade_problem(problem: str, assignment: Assignment, out: Path, tolerances: Path | None,
                   rubric: Path | None) -> None:
    """A zero with ``problem`` as the reason of every check: nothing was run."""
    _clear(out)
    execution = {
        "status": "unreadable", "reason": problem, "cells_total": 0, "cells_run": 0, "cells_errored": 0,
        "cells": [], "first_error": None, "probe": "not_run", "duration_s": 0.0, "output_truncated": False,
        "isolation": {"mode": "none", "layers": [], "warnings": ["nothing was executed"]},
    }
    write_json_atomic(out / pipeline.EXECUTION_FILE, execution)
    measurements = {
        "schema": 1,
        "error": problem,  # at the root: every measurement path yields this reason (see judge.lookup)
        "assignment": {"id": assignment.id, "version": assignment.version,
                       "fingerprint": assignment.fingerprint()},
        "environment": assignment.environment(),
        "execution": {**{k: v for k, v in execution.items() if k != "cells"}, "completed": False},
    }
    write_json_atomic(out / pipeline.MEASUREMENTS_FILE, measurements)
    _judge_own(out, assignment, tolerances, rubric)


def _clear(out: Path) -> None:
    for name in STAGE_FILES:
        (out / name).unlink(missing_ok=True)


def task_from_json(data: dict[str, Any]) -> Task:
    return Task(**{k: data[k] for k in Task.__dataclass_fields__ if k in data})


def task_to_json(task: Task) -> dict[str, Any]:
    return asdict(task)
