"""Stage 3 · judge: rubric × tolerances × measurements → grade (see docs/ARCHITECTURE.md).

Pure: no I/O, no clock, no randomness; the inputs are never mutated and the same inputs always
give the same grade. Two kinds of bad input are told apart:

- the rubric or the tolerances are wrong (unknown op, points that do not add up, a duplicate id,
  a tolerance key that does not exist): instructor input, so ``AssignmentError``, loudly
  (:mod:`autograder.rubric`, against ``autograder/schemas/rubric.schema.json``);
- a measurement is missing or is ``{"error": reason}``: the student's outcome, so the part fails
  with ``reason`` set, a zero and no hint (nothing was measured to hint at), never an exception;
  the check gets a ``cause`` when a cell that should have defined its function is to blame
  (:mod:`autograder.root_cause`), said once instead of once per part.

Measurements are read by dotted path (:mod:`autograder.dotted`). A tolerance reference may point
at a number (``accuracy_drop_max = 0.012``) or at a table with a ``value`` key
(``accuracy_drop_max = {value = 0.012, derived = "p99 of 20 seeds + 50%"}``).

Ops: ``==  !=  <=  <  >=  >`` compare (the ordering ones need numbers on both sides; a bool is not
a number); ``in`` passes when the measured value, or every element of a measured list, is one of
the threshold list (an empty measured list fails); ``is_true`` / ``is_false`` need a measured bool.

Messages and hints are templates, values are shown in the part's ``format``
(:mod:`autograder.grade_text`).

Points are evidence of work: when no visible part about the work itself passed
(:mod:`autograder.attempt`), the parts about how the notebook ran (``execution.*``) earn nothing
either, and the grade says ``"attempted": false`` (the untouched starter scores 0).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

from .attempt import NO_WORK_MESSAGE, is_about_running, no_work_passed
from .dotted import is_number, lookup, plain
from .grade_text import (
    DEFAULT_MESSAGE,
    OP_TEXT,
    format_value,
    render,
    shown_measured,
    shown_reason,
    threshold_text,
)
from .root_cause import check_cause
from .rubric import NO_THRESHOLD_OPS, Check, Part, Rubric, parse_rubric, validate_rubric

# the names callers imported from here before the split; their homes are the modules above
__all__ = ["judge", "validate_rubric", "lookup", "format_value", "OP_TEXT"]

_ORDERING = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


def judge(
    rubric: Mapping[str, Any] | Rubric, tolerances: Mapping[str, Any], measurements: Mapping[str, Any]
) -> dict[str, Any]:
    """Grade ``measurements`` against ``rubric`` (rubric.toml as loaded, or parsed) and ``tolerances``;
    returns grade.json as a dict.

    Raises ``AssignmentError`` when the rubric or the tolerances are malformed; never for a
    missing or errored measurement.
    """
    parsed = parse_rubric(rubric, tolerances)
    measurements = measurements if isinstance(measurements, Mapping) else {}
    graded = [_judge_check(check, tolerances, measurements) for check in parsed.checks]
    attempted = not no_work_passed(graded)
    if not attempted:  # points are evidence of work: running the starter to the end is none
        graded = [_without_running_points(c) for c in graded]
    grade = {
        "assignment": _assignment_id(parsed, measurements),
        "score": _total(c["score"] for c in graded),
        "max_score": _total(c["max_score"] for c in graded),
        "checks": graded,
        "manual": [item.as_dict() for item in parsed.manual],
    }
    if not attempted:
        grade["attempted"] = False
    return grade


def _without_running_points(check: dict[str, Any]) -> dict[str, Any]:
    """``check`` with every passed part about how the notebook ran failed at zero, saying why."""
    parts = [
        {**p, "passed": False, "score": 0 * p["points"], "message": NO_WORK_MESSAGE, "hint": ""}
        if is_about_running(p) and p["passed"]
        else p
        for p in check["parts"]
    ]
    if parts == check["parts"]:
        return check
    return {
        **check,
        "score": _total(p["score"] for p in parts),
        "passed": all(p["passed"] for p in parts),
        "parts": parts,
    }


def _judge_check(check: Check, tolerances: Mapping[str, Any], measurements: Mapping[str, Any]) -> dict[str, Any]:
    requires = list(check.requires)
    blocked = _first_missing(requires, measurements)
    parts = [_judge_part(part, tolerances, measurements, blocked) for part in check.parts]
    graded: dict[str, Any] = {
        "id": check.id,
        "title": check.title,
        "visibility": check.visibility,
        "score": _total(p["score"] for p in parts),
        "max_score": _total(p["points"] for p in parts),
        "passed": all(p["passed"] for p in parts),
        "parts": parts,
    }
    if check.description is not None:
        graded["description"] = check.description
    cause = check_cause(parts, requires, measurements)
    if cause is not None:  # said once for the check, before its parts (root_cause.py)
        graded["cause"] = cause
        # a stub's or a failed cell's parts measured nothing of the student's work: no hints
        graded["parts"] = [p if p["passed"] else {**p, "hint": ""} for p in parts]
    return graded


def _first_missing(requires: list[str], measurements: Mapping[str, Any]) -> str | None:
    for path in requires:
        _, reason = lookup(measurements, path)
        if reason is not None:
            return reason
    return None


def _judge_part(
    part: Part, tolerances: Mapping[str, Any], measurements: Mapping[str, Any], blocked: str | None
) -> dict[str, Any]:
    op, fmt, path = part.op, part.format, part.measure
    limit = plain(part.threshold(tolerances))
    measured, reason = (None, blocked) if blocked is not None else lookup(measurements, path)
    passed = False
    if reason is None:
        passed, reason = _compare(op, measured, limit, path)
    reason = shown_reason(reason)
    shown, shown_raw = shown_measured(measurements, path, measured, fmt, passed, op, limit)  # leak_budget
    fields = {
        "measured": shown,
        "threshold": part.expected or threshold_text(op, limit, fmt),
        "op": OP_TEXT[op],
        "name": part.name,
    }
    raw = {"measured": shown_raw, "threshold": limit}

    def fill(template: str) -> str:
        return render(template, fields, raw, measurements, tolerances)

    points = part.points
    return {
        "name": part.name,
        "measure": path,
        "op": op,
        "format": fmt,
        "passed": passed,
        "points": points,
        "score": points if passed else 0 * points,
        "measured": measured,
        "threshold": limit,
        "measured_text": fields["measured"],
        "threshold_text": fields["threshold"],
        "message": reason if reason is not None else (fill(part.message or DEFAULT_MESSAGE) or fill(DEFAULT_MESSAGE)),
        "hint": fill(part.hint) if reason is None else "",  # no hint for what was not measured
        "reason": reason,
    }


def _compare(op: str, measured: Any, limit: Any, path: str) -> tuple[bool, str | None]:
    """(passed, reason); reason is set when the measured value is of the wrong kind for ``op``."""
    if op in NO_THRESHOLD_OPS:
        if not isinstance(measured, bool):
            return False, f"measurement {path} is {format_value(measured)}, not true or false"
        return measured is limit, None
    if op in _ORDERING:
        if not is_number(measured):
            return False, f"measurement {path} is {format_value(measured)}, not a number"
        return bool(_ORDERING[op](measured, limit)), None
    if op == "in":
        items = measured if isinstance(measured, list) else [measured]
        return bool(items) and all(any(_equal(x, t) for t in limit) for x in items), None
    return _equal(measured, limit) == (op == "=="), None


def _equal(a: Any, b: Any) -> bool:
    """Equality where a bool is never equal to a number, and lists compare element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _total(values: Any) -> float:
    return round(math.fsum(values), 6)


def _assignment_id(rubric: Rubric, measurements: Mapping[str, Any]) -> str:
    if rubric.assignment is not None:
        return rubric.assignment
    value, reason = lookup(measurements, "assignment.id")
    return str(value) if reason is None else "unknown"
