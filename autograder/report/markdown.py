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

from ..judge import OP_TEXT
from . import escape

PASS, FAIL = "✓", "✗"
MAX_UNTRUSTED_CHARS = 300
MAX_TEXT_CHARS = 2000      # a hint or a message (filled with values) on one line
CELL_INDEX_BASE = 0  # execution.json counts cells from 0 (nbformat's list index); students count from 1

_STATUS_HEADLINES = {
    "completed": "Your notebook ran to the end",
    "timeout": "Your notebook was stopped because it ran out of time",
    "kernel_died": "Your notebook's kernel died (often: it ran out of memory or crashed)",
    "startup_failed": "Your notebook's kernel could not start",
    "unreadable": "Your notebook could not be read",
    "sandbox_error": "The grader could not run your notebook (a problem on our side, not in your work)",
}


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
    return check.get("visibility", "visible") != "visible"


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
        lines = [f"{head}: measured {code(part.get('measured_text', '?'))}, "
                 f"expected {_op_text(part)} {code(part.get('threshold_text', '?'))}"]
        if not part.get("passed") and part.get("message"):
            lines.append(f"  - {text(part['message'])}")
    if not part.get("passed") and part.get("hint"):
        lines.append(f"  - **Hint:** {text(part['hint'])}")
    return "\n".join(lines)


def _op_text(part: Mapping[str, Any]) -> str:
    return OP_TEXT.get(str(part.get("op")), str(part.get("op", "")))


def check_markdown(check: Mapping[str, Any]) -> str:
    """A check's details: a status line, then one line per part."""
    status = "Passed" if check.get("passed") else "Failed"
    lines = [f"**{status}** · {points(check.get('score', 0), check.get('max_score', 0))} points"]
    if check.get("description"):
        lines += ["", text(check["description"])]
    lines += [""] + [part_line(p) for p in check.get("parts", [])]
    return "\n".join(lines)


def score_lines(grade: Mapping[str, Any]) -> list[str]:
    """The total, the visible checks' tally and how many hidden checks failed (never which)."""
    lines = [f"**Score: {points(grade.get('score', 0), grade.get('max_score', 0))}**", ""]
    shown, hidden = visible_checks(grade), hidden_checks(grade)
    if shown:
        passed = sum(1 for c in shown if c.get("passed"))
        lines.append(f"- Visible checks: {passed} of {len(shown)} passed "
                     f"({points(sum(c.get('score', 0) for c in shown), sum(c.get('max_score', 0) for c in shown))} points).")
    if hidden:
        failed = sum(1 for c in hidden if not c.get("passed"))
        noun = "check" if len(hidden) == 1 else "checks"
        lines.append(f"- Hidden {noun}: {failed} of {len(hidden)} failed. Hidden checks use inputs and "
                     "thresholds you don't see, so they are counted here but not named.")
    return lines


def manual_lines(grade: Mapping[str, Any]) -> list[str]:
    items = grade.get("manual") or []
    lines = []
    for item in items:
        pts = item.get("points", 0)
        suffix = f" ({_num(pts)} points)" if pts else ""
        lines.append(f"- {text(item.get('title', item.get('id', '?')))}{suffix}: graded by hand, not part of this score.")
    return lines


# ── execution ─────────────────────────────────────────────────────────────────────────────────

def execution_lines(measurements: Mapping[str, Any] | None) -> list[str]:
    """What happened when the notebook ran, for the student: status, first error, truncation."""
    execution = (measurements or {}).get("execution") if isinstance(measurements, Mapping) else None
    if not isinstance(execution, Mapping):
        return []
    if execution.get("error") is not None:
        return [f"- The grader could not tell how your notebook ran: {text(execution['error'])}"]
    status = str(execution.get("status", "unknown"))
    headline = _STATUS_HEADLINES.get(status, f"Execution status: {text(status)}")
    details = []
    if execution.get("reason") and status != "completed":
        details.append(code(execution["reason"]))
    if isinstance(execution.get("duration_s"), (int, float)):
        details.append(f"{execution['duration_s']:.1f} s")
    lines = [f"- {headline}" + (f" ({', '.join(details)})" if details else "") + "."]
    run, total = execution.get("cells_run"), execution.get("cells_total")
    if status != "completed" and isinstance(run, int) and isinstance(total, int):
        lines.append(f"- {run} of {total} cells ran; checks that need the rest got no measurement.")
    lines += _first_error_lines(execution)
    if execution.get("probe") == "failed" and status == "completed":
        lines.append("- After your notebook ran, the grader could not call your functions in it.")
    if execution.get("output_truncated"):
        lines.append("- Your notebook printed more output than the grader keeps; the rest was cut.")
    return lines


def _first_error_lines(execution: Mapping[str, Any]) -> list[str]:
    first = execution.get("first_error")
    if not isinstance(first, Mapping):
        return []
    cell, total = first.get("cell"), execution.get("cells_total")
    where = f"cell {cell - CELL_INDEX_BASE + 1}" if isinstance(cell, int) else "a cell"
    if isinstance(cell, int) and isinstance(total, int):
        where += f" of {total} (counting markdown cells too)"
    error = code(f"{first.get('ename', 'Error')}: {first.get('evalue', '')}".rstrip(": "))
    line = f"- {where[0].upper()}{where[1:]} raised {error}"
    errored = execution.get("cells_errored")
    if isinstance(errored, int) and errored > 1:
        line += f"; {errored} cells raised errors in all"
    if execution.get("status") == "completed":
        line += ". The cells after it still ran, so later checks could still earn points"
    return [line + "."]


def join_blocks(blocks: Iterable[str]) -> str:
    """Paragraphs separated by one blank line, no trailing spaces, ``\\n`` line endings."""
    return "\n\n".join(b.strip("\n") for b in blocks if b and b.strip()) + "\n"
