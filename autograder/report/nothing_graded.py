"""Short feedback when nothing of the student's work could be graded.

The untouched template, an unreadable file or a kernel that never started fail every check for
the same reason or two; listing ~35 "not measured" parts, each with its hint, buries that
reason. :func:`~autograder.attempt.nothing_to_grade` recognises the case from the grade alone: no
visible part passed apart from those about how the notebook ran (``execution.*``). :func:`short_lines` then
says why, what to do, and names the checks that could not be measured in one line (hidden
checks are counted, never named). Hidden checks never decide the case, so its form tells
nothing about them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..attempt import EXECUTION_PREFIX
from ..cell_numbers import where_of
from ..statuses import RunStatus
from . import escape
from . import markdown as md
from .execution_text import NO_CODE, STATUS_HEADLINES, error_text, execution_of, status_headline

MAX_REASONS = 3
REASON_CHARS, ERROR_CHARS = 110, 160  # the why stays one short paragraph (under ~650 characters)
TODO = (
    "Complete the notebook's tasks, then restart the kernel, run all cells top to bottom in a "
    "fresh folder and submit the notebook you ran. Once your work produces something, this "
    "feedback lists each check with what it measured and a hint."
)
TODO_GRADER = "This is not a judgment of your work: submit again, and ask course staff if it happens again."
TODO_UNREADABLE = (
    "Open the file in Jupyter, check that it is the assignment's notebook (.ipynb), "
    "run all cells, save, and submit it again."
)


class _Plain:
    """The same words for a terminal: cleaned and bounded, no markup language involved."""

    @staticmethod
    def text(s: Any, limit: int = md.MAX_TEXT_CHARS) -> str:
        return escape.plain(s, limit)

    @staticmethod
    def code(s: Any, limit: int = md.MAX_UNTRUSTED_CHARS) -> str:
        return escape.plain(s, limit)


def why(measurements: Mapping[str, Any] | None, grade: Mapping[str, Any], fmt: Any = md) -> str:
    """One or two sentences (Markdown, escaped; or plain with ``fmt=_Plain``): why nothing could be graded."""
    execution = execution_of(measurements) or {}
    status = execution.get("status")
    if execution.get("error") is not None:
        return f"The grader could not tell how your notebook ran: {fmt.text(execution['error'])}."
    if status not in (None, RunStatus.COMPLETED):
        headline = status_headline(execution) if status in STATUS_HEADLINES else "Your notebook did not run to the end"
        reason = execution.get("reason")
        return headline + (f": {fmt.text(reason)}" if reason else "") + "."
    if execution.get("cells_total") == 0:
        return fmt.text(NO_CODE)
    sentence = "Your notebook ran, but none of the checks found work of yours to measure"
    reasons = _reasons(grade)
    if reasons:
        sentence += " (" + "; ".join(fmt.text(r, REASON_CHARS) for r in reasons) + ")"
    first = execution.get("first_error")
    if isinstance(first, Mapping):
        sentence += f". The first error: {where_of(first)} raised {fmt.code(error_text(first), ERROR_CHARS)}"
    return sentence + "."


def short_lines(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None, fmt: Any = md) -> list[str]:
    """The paragraph: why, what to do, and the checks not measured, in one line."""
    execution = execution_of(measurements) or {}
    status = execution.get("status")
    todos: dict[str, str] = {
        RunStatus.UNREADABLE: TODO_UNREADABLE,
        RunStatus.SANDBOX_ERROR: TODO_GRADER,
        RunStatus.STARTUP_FAILED: TODO_GRADER,
    }
    todo = todos.get(str(status), TODO)
    return [why(measurements, grade, fmt), "", todo, "", not_measured_line(grade, fmt)]  # each a short paragraph


def short_text(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None) -> str:
    """The paragraph as plain text for a terminal (Markdown escapes undone, code spans unquoted)."""
    return "\n".join(short_lines(grade, measurements, _Plain))


def not_measured_line(grade: Mapping[str, Any], fmt: Any = md) -> str:
    shown = [c for c in md.visible_checks(grade) if not c.get("score")]
    hidden = md.hidden_checks(grade)
    names = ", ".join(fmt.text(c.get("title", c.get("id", "?")), 120) for c in shown)
    line = f"Checks with nothing to grade yet ({len(shown)}): {names}" if shown else "No visible check is at zero"
    if hidden:
        line += f"; and {len(hidden)} hidden {'check' if len(hidden) == 1 else 'checks'}"
    return line + "."


def short_check_markdown(check: Mapping[str, Any]) -> str:
    """A check's details in the short form: its status and the first reason, no hints."""
    lines = [
        f"**{'Passed' if check.get('passed') else 'Failed'}** · "
        f"{md.points(check.get('score', 0), check.get('max_score', 0))} points"
    ]
    failed = [p for p in check.get("parts", []) if not p.get("passed")]
    part = next((p for p in failed if p.get("reason")), failed[0] if failed else None)
    if md.cause_text(check):
        lines += ["", md.text(md.cause_text(check), 600)]
    elif part is not None and part.get("reason"):
        lines += ["", f"Not measured: {md.text(part['reason'], 300)}"]
    elif part is not None and part.get("message"):
        lines += ["", md.text(part["message"], 300)]
    return "\n".join(lines)


def _reasons(grade: Mapping[str, Any]) -> list[str]:
    """The distinct reasons visible parts were not measured, most frequent first."""
    counts: dict[str, int] = {}
    for check in md.visible_checks(grade):
        for part in check.get("parts", []):
            reason = part.get("reason")
            if isinstance(reason, str) and reason and not str(part.get("measure", "")).startswith(EXECUTION_PREFIX):
                counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts, key=lambda r: -counts[r])[:MAX_REASONS]
