"""gradebook.csv: one row per submission, one column per check id.

Columns: ``name, submitters, sids, emails, submitted_at, score, max_score, status, outcome``
(``submitted_at``: ISO 8601 from a Gradescope export's metadata, empty when unknown), then each check
id in rubric order (that check's score; empty when no grade exists, e.g. ``grader_error``), then
``manual_<id>`` for each hand-graded question with points recorded (``autograder manual import``;
``score`` includes them), then ``cells_errored, execution_s, cached, reason``. ``status`` is ``ok`` (the notebook ran to the
end), the execution status (``timeout``, ``kernel_died``, ``unreadable``, …) or ``grader_error``;
``outcome`` says the same in an instructor's words, one of :data:`OUTCOMES`: ``graded``, ``not
attempted`` (it ran, but no visible part about the work passed: :mod:`autograder.attempt`; it
scores 0), ``timed out``, ``kernel died``, ``unreadable``, ``grader failure`` (never the
student's doing: grade it again) or ``not graded``.

Text that came from students (names, emails, file names, error messages) is neutralised for
spreadsheets: a cell starting with ``= + - @`` or a tab/CR gets a leading apostrophe, so it is
shown as text and never evaluated as a formula.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterable

from ..safe_files import write_atomic
from ..statuses import SubmissionStatus
from ..student_text import clean

LEADING = ["name", "submitters", "sids", "emails", "submitted_at", "score", "max_score", "status", "outcome"]
OUTCOMES = ("graded", "not attempted", "timed out", "kernel died", "unreadable", "grader failure", "not graded")
_OUTCOME_OF_STATUS: dict[str, str] = {
    SubmissionStatus.TIMEOUT: "timed out",
    SubmissionStatus.KERNEL_DIED: "kernel died",
    SubmissionStatus.UNREADABLE: "unreadable",
    SubmissionStatus.NOT_GRADED: "not graded",
}
TRAILING = ["cells_errored", "execution_s", "cached", "reason"]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
TEXT_CELL_CHARS = 4000  # of a text cell (a reason, names): one line, cleaned (student_text.clean)


def gradebook_columns(check_ids: Iterable[str], manual_ids: Iterable[str] = ()) -> list[str]:
    fixed = set(LEADING + TRAILING)
    checks = [f"check_{c}" if c in fixed else c for c in check_ids]
    return LEADING + checks + [f"manual_{m}" for m in manual_ids] + TRAILING


def gradebook_csv(rows: list[dict[str, Any]], check_ids: list[str], manual_ids: list[str] | None = None) -> str:
    """The CSV; ``manual_ids``: hand-graded questions with points recorded (``manual_<id>``
    columns, empty where a submission has none; ``score`` includes them)."""
    manual_ids = manual_ids if manual_ids is not None else sorted({m for r in rows for m in r.get("manual", {})})
    columns = gradebook_columns(check_ids, manual_ids)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        graded = bool(row.get("checks"))
        values = [
            text_cell(row.get("name")),
            text_cell(row.get("submitters")),
            text_cell(row.get("sids")),
            text_cell(row.get("emails")),
            text_cell(row.get("submitted_at")),
            number_cell(row.get("score")),
            number_cell(row.get("max")),
            text_cell(row.get("status")),
            outcome(row),
        ]
        values += [number_cell(row["checks"].get(c)) if graded else "" for c in check_ids]
        values += [number_cell(row.get("manual", {}).get(m)) for m in manual_ids]
        seconds = row.get("execution_s")
        seconds = round(seconds, 1) if isinstance(seconds, float) else seconds
        values += [
            number_cell(row.get("cells_errored")),
            number_cell(seconds),
            "yes" if row.get("cached") else "no",
            text_cell(row.get("reason")),
        ]
        writer.writerow(values)
    return buf.getvalue()


def outcome(row: dict[str, Any]) -> str:
    """What happened to one submission, in an instructor's words (one of :data:`OUTCOMES`)."""
    status = row.get("status")
    if status == SubmissionStatus.OK:
        return "not attempted" if row.get("attempted") is False else "graded"
    return _OUTCOME_OF_STATUS.get(str(status), "grader failure")


def write_gradebook(path: Path, rows: list[dict[str, Any]], check_ids: list[str]) -> Path:
    """Write gradebook.csv atomically (a spreadsheet open on the old one never sees half a file)."""
    return write_atomic(path, gradebook_csv(rows, check_ids))


def text_cell(value: Any) -> str:
    text = "" if value is None else clean(value, TEXT_CELL_CHARS)
    return "'" + text if text.startswith(_FORMULA_START) else text


def number_cell(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, (int, float)):
        return ("%.6f" % value).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    return text_cell(value)
