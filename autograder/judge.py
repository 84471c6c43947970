"""Stage 3 · judge: rubric × tolerances × measurements → grade (see docs/ARCHITECTURE.md).

Pure: no I/O, no clock, no randomness; the inputs are never mutated and the same inputs always
give the same grade. Two kinds of bad input are told apart:

- the rubric or the tolerances are wrong (unknown op, points that do not add up, a duplicate id,
  a tolerance key that does not exist): instructor input, so ``AssignmentError``, loudly;
- a measurement is missing or is ``{"error": reason}``: the student's outcome, so the part fails
  with ``reason`` set, a zero and no hint (nothing was measured to hint at), never an exception;
  the check gets a ``cause`` when a cell that should have defined its function is to blame
  (:mod:`autograder.root_cause`), said once instead of once per part.

Paths are dotted (``models.int8_dynamic.quality.accuracy_drop``). A key that itself contains dots
(``reported.fields.fp32.size_bytes``) is found too: at each level the longest matching key wins.
A list element is addressed by its index (``calibrated_input_range.0``). A section
``{"error": "…"}`` met anywhere on the way (or at its end) yields that error as the reason; a
missing key or a ``null`` value yields ``"measurement missing: <path>"``.

A tolerance reference may point at a number (``accuracy_drop_max = 0.012``) or at a table with a
``value`` key (``accuracy_drop_max = {value = 0.012, derived = "p99 of 20 seeds + 50%"}``).

Ops: ``==  !=  <=  <  >=  >`` compare (the ordering ones need numbers on both sides; a bool is not
a number); ``in`` passes when the measured value, or every element of a measured list, is one of
the threshold list (an empty measured list fails); ``is_true`` / ``is_false`` need a measured bool.

Templates (``message``, ``hint``) take placeholders in braces; ``{{`` and ``}}`` are literal braces
and a lone ``{`` or ``}`` is refused (it was a literal brace eaten by its neighbour):

- ``{measured}``, ``{threshold}``: formatted with the part's ``format``; ``{op}`` (``≤``), ``{name}``;
- ``{models.fp32.param_count}``: any other measurement, by dotted path;
- ``{tolerances.dynamic_model.accuracy_drop_max}``: a tolerance;
- ``{path:fmt}``: the same with an explicit format (``{models.fp32.param_count:int}``).
Without ``:fmt`` other values are formatted ``auto`` (ints with thousands separators, floats to
four significant digits). A sentence whose placeholder has no value (missing or errored) is left
out, so no ``?`` stands in for a number; a message left empty falls back to the default.

Formats: ``text``, ``int`` (66,817), ``float3`` (0.031), ``percent`` (3.1%), ``pp`` (a
difference of two shares in percentage points: 1.2 pp), ``bytes``
(262.4 KiB (268,674 bytes)), ``ratio`` (0.27×), ``auto`` (four significant digits: 5.907e-07 for
values too small for float3). A value of the wrong kind falls back to text.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from typing import Any

from .errors import AssignmentError
from .root_cause import check_cause

OPS = ("==", "!=", "<=", "<", ">=", ">", "in", "is_true", "is_false")
FORMATS = ("text", "int", "float3", "percent", "pp", "bytes", "ratio", "auto")
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
OP_TEXT = {"==": "=", "!=": "≠", "<=": "≤", "<": "<", ">=": "≥", ">": ">", "in": "one of",
           "is_true": "=", "is_false": "="}
UNKNOWN = "?"
DEFAULT_MESSAGE = "measured {measured}, expected {op} {threshold}"

_ORDERING = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_NO_THRESHOLD_OPS = ("is_true", "is_false")
_CHECK_KEYS = frozenset({"id", "title", "points", "visibility", "requires", "parts", "description"})
_PART_KEYS = frozenset({"name", "measure", "op", "value", "tolerance", "points", "format", "message", "hint"})
_MANUAL_KEYS = frozenset({"id", "title", "points", "description"})
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][\w.\-]*)(?::([a-z0-9]+))?\}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_POINTS_EPS = 1e-9


# ── public entry ──────────────────────────────────────────────────────────────────────────────

def judge(rubric: Mapping[str, Any], tolerances: Mapping[str, Any], measurements: Mapping[str, Any]) -> dict[str, Any]:
    """Grade ``measurements`` against ``rubric`` and ``tolerances``; returns grade.json as a dict.

    Raises ``AssignmentError`` when the rubric or the tolerances are malformed; never for a
    missing or errored measurement.
    """
    checks, manual = validate_rubric(rubric, tolerances)
    measurements = measurements if isinstance(measurements, Mapping) else {}
    graded = [_judge_check(check, tolerances, measurements) for check in checks]
    return {
        "assignment": _assignment_id(rubric, measurements),
        "score": _total(c["score"] for c in graded),
        "max_score": _total(c["max_score"] for c in graded),
        "checks": graded,
        "manual": [_plain(item) for item in manual],
    }


# ── rubric validation (instructor input: fail loudly) ─────────────────────────────────────────

def validate_rubric(rubric: Mapping[str, Any], tolerances: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    """Check the rubric's shape and resolve every tolerance; returns (checks, manual items)."""
    if not isinstance(rubric, Mapping):
        raise AssignmentError(f"rubric: expected a table, got {type(rubric).__name__}")
    checks = rubric.get("checks")
    if not isinstance(checks, list) or not checks:
        raise AssignmentError("rubric: needs at least one [[checks]] entry")
    manual = rubric.get("manual", [])
    if not isinstance(manual, list):
        raise AssignmentError("rubric: [[manual]] must be an array of tables")
    seen: set[str] = set()
    for check in checks:
        _validate_check(check, tolerances, seen)
    for item in manual:
        _validate_manual(item, seen)
    return checks, manual


