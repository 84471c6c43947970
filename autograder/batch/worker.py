"""One submission of a batch: the task the client keeps, the job a worker grades, the reply it returns.

Only bytes travel between the batch (the client) and a worker, whatever the engine:

- a ``Job`` holds the notebook's bytes, the assignment's id and fingerprint, the client's package
  versions, the grade's options (``GradeOptions``), and a custom rubric or tolerances file when the
  instructor gave one, as bytes (trusted files, read only by the judge on the worker, never placed
  where the notebook runs);
- ``grade_job`` runs on the worker (a local pool process or a Dask worker): it refuses a job
  whose versions or assignment differ from its own, then runs ``pipeline.grade_notebook`` in a
  private temporary folder and returns a ``Reply`` with the stage files' bytes;
- the client writes them into ``OUT/<name>/`` and stamps the submission (``outcomes.py``).

A grader exception becomes the reply's ``error`` (status ``grader_error``); only a missing sandbox
or a worker that does not match the client is ``fatal``, since it would fail every submission alike.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import signal
import socket
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import pipeline
from ..assignment import Assignment, load_assignment
from ..environment import environment_versions
from ..errors import AutograderError, SandboxUnavailableError
from ..grade_options import GradeOptions
from ..statuses import SubmissionStatus
from ..statuses import submission_status as row_status

SUBMISSION_FILE = "submission.json"
GRADER_ERROR = SubmissionStatus.GRADER_ERROR
WORKER_LOST = SubmissionStatus.WORKER_LOST
STAGE_FILES = (
    pipeline.EXECUTION_FILE,
    pipeline.MEASUREMENTS_FILE,
    pipeline.GRADE_FILE,
    pipeline.RESULTS_FILE,
    pipeline.FEEDBACK_FILE,
    pipeline.FEEDBACK_HTML_FILE,
)
FATAL_SANDBOX, FATAL_MISMATCH = "sandbox", "mismatch"


class BatchInterrupted(BaseException):
    """The batch was stopped (Ctrl-C in the parent); unwinds a worker through its cleanups."""


class WorkerMismatchError(AutograderError):
    """A worker's package versions or assignment differ from the client's: it refuses to grade."""


@dataclass(frozen=True)
class Task:
    """A submission as the client sees it (paths on the client's disk); stored in batch.json."""

    name: str
    notebook: str | None
    problem: str | None
    sha256: str
    key: str
    out_dir: str
    origin: str = ""
    submitters: list[dict[str, str]] = field(default_factory=list)
    submitted_at: str = ""  # ISO 8601, from the export's metadata; "" unknown
    cache_dir: str | None = None
    options: GradeOptions = GradeOptions()  # batch.json keeps its fields beside the others (task_to_json)


@dataclass(frozen=True)
class Job:
    """What a worker receives: bytes and names only, no path of the client's."""

    name: str
    notebook: bytes
    assignment: str
    fingerprint: str  # Assignment.fingerprint() on the client
    versions: dict[str, str]  # environment_versions() on the client
    options: GradeOptions = GradeOptions()  # without paths: the files below travel instead
    tolerances: bytes | None = None  # a custom tolerances.toml (instructor's, trusted)
    rubric: bytes | None = None  # a custom rubric.toml (instructor's, trusted)


@dataclass
class Reply:
    """What a worker sends back: the stage files it wrote, and how it went."""

    name: str
    files: dict[str, bytes] = field(default_factory=dict)
    error: str | None = None  # a grader exception: the submission's grader_error
    traceback: str | None = None
    fatal: str | None = None  # the batch must stop (no sandbox, a mismatched worker)
    fatal_kind: str | None = None  # FATAL_SANDBOX | FATAL_MISMATCH
    slot: int | None = None
    worker: str = ""  # host:pid, for the instructor
    duration_s: float = 0.0


def make_job(task: Task, assignment_id: str, fingerprint: str) -> Job:
    """The job of ``task``: its notebook's and its grading files' bytes read now, on the client."""
    options = task.options
    return Job(
        name=task.name,
        notebook=Path(task.notebook or "").read_bytes(),
        assignment=assignment_id,
        fingerprint=fingerprint,
        versions=dict(environment_versions()),
        options=replace(options, tolerances=None, rubric=None),
        tolerances=options.tolerances.read_bytes() if options.tolerances else None,
        rubric=options.rubric.read_bytes() if options.rubric else None,
    )


def worker_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def mismatch(
    job_versions: dict[str, str],
    job_fingerprint: str,
    assignment: Assignment,
    where: str | None = None,
    loaded_fingerprint: str | None = None,
) -> str | None:
    """Why this worker must not grade for that client (versions, assignment), or None.

    ``loaded_fingerprint``: the fingerprint of the grading code this worker has loaded (a
    long-lived worker keeps the code it imported first, even if the files change later).
    """
    mine = environment_versions()
    diffs = [
        f"{k} {mine.get(k, 'missing')} here, {job_versions.get(k, 'missing')} on the client"
        for k in sorted(set(mine) | set(job_versions))
        if mine.get(k) != job_versions.get(k)
    ]
    here = loaded_fingerprint or assignment.fingerprint()
    if here != job_fingerprint:
        diffs.append(
            f"assignment '{assignment.id}' fingerprint {here} here, "
            f"{job_fingerprint} on the client (another assignment.toml or grading code)"
        )
    if not diffs:
        return None
    return (
        f"worker {where or worker_label()} refuses to grade: {'; '.join(diffs)}. Hint: install the "
        "same pinned versions and assignment folders on every worker as on the client "
        "(pip install -c constraints.txt 'autograder[dask]' from the same checkout), and restart "
        "long-lived workers after an assignment changes (a worker keeps the grading code it loaded)."
    )


def grade_job(job: Job, assignment: Assignment, *, slot: int = 0, loaded_fingerprint: str | None = None) -> Reply:
    """Grade ``job`` on this worker into a private temporary folder; returns the stage files."""
    started = time.monotonic()
    reply = Reply(name=job.name, slot=slot, worker=worker_label())
    why = mismatch(job.versions, job.fingerprint, assignment, loaded_fingerprint=loaded_fingerprint)
    if why:
        reply.fatal, reply.fatal_kind = why, FATAL_MISMATCH
        return reply
    tmp = Path(tempfile.mkdtemp(prefix="autograder-job-"))
    try:
        notebook = tmp / f"{job.name}.ipynb"
        notebook.write_bytes(job.notebook)
        options = replace(
            job.options,
            tolerances=_write(tmp / "tolerances.toml", job.tolerances),
            rubric=_write(tmp / "rubric.toml", job.rubric),
        )
        out = tmp / "out"
        try:
            pipeline.grade_notebook(notebook, assignment, out, options=options, slot=slot)
        except SandboxUnavailableError as e:
            reply.fatal, reply.fatal_kind = str(e), FATAL_SANDBOX
            return reply
        except Exception as e:  # noqa: BLE001 - one submission's failure never stops the batch
            reply.error = f"{type(e).__name__}: {e}"[:2000]
            reply.traceback = traceback.format_exc(limit=12)[-6000:]
        reply.files = {name: (out / name).read_bytes() for name in STAGE_FILES if (out / name).is_file()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    reply.duration_s = round(time.monotonic() - started, 3)
    return reply


def submission_status(out: Path, error: str | None) -> tuple[str, str | None]:
    """(gradebook status, reason): ``ok`` for a completed execution, else its status."""
    if error is not None or not (out / pipeline.GRADE_FILE).is_file():
        return GRADER_ERROR, error or "no grade.json was written"
    try:
        execution = json.loads((out / pipeline.EXECUTION_FILE).read_text())
    except (OSError, ValueError):
        return GRADER_ERROR, "execution.json is missing or unreadable"
    return row_status(str(execution.get("status") or "unknown")), execution.get("reason")


def task_from_json(data: dict[str, Any]) -> Task:
    return Task(
        **{k: data[k] for k in Task.__dataclass_fields__ if k in data and k != "options"},
        options=GradeOptions.from_json(data),
    )


def task_to_json(task: Task) -> dict[str, Any]:
    """A task as batch.json holds it: its options' fields beside its own (``tolerances``, ``rubric``,
    ``unsafe_no_sandbox``), as before options were one value."""
    data = asdict(task)
    del data["options"]
    return {**data, **task.options.to_json()}


def _write(path: Path, data: bytes | None) -> Path | None:
    if data is None:
        return None
    path.write_bytes(data)
    return path


def share_measuring_cores(jobs_on_machine: int) -> int:
    """What every engine's worker process sets before its first job: the grades running at once on
    this machine (``jobs_on_machine``, this worker's included) share its cores, so each measures at
    most cores // jobs models at a time (``AUTOGRADER_MEASURE_JOBS``; a value already set, e.g. by the
    instructor, is kept). Returns the value in effect."""
    from ..measure.warm_pool import measure_jobs

    os.environ.setdefault("AUTOGRADER_MEASURE_JOBS", str(max(1, measure_jobs() // max(1, jobs_on_machine))))
    return measure_jobs()


# ── a local pool's worker process ───────────────────────────────────────────────────────────

_WORKER: dict[str, Any] = {"slot": 0, "assignment": None, "fingerprint": None}


def init_worker(slots: Any, assignment_id: str, root: str, tmp: str, jobs: int = 1) -> None:
    """ProcessPoolExecutor initializer: take a sandbox slot, load the assignment, set signals,
    and keep temporary folders under the pool's own ``tmp`` (removed with the pool). ``jobs``
    workers share the cores: each measures its models at most cores // jobs at a time."""
    # Everything inherited from the parent through fork is left alone by this worker's garbage
    # collector. An ONNX Runtime object the parent made before forking holds condition variables
    # whose waiters (the parent's threads) do not exist here: collecting it blocks forever in
    # pthread_cond_destroy while holding the GIL (seen: a batch worker hung for 30 minutes).
    gc.freeze()
    share_measuring_cores(jobs)
    _WORKER["slot"] = slots.get()
    tempfile.tempdir = tmp
    signal.signal(signal.SIGINT, lambda *_: None)  # the parent handles Ctrl-C and stops us
    signal.signal(signal.SIGTERM, _interrupted)
    _die_with_parent()
    _WORKER["assignment"] = load_assignment(assignment_id, Path(root))
    _WORKER["fingerprint"] = _WORKER["assignment"].fingerprint()


def run_job(job: Job) -> Reply:
    _WORKER["busy"] = True
    try:
        return grade_job(job, _WORKER["assignment"], slot=_WORKER["slot"], loaded_fingerprint=_WORKER["fingerprint"])
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
