"""Why a check could not be measured, said once: the cell that should have defined its function.

A syntax error in the cell that defines ``quantize`` leaves every part of every check of
``quantize`` "not measured: the notebook does not define quantize at its top level". The
judge asks :func:`check_cause` once per check; when a part was not measured and its reason (or the
check's ``requires`` path) names a function of the contract, execution.json's ``definitions``
(the cell that defines it, found statically by :mod:`autograder.defining_cells`, and how that cell
ran) gives the root cause, in the student's numbering:

    quantize could not be checked: code cell 9 (cell 16 of the notebook), where it is defined,
    has a syntax error at line 4: expected ':'

Pure: reads only the measurements' ``execution`` section, so a rescore says the same. Works for
every assignment (the names are the ``[probe] functions`` of its assignment.toml).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .cell_numbers import cell_where, error_summary, without_place

SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def check_cause(
    parts: Sequence[Mapping[str, Any]], requires: Sequence[str], measurements: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The root cause of a check's unmeasured parts, or None (nothing unmeasured, or no
    function of the contract is to blame). ``{"name", "kind", "where", "cell", "code_cell",
    "line", "text"}``; ``kind``: ``syntax_error``, ``error``, ``timeout``, ``not_run`` or
    ``undefined`` (no cell defines it)."""
    reasons = [str(p["reason"]) for p in parts if p.get("reason")]
    execution = measurements.get("execution") if isinstance(measurements, Mapping) else None
    definitions = execution.get("definitions") if isinstance(execution, Mapping) else None
    if not reasons or not isinstance(execution, Mapping) or not isinstance(definitions, Mapping):
        return None
    said = " ".join(reasons + [seg for path in requires for seg in str(path).split(".")])
    for name, spot in definitions.items():
        if not re.search(rf"(?<![\w.]){re.escape(str(name))}(?!\w)", said):
            continue
        cause = _cause(str(name), spot, execution)
        if cause is not None:
            return cause
    return None


def _cause(name: str, spot: Any, execution: Mapping[str, Any]) -> dict[str, Any] | None:
    if spot is None:
        return {
            "name": name,
            "kind": "undefined",
            "where": None,
            "cell": None,
            "code_cell": None,
            "line": None,
            "text": f"{name} could not be checked: no code cell of the notebook defines it at its top level",
        }
    if not isinstance(spot, Mapping):
        return None
    status = spot.get("status")
    where = (
        spot.get("where") if isinstance(spot.get("where"), str) else cell_where(spot.get("code_cell"), spot.get("cell"))
    )
    head = f"{name} could not be checked: {where}, where it is defined,"
    line = spot.get("error_line") if isinstance(spot.get("error_line"), int) else None
    ename, evalue = str(spot.get("ename") or ""), str(spot.get("evalue") or "")
    if status == "error" and ename in SYNTAX_ERRORS:
        kind = "syntax_error"
        what = (
            "has a syntax error"
            if ename == "SyntaxError"
            else f"has an {ename}"
            if ename[0] in "AEIOU"
            else f"has a {ename}"
        )
        text = f"{head} {what}" + (f" at line {line}" if line else "") + f": {without_place(evalue) or ename}"
    elif status == "error":
        kind = "error"
        text = f"{head} stopped" + (f" at line {line}" if line else "") + f" with {error_summary(ename, evalue)}"
    elif status == "timeout":
        kind, text = "timeout", f"{head} ran out of time and was interrupted"
    elif status == "not_run":
        reason = execution.get("reason")
        kind = "not_run"
        text = f"{head} did not run" + (f": {reason}" if isinstance(reason, str) and reason else "")
    else:
        return None
    return {
        "name": name,
        "kind": kind,
        "where": where,
        "cell": spot.get("cell"),
        "code_cell": spot.get("code_cell"),
        "line": line,
        "text": text,
    }