def _validate_check(check: Any, tolerances: Mapping[str, Any], seen: set[str]) -> None:
    if not isinstance(check, Mapping):
        raise AssignmentError(f"rubric: each [[checks]] entry must be a table, got {check!r}")
    cid = _new_id(check, "check", seen)
    where = f"rubric check '{cid}'"
    _reject_unknown_keys(check, _CHECK_KEYS, where)
    if check.get("visibility", "visible") not in VISIBILITIES:
        raise AssignmentError(f"{where}: visibility '{check.get('visibility')}' is not one of {', '.join(VISIBILITIES)}")
    requires = check.get("requires", [])
    paths = [requires] if isinstance(requires, str) else requires
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise AssignmentError(f"{where}: requires must be a dotted path or a list of them, got {requires!r}")
    parts = check.get("parts")
    if not isinstance(parts, list) or not parts:
        raise AssignmentError(f"{where}: needs at least one [[checks.parts]] entry")
    names: set[str] = set()
    for part in parts:
        _validate_part(part, tolerances, f"{where} part", names)
    points = _points(check, where, required=True)
    total = math.fsum(p["points"] for p in parts)
    if abs(points - total) > _POINTS_EPS:
        raise AssignmentError(f"{where}: points = {points:g} but its parts add up to {total:g}; make them equal")


def _validate_part(part: Any, tolerances: Mapping[str, Any], where: str, names: set[str]) -> None:
    if not isinstance(part, Mapping):
        raise AssignmentError(f"{where}: each [[checks.parts]] entry must be a table, got {part!r}")
    name = part.get("name")
    if not isinstance(name, str) or not name:
        raise AssignmentError(f"{where}: every part needs a non-empty name")
    if name in names:
        raise AssignmentError(f"{where} '{name}': duplicate part name within the check")
    names.add(name)
    where = f"{where} '{name}'"
    _reject_unknown_keys(part, _PART_KEYS, where)
    if not isinstance(part.get("measure"), str) or not part["measure"]:
        raise AssignmentError(f"{where}: needs measure = \"dotted.path.into.measurements\"")
    op = part.get("op")
    if op not in OPS:
        raise AssignmentError(f"{where}: unknown op {op!r} (known: {' '.join(OPS)})")
    if part.get("format", "text") not in FORMATS:
        raise AssignmentError(f"{where}: unknown format {part.get('format')!r} (known: {', '.join(FORMATS)})")
    _points(part, where, required=True)
    for key in ("message", "hint"):
        _validate_template(part.get(key, ""), f"{where} {key}")
    _check_threshold(op, _threshold(part, tolerances, where), where)


