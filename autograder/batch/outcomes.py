"""The client's side of one submission: its folder ``OUT/<name>/`` and, written last, its stamp.

Every path ends with ``results.json`` and then ``submission.json`` (the stamp that says the
submission is finished; a re-run skips it):

- ``from_reply``: a worker's stage files are written into the folder, then fed to the cache;
- ``from_cache``: the stored execution and measurements are copied and judged here (nothing is
  sent to a worker);
- ``from_problem``: no gradable notebook (a ``problem`` from the source): a zero with that reason,
  through the normal judge so that every check says why;
- ``from_lost_worker``: the worker died every time it graded this notebook (``worker_lost``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .. import pipeline
from ..assignment import Assignment
from ..report.gradescope_results import failure_results_json
from ..safe_files import write_atomic, write_json_atomic
from ..statuses import ProbeStatus, RunStatus
from .cache import ExecutionCache
from .worker import STAGE_FILES, SUBMISSION_FILE, WORKER_LOST, Reply, Task, submission_status

# outcomes a busy neighbour can cause: regraded once alone before they are recorded or cached
NEIGHBOUR_STATUSES = frozenset({RunStatus.TIMEOUT, RunStatus.KERNEL_DIED})
# a timeout whose kernel spent at least this share of the CPU time it wanted waiting for a CPU may
# have been starved by its neighbours; below it (an infinite loop that had its core), it is final
STARVED_SHARE = 0.2


def execution_status(reply: Reply) -> str | None:
    return _execution(reply).get("status")


def neighbour_may_be_to_blame(reply: Reply) -> bool:
    """Whether a busy neighbour may have caused this outcome, so that it is graded again alone: a
    kernel that died (memory pressure), or a timeout whose kernel was starved of CPU or of which
    that is unknown. A notebook that looped with a core of its own is not run twice."""
    execution = _execution(reply)
    status = execution.get("status")
    if status not in NEIGHBOUR_STATUSES:
        return False
    if status != RunStatus.TIMEOUT:
        return True
    share = execution.get("cpu_denied_share")
    return not isinstance(share, (int, float)) or isinstance(share, bool) or share >= STARVED_SHARE


def _execution(reply: Reply) -> dict[str, Any]:
    try:
        execution = json.loads(reply.files[pipeline.EXECUTION_FILE])
    except (KeyError, ValueError, AttributeError):
        return {}
    return execution if isinstance(execution, dict) else {}


def from_reply(
    task: Task, reply: Reply, cache: ExecutionCache | None, *, alone: bool, first: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write a worker's stage files into ``OUT/<name>/``, feed the cache, stamp; returns the record."""
    out = _fresh(task)
    for name in STAGE_FILES:
        if name in reply.files:
            write_atomic(out / name, reply.files[name])
    record = _record(task, executed=True, slot=reply.slot, error=reply.error)
    record.update(worker=reply.worker, alone=alone, duration_s=reply.duration_s)
    if reply.traceback:
        record["traceback"] = reply.traceback
    if first is not None:
        record["first_attempt"] = first  # the outcome with neighbours running, before the regrade
    if pipeline.RESULTS_FILE not in reply.files:  # the student always gets a results.json
        record["error"] = record["error"] or "the worker sent back no results.json"
        write_json_atomic(
            out / pipeline.RESULTS_FILE,
            failure_results_json(
                "The grader itself failed while grading this notebook; this is not a problem with your work, "
                "and course staff can see the error."
            ),
        )
    if cache is not None and (alone or not neighbour_may_be_to_blame(reply)):
        cache.store(task.key, out, info={"name": task.name, "sha256": task.sha256, "alone": alone})
    return _stamp(out, record)


def from_cache(task: Task, assignment: Assignment, cache: ExecutionCache) -> dict[str, Any] | None:
    """Judge ``task`` from the cache entry of its key, on the client; None on a miss."""
    if cache.entry(task.key) is None:
        return None
    started = time.monotonic()
    out = _fresh(task)
    if not cache.restore(task.key, out):
        return None
    record = _record(task, cached=True)
    record["error"] = _judge(task, out, assignment)
    record["duration_s"] = round(time.monotonic() - started, 3)
    return _stamp(out, record)


