"""Hand-graded questions of a batch: the class's answers to one question on one page, and the
points course staff give back, recorded in the gradebook and in each student's results.

- :func:`gather` reads each submission's answer through the bounded notebook reader (the cells of
  otter's ``<!-- BEGIN QUESTION -->`` block whose first cell contains the ``[[manual]]`` item's
  ``question`` text, up to ``<!-- END QUESTION -->``) and writes ``OUT/manual-<id>.html`` (one
  section per submission, every answer escaped; ``anonymous``: numbered in a shuffled order, no
  names) and ``OUT/manual-<id>.csv`` (``submission, points, comment``, points to fill in; the
  anonymous numbers when anonymous, their key kept in ``OUT/manual-<id>.key.json`` for staff).
- :func:`import_points` reads such a CSV back. Every row must name a submission of the batch (or
  an anonymous number of the gather), its points a number from 0 to the item's points; all of it
  is checked before anything is written. The points are kept in ``OUT/manual.json``.
- :func:`apply` (every batch and rescore, through ``run._finish``) adds them to each student's
  results.json, as one Gradescope test per item, and to the gradebook's rows; idempotent, so a
  rescore keeps them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path
from typing import Any

from ..assignment import Assignment
from ..errors import AutograderError
from ..manual_answers import NO_QUESTION, TEST_SUFFIX, answers_of
from ..safe_files import write_atomic, write_json_atomic
from ..statuses import TestStatus, Visibility
from ..student_text import clean, clean_lines

MANUAL_FILE = "manual.json"
COLUMNS = ("submission", "points", "comment")
MAX_COMMENT = 2000


class ManualError(AutograderError):
    """A hand-graded question or points file the command cannot use (exit 2, nothing written)."""


def item_of(assignment: Assignment, item_id: str, rubric: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``[[manual]]`` item ``item_id`` of the assignment's rubric, or ManualError naming the choices."""
    items = (rubric or assignment.rubric()).get("manual", [])
    for item in items:
        if item.get("id") == item_id:
            return item
    known = ", ".join(str(i.get("id")) for i in items) or "none"
    raise ManualError(f"{assignment.id} has no hand-graded question '{item_id}' (its [[manual]] items: {known})")


def gather(
    out: Path, assignment: Assignment, item_id: str, notebooks: dict[str, Path], *, anonymous: bool = False
) -> tuple[Path, Path]:
    """Write the page and the points sheet of one question for the class in ``out``; returns their paths."""
    from ..report.page_templates import own_markup, render
    from ..notebook_reader import read_each

    item = item_of(assignment, item_id)
    question = item.get("question")
    if not question:
        raise ManualError(
            f"the [[manual]] item '{item_id}' of {assignment.id} has no `question` (a text of the question's "
            "first cell) to find the answers by; add one to its rubric.toml"
        )
    names = sorted(notebooks, key=str.lower)
    texts = read_each(lambda n: answers_of(notebooks[n], [item]).get(item_id, NO_QUESTION), names)
    answers = dict(zip(names, texts))
    shown = list(names)
    labels = {n: n for n in names}
    if anonymous:
        random.SystemRandom().shuffle(shown)
        labels = {n: f"answer {k:03d}" for k, n in enumerate(shown, start=1)}
        write_json_atomic(out / f"manual-{item_id}.key.json", {labels[n]: n for n in shown})
    page = out / f"manual-{item_id}.html"
    write_atomic(
        page,
        render(
            "manual.html",
            csp=own_markup("default-src 'none'; style-src 'unsafe-inline'"),  # no script, nothing loaded
            title=clean(item.get("title", item_id), 300),
            description=clean(item.get("description", ""), 2000),
            points=item.get("points", 0),
            answers=[{"label": labels[n], "text": answers[n]} for n in shown],
            anonymous=anonymous,
        ),
    )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for n in shown:
        writer.writerow([labels[n], "", ""])
    sheet = out / f"manual-{item_id}.csv"
    write_atomic(sheet, buf.getvalue())
    return page, sheet


