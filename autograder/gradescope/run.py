"""Grade one Gradescope submission: ``autograder gradescope run [--root /autograder]``.

Gradescope's layout (its "Autograder Specifications"): ``ROOT/source`` holds the unpacked
autograder zip, ``ROOT/submission`` the student's files, ``ROOT/submission_metadata.json`` facts
about the submission, and the result goes to ``ROOT/results/results.json``. A missing or invalid
results file shows the student "The autograder failed to execute correctly", so:

1. a zero-score placeholder is written first (it stays if Gradescope's time limit kills us);
2. the notebook of the submission is chosen by the rule every front end shares
   (:mod:`autograder.notebook_choice`), read safely (no symlinks, size cap) into a private folder
   only root can read, checked for another assignment's metadata by the bounded reader (a limited
   child process: nothing of it is parsed here), and graded there with
   :func:`autograder.pipeline.grade_notebook`;
3. the real results are written last, atomically; any failure of the grader itself becomes a
   zero with a reason, its traceback goes to stdout (shown to instructors only), and the run
   still exits 0 because the file is valid.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from ..assignment import Assignment, load_assignment
from ..assignment_match import mismatch_reason, notebook_facts_of
from ..errors import AssignmentError, UnsafeFileError
from ..grade_options import GradeOptions
from ..notebook_choice import NotebookChoice, choose_notebook, ignored, shown
from ..report import markdown as md
from ..manual_answers import answer_tests
from ..report.gradescope_results import failure_results_json
from ..safe_files import MiB, read_bytes, write_json_atomic
from ..notebook_reader import MAX_NOTEBOOK_BYTES
from .container_limits import own_limits

DEFAULT_ROOT = Path("/autograder")
MANIFEST = "gradescope.json"  # written by gradescope.build into the zip
NOTEBOOK_MAX_BYTES = MAX_NOTEBOOK_BYTES  # the bounded reader's cap (outputs and images included)
METADATA_MAX_BYTES = 16 * MiB  # previous_submissions carries earlier results
SCAN_LIMIT = 10_000  # entries of the submission folder looked at

PLACEHOLDER_REASON = (
    "Grading did not finish: the autograder was stopped before it could write a result, most "
    "likely because the notebook ran past Gradescope's time limit or out of memory. Check that it "
    "runs top to bottom in a fresh kernel within a few minutes, then resubmit."
)
OUT_OF_MEMORY_NOTE = (
    "**The grading container ran out of memory** ({limit}): its out-of-memory killer stopped "
    "{kills} while your submission was graded, so part of it could not run. Use less memory (smaller "
    "arrays, fewer copies, `del` what you no longer need) and resubmit."
)
GRADER_FAILED_REASON = (
    "The grader itself failed while grading this submission ({error}). This is not a problem with "
    "your work; course staff can see the details. Please let them know."
)


def log(message: str) -> None:
    """One line to stdout, which Gradescope shows to instructors only (results/stdout)."""
    print(f"[autograder] {message}", flush=True)


# ------------------------------------------------------------------------- finding the notebook


def _scan(submission: Path) -> list[tuple[str, bool]]:
    """``(relative path, is a regular file)`` of the files under ``submission`` (hidden folders
    and ``__MACOSX`` not entered; at most SCAN_LIMIT entries or 256 nested folders looked at).

    The student's upload is walked like any student tree (:mod:`autograder.tree_walk`:
    iterative, no link followed)."""
    from ..tree_walk import TreeLimitError, open_folder, walk

    files: list[tuple[str, bool]] = []
    try:
        top = open_folder(submission)
    except OSError:
        return files
    try:
        for e in walk(
            top, what="the submission", max_entries=SCAN_LIMIT, include=lambda e: not (e.is_dir and ignored(e.name))
        ):
            if not e.is_dir:
                files.append((e.path, stat.S_ISREG(e.st.st_mode)))
    except TreeLimitError:
        pass
    finally:
        os.close(top)
    return sorted(files)


def find_notebook(submission: Path, preferred_name: str) -> NotebookChoice:
    """The notebook to grade in ``submission`` (searched recursively) by the rule every front end
    shares (:func:`autograder.notebook_choice.choose_notebook`)."""
    if not submission.is_dir():
        return NotebookChoice(None, "The submission folder is missing: nothing was uploaded.")
    return choose_notebook(_scan(submission), preferred_name)


# ----------------------------------------------------------------------------------- metadata


def read_submission_metadata(root: Path) -> dict[str, Any]:
    """The few facts of ``submission_metadata.json`` worth recording; {} when absent or odd."""
    try:
        data = json.loads(read_bytes(root, "submission_metadata.json", METADATA_MAX_BYTES))
    except (UnsafeFileError, ValueError, OSError) as e:
        if os.path.lexists(root / "submission_metadata.json"):
            log(f"submission_metadata.json ignored: {e}")
        return {}
    if not isinstance(data, dict):
        log("submission_metadata.json ignored: not a JSON object")
        return {}
    facts: dict[str, Any] = {}
    for key in ("id", "created_at", "submission_method"):
        if isinstance(data.get(key), (str, int)) and not isinstance(data.get(key), bool):
            facts["submission_id" if key == "id" else key] = data[key]
    assignment = data.get("assignment")
    if isinstance(assignment, dict) and isinstance(assignment.get("title"), str):
        facts["assignment_title"] = assignment["title"][:200]
    previous = data.get("previous_submissions")
    if isinstance(previous, list):
        facts["previous_submissions"] = len(previous)
    return facts


# --------------------------------------------------------------------------------- leaderboard


def leaderboard(assignment: Assignment, grade: dict[str, Any], measurements: dict[str, Any]) -> list[dict[str, Any]]:
    """Gradescope leaderboard entries: the assignment's ``leaderboard(grade, measurements)`` hook
    (see autograder.grading_plugin), or none. The core ranks nothing by itself."""
    return assignment.grading.leaderboard(grade, measurements)


# ----------------------------------------------------------------------------------- grading


def source_dir(root: Path) -> Path:
    """Where the unpacked autograder zip is: ``$AUTOGRADER_ROOT`` when set, else ``ROOT/source``."""
    env = os.environ.get("AUTOGRADER_ROOT")
    return Path(env) if env else root / "source"


def _assignment_id(source: Path, requested: str | None) -> str:
    if requested:
        return requested
    try:
        manifest = json.loads((source / MANIFEST).read_text())
        if isinstance(manifest, dict) and isinstance(manifest.get("assignment"), str):
            return manifest["assignment"]
    except (OSError, ValueError):
        pass
    folders = sorted(p.name for p in (source / "assignments").glob("*") if p.is_dir())
    if len(folders) == 1:
        return folders[0]
    raise AssignmentError(f"{source}: no {MANIFEST} and {len(folders)} assignment folders; pass --assignment")


def _restrict(path: Path, mask: int) -> None:
    """Remove permission bits ``mask`` from ``path`` (defence in depth beside setup.sh's chmod)."""
    try:
        os.chmod(path, path.stat().st_mode & 0o7777 & ~mask)
    except OSError as e:
        log(f"could not restrict permissions of {path}: {e.strerror}")


def placeholder_reason(limits: dict[str, Any]) -> str:
    """The placeholder's reason, with the container's memory limit when it can be read."""
    if limits.get("memory_limit_mb"):
        return PLACEHOLDER_REASON.replace("out of memory", f"out of its {limits['memory_limit_mb']} MB of memory")
    return PLACEHOLDER_REASON


def memory_note(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A note for the student when the container's OOM killer struck during grading, else ''."""
    if before.get("oom_kills") is None or after.get("oom_kills") is None or not after.get("memory_limit_mb"):
        return ""  # no container limit to blame (a host's root cgroup counts other kills)
    kills = after["oom_kills"] - before["oom_kills"]
    if kills <= 0:
        return ""
    return OUT_OF_MEMORY_NOTE.format(
        limit=f"{after['memory_limit_mb']} MB", kills="a process" if kills == 1 else f"{kills} processes"
    )


def _with_extras(
    results: dict[str, Any], extra: dict[str, Any], note: str, board: list[dict[str, Any]]
) -> dict[str, Any]:
    results = dict(results)
    results["extra_data"] = {**(results.get("extra_data") or {}), "gradescope": extra}
    if note:
        results["output"] = f"{md.text(note, 2000)}\n\n{results.get('output') or ''}".rstrip() + "\n"
    if board:
        results["leaderboard"] = board
    return results


def grade_submission(root: Path, assignment_id: str | None = None) -> dict[str, Any]:
    """Grade the submission under ``root`` and return its results.json content (not written)."""
    from .. import pipeline

    source = source_dir(root)
    if source.resolve() == (root / "source").resolve():  # never a developer's checkout via $AUTOGRADER_ROOT
        _restrict(source, 0o077)
    assignment = load_assignment(_assignment_id(source, assignment_id), root=source)
    extra: dict[str, Any] = {"assignment": assignment.id, **read_submission_metadata(root)}
    choice = find_notebook(root / "submission", assignment.notebook.name)
    if choice.chosen is None:
        log(f"nothing graded: {choice.message}")
        return failure_results_json(choice.message, extra={"gradescope": extra})
    extra["notebook"] = choice.chosen
    try:
        data = read_bytes(root / "submission", choice.chosen, NOTEBOOK_MAX_BYTES)
    except UnsafeFileError as e:
        return failure_results_json(f"Your notebook could not be read: {e}.", extra={"gradescope": extra})
    other = mismatch_reason("Your notebook", notebook_facts_of(Path(choice.chosen).name, data), assignment)
    if other:
        log(f"nothing graded: {other}")
        return failure_results_json(
            f"{other}. Submit the notebook of this assignment, {shown(assignment.notebook.name)}.",
            extra={"gradescope": extra},
        )
    log(f"grading submission/{choice.chosen} for {assignment.id}")
    with (
        tempfile.TemporaryDirectory(prefix="autograder-gradescope-", ignore_cleanup_errors=True) as private,
        tempfile.TemporaryDirectory(prefix="autograder-gradescope-ws-", ignore_cleanup_errors=True) as ws,
    ):
        private_dir = Path(private)  # mode 0700: the notebook copy and the stage files
        os.chmod(ws, 0o711)  # the fallback jail's uid passes through to its workspace
        notebook = private_dir / Path(choice.chosen).name
        notebook.write_bytes(data)
        out = private_dir / "out"
        # the assignment's own tolerances and rubric, and always the jail: a student's container has no flags;
        # only results.json reaches the student here, so no feedback pages (and the picture only as its PNG)
        grade = pipeline.grade_notebook(
            notebook,
            assignment,
            out,
            options=GradeOptions(),
            workspace=Path(ws) / "work",
            reports=(pipeline.RESULTS_FILE,),
        )
        results = json.loads((out / pipeline.RESULTS_FILE).read_text())
        # each hand-graded question's answer beside the results, where Gradescope's manual grading shows it
        results["tests"] = list(results.get("tests", [])) + answer_tests(notebook, assignment.rubric())
        measurements_file = out / pipeline.MEASUREMENTS_FILE
        measurements = json.loads(measurements_file.read_text()) if measurements_file.is_file() else {}
    board = leaderboard(assignment, grade, measurements)
    log(f"score {grade.get('score')}/{grade.get('max_score')}")
    return _with_extras(results, extra, choice.message, board)


def run(root: Path = DEFAULT_ROOT, assignment_id: str | None = None) -> dict[str, Any]:
    """``autograder gradescope run``: always leaves a valid ``ROOT/results/results.json``.

    Returns what was written. Raises only when even the results file cannot be written.
    """
    root = Path(root)
    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    _restrict(results_path.parent, 0o007)
    before = own_limits()
    write_json_atomic(results_path, failure_results_json(placeholder_reason(before)))
    try:
        results = grade_submission(root, assignment_id)
    except Exception as e:  # noqa: BLE001 - the grader's own failure: a zero with a reason, never a missing file
        log("the grader failed; traceback follows")
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        results = failure_results_json(
            GRADER_FAILED_REASON.format(error=type(e).__name__), extra={"gradescope": {"grader_error": repr(e)[:500]}}
        )
    after = own_limits()
    note = memory_note(before, after)
    if note:
        log(f"the container's OOM killer struck: {before} -> {after}")
        results = dict(results)
        results["output"] = f"{note}\n\n{results.get('output') or ''}".rstrip() + "\n"
    if after.get("memory_limit_mb"):
        extra_data = dict(results.get("extra_data") or {})
        extra_data["container"] = {
            **after,
            "oom_kills_while_grading": (after.get("oom_kills") or 0) - (before.get("oom_kills") or 0),
        }
        results = {**results, "extra_data": extra_data}
    write_json_atomic(results_path, results)
    log(f"wrote {results_path}")
    return results
