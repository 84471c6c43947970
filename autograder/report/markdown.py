"""Markdown pieces shared by results.json (Gradescope, ``output_format: "md"``) and feedback.md.

Everything a student sees is built here, so the rules live in one place:

- a check's details (per part ✓/✗, measured vs threshold, message, hint for failed parts) are
  rendered only for the check they belong to; whether that check is shown is the caller's call;
- for the student-wide summary, a check whose visibility is not ``visible`` (``hidden``,
  ``after_due_date``, ``after_published``) counts as hidden: it is counted, never named;
- every string goes through :mod:`autograder.report.escape` (by construction, not by caller's
  care): free text with :func:`text` (every Markdown and HTML character escaped), values with
  :func:`code` (a code span whose fence no backtick inside can close); both are cleaned first
  (one line, bounded, no lone surrogates, control characters or grader paths), so nothing a
  notebook wrote renders as a link, an image, emphasis, a heading, a table or HTML.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..grade_text import OP_TEXT
from ..statuses import Visibility
from . import escape

PASS, FAIL = "✓", "✗"
MAX_UNTRUSTED_CHARS = 300
MAX_TEXT_CHARS = 2000  # a hint or a message (filled with values) on one line


# ── escaping ──────────────────────────────────────────────────────────────────────────────────


def text(s: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """Free text on one line, shown literally: every Markdown and HTML character is escaped (the
    rubric's messages are filled with measured values a notebook controls, so none is trusted)."""
    return escape.markdown(s, limit)


def code(s: Any, limit: int = MAX_UNTRUSTED_CHARS) -> str:
    """``s`` as an inline code span: nothing inside renders, whatever the student put there."""
    return escape.code_span(s, limit)


def points(score: float, max_score: float) -> str:
    return f"{_num(score)} / {_num(max_score)}"


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


# ── checks ────────────────────────────────────────────────────────────────────────────────────


def is_hidden(check: Mapping[str, Any]) -> bool:
    return check.get("visibility", Visibility.VISIBLE) != Visibility.VISIBLE


def visible_checks(grade: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in grade.get("checks", []) if not is_hidden(c)]


def hidden_checks(grade: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in grade.get("checks", []) if is_hidden(c)]


def part_line(part: Mapping[str, Any]) -> str:
    """One part: ✓/✗, name, points, measured vs threshold; message and hint below when it failed."""
    mark = PASS if part.get("passed") else FAIL
    head = f"- {mark} **{text(part.get('name', '?'))}** ({points(part.get('score', 0), part.get('points', 0))})"
    if part.get("reason"):
        lines = [f"{head}: not measured: {text(part['reason'])}"]
    else:
        lines = [
            f"{head}: measured {code(part.get('measured_text', '?'))}, "
            f"expected {_op_text(part)} {code(part.get('threshold_text', '?'))}"
        ]
        if not part.get("passed") and part.get("message"):
            lines.append(f"  - {text(part['message'])}")
    if not part.get("passed") and part.get("hint"):
        lines.append(f"  - **Hint:** {text(part['hint'])}")
    return "\n".join(lines)


def _op_text(part: Mapping[str, Any]) -> str:
    return OP_TEXT.get(str(part.get("op")), str(part.get("op", "")))


def check_markdown(check: Mapping[str, Any]) -> str:
    """A check's details: a status line, the root cause when parts could not be measured
    (:func:`cause_text`), then one line per measured part and one per reason parts were not
    measured (no hint: nothing was measured to hint at)."""
    status = "Passed" if check.get("passed") else "Failed"
    lines = [f"**{status}** · {points(check.get('score', 0), check.get('max_score', 0))} points"]
    cause = cause_text(check)
    if cause:
        lines += ["", f"**{text(cause)}**"]
    if check.get("description"):
        lines += ["", text(check["description"])]
    parts = list(check.get("parts", []))
    kind = check["cause"].get("kind") if isinstance(check.get("cause"), Mapping) else None
    if kind == "unwritten":  # every part failed on the stub: one line, not one hintless line per part
        failed = [p for p in parts if not p.get("passed")]
        lines += [""] + [part_line(p) for p in parts if p.get("passed")]
        if failed:
            got, total = sum(p.get("score", 0) for p in failed), sum(p.get("points", 0) for p in failed)
            names = ", ".join(text(p.get("name", "?"), 120) for p in failed)
            lines.append(f"- {FAIL} **{len(failed)} parts not written yet** ({points(got, total)})\n  - {names}")
        return "\n".join(lines)
    unmeasured: dict[str, list[Mapping[str, Any]]] = {}
    for p in parts:
        if p.get("reason"):  # with a cause, said once above: its parts' own reasons would only echo it
            unmeasured.setdefault(CAUSED if cause else str(p["reason"]), []).append(p)
    if cause and CAUSED in unmeasured:
        group = unmeasured.pop(CAUSED)
        lines += ["", _unmeasured_line(CAUSED, group)]
        lines += [part_line(p) for p in parts if not p.get("reason")]
        lines += [_unmeasured_line(r, g) if len(g) > 1 else part_line(g[0]) for r, g in unmeasured.items()]
        return "\n".join(lines)
    lines += [""] + [part_line(p) for p in parts if not p.get("reason")]
    lines += [
        part_line(group[0]) if len(group) == 1 else _unmeasured_line(reason, group)
        for reason, group in unmeasured.items()
    ]
    return "\n".join(lines)


CAUSED = "for the cause above"


def cause_text(check: Mapping[str, Any]) -> str:
    """The sentence naming why a check could not be measured (grade.json's ``cause``), or ""."""
    cause = check.get("cause")
    return str(cause["text"]) if isinstance(cause, Mapping) and cause.get("text") else ""


def cause_lines(grade: Mapping[str, Any], *, short: bool = False) -> list[str]:
    """The root causes of the visible checks, each once, in notebook order, for the top of the
    feedback; ``short`` (nothing of the work could be graded): only a cell that failed, as the
    short paragraph already says which functions no cell defines."""
    grouped: dict[str, list[str]] = {}  # one line per cell and problem: "quantize and dequantize could not …"
    kinds: dict[str, str] = {}
    order: dict[str, tuple[int, int]] = {}
    for position, check in enumerate(visible_checks(grade)):
        said, cause = cause_text(check), check.get("cause")
        name = str(cause.get("name") or "") if isinstance(cause, Mapping) else ""
        if not said or (short and isinstance(cause, Mapping) and cause.get("kind") == "undefined"):
            continue
        rest = said[len(name) :] if name and said.startswith(name) else said
        names = grouped.setdefault(rest, [])
        if name not in names:
            names.append(name)
        kinds.setdefault(rest, str(cause.get("kind")) if isinstance(cause, Mapping) else "")
        cell = cause.get("cell") if isinstance(cause, Mapping) else None
        order.setdefault(rest, (cell if isinstance(cell, int) else 1 << 30, position))
    lines: list[str] = []
    follows: dict[int, list[str]] = {}  # line → the names whose cause only repeats its failure
    said_names: list[tuple[int, str]] = []
    for rest in sorted(grouped, key=lambda r: order[r]):  # the first cell that failed comes first
        names = grouped[rest]
        earlier = next((i for i, n in said_names if n and n in rest), None)
        if earlier is not None and kinds[rest] == "file":  # its cell failed on an earlier missing file
            follows.setdefault(earlier, []).extend(names)
            said_names += [(earlier, n) for n in names]
            continue
        said_names += [(len(lines), n) for n in names]
        if len(names) > 1:
            for one, many in _PLURALS.get(kinds[rest], ()):
                rest = rest.replace(one, many, 1)
            lines.append(names_and(names) + rest)
        else:
            lines.append(names[0] + rest)
    for i, names in follows.items():
        verb = "is" if len(names) == 1 else "are"
        lines[i] += f"; so {names_and(names)}, made by the cells that need it, {verb} missing too"
    return [f"- {text(line)}" for line in lines]


def names_and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# how a cause's sentence reads for several names at once, by its kind
_DEFINED_PLURALS = ((" where it is defined,", " where they are defined,"),)
_PLURALS: dict[str, tuple[tuple[str, str], ...]] = {
    "syntax_error": _DEFINED_PLURALS,
    "error": _DEFINED_PLURALS,
    "timeout": _DEFINED_PLURALS,
    "not_run": _DEFINED_PLURALS,
    "undefined": ((" defines it at its top level", " defines them at its top level"),),
    "unwritten": (
        (" is not written yet: its body", " are not written yet: their bodies"),
        (" is still the starter's placeholder; write it,", " are still the starter's placeholders; write them,"),
    ),
    "file": ((" is missing:", " are missing:"), ("which names it,", "which names them,")),
}


def _unmeasured_line(reason: str, group: list[Mapping[str, Any]]) -> str:
    got = sum(p.get("score", 0) for p in group)
    total = sum(p.get("points", 0) for p in group)
    names = ", ".join(text(p.get("name", "?"), 120) for p in group)
    many = "parts" if len(group) > 1 else "part"
    return f"- {FAIL} **{len(group)} {many} not measured** ({points(got, total)}): {text(reason)}\n  - {names}"


def score_lines(grade: Mapping[str, Any]) -> list[str]:
    """The total and the visible checks' tally; with any check not visible, neither the total
    nor anything of the hidden checks' results (Gradescope hides the total then too)."""
    shown, hidden = visible_checks(grade), hidden_checks(grade)
    lines = [] if hidden else [f"**Score: {points(grade.get('score', 0), grade.get('max_score', 0))}**", ""]
    if shown:
        passed = sum(1 for c in shown if c.get("passed"))
        lines.append(
            f"- Visible checks: {passed} of {len(shown)} passed "
            f"({points(sum(c.get('score', 0) for c in shown), sum(c.get('max_score', 0) for c in shown))} points)."
        )
    if hidden:
        lines.append(f"- {hidden_note(hidden)}")
    return lines


def hidden_note(hidden: list[Mapping[str, Any]]) -> str:
    """What the student may know of hidden checks: that they exist and how many."""
    n = len(hidden)
    return (
        f"{n} more {'check is' if n == 1 else 'checks are'} not shown here: "
        f"{'it uses' if n == 1 else 'they use'} inputs and thresholds you don't see. "
        f"{'Its result' if n == 1 else 'Their results'} and your total score are not shown until "
        "course staff release them."
    )


def manual_lines(grade: Mapping[str, Any]) -> list[str]:
    items = grade.get("manual") or []
    lines = []
    for item in items:
        pts = item.get("points", 0)
        suffix = f" ({_num(pts)} points)" if pts else ""
        lines.append(
            f"- {text(item.get('title', item.get('id', '?')))}{suffix}: graded by hand, not part of this score."
        )
    return lines


def join_blocks(blocks: Iterable[str]) -> str:
    """Paragraphs separated by one blank line, no trailing spaces, ``\\n`` line endings."""
    return "\n\n".join(b.strip("\n") for b in blocks if b and b.strip()) + "\n"
