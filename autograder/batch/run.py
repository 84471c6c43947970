"""Batch grading: a folder of notebooks or a Gradescope export → a graded class.

``run_batch(SOURCE, OUT)`` writes ``OUT/<submission>/{results.json, feedback.md, grade.json,
measurements.json, execution.json, submission.json}``, ``OUT/gradebook.csv``, ``OUT/summary.html``
and ``OUT/batch.json`` (the assignment and the submissions, so that ``rescore`` can re-judge).

- N worker processes (default: the number of cores), worker i jails with sandbox slot i; or a
  Dask cluster (``scheduler``): the engines are behind ``executor.py``, the common work in
  ``dispatch.py`` (cache on the client, duplicates, retries, regrades alone) and ``outcomes.py``;
- a submission is finished when its ``submission.json`` stamp exists (written last) and matches
  the notebook's hash and the cache key: a re-run after Ctrl-C skips finished work;
- an execution cache (``OUT/.cache`` or ``cache_dir``) keyed by notebook hash + assignment +
  environment: identical notebooks run once, duplicates wait for the first and are only judged;
- one submission's failure is that submission's ``grader_error``, never the batch's;
- a custom tolerances or rubric file given to an earlier run or ``rescore`` of the same OUT is
  kept for later runs and rescores (so submissions added later are judged alike) until another is
  given or ``calibrated`` goes back to the assignment's own (``grading_files``, the one rule).

``rescore(OUT)`` re-judges every submission from its stored measurements.json (new tolerances or
rubric), runs nothing, and rewrites results, gradebook and summary. What it reads is checked
against the shipped schemas first (:mod:`autograder.contracts`): a batch.json that does not fit
is refused before anything is written; a submission whose stored execution.json or
measurements.json does not fit is that submission's ``grader_error``, naming the file and the
JSON path, and the others are rescored.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import contracts, pipeline
from ..assignment import Assignment, load_assignment, project_root
from ..assignment_match import files_facts, mismatch_reason
from . import manual
from ..rubric import Rubric, parse_rubric
from ..statuses import SubmissionStatus
from .dispatch import run_tasks
from .executor import make_executor
from .worker import GRADER_ERROR, SUBMISSION_FILE, WORKER_LOST, Task, submission_status, task_from_json, task_to_json
from .cache import ExecutionCache, cache_key, sha256_bytes
from ..errors import AssignmentError, AutograderError
from ..grade_options import GradeOptions
from ..safe_files import write_json_atomic
from ..tolerances import version_drift
from .grading_files import grading_files
from .sources import discover

BATCH_FILE = "batch.json"
SOURCES_DIR = ".sources"
CACHE_DIR = ".cache"
GRADEBOOK_FILE = "gradebook.csv"
SUMMARY_FILE = "summary.html"
INTEGRITY_FILE = "integrity.csv"
RESCORE_DIFF_FILE = "rescore-diff.csv"
NOT_GRADED = SubmissionStatus.NOT_GRADED
# failures of the grader or its machine, not of the notebook: a re-run grades these again
RETRIED_STATUSES = frozenset(
    {None, GRADER_ERROR, WORKER_LOST, SubmissionStatus.SANDBOX_ERROR, SubmissionStatus.STARTUP_FAILED}
)


class BatchError(AutograderError):
    """The batch cannot run or be rescored as asked (wrong folder, another assignment's output)."""


class EmptyBatchError(BatchError):
    """The source holds no notebook at all (and ``allow_empty`` was not given)."""


class PartialBatchError(BatchError):
    """``rescore`` of a batch some of whose submissions were never graded (and not ``partial``)."""


@dataclass
class BatchSummary:
    out: Path
    rows: list[dict[str, Any]]  # one per submission; see ``submission_row``
    assignment: str = ""
    graded: int = 0  # graded by this run (executed, from the cache, or a zero)
    skipped: int = 0  # finished by an earlier run and kept
    executed: int = 0  # notebooks actually run in the jail by this run
    cache_hits: int = 0
    warnings: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    ungraded: int = 0  # submissions with no grade yet (an interrupted batch)
    version_drift: list[str] = field(default_factory=list)
    diff: list[dict[str, Any]] = field(default_factory=list)  # rescore: the scores that changed
    integrity: Any = None  # report.integrity.IntegrityReport
    grading_note: str = ""  # one line: the tolerances (and rubric) that judged, and why those

    @property
    def gradebook(self) -> Path:
        return self.out / GRADEBOOK_FILE

    @property
    def integrity_csv(self) -> Path:
        return self.out / INTEGRITY_FILE

    @property
    def rescore_diff(self) -> Path:
        return self.out / RESCORE_DIFF_FILE

    @property
    def summary_html(self) -> Path:
        return self.out / SUMMARY_FILE

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        return counts


def run_batch(
    source: Path,
    out: Path,
    *,
    assignment: Assignment,
    options: GradeOptions = GradeOptions(),
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    cache_dir: Path | None = None,
    use_cache: bool = True,
    allow_empty: bool = False,
    calibrated: bool = False,
) -> BatchSummary:
    """Grade every submission of ``source`` into ``out`` as ``options`` say; resumable, cached, never
    aborted by one failure. The tolerances and rubric that judge follow ``grading_files`` (an
    override an earlier run kept applies, ``calibrated`` drops it).

    Everything the instructor gave is checked before anything is written; a source with no
    notebook raises ``EmptyBatchError`` unless ``allow_empty``. A batch that fails or is
    interrupted leaves no folder it created for nothing (staging, empty submission folders).
    ``scheduler``: None for the local pool of ``jobs`` processes, else a Dask scheduler's address
    (``tcp://HOST:PORT``) or ``local:N`` (a Dask LocalCluster of N single-threaded workers).
    """
    started = time.monotonic()
    out = Path(out).resolve()
    previous = read_batch_file(out)
    if previous is not None and previous.get("assignment") != assignment.id:
        raise BatchError(
            f"{out} holds a batch of assignment '{previous.get('assignment')}', not "
            f"'{assignment.id}': use another --out folder"
        )
    files = grading_files(out, previous, options.tolerances, options.rubric, calibrated=calibrated)
    options = replace(options, tolerances=files.tolerances, rubric=files.rubric)
    validate_grading(assignment, options)
    created = not out.exists()
    existed = {p.name for p in out.iterdir()} if out.is_dir() else set()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BatchError(f"--out {out} cannot be created: {e.strerror or e}") from None
    try:
        discovery = discover(Path(source), out / SOURCES_DIR, assignment.notebook.name)
        if not allow_empty and not any(sub.notebook is not None for sub in discovery.submissions):
            raise EmptyBatchError(_empty_message(Path(source), discovery))
    except BaseException:
        _remove_unused(out, created, existed)
        raise
    cache_root = None if not use_cache else Path(cache_dir).resolve() if cache_dir else out / CACHE_DIR
    tasks = _make_tasks(discovery.submissions, out, assignment, cache_root, options)
    limits = assignment.tolerances(options.tolerances)
    drift = version_drift(limits, assignment.environment())
    batch = {
        "schema": 1,
        "assignment": assignment.id,
        "assignment_root": str(assignment.folder.parent.parent),
        "fingerprint": assignment.fingerprint(),
        "environment": assignment.environment_fingerprint(),
        "source": str(Path(source).resolve()),
        "kind": discovery.kind,
        "cache_dir": str(cache_root or ""),
        "tolerances": str(options.tolerances or ""),
        "rubric": str(options.rubric or ""),
        "warnings": discovery.warnings,
        "tolerances_used": files.record(assignment, limits),
        "version_drift": drift,
        "executor": scheduler or f"local pool -j {jobs or 'auto'}",
        "started_at": _now(),
        "state": "running",
        "submissions": [task_to_json(t) for t in tasks],
    }
    write_json_atomic(out / BATCH_FILE, batch)
    todo = [t for t in tasks if not is_finished(out, t)]
    try:
        records = run_tasks(
            todo,
            assignment,
            lambda n: make_executor(scheduler, jobs, assignment, n),
            progress=progress,
            cache=ExecutionCache(cache_root) if cache_root else None,
            dedupe=cache_root is not None,
            done_before=len(tasks) - len(todo),
        )
    except BaseException:
        write_json_atomic(out / BATCH_FILE, {**batch, "state": "interrupted", "stopped_at": _now()})
        _remove_unused(out, created, existed)
        raise
    rows, integrity = _finish(out, assignment, tasks, options, discovery.warnings)
    write_json_atomic(out / BATCH_FILE, {**batch, "state": "finished", "finished_at": _now()})
    return BatchSummary(
        out=out,
        rows=rows,
        assignment=assignment.id,
        graded=len(records),
        skipped=len(tasks) - len(todo),
        executed=sum(bool(r.get("executed")) for r in records),
        cache_hits=sum(bool(r.get("cached")) for r in records),
        warnings=discovery.warnings,
        elapsed_s=round(time.monotonic() - started, 3),
        version_drift=drift,
        integrity=integrity,
        grading_note=files.note(assignment, limits),
    )


def _empty_message(source: Path, discovery: Any) -> str:
    folders = len(discovery.submissions)
    found = (
        f"{folders} submission folder(s), none with a notebook"
        if folders
        else "no notebook (.ipynb) at its top level"
        if discovery.kind == "folder"
        else "no notebook (.ipynb)"
    )
    return (
        f"{source} holds {found}: nothing to grade. Check the path (a folder of .ipynb files or a "
        "Gradescope export zip), or pass --allow-empty to write an empty gradebook"
    )


def _remove_unused(out: Path, created: bool, existed: set[str]) -> None:
    """After a failed or interrupted run: remove what this run created for nothing (the staging
    folder, submission folders it did not finish, an empty cache, and the output folder when
    nothing was finished); finished submissions and an earlier run's files stay (resume state)."""
    with contextlib.suppress(OSError):
        for child in out.iterdir():
            if child.name in existed or not child.is_dir() or child.is_symlink():
                continue
            if (
                child.name == SOURCES_DIR
                or (child.name != CACHE_DIR and not (child / SUBMISSION_FILE).is_file())
                or not any(child.iterdir())
            ):
                shutil.rmtree(child, ignore_errors=True)
    if created:
        with contextlib.suppress(OSError):
            if {p.name for p in out.iterdir()} <= {BATCH_FILE}:
                shutil.rmtree(out)


def rescore(
    out: Path, *, options: GradeOptions = GradeOptions(), partial: bool = False, calibrated: bool = False
) -> BatchSummary:
    """Re-judge every submission of the batch in ``out`` from its measurements.json; runs nothing.

    Judges with the tolerances and rubric of ``options``, else those the batch last used (an
    override is kept), else, or with ``calibrated``, the assignment's own (``grading_files``).
    Refuses, before writing anything, a batch with ungraded submissions unless ``partial``.
    Writes ``rescore-diff.csv`` (every submission whose score changed) beside the gradebook.
    """
    from ..report.rescore_diff import read_scores, score_changes, write_rescore_diff

    started = time.monotonic()
    out = Path(out).resolve()
    batch = read_batch_file(out)
    if batch is None:
        raise BatchError(f"{out / BATCH_FILE} is missing or unreadable: give the --out folder of a batch run")
    try:
        contracts.validate("batch", batch, str(out / BATCH_FILE))
    except contracts.ContractError as e:
        raise BatchError(f"{e}; it was not written by a batch run of this version") from None
    assignment = _batch_assignment(batch)
    files = grading_files(out, batch, options.tolerances, options.rubric, calibrated=calibrated)
    options = replace(options, tolerances=files.tolerances, rubric=files.rubric)
    validate_grading(assignment, options)
    tasks = [task_from_json(t) for t in batch.get("submissions", [])]
    ungraded = [t.name for t in tasks if not (out / t.name / SUBMISSION_FILE).is_file()]
    if ungraded and not partial:
        raise PartialBatchError(
            f"{len(ungraded)} of {len(tasks)} submissions of {out} are not graded yet (e.g. {ungraded[0]}; "
            f"the batch was {batch.get('state', 'interrupted')}): finish it with `autograder batch "
            f"{batch.get('source', 'SOURCE')} --out {out}`, or pass --partial to rescore the "
            f"{len(tasks) - len(ungraded)} graded ones"
        )
    before = read_scores(out, [t.name for t in tasks])
    rescored = 0
    for task in tasks:
        rescored += _rescore_one(out / task.name, assignment, options)
    limits = assignment.tolerances(options.tolerances)
    write_json_atomic(
        out / BATCH_FILE,
        {
            **batch,
            "rescored_at": _now(),
            "tolerances": str(options.tolerances or ""),
            "rubric": str(options.rubric or ""),
            "tolerances_used": files.record(assignment, limits),
        },
    )
    warnings = list(batch.get("warnings", []))
    rows, integrity = _finish(out, assignment, tasks, options, warnings)
    diff = score_changes(before, read_scores(out, [t.name for t in tasks]), rows)
    write_rescore_diff(out / RESCORE_DIFF_FILE, diff)
    return BatchSummary(
        out=out,
        rows=rows,
        assignment=assignment.id,
        graded=rescored,
        warnings=warnings,
        elapsed_s=round(time.monotonic() - started, 3),
        ungraded=len(ungraded),
        diff=diff,
        version_drift=sorted({w for r in rows for w in r.get("version_drift", [])}),
        integrity=integrity,
        grading_note=files.note(assignment, limits),
    )


def read_batch_file(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(out) / BATCH_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def validate_grading(assignment: Assignment, options: GradeOptions) -> None:
    """Fail loudly, before any submission, on a broken rubric or tolerances file (instructor input)."""
    for path in (options.tolerances, options.rubric):
        if path is not None and not path.is_file():
            raise BatchError(f"{path} does not exist")
        if path is not None and not os.access(path, os.R_OK):
            raise BatchError(f"{path} cannot be read (permission denied)")
    assignment.check_grading(options.tolerances, options.rubric)


def is_finished(out: Path, task: Task) -> bool:
    """True when ``task`` was graded to the end by an earlier run, from the same notebook and key."""
    sub = out / task.name
    record = _read_json(sub / SUBMISSION_FILE)
    return (
        isinstance(record, dict)
        and record.get("status") not in RETRIED_STATUSES
        and record.get("sha256") == task.sha256
        and record.get("cache_key") == task.key
        and (sub / pipeline.GRADE_FILE).is_file()
        and (sub / pipeline.RESULTS_FILE).is_file()
    )


# ── rows ────────────────────────────────────────────────────────────────────────────────────


def submission_row(task: Task, out: Path, rubric: Rubric) -> dict[str, Any]:
    """One gradebook row: {name, score, max, status, checks: {id: score}, …} (print_scores_table's input)."""
    sub = out / task.name
    record = _read_json(sub / SUBMISSION_FILE)
    record = record if isinstance(record, dict) else {}
    grade = _read_json(sub / pipeline.GRADE_FILE) if record else None
    grade = grade if isinstance(grade, dict) and record.get("status") != GRADER_ERROR else None
    execution = _read_json(sub / pipeline.EXECUTION_FILE) if record else None
    execution = execution if isinstance(execution, dict) else {}
    checks = grade.get("checks", []) if grade else []
    people = task.submitters or []
    return {
        "name": task.name,
        "submitters": "; ".join(p.get("name", "") for p in people if p.get("name")),
        "sids": "; ".join(p.get("sid", "") for p in people if p.get("sid")),
        "emails": "; ".join(p.get("email", "") for p in people if p.get("email")),
        "submitted_at": task.submitted_at,
        "score": float(grade.get("score", 0.0)) if grade else 0.0,
        "max": float(grade.get("max_score", 0.0)) if grade else float(rubric.max_points),
        "status": record.get("status", NOT_GRADED),
        "attempted": not (grade and grade.get("attempted") is False),
        "reason": record.get("reason") or record.get("error"),
        "checks": {c["id"]: c.get("score") for c in checks},
        "checks_max": {c["id"]: c.get("max_score") for c in checks},
        "checks_passed": {c["id"]: bool(c.get("passed")) for c in checks},
        "failures": [
            {
                "check": c["id"],
                "title": c.get("title", c["id"]),
                "part": p.get("name", ""),
                "message": p.get("message"),
                "reason": p.get("reason"),
            }
            for c in checks
            for p in c.get("parts", [])
            if not p.get("passed")
        ],
        "cells_errored": execution.get("cells_errored"),
        "first_error": execution.get("first_error"),
        "execution_s": execution.get("duration_s"),
        "duration_s": record.get("duration_s"),
        "cached": bool(record.get("cached")),
        "version_drift": list(grade.get("version_drift") or []) if grade else [],
        "error": record.get("error"),
        "origin": task.origin,
    }


def check_ids(rubric: Rubric, rows: list[dict[str, Any]]) -> list[str]:
    ids = rubric.check_ids
    for row in rows:
        ids.extend(i for i in row["checks"] if i not in ids)
    return ids


# ── helpers ─────────────────────────────────────────────────────────────────────────────────


def _make_tasks(
    submissions: list[Any], out: Path, assignment: Assignment, cache_root: Path | None, options: GradeOptions
) -> list[Task]:
    a_fp, env_fp = assignment.fingerprint(), assignment.environment_fingerprint()
    tasks = []
    facts = files_facts(Path(sub.notebook) for sub in submissions if sub.notebook is not None)  # bounded reader
    for sub in submissions:
        problem = sub.problem
        if sub.notebook is not None:
            data = Path(sub.notebook).read_bytes()  # hashed, never parsed here
            problem = mismatch_reason("The notebook", facts[Path(sub.notebook)], assignment)
        if problem is None:
            sha = sha256_bytes(data)
            key = cache_key(sha, a_fp, env_fp)
        else:
            sha = "problem:" + sha256_bytes(str(problem).encode())
            key = "none"
        tasks.append(
            Task(
                name=sub.name,
                notebook=str(sub.notebook) if sub.notebook and not problem else None,
                problem=problem,
                sha256=sha,
                key=key,
                out_dir=str(out / sub.name),
                origin=sub.origin,
                submitters=sub.submitters,
                submitted_at=sub.submitted_at,
                cache_dir=str(cache_root) if cache_root else None,
                options=options,
            )
        )
    return tasks


def _rescore_one(sub: Path, assignment: Assignment, options: GradeOptions) -> bool:
    record = _read_json(sub / SUBMISSION_FILE)
    if not isinstance(record, dict) or not (sub / pipeline.MEASUREMENTS_FILE).is_file():
        return False
    error = _stored_problem(sub)
    try:
        if error is None:
            pipeline.rejudge(sub, assignment, options=options)
    except Exception as e:  # noqa: BLE001 - one submission's failure is its row's
        error = f"{type(e).__name__}: {e}"[:2000]
    record["status"], record["reason"] = submission_status(sub, error)
    record.update(error=error, rescored_at=_now())
    write_json_atomic(sub / SUBMISSION_FILE, record)
    return True


def _stored_problem(sub: Path) -> str | None:
    """Why a graded submission's stored stage files cannot be re-judged (not JSON, or not the shape
    of their schema), or None."""
    for kind, name in (("execution", pipeline.EXECUTION_FILE), ("measurements", pipeline.MEASUREMENTS_FILE)):
        data = _read_json(sub / name)
        if data is None:
            return f"{sub.name}/{name} is missing or not JSON: grade this submission again"
        try:
            contracts.validate(kind, data, f"{sub.name}/{name}")
        except contracts.ContractError as e:
            return f"{e}: grade this submission again"[:2000]
    return None


def _finish(
    out: Path, assignment: Assignment, tasks: list[Task], options: GradeOptions, warnings: list[str]
) -> tuple[list[dict[str, Any]], Any]:
    """gradebook.csv, integrity.csv and summary.html from the submissions' files (runs nothing)."""
    from ..report.gradebook import write_gradebook
    from ..report.integrity import class_integrity
    from ..report.integrity_view import write_integrity_csv
    from ..report.summary import write_summary

    rubric, tolerances = assignment.rubric(options.rubric), assignment.tolerances(options.tolerances)
    parsed = parse_rubric(rubric, tolerances)  # checked before anything was graded: parsed, or kept
    rows = sorted((submission_row(t, out, parsed) for t in tasks), key=lambda r: r["name"].lower())
    manual.apply(out, rubric, rows)  # points given by hand: into the rows and each results.json
    write_gradebook(out / GRADEBOOK_FILE, rows, check_ids(parsed, rows))
    notebooks = {t.name: Path(t.notebook) for t in tasks if t.notebook}
    integrity = class_integrity(notebooks, assignment)
    write_integrity_csv(out / INTEGRITY_FILE, integrity)
    write_summary(
        out / SUMMARY_FILE,
        rows,
        out=out,
        assignment=assignment,
        rubric=rubric,
        tolerances=tolerances,
        warnings=warnings,
        batch=read_batch_file(out) or {},
        integrity=integrity,
    )
    return rows, integrity


def _batch_assignment(batch: dict[str, Any]) -> Assignment:
    name = str(batch.get("assignment") or "")
    roots = ([Path(batch["assignment_root"])] if batch.get("assignment_root") else []) + [project_root()]
    error: Exception | None = None
    for root in roots:
        try:
            return load_assignment(name, root)
        except AssignmentError as e:
            error = e
    raise BatchError(f"cannot load assignment '{name}' of this batch: {error}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
