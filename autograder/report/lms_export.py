"""A graded class's scores in the form a learning platform imports as it is: Canvas's gradebook
CSV and Moodle's grade import CSV, read from the batch's own ``gradebook.csv`` (totals include
points given by hand). A group submission gives one row per student; a student with neither a
student id nor an email cannot be matched by the platform and is left out (counted).

- ``canvas``: ``Student, ID, SIS User ID, SIS Login ID, Section, <title>``, then a ``Points
  Possible`` row; the student id goes in ``SIS User ID``, the email in ``SIS Login ID`` (Canvas
  matches on either; ``ID`` is Canvas's own, unknown here, so empty).
- ``moodle``: ``Email address, ID number, Full name, <title>``; with a due date, ``Late (hours)``
  too (Moodle's import maps the columns it uses and ignores the rest).

With a due date (``due``, ISO 8601), each submission's lateness is ``submitted_at`` (a Gradescope
export's metadata) minus the due date, in hours, 0 when on time, empty when the time is unknown.
"""

from __future__ import annotations

import csv
import datetime
import io
from dataclasses import dataclass
from pathlib import Path

FORMATS = ("canvas", "moodle")


class ExportError(ValueError):
    """The class cannot be exported as asked (no gradebook, a due date that is no time)."""


@dataclass
class Export:
    text: str
    rows: int  # students written
    left_out: int  # students with no id or email
    late: int  # submissions after the due date


def parse_due(text: str) -> datetime.datetime:
    try:
        due = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"--due {text!r} is not a time: give ISO 8601, e.g. 2026-12-01T23:59:00-08:00") from None
    if due.tzinfo is None:
        raise ExportError(f"--due {text!r} has no time zone: add one, e.g. {text.strip()}+00:00")
    return due


def hours_late(submitted_at: str, due: datetime.datetime) -> float | None:
    try:
        when = datetime.datetime.fromisoformat(submitted_at)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return round(max(0.0, (when - due).total_seconds() / 3600), 2)


def export(gradebook: Path, fmt: str, title: str, due: datetime.datetime | None = None) -> Export:
    if fmt not in FORMATS:
        raise ExportError(f"--to {fmt!r}: choose one of {', '.join(FORMATS)}")
    try:
        rows = list(csv.DictReader(io.StringIO(Path(gradebook).read_text(encoding="utf-8"))))
    except OSError as e:
        raise ExportError(
            f"{gradebook} cannot be read ({e.strerror}): grade the class with `autograder batch` first"
        ) from None
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    late_column = due is not None and fmt == "moodle"
    if fmt == "canvas":
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", title])
        top = max((_float(r.get("max_score")) for r in rows), default=0.0)
        writer.writerow(["Points Possible", "", "", "", "", _number(top)])
    else:
        writer.writerow(["Email address", "ID number", "Full name", title] + (["Late (hours)"] if late_column else []))
    written = left_out = late = 0
    for row in rows:
        lateness = hours_late(row.get("submitted_at") or "", due) if due is not None else None
        late += bool(lateness)
        for name, sid, email in _students(row):
            if not sid and not email:
                left_out += 1
                continue
            score = _number(_float(row.get("score")))
            if fmt == "canvas":
                writer.writerow([_cell(name), "", _cell(sid), _cell(email), "", score])
            else:
                extra = [] if not late_column else ["" if lateness is None else _number(lateness)]
                writer.writerow([_cell(email), _cell(sid), _cell(name), score, *extra])
            written += 1
    return Export(buf.getvalue(), written, left_out, late)


def _students(row: dict[str, str]) -> list[tuple[str, str, str]]:
    """One (name, sid, email) per student of a (group) submission, in the gradebook's order."""
    split = [[p.strip() for p in (row.get(k) or "").lstrip("'").split(";")] for k in ("submitters", "sids", "emails")]
    count = max(len(s) for s in split)
    if count == 1 and not any(split[i][0] for i in range(3)):
        return [(row.get("name", ""), "", "")]
    return [tuple(s[i] if i < len(s) else "" for s in split) for i in range(count)]  # type: ignore[misc]


def _float(value: object) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def _number(x: float) -> str:
    return ("%.4f" % x).rstrip("0").rstrip(".")


def _cell(text: str) -> str:
    """A spreadsheet cell that is never evaluated as a formula."""
    return "'" + text if text.startswith(("=", "+", "-", "@", "\t", "\r")) else text