def _validate_manual(item: Any, seen: set[str]) -> None:
    if not isinstance(item, Mapping):
        raise AssignmentError(f"rubric: each [[manual]] entry must be a table, got {item!r}")
    mid = _new_id(item, "manual item", seen)
    _reject_unknown_keys(item, _MANUAL_KEYS, f"rubric manual item '{mid}'")
    _points(item, f"rubric manual item '{mid}'", required=False)


def _new_id(entry: Mapping[str, Any], kind: str, seen: set[str]) -> str:
    cid = entry.get("id")
    if not isinstance(cid, str) or not cid.strip():
        raise AssignmentError(f"rubric: a {kind} has no id (title {entry.get('title')!r}); ids become Gradescope tags")
    if cid in seen:
        raise AssignmentError(f"rubric: duplicate id '{cid}'; every check and manual item needs its own")
    seen.add(cid)
    return cid


def _reject_unknown_keys(entry: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(entry) - known)
    if unknown:
        raise AssignmentError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _points(entry: Mapping[str, Any], where: str, *, required: bool) -> float:
    points = entry.get("points", None if required else 0)
    if not _is_number(points) or not math.isfinite(points) or points < 0:
        raise AssignmentError(f"{where}: points must be a number >= 0, got {points!r}")
    return float(points)


def _threshold(part: Mapping[str, Any], tolerances: Mapping[str, Any], where: str) -> Any:
    has_value, has_tol = "value" in part, "tolerance" in part
    if part["op"] in _NO_THRESHOLD_OPS:
        if has_value or has_tol:
            raise AssignmentError(f"{where}: op {part['op']} takes no value or tolerance")
        return part["op"] == "is_true"
    if has_value == has_tol:
        raise AssignmentError(f"{where}: give exactly one of value = … or tolerance = \"dotted.path\"")
    if has_value:
        return part["value"]
    key = part["tolerance"]
    value, reason = lookup(tolerances if isinstance(tolerances, Mapping) else {}, key) if isinstance(key, str) else (None, "")
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    if reason is not None or isinstance(value, Mapping):
        raise AssignmentError(f"{where}: tolerance '{key}' is not a value in tolerances.toml")
    return value


def _check_threshold(op: str, threshold: Any, where: str) -> None:
    if op in _ORDERING and not _is_number(threshold):
        raise AssignmentError(f"{where}: op {op} needs a number, got {threshold!r}")
    if op == "in" and not isinstance(threshold, list):
        raise AssignmentError(f"{where}: op in needs a list, got {threshold!r}")


def _validate_template(template: Any, where: str) -> None:
    if not isinstance(template, str):
        raise AssignmentError(f"{where}: must be a string, got {template!r}")
    for m in _PLACEHOLDER.finditer(template):
        if m.group(2) and m.group(2) not in FORMATS + ("auto",):
            raise AssignmentError(f"{where}: unknown format ':{m.group(2)}' in {m.group(0)} (known: {', '.join(FORMATS)}, auto)")
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        at = template[max(0, template.find("{" if "{" in rest else "}") - 20):][:60]
        raise AssignmentError(f"{where}: a lone brace near {at!r}; write {{{{ and }}}} for literal braces "
                              "and {dotted.path} for a value")


# ── measurement lookup ────────────────────────────────────────────────────────────────────────

