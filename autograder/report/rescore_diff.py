"""rescore-diff.csv: which scores a rescore changed, and which checks moved them.

Columns: ``name, submitters, old_score, new_score, change, checks_moved`` where ``checks_moved``
reads ``size 10 → 5; drift 10 → 0`` (check ids, old and new score). One row per submission
whose total or any check score changed; a rescore that changed nothing writes the header only.
Written atomically beside gradebook.csv, with the gradebook's protection against spreadsheet
formulas.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..safe_files import write_atomic
from .gradebook import number_cell, text_cell

COLUMNS = ["name", "submitters", "old_score", "new_score", "change", "checks_moved"]
GRADE_FILE = "grade.json"


def read_scores(out: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """``name → {"score": float, "checks": {id: score}}`` from each submission's grade.json."""
    scores: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            grade = json.loads((Path(out) / name / GRADE_FILE).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(grade, dict):
            scores[name] = {
                "score": grade.get("score"),
                "checks": {str(c.get("id")): c.get("score") for c in grade.get("checks", []) if isinstance(c, dict)},
            }
    return scores


def score_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The submissions whose score changed, largest change first."""
    people = {r["name"]: r.get("submitters", "") for r in rows}
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, {}), after.get(name, {})
        ids = list(dict.fromkeys([*old.get("checks", {}), *new.get("checks", {})]))
        moved = [
            (i, old.get("checks", {}).get(i), new.get("checks", {}).get(i))
            for i in ids
            if old.get("checks", {}).get(i) != new.get("checks", {}).get(i)
        ]
        if old.get("score") == new.get("score") and not moved:
            continue
        changes.append(
            {
                "name": name,
                "submitters": people.get(name, ""),
                "old_score": old.get("score"),
                "new_score": new.get("score"),
                "change": _delta(old.get("score"), new.get("score")),
                "checks_moved": moved,
            }
        )
    return sorted(changes, key=lambda c: (-abs(c["change"] or 0), c["name"].lower()))


def moved_text(moved: list[tuple[str, Any, Any]]) -> str:
    return "; ".join(f"{i} {_pts(a)} → {_pts(b)}" for i, a, b in moved)


def rescore_diff_csv(changes: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for c in changes:
        writer.writerow(
            [
                text_cell(c["name"]),
                text_cell(c["submitters"]),
                number_cell(c["old_score"]),
                number_cell(c["new_score"]),
                number_cell(c["change"]),
                text_cell(moved_text(c["checks_moved"])),
            ]
        )
    return buf.getvalue()


def write_rescore_diff(path: Path, changes: list[dict[str, Any]]) -> Path:
    return write_atomic(path, rescore_diff_csv(changes))


def _delta(old: Any, new: Any) -> float | None:
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return float(new) - float(old)
    return None


def _pts(x: Any) -> str:
    return "–" if x is None else f"{x:g}" if isinstance(x, (int, float)) else str(x)