def import_points(out: Path, assignment: Assignment, item_id: str, sheet: Path, names: list[str]) -> int:
    """Record the points of ``sheet`` for question ``item_id``; returns how many rows were recorded."""
    item = item_of(assignment, item_id)
    top = float(item.get("points", 0))
    key_file = out / f"manual-{item_id}.key.json"
    key = json.loads(key_file.read_text()) if key_file.is_file() else {}
    try:
        rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ManualError(f"{sheet} cannot be read as a CSV file: {e}") from None
    if rows and not {"submission", "points"} <= set(rows[0]):
        raise ManualError(f"{sheet} needs the columns submission and points (comment optional), as gather writes")
    known = set(names)
    recorded: dict[str, dict[str, Any]] = {}
    problems = []
    for line, row in enumerate(rows, start=2):
        who = (row.get("submission") or "").strip()
        who = key.get(who, who)
        text = (row.get("points") or "").strip()
        if not who or not text:
            continue  # a row not graded yet
        if who not in known:
            problems.append(f"line {line}: '{who}' is no submission of this batch")
            continue
        try:
            points = float(text)
        except ValueError:
            problems.append(f"line {line}: points '{text}' is not a number")
            continue
        if not math.isfinite(points) or points < 0 or points > top:
            problems.append(f"line {line}: {points:g} points is outside 0 … {top:g}, what '{item_id}' is worth")
            continue
        recorded[who] = {"points": points, "comment": clean_lines(row.get("comment") or "", MAX_COMMENT)}
    if problems:
        raise ManualError(
            f"{sheet}: " + "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        )
    stored = read_manual(out)
    stored.setdefault(item_id, {}).update(recorded)
    write_json_atomic(out / MANUAL_FILE, stored)
    return len(recorded)


def read_manual(out: Path) -> dict[str, dict[str, dict[str, Any]]]:
    try:
        data = json.loads((Path(out) / MANUAL_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def apply(out: Path, rubric: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Put the recorded points into each row (``manual``: id → points, added to ``score``) and into
    each submission's results.json (one test per item, the total raised); runs again harmlessly."""
    stored = read_manual(out)
    items = [i for i in rubric.get("manual", []) if i.get("id") in stored]
    if not items:
        return
    for row in rows:
        given = ((str(i["id"]), stored[i["id"]].get(row["name"])) for i in items)
        mine: dict[str, dict[str, Any]] = {k: v for k, v in given if isinstance(v, dict)}
        if not mine:
            continue
        row["manual"] = {k: v["points"] for k, v in mine.items()}
        row["score"] = row.get("score", 0.0) + sum(row["manual"].values())
        _into_results(out / row["name"] / "results.json", items, mine)


def _into_results(path: Path, items: list[dict[str, Any]], mine: dict[str, dict[str, Any]]) -> None:
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # no results (never graded): nothing to add to
    tests = [t for t in results.get("tests", []) if not str(t.get("name", "")).endswith(TEST_SUFFIX)]
    before = sum(
        float(t.get("score", 0)) for t in results.get("tests", []) if str(t.get("name", "")).endswith(TEST_SUFFIX)
    )
    added = 0.0
    for item in items:
        got = mine.get(item["id"])
        if got is None:
            continue
        tests.append(
            {
                "name": clean(item.get("title", item["id"]), 200) + TEST_SUFFIX,
                "score": got["points"],
                "max_score": float(item.get("points", 0)),
                "status": TestStatus.PASSED if got["points"] >= float(item.get("points", 0)) else TestStatus.FAILED,
                "tags": [str(item["id"])],
                "output": got["comment"] or "Graded by hand.",
                "visibility": Visibility.VISIBLE,
            }
        )
        added += got["points"]
    results["tests"] = tests
    if isinstance(results.get("score"), (int, float)):
        results["score"] = round(float(results["score"]) - before + added, 6)
    write_json_atomic(path, results)
