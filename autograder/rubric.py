"""The rubric (``assignments/<id>/rubric.toml``, loaded) checked against its tolerances.

Instructor input, so every problem is an ``AssignmentError`` naming the check, the part and the
key. The shape is the schema's (``autograder/schemas/rubric.schema.json``, through
:mod:`autograder.contracts`); here are only the checks a schema cannot express:

- ids are unique across ``[[checks]]`` and ``[[manual]]`` (they become Gradescope tags), and part
  names within a check;
- a check's ``points`` equal the sum of its parts' (and are finite);
- a ``tolerance`` key resolves to a value of tolerances.toml (a number, or a table with a
  ``value``), and a threshold is of the kind its op needs (a number for ``<=``, a list for ``in``);
- a ``message`` or ``hint`` template has only known formats and no lone brace
  (:func:`autograder.grade_text.template_problem`);
- a path (``measure``, ``requires``, a template's placeholder) into the core's sections of
  measurements.json (``execution``, ``assignment``, ``environment``) names one of their fields
  (:func:`autograder.contracts.knows_path`); an assignment's own sections are its to define.

The rubric is parsed once into typed, frozen values (:func:`parse_rubric`: checked as above, then
kept by its JSON text): a :class:`Rubric` of :class:`Check` (each of :class:`Part`) and
:class:`ManualItem`, with the op (:class:`Op`) and the visibility (:class:`~autograder.statuses.Visibility`) as
``StrEnum``s whose values are the rubric's strings, so grade.json holds what it held.
:func:`validate_rubric` (the raw checks and manual items) and ``threshold(part, tolerances)`` (the
value a part is judged against, of a raw part) stay for the callers that hold the raw tables.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .contracts import ContractError, first_problem, knows_path, validate
from .dotted import is_number, lookup, plain
from .errors import AssignmentError
from .grade_text import TEMPLATE_FIELDS, placeholders, template_problem
from .statuses import Visibility


class Op(StrEnum):
    """A part's ``op``: how the measured value meets its threshold (docs/ADDING-AN-ASSIGNMENT.md)."""

    EQ = "=="
    NE = "!="
    LE = "<="
    LT = "<"
    GE = ">="
    GT = ">"
    IN = "in"
    IS_TRUE = "is_true"
    IS_FALSE = "is_false"


OPS = tuple(Op)
ORDERING_OPS = (Op.LE, Op.LT, Op.GE, Op.GT)
NO_THRESHOLD_OPS = (Op.IS_TRUE, Op.IS_FALSE)
_POINTS_EPS = 1e-9
_VALID: set[str] = set()  # JSON texts of (rubric, tolerances) pairs found valid
_VALID_KEPT = 16
_PARSED: dict[str, Rubric] = {}  # JSON texts of rubrics, parsed


@dataclass(frozen=True)
class Part:
    """One ``[[checks.parts]]`` entry: a measurement, an op, a threshold, points."""

    name: str
    measure: str
    op: Op
    points: float  # as written (an int stays an int: grade.json shows it as written)
    format: str = "text"
    message: str = ""
    hint: str = ""
    expected: str = ""  # the threshold in the lesson's words ("": the threshold's value)
    tolerance: str | None = None  # a dotted key of tolerances.toml
    value: Any = field(default=None, hash=False)  # the literal threshold, when ``has_value``
    has_value: bool = False

    def threshold(self, tolerances: Mapping[str, Any], where: str = "rubric") -> Any:
        """The value this part is judged against (see :func:`threshold`)."""
        return _threshold(self.op, self.has_value, self.value, self.tolerance, tolerances, where)

    @classmethod
    def from_table(cls, part: Mapping[str, Any]) -> Part:
        return cls(
            name=part["name"],
            measure=part["measure"],
            op=Op(part["op"]),
            points=part["points"],
            format=part.get("format", "text"),
            message=part.get("message", ""),
            hint=part.get("hint", ""),
            expected=str(part.get("expected") or ""),
            tolerance=part.get("tolerance"),
            value=copy.deepcopy(part.get("value")),  # never the caller's list: this value is kept
            has_value="value" in part,
        )