def lookup(data: Any, path: str) -> tuple[Any, str | None]:
    """``(value, None)`` when ``path`` leads to a value, else ``(None, reason)``."""
    missing = f"measurement missing: {path}"
    node, segments, i = data, path.split("."), 0
    while True:
        if isinstance(node, Mapping) and node.get("error") is not None:
            return None, str(node["error"])
        if i == len(segments):
            break
        if isinstance(node, Mapping):
            for j in range(len(segments), i, -1):  # longest key first: keys may contain dots
                key = ".".join(segments[i:j])
                if key in node:
                    node, i = node[key], j
                    break
            else:
                return None, _sibling_error(node) or missing
        elif isinstance(node, (list, tuple)) and re.fullmatch(r"-?\d+", segments[i]) \
                and -len(node) <= int(segments[i]) < len(node):
            node, i = node[int(segments[i])], i + 1
        else:
            return None, missing
    if node is None:
        return None, missing
    return _plain(node), None


def _sibling_error(node: Mapping[str, Any]) -> str | None:
    """Why a field is absent: measurements record it in a ``*_error`` key beside the field."""
    for key in sorted(node):
        if str(key).endswith("_error") and isinstance(node[key], str) and node[key]:
            return str(node[key])
    return None


def _first_missing(requires: Any, measurements: Mapping[str, Any]) -> str | None:
    for path in [requires] if isinstance(requires, str) else requires:
        _, reason = lookup(measurements, path)
        if reason is not None:
            return reason
    return None


# ── judging ───────────────────────────────────────────────────────────────────────────────────

def _judge_check(check: Mapping[str, Any], tolerances: Mapping[str, Any], measurements: Mapping[str, Any]) -> dict[str, Any]:
    blocked = _first_missing(check.get("requires", []), measurements)
    parts = [_judge_part(part, tolerances, measurements, blocked) for part in check["parts"]]
    graded = {
        "id": check["id"],
        "title": str(check.get("title", check["id"])),
        "visibility": check.get("visibility", "visible"),
        "score": _total(p["score"] for p in parts),
        "max_score": _total(p["points"] for p in parts),
        "passed": all(p["passed"] for p in parts),
        "parts": parts,
    }
    if "description" in check:
        graded["description"] = str(check["description"])
    requires = check.get("requires", [])
    cause = check_cause(parts, [requires] if isinstance(requires, str) else requires, measurements)
    if cause is not None:   # said once for the check, before its parts (root_cause.py)
        graded["cause"] = cause
    return graded


def _judge_part(part: Mapping[str, Any], tolerances: Mapping[str, Any], measurements: Mapping[str, Any],
                blocked: str | None) -> dict[str, Any]:
    op, fmt, path = part["op"], part.get("format", "text"), part["measure"]
    threshold = _plain(_threshold(part, tolerances, "rubric"))
    measured, reason = (None, blocked) if blocked is not None else lookup(measurements, path)
    passed = False
    if reason is None:
        passed, reason = _compare(op, measured, threshold, path)
    fields = {"measured": format_value(measured, fmt), "threshold": _threshold_text(op, threshold, fmt),
              "op": OP_TEXT[op], "name": part["name"]}
    raw = {"measured": measured, "threshold": threshold}

    def render(template: str) -> str:
        return _render(template, fields, raw, measurements, tolerances)

    points = part["points"]
    return {
        "name": part["name"], "measure": path, "op": op, "format": fmt,
        "passed": passed, "points": points, "score": points if passed else 0 * points,
        "measured": measured, "threshold": threshold,
        "measured_text": fields["measured"], "threshold_text": fields["threshold"],
        "message": reason if reason is not None else (render(part.get("message") or DEFAULT_MESSAGE)
                                                       or render(DEFAULT_MESSAGE)),
        "hint": render(part.get("hint", "")) if reason is None else "",   # no hint for what was not measured
        "reason": reason,
    }


