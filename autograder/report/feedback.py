"""``feedback.md``: the grade as the student reads it, as a file.

The total, what to fix first (the root causes, by cell and line, in notebook order:
:mod:`autograder.root_cause`), how the notebook ran, then each visible check that lost points with
measured vs threshold and a hint for what failed, each passed check in one line (feedback.html
shows its parts on demand), the items graded by hand. With any check not visible, neither the total nor
anything of the hidden checks' results is shown, only their number. When nothing of the work
could be graded (:mod:`.nothing_graded`), one paragraph replaces the checks: why, what to do,
and the checks not measured in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import markdown as md
from .execution_text import execution_lines
from ..attempt import nothing_to_grade
from .nothing_graded import short_lines


def feedback_markdown(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None = None) -> str:
    title = _title(grade, measurements)
    blocks = [f"# Feedback · {md.text(title)}", "\n".join(md.score_lines(grade))]
    causes = md.cause_lines(grade, short=nothing_to_grade(grade))
    if causes:  # the root cause first, by cell and line; the checks below do not repeat it per part
        blocks.append("## Fix this first\n\n" + "\n".join(causes))
    if nothing_to_grade(grade):
        blocks.append("## Nothing to grade yet\n\n" + "\n".join(short_lines(grade, measurements)))
        execution = execution_lines(measurements)
        if execution:
            blocks.append("## Running your notebook\n\n" + "\n".join(execution))
    else:
        execution = execution_lines(measurements)
        if execution:
            blocks.append("## Running your notebook\n\n" + "\n".join(execution))
        shown = md.visible_checks(grade)
        failed = [c for c in shown if not c.get("passed")]
        if failed:  # what lost points first, in full; what passed below, one line each
            blocks.append("## " + CHECKS_TO_WORK_ON)
            for check in failed:
                blocks.append(
                    f"### {md.FAIL} {md.text(check.get('title', check.get('id', '?')))}\n\n" + md.check_markdown(check)
                )
        passed = [c for c in shown if c.get("passed")]
        if passed:
            blocks.append(f"## {PASSED}\n\n" + "\n".join(passed_line(c) for c in passed))
    manual = md.manual_lines(grade)
    if manual:
        blocks.append("## Graded by hand\n\n" + "\n".join(manual))
    return md.join_blocks(blocks)


CHECKS_TO_WORK_ON = "Checks to work on"
PASSED = "Passed"  # feedback.html shows each of these checks' parts on demand (feedback_html.py)


def passed_line(check: Mapping[str, Any]) -> str:
    """A passed check in one line: its title and points."""
    title = md.text(check.get("title", check.get("id", "?")))
    return f"- {md.PASS} **{title}** · {md.points(check.get('score', 0), check.get('max_score', 0))} points"


def failure_feedback_markdown(reason: str) -> str:
    """feedback.md for when no grade could be made; the same words as ``failure_results_json``."""
    return md.join_blocks(
        [
            "# Feedback",
            "**Your submission could not be graded.**",
            md.text(reason),
            "This is a score of 0 for now, not a judgment of your work: fix the problem above and "
            "resubmit, or ask your instructor if it persists.",
        ]
    )


def _title(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None) -> str:
    info = measurements.get("assignment") if isinstance(measurements, Mapping) else None
    if isinstance(info, Mapping) and info.get("title"):
        return str(info["title"])
    return str(grade.get("assignment") or "your submission")
