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
from .statuses import CellStatus

SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def check_cause(
    parts: Sequence[Mapping[str, Any]], requires: Sequence[str], measurements: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The root cause of a check's failed parts, or None (nothing to blame on a cell). ``{"name",
    "kind", "where", "cell", "code_cell", "line", "text"}``; ``kind``: ``syntax_error``,
    ``error``, ``timeout``, ``not_run`` or ``undefined`` (no cell defines it) for a function of
    the contract whose parts could not be measured; ``unwritten`` for a function whose body is
    still the starter's stub; ``file`` for a file that is missing while a cell that names it
    failed."""
    execution = measurements.get("execution") if isinstance(measurements, Mapping) else None
    if not isinstance(execution, Mapping):
        return None
    reasons = [str(p["reason"]) for p in parts if p.get("reason")]
    definitions = execution.get("definitions")
    definitions = definitions if isinstance(definitions, Mapping) else {}
    if reasons:
        said = " ".join(reasons + [seg for path in requires for seg in str(path).split(".")])
        for name, spot in definitions.items():
            if _names(said, str(name), after_dot=False):
                cause = _cause(str(name), spot, execution)
                if cause is not None:
                    return cause
    failed = [p for p in parts if not p.get("passed")]
    said = " ".join(str(p.get("measure", "")) + " " + str(p.get("reason") or "") for p in failed)
    for name, spot in definitions.items():
        if isinstance(spot, Mapping) and spot.get("stub") and _names(said, str(name)):
            return _unwritten(str(name), spot)
    return _missing_file(reasons, execution.get("files"))


def _names(said: str, name: str, *, after_dot: bool = True) -> bool:
    """Whether ``said`` names ``name`` as a word (``after_dot``: also as a segment of a dotted path)."""
    before = r"(?<!\w)" if after_dot else r"(?<![\w.])"
    return re.search(rf"{before}{re.escape(name)}(?!\w)", said) is not None


def _unwritten(name: str, spot: Mapping[str, Any]) -> dict[str, Any]:
    where = (
        spot.get("where") if isinstance(spot.get("where"), str) else cell_where(spot.get("code_cell"), spot.get("cell"))
    )
    return {
        "name": name,
        "kind": "unwritten",
        "where": where,
        "cell": spot.get("cell"),
        "code_cell": spot.get("code_cell"),
        "line": spot.get("line") if isinstance(spot.get("line"), int) else None,
        "text": f"{name} is not written yet: its body in {where} is still the starter's placeholder; write it, "
        "then run the notebook again",
    }


_MISSING = re.compile(r"([\w.\-/]{1,200}) is missing")


def _missing_file(reasons: Sequence[str], files: Any) -> dict[str, Any] | None:
    """A file a reason says is missing, while a cell that names it failed: that cell is the cause."""
    if not isinstance(files, Mapping) or not files:
        return None
    for reason in reasons:
        for path in _MISSING.findall(reason):
            spot = files.get(path) or next(
                (v for k, v in files.items() if str(k).rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1]), None
            )
            if not isinstance(spot, Mapping):
                continue
            where = (
                spot.get("where")
                if isinstance(spot.get("where"), str)
                else cell_where(spot.get("code_cell"), spot.get("cell"))
            )
            status, line = (
                spot.get("status"),
                spot.get("error_line") if isinstance(spot.get("error_line"), int) else None,
            )
            if status == CellStatus.ERROR:
                ename, evalue = str(spot.get("ename") or ""), str(spot.get("evalue") or "")
                how = "stopped" + (f" at line {line}" if line else "") + f" with {error_summary(ename, evalue)}"
            elif status == CellStatus.TIMEOUT:
                how = "ran out of time and was interrupted"
            elif status == CellStatus.NOT_RUN:
                how = "did not run"
            else:
                continue
            return {
                "name": path,
                "kind": "file",
                "where": where,
                "cell": spot.get("cell"),
                "code_cell": spot.get("code_cell"),
                "line": line,
                "text": f"{path} is missing: {where}, which names it, {how}",
            }
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
    if status == CellStatus.ERROR and ename in SYNTAX_ERRORS:
        kind = "syntax_error"
        what = (
            "has a syntax error"
            if ename == "SyntaxError"
            else f"has an {ename}"
            if ename[0] in "AEIOU"
            else f"has a {ename}"
        )
        text = f"{head} {what}" + (f" at line {line}" if line else "") + f": {without_place(evalue) or ename}"
    elif status == CellStatus.ERROR:
        kind = "error"
        text = f"{head} stopped" + (f" at line {line}" if line else "") + f" with {error_summary(ename, evalue)}"
    elif status == CellStatus.TIMEOUT:
        kind, text = "timeout", f"{head} ran out of time and was interrupted"
    elif status == CellStatus.NOT_RUN:
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