def from_problem(task: Task, assignment: Assignment) -> dict[str, Any]:
    """A zero with ``task.problem`` as the reason of every check: nothing was run."""
    out = _fresh(task)
    problem = str(task.problem)
    execution = {
        "status": RunStatus.UNREADABLE,
        "reason": problem,
        "cells_total": 0,
        "cells_run": 0,
        "cells_errored": 0,
        "cells": [],
        "first_error": None,
        "probe": ProbeStatus.NOT_RUN,
        "duration_s": 0.0,
        "output_truncated": False,
        "isolation": {"mode": "none", "layers": [], "warnings": ["nothing was executed"]},
    }
    write_json_atomic(out / pipeline.EXECUTION_FILE, execution)
    measurements = {
        "schema": 1,
        "error": problem,  # at the root: every measurement path yields this reason (see judge.lookup)
        "assignment": {"id": assignment.id, "version": assignment.version, "fingerprint": assignment.fingerprint()},
        "environment": assignment.environment(),
        "execution": {**{k: v for k, v in execution.items() if k != "cells"}, "completed": False},
    }
    write_json_atomic(out / pipeline.MEASUREMENTS_FILE, measurements)
    record = _record(task)
    record["error"] = _judge(task, out, assignment)
    return _stamp(out, record)


def from_lost_worker(task: Task, reason: str) -> dict[str, Any]:
    """The record (and failure results.json) of a submission whose worker kept dying."""
    out = _fresh(task)
    write_json_atomic(
        out / pipeline.RESULTS_FILE,
        failure_results_json(
            "The grader itself failed while grading this notebook; this is not a problem with your work, "
            "and course staff can see the error."
        ),
    )
    record = _record(task, executed=True, slot=None, error=f"worker lost: {reason}")
    record.update(status=WORKER_LOST, reason=reason, finished_at=_now())
    write_json_atomic(out / SUBMISSION_FILE, record)
    return record


def from_exception(task: Task, error: BaseException) -> dict[str, Any]:
    """A job the engine could not run or return (not a worker death): the submission's grader_error."""
    out = _fresh(task)
    write_json_atomic(
        out / pipeline.RESULTS_FILE,
        failure_results_json(
            "The grader itself failed while grading this notebook; this is not a problem with your work, "
            f"and course staff can see the error ({type(error).__name__})."
        ),
    )
    record = _record(task, executed=True, error=f"{type(error).__name__}: {error}"[:2000])
    return _stamp(out, record)


# ── helpers ─────────────────────────────────────────────────────────────────────────────────


def _record(
    task: Task, *, cached: bool = False, executed: bool = False, slot: int | None = None, error: str | None = None
) -> dict[str, Any]:
    return {
        "name": task.name,
        "origin": task.origin,
        "submitters": task.submitters,
        "sha256": task.sha256,
        "cache_key": task.key,
        "cached": cached,
        "executed": executed,
        "slot": slot,
        "error": error,
    }


def _stamp(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    record["status"], record["reason"] = submission_status(out, record["error"])
    record["finished_at"] = _now()
    write_json_atomic(out / SUBMISSION_FILE, record)
    return record


def _judge(task: Task, out: Path, assignment: Assignment) -> str | None:
    """rejudge on the client; the error text (and a failure results.json) when it raises."""
    try:
        pipeline.rejudge(out, assignment, options=task.options)
        return None
    except Exception as e:  # noqa: BLE001 - one submission's failure never stops the batch
        write_json_atomic(
            out / pipeline.RESULTS_FILE,
            failure_results_json(
                "The grader itself failed while grading this notebook; this is not a problem with your "
                f"work, and course staff can see the error ({type(e).__name__})."
            ),
        )
        return f"{type(e).__name__}: {e}"[:2000]


def _fresh(task: Task) -> Path:
    """``OUT/<name>/`` without its stamp and stage files (a re-run replaces them all)."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SUBMISSION_FILE).unlink(missing_ok=True)
    for name in STAGE_FILES:
        (out / name).unlink(missing_ok=True)
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
