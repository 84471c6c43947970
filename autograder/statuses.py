"""The status words of the grader's files, one ``StrEnum`` each: the one place their spellings live
(and a check's visibility, a word of the rubric and of results.json alike).

A member is a ``str``: it compares, hashes and JSON-serialises as its value, so execution.json,
grade.json, results.json, batch.json and the gradebook hold exactly these strings, and a status
read back from a file (a plain ``str``) equals its member. tests/package/test_package_statuses.py
holds every enum against the schema's list of the same field (autograder/schemas/).
Standard library only: the base of the import graph (tests/package/test_package_layers.py).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """How a notebook's run ended: execution.json's ``status``."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"
    KERNEL_DIED = "kernel_died"
    STARTUP_FAILED = "startup_failed"
    UNREADABLE = "unreadable"
    SANDBOX_ERROR = "sandbox_error"


class ProbeStatus(StrEnum):
    """How the probe ended: execution.json's ``probe``."""

    COMPLETED = "completed"
    FAILED = "failed"
    NOT_RUN = "not_run"


class CellStatus(StrEnum):
    """How one code cell ended: execution.json's ``cells[...].status`` (and ``first_error``'s)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    NOT_RUN = "not_run"


class TestStatus(StrEnum):
    """A Gradescope test's ``status`` in results.json: a rubric check, a hand-graded answer."""

    __test__ = False  # not a pytest class, whatever its name

    PASSED = "passed"
    FAILED = "failed"


class Visibility(StrEnum):
    """A rubric check's ``visibility``, and a Gradescope test's (results.json): when the student sees it."""

    VISIBLE = "visible"
    HIDDEN = "hidden"
    AFTER_DUE_DATE = "after_due_date"
    AFTER_PUBLISHED = "after_published"


class SubmissionStatus(StrEnum):
    """A batch row's ``status`` (batch.json, the gradebook, the summary): ``ok`` for a completed
    run, else the run's status, or what kept the submission from a grade."""

    OK = "ok"
    TIMEOUT = "timeout"
    KERNEL_DIED = "kernel_died"
    STARTUP_FAILED = "startup_failed"
    UNREADABLE = "unreadable"
    SANDBOX_ERROR = "sandbox_error"
    GRADER_ERROR = "grader_error"  # the grader failed on it (no grade.json)
    WORKER_LOST = "worker_lost"  # the process grading it died twice
    NOT_GRADED = "not_graded"  # the batch stopped before it


def submission_status(run: str) -> SubmissionStatus | str:
    """A batch row's status for a run that ended with ``run`` (``ok`` for a completed run); an
    unknown word passes through as it is."""
    if run == RunStatus.COMPLETED:
        return SubmissionStatus.OK
    try:
        return SubmissionStatus(run)
    except ValueError:
        return run