def _compare(op: str, measured: Any, threshold: Any, path: str) -> tuple[bool, str | None]:
    """(passed, reason); reason is set when the measured value is of the wrong kind for ``op``."""
    if op in _NO_THRESHOLD_OPS:
        if not isinstance(measured, bool):
            return False, f"measurement {path} is {format_value(measured)}, not true or false"
        return measured is threshold, None
    if op in _ORDERING:
        if not _is_number(measured):
            return False, f"measurement {path} is {format_value(measured)}, not a number"
        return bool(_ORDERING[op](measured, threshold)), None
    if op == "in":
        items = measured if isinstance(measured, list) else [measured]
        return bool(items) and all(any(_equal(x, t) for t in threshold) for x in items), None
    return _equal(measured, threshold) == (op == "=="), None


def _equal(a: Any, b: Any) -> bool:
    """Equality where a bool is never equal to a number, and lists compare element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


# ── templates and formatting ──────────────────────────────────────────────────────────────────

def _render(template: str, fields: Mapping[str, str], raw: Mapping[str, Any],
            measurements: Mapping[str, Any], tolerances: Mapping[str, Any]) -> str:
    """The template filled in, sentence by sentence: a sentence with a value missing is left out."""
    missing = False

    def substitute(m: re.Match[str]) -> str:
        nonlocal missing
        token, name, fmt = m.group(0), m.group(1), m.group(2)
        if token in ("{{", "}}"):
            return token[0]
        if name in fields:
            return fields[name] if fmt is None else format_value(raw.get(name, fields[name]), fmt)
        source, path = (tolerances, name[len("tolerances."):]) if name.startswith("tolerances.") else (measurements, name)
        value, reason = lookup(source, path)
        if reason is not None:
            missing = True
            return UNKNOWN
        return format_value(value, fmt or "auto")

    kept = []
    for sentence in _SENTENCE_END.split(template):
        missing = False
        filled = _PLACEHOLDER.sub(substitute, sentence)
        if not missing:
            kept.append(filled)
    return " ".join(kept)


def _threshold_text(op: str, threshold: Any, fmt: str) -> str:
    if op == "in" and isinstance(threshold, list):
        return ", ".join(format_value(t, fmt) for t in threshold) or "nothing"
    return format_value(threshold, fmt)


def format_value(value: Any, fmt: str = "text") -> str:
    """A measurement or threshold as the student reads it; see the module docstring for formats."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, fmt) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {format_value(v, fmt)}" for k, v in value.items()) + "}"
    if not _is_number(value):
        return str(value)
    if not math.isfinite(value):
        return str(float(value))  # nan, inf, -inf
    if fmt == "auto":
        fmt = "int" if isinstance(value, int) else "auto_float"
    if fmt == "int":
        return f"{round(value):,}"
    if fmt == "float3":
        return _fixed(value, 3)
    if fmt == "percent":
        return _fixed(value * 100, 1) + "%"
    if fmt == "pp":
        return _fixed(value * 100, 1) + " pp"
    if fmt == "ratio":
        return _fixed(value, 2) + "×"
    if fmt == "bytes":
        return _bytes(value)
    if fmt == "auto_float":
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"
    return str(value)


def _fixed(x: float, decimals: int) -> str:
    """``x`` to ``decimals`` places, but a small non-zero value keeps two significant digits."""
    text = f"{x:.{decimals}f}"
    if x != 0 and float(text) == 0:
        return f"{x:.2g}"
    return text


def _bytes(n: float) -> str:
    if abs(n) < 1024:
        return f"{round(n):,} bytes"
    unit, size = ("KiB", n / 1024) if abs(n) < 1024**2 else ("MiB", n / 1024**2)
    return f"{size:.1f} {unit} ({round(n):,} bytes)"


# ── small helpers ─────────────────────────────────────────────────────────────────────────────

def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _plain(value: Any) -> Any:
    """A deep copy as plain JSON-like Python: numpy scalars and arrays become floats, ints, lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def _total(values: Any) -> float:
    return round(math.fsum(values), 6)


def _assignment_id(rubric: Mapping[str, Any], measurements: Mapping[str, Any]) -> str:
    if isinstance(rubric.get("assignment"), str):
        return rubric["assignment"]
    value, reason = lookup(measurements, "assignment.id")
    return str(value) if reason is None else "unknown"
