"""Are the numbers a notebook reports what it really measured? One check for every lesson.

A lesson's notebook fills a dict (``RESULTS``) with numbers it measured: sizes, accuracies,
latencies, node counts. :func:`check_reported` compares each with the grader's value of the same
quantity and returns the facts the rubric judges::

    {"present": bool, "problems": [str], "checked": int, "honest": int, "honest_share": float,
     "fields": {"<key>": {"reported": ..., "measured": ..., "ok": bool, "reason"?: str}}}

``present`` is true only when ``RESULTS`` was found *and* the grader could re-measure at least one
of its numbers on the notebook's own artifacts or functions: numbers typed into a notebook that
produced nothing earn nothing for being there.

The honesty rule: a reported number is judged against what the notebook's *own* functions compute
on its *own* artifacts (re-measured by the grader: the student's model run on the contract's public
data, the student's function's answer), never against the reference's. Honesty only: whether the
model or the function is right is another check's business, so a wrong model honestly reported
keeps its reported points and loses the others.

Keys may be dotted (``"fp32.size_bytes"`` is ``RESULTS["fp32"]["size_bytes"]``). Per key the
lesson gives ``(measured, tolerance)`` or an :class:`Expected`:

- ``tolerance``: a :class:`~autograder.measure.compare.Tolerance` (``|r − m| <= atol + rtol·|m|``),
  a float (relative, no absolute part; ``0``: exactly, for counts and sizes), or None (only the
  form is judged: a finite number, positive with ``positive=True``; for a latency, whose closeness
  a lesson judges apart against a calibrated window);
- ``measured`` None: the number cannot be re-measured (``why_not`` says why): not honest (a
  form-only number too: the grader checks only what it could measure itself).

What the notebook wrote reaches the student's feedback only as a number, or as its kind and size
(a string, a list of N items): ``RESULTS`` is the notebook's text channel, so its strings and
keys are never copied into a message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .compare import Tolerance

NAME = "RESULTS"


@dataclass(frozen=True)
class Hint:
    """An explanation appended to a mismatch, ``" (<text>)"``. When two or more problems carry the
    same hint, each says only ``" (<label>)"`` and ``"<label>: <text>"`` follows once at the end."""

    label: str
    text: str


@dataclass(frozen=True)
class Expected:
    """The grader's value of one reported number and how it is judged (see the module's docstring).

    ``alternatives``: values that explain a mismatch, each with its hint (the percentage of a
    share, the element-wise drift beside the contract's), tried in order with the same tolerance;
    ``hint`` explains any other mismatch. ``nonfinite_hint``: appended when a number is reported
    but is not finite. ``not_judged``: a reason that makes even an honest report earn nothing (it
    describes an artifact that is not what it promises).
    """

    measured: Any
    tolerance: Tolerance | float | None = 0.0
    why_not: str | None = None
    positive: bool = False
    unit: str = ""
    where: str = ""
    alternatives: tuple[tuple[float | None, Hint], ...] = ()
    hint: Hint | None = None
    nonfinite_hint: Hint | None = None
    not_judged: str | None = None


def is_number(v: Any) -> bool:
    """A real number a float can hold (a JSON integer of 400 digits is not; a bool is not)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


def kind(v: Any) -> str:
    """What a reported value is, without its content."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({'true' if v else 'false'})"
    if isinstance(v, int):
        return f"an integer of {len(str(abs(v))) if abs(v) < 10**4000 else 'over 4,000'} digits"
    if isinstance(v, str):
        return f"a string of {len(v):,} characters"
    if isinstance(v, (list, dict)):
        return f"a {'list' if isinstance(v, list) else 'dict'} of {len(v):,} items"
    return f"a {type(v).__name__}"


def plain(v: Any) -> Any:
    """What the notebook reported, as the grader repeats it: a number as it is (``"nan"``,
    ``"inf"`` for the non-finite), anything else only by its :func:`kind`."""
    if is_number(v):
        return v if math.isfinite(v) else str(v)
    return kind(v)


def close(reported: float, measured: float, tolerance: Tolerance | float) -> bool:
    """``|reported − measured| <= atol + rtol·|measured|`` (a float tolerance: relative only)."""
    rtol, atol = (tolerance.rtol, tolerance.atol) if isinstance(tolerance, Tolerance) else (float(tolerance), 0.0)
    return abs(reported - measured) <= atol + rtol * abs(measured)


def _number_text(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:.6g}"


def _with(msg: str, hint: Hint | None) -> str:
    return msg if hint is None else f"{msg} ({hint.text})"


def judge(reported: Any, e: Expected) -> str | None:
    """None when ``reported`` is an honest report of ``e.measured``, else what is wrong."""
    if not is_number(reported) or not math.isfinite(reported):
        return _with(
            f"reported {plain(reported)}, not a finite number", e.nonfinite_hint if is_number(reported) else None
        )
    unit = f" {e.unit}" if e.unit else ""
    if e.tolerance is None:
        if e.positive and reported <= 0:
            return f"reported {reported:g}{unit}, it must be positive"
        return None
    m = e.measured
    if not is_number(m) or not math.isfinite(m):
        return f"reported {_number_text(reported)}{unit}, but the grader's value{e.where} is not a finite number"
    if close(reported, m, e.tolerance):
        return None
    msg = f"reported {_number_text(reported)}{unit}, measured {_number_text(m)}{unit}{e.where}"
    for value, hint in e.alternatives:
        if value is not None and is_number(value) and math.isfinite(value) and close(reported, value, e.tolerance):
            return _with(msg, hint)
    return _with(msg, e.hint)


def _hints_once(problems: list[str], hints: list[Hint]) -> list[str]:
    """A hint carried by two or more problems is said once, before them (see :class:`Hint`): a
    message shows only the first few problems (grade_text.LIST_ITEMS), and the explanation of a
    label must not be the one left out."""
    said: list[str] = []
    for hint in dict.fromkeys(hints):
        tail = f" ({hint.text})"
        if sum(p.endswith(tail) for p in problems) < 2:
            continue
        problems = [p[: -len(tail)] + f" ({hint.label})" if p.endswith(tail) else p for p in problems]
        said.append(f"{hint.label}: {hint.text}")
    return said + problems


def _lookup(reported: Mapping, key: str, name: str, problems: list[str]) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted key; a missing or non-dict container is one problem."""
    node: Any = reported
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        node = node.get(part)
        if not isinstance(node, Mapping):
            where = name + "".join(f"['{p}']" for p in parts[: depth + 1])
            problem = f"{where} is {'missing' if node is None else 'not a dict'}"
            if problem not in problems:
                problems.append(problem)
            return False, None
    return (parts[-1] in node), node.get(parts[-1])


def check_reported(
    reported: Any,
    expected: Mapping[str, Expected | tuple[Any, Tolerance | float | None]],
    *,
    missing_reason: str | None = None,
    name: str = NAME,
) -> dict[str, Any]:
    """The facts of a notebook's reported numbers (see the module's docstring).

    ``reported``: what the notebook left in ``name`` (None: nothing was found, ``missing_reason``
    says why). ``expected``: per (dotted) key, ``(measured, tolerance)`` or an :class:`Expected`.
    """
    if reported is None:
        return {
            "present": False,
            "problems": [missing_reason or f"{name} was not found"],
            "checked": 0,
            "honest": 0,
            "honest_share": 0.0,
            "fields": {},
        }
    specs = {key: e if isinstance(e, Expected) else Expected(*e) for key, e in expected.items()}
    top = list(dict.fromkeys(key.split(".")[0] for key in specs))
    problems: list[str] = []
    if not isinstance(reported, Mapping):
        problems.append(f"{name} is {kind(reported)}, expected a dict with the keys {', '.join(top)}")
        reported = {}
    extra = [k for k in reported if k not in top]
    if extra:  # not named: a key is text the notebook chose
        problems.append(f"{name} has {len(extra):,} key(s) besides {', '.join(top)}; they are ignored")
    fields: dict[str, Any] = {}
    hints: list[Hint] = []
    for key, e in specs.items():
        found, value = _lookup(reported, key, name, problems)
        record: dict[str, Any] = {"reported": plain(value), "measured": e.measured}
        reason: str | None
        if not found:
            reason = f"missing from {name}"
        elif e.measured is None:
            reason = f"cannot be re-measured: {e.why_not or 'not measured'}"
        else:
            reason = judge(value, e)
        if reason is None and e.not_judged:
            reason = e.not_judged
        record["ok"] = reason is None
        if reason:
            record["reason"] = reason
            problems.append(f"{key}: {reason}")
        fields[key] = record
        hints += [h for h in (e.hint, e.nonfinite_hint, *(h for _, h in e.alternatives)) if h is not None]
    honest = sum(1 for r in fields.values() if r["ok"])
    # Present means backed: a RESULTS beside which the grader measured nothing of the notebook's own
    # (no artifact, no function's answer) is numbers typed in, and earns nothing for being there.
    backed = any(e.measured is not None for e in specs.values())
    if not backed:
        problems.insert(0, f"nothing the notebook produced backs the numbers of {name}")
    return {
        "present": backed,
        "problems": _hints_once(problems, hints),
        "checked": len(fields),
        "honest": honest,
        "honest_share": honest / len(fields) if fields else 0.0,
        "fields": fields,
    }
