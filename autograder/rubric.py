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

``threshold(part, tolerances)`` is the value a part is judged against, for the judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .contracts import ContractError, first_problem, knows_path, validate
from .dotted import is_number, lookup
from .errors import AssignmentError
from .grade_text import TEMPLATE_FIELDS, placeholders, template_problem

OPS = ("==", "!=", "<=", "<", ">=", ">", "in", "is_true", "is_false")
ORDERING_OPS = ("<=", "<", ">=", ">")
NO_THRESHOLD_OPS = ("is_true", "is_false")
_POINTS_EPS = 1e-9
_VALID: set[str] = set()  # JSON texts of (rubric, tolerances) pairs found valid
_VALID_KEPT = 16


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
    if part["op"] in NO_THRESHOLD_OPS:
        return part["op"] == "is_true"
    if "value" in part:
        return part["value"]
    key = part["tolerance"]
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