@dataclass(frozen=True)
class Check:
    """One ``[[checks]]`` entry: one Gradescope test, its points the sum of its parts'."""

    id: str
    title: str  # the id when the rubric gives none
    points: float
    visibility: Visibility
    requires: tuple[str, ...]  # measurements that must exist for any part to be judged
    parts: tuple[Part, ...]
    description: str | None = None

    @classmethod
    def from_table(cls, check: Mapping[str, Any]) -> Check:
        requires = check.get("requires", [])
        return cls(
            id=check["id"],
            title=str(check.get("title", check["id"])),
            points=check["points"],
            visibility=Visibility(check.get("visibility", Visibility.VISIBLE)),
            requires=(requires,) if isinstance(requires, str) else tuple(requires),
            parts=tuple(Part.from_table(p) for p in check["parts"]),
            description=str(check["description"]) if "description" in check else None,
        )


@dataclass(frozen=True)
class ManualItem:
    """One ``[[manual]]`` entry: a question course staff grade by hand."""

    id: str
    title: str  # the id when the rubric gives none
    points: float = 0.0
    question: str | None = None  # a text of the question's first cell
    description: str | None = None
    table: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The entry as the rubric wrote it (grade.json's ``manual``)."""
        return plain(self.table)

    @classmethod
    def from_table(cls, item: Mapping[str, Any]) -> ManualItem:
        return cls(
            id=item["id"],
            title=str(item.get("title", item["id"])),
            points=item.get("points", 0.0),
            question=item.get("question"),
            description=item.get("description"),
            table=plain(item),
        )


@dataclass(frozen=True)
class Rubric:
    """rubric.toml, checked and typed."""

    checks: tuple[Check, ...]
    manual: tuple[ManualItem, ...] = ()
    assignment: str | None = None

    @property
    def max_points(self) -> float:
        """The points of every check (hand-graded questions left out)."""
        return math.fsum(c.points for c in self.checks)

    @property
    def check_ids(self) -> list[str]:
        return [c.id for c in self.checks]

    @classmethod
    def from_table(cls, rubric: Mapping[str, Any]) -> Rubric:
        """The typed rubric of a table that passed :func:`validate_rubric` (nothing is checked here)."""
        return cls(
            checks=tuple(Check.from_table(c) for c in rubric["checks"]),
            manual=tuple(ManualItem.from_table(m) for m in rubric.get("manual", [])),
            assignment=rubric["assignment"] if isinstance(rubric.get("assignment"), str) else None,
        )


def parse_rubric(rubric: Any, tolerances: Any) -> Rubric:
    """The rubric checked against its tolerances (:func:`validate_rubric`: ``AssignmentError``
    naming the check, part and key) and typed; a :class:`Rubric` passes through, checked again
    only against these tolerances. Parsed once per rubric text (kept by its JSON text, never by
    identity, so a changed rubric is parsed again)."""
    if isinstance(rubric, Rubric):
        _check_tolerances(tolerances)
        for check in rubric.checks:
            for part in check.parts:
                where = f"rubric check '{check.id}' part '{part.name}'"
                _check_threshold(part.op, part.threshold(tolerances, where), where)
        return rubric
    validate_rubric(rubric, tolerances)
    key = _key(rubric, None)
    parsed = _PARSED.get(key) if key is not None else None
    if parsed is None:
        parsed = Rubric.from_table(rubric)
        if key is not None:
            if len(_PARSED) >= _VALID_KEPT:
                _PARSED.clear()
            _PARSED[key] = parsed
    return parsed


def validate_rubric(rubric: Any, tolerances: Any) -> tuple[list[dict], list[dict]]:
    """Check the rubric (and its tolerances) and resolve every tolerance; returns (checks, manual).

    A pair already found valid is not checked again (the judge calls this for every grade, and a
    batch or a rescore judges hundreds with the same two files): it is remembered by its JSON text,
    never by identity, so a changed rubric is always checked."""
    key = _key(rubric, tolerances)
    if key is None or key not in _VALID:
        _check(rubric, tolerances)
        if key is not None:
            if len(_VALID) >= _VALID_KEPT:
                _VALID.clear()
            _VALID.add(key)
    return rubric["checks"], rubric.get("manual", [])


def _key(rubric: Any, tolerances: Any) -> str | None:
    try:
        return json.dumps([rubric, tolerances], sort_keys=True)
    except (TypeError, ValueError):  # not plain JSON (a TOML date, say): checked every time
        return None


def _check(rubric: Any, tolerances: Any) -> None:
    _check_tolerances(tolerances)
    problem = first_problem("rubric", rubric)
    if problem is not None:
        path, message = problem
        raise AssignmentError(f"{_where(rubric, path)}: {message}")
    checks, manual = rubric["checks"], rubric.get("manual", [])
    seen: set[str] = set()
    for check in checks:
        where = f"rubric check '{check['id']}'"
        _new_id(check["id"], seen)
        requires = check.get("requires", [])
        for required in [requires] if isinstance(requires, str) else requires:
            _check_path(required, f"{where}: requires")
        names: set[str] = set()
        for part in check["parts"]:
            part_where = f"{where} part '{part['name']}'"
            if part["name"] in names:
                raise AssignmentError(f"{part_where}: duplicate part name within the check")
            names.add(part["name"])
            _check_path(part["measure"], f"{part_where}: measure")
            for key in ("message", "hint"):
                template = template_problem(part.get(key, ""))
                if template is not None:
                    raise AssignmentError(f"{part_where} {key}: {template}")
                for name in placeholders(part.get(key, "")):
                    if name not in TEMPLATE_FIELDS and not name.startswith("tolerances."):
                        _check_path(name, f"{part_where} {key}: placeholder")
            _check_threshold(part["op"], threshold(part, tolerances, part_where), part_where)
        total = math.fsum(p["points"] for p in check["parts"])
        if not math.isfinite(check["points"]) or abs(check["points"] - total) > _POINTS_EPS:
            raise AssignmentError(
                f"{where}: points = {check['points']:g} but its parts add up to {total:g}; make them equal"
            )
    for item in manual:
        _new_id(item["id"], seen)


def threshold(part: Mapping[str, Any], tolerances: Mapping[str, Any], where: str = "rubric") -> Any:
    """The value ``part`` is judged against: its ``value``, its resolved ``tolerance``, or the bool
    of ``is_true``/``is_false``."""
    return _threshold(part["op"], "value" in part, part.get("value"), part.get("tolerance"), tolerances, where)


def _threshold(op: str, has_value: bool, value: Any, key: Any, tolerances: Any, where: str) -> Any:
    if op in NO_THRESHOLD_OPS:
        return op == Op.IS_TRUE
    if has_value:
        return value
    value, reason = lookup(tolerances if isinstance(tolerances, Mapping) else {}, key)
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    if reason is not None or isinstance(value, Mapping):
        raise AssignmentError(f"{where}: tolerance '{key}' is not a value in tolerances.toml")
    return value


def _check_tolerances(tolerances: Any) -> None:
    try:
        validate("tolerances", tolerances, "tolerances.toml")
    except ContractError as e:  # the message names the key: instructor input, loudly
        raise AssignmentError(str(e)) from None


def _check_threshold(op: str, value: Any, where: str) -> None:
    if op in ORDERING_OPS and not is_number(value):
        raise AssignmentError(f"{where}: op {op} needs a number, got {value!r}")
    if op == "in" and not isinstance(value, list):
        raise AssignmentError(f"{where}: op in needs a list, got {value!r}")


def _check_path(path: str, what: str) -> None:
    """A path into the core's sections of measurements.json must name one of their fields (a
    typo there would fail every student's part as "missing"); an assignment's sections are open."""
    if not knows_path("measurements", path):
        raise AssignmentError(
            f"{what} '{path}' is not a field of measurements.json (autograder/schemas/measurements.schema.json)"
        )


def _new_id(cid: str, seen: set[str]) -> None:
    if cid in seen:
        raise AssignmentError(f"rubric: duplicate id '{cid}'; every check and manual item needs its own")
    seen.add(cid)


def _where(rubric: Any, path: list[str | int]) -> str:
    """``rubric check 'c' part 'p'`` for a schema error's path (by id or name where it has one)."""
    words, node = ["rubric"], rubric
    for i, step in enumerate(path):
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(step, int) and i > 0:
            kind = {"checks": "check", "parts": "part", "manual": "manual item"}.get(str(path[i - 1]), str(path[i - 1]))
            label = node.get("id" if kind != "part" else "name") if isinstance(node, Mapping) else None
            words.append(f"{kind} '{label}'" if isinstance(label, str) and label.strip() else f"{kind} #{step + 1}")
    return " ".join(words)
