"""``feedback.md``: the grade as the student reads it, as a file.

The total, then each visible check with measured vs threshold and a hint for what failed, the
number of hidden checks that failed (never which, and nothing of their inputs, thresholds or the
reference), the items graded by hand, and how the notebook ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import markdown as md


def feedback_markdown(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None = None) -> str:
    title = _title(grade, measurements)
    blocks = [f"# Feedback · {md.text(title)}", "\n".join(md.score_lines(grade))]
    execution = md.execution_lines(measurements)
    if execution:
        blocks.append("## Running your notebook\n\n" + "\n".join(execution))
    shown = md.visible_checks(grade)
    if shown:
        blocks.append("## Checks")
        for check in shown:
            mark = md.PASS if check.get("passed") else md.FAIL
            blocks.append(f"### {mark} {md.text(check.get('title', check.get('id', '?')))}\n\n" + md.check_markdown(check))
    hidden = md.hidden_checks(grade)
    if hidden:
        failed = sum(1 for c in hidden if not c.get("passed"))
        blocks.append("## Hidden checks\n\n"
                      f"{failed} of {len(hidden)} hidden checks failed. They run on the grader's own "
                      "inputs and thresholds, which stay hidden so that passing them means the work is "
                      "right, not tuned to the test; which ones failed is not shown.")
    manual = md.manual_lines(grade)
    if manual:
        blocks.append("## Graded by hand\n\n" + "\n".join(manual))
    return md.join_blocks(blocks)


def failure_feedback_markdown(reason: str) -> str:
    """feedback.md for when no grade could be made; the same words as ``failure_results_json``."""
    return md.join_blocks([
        "# Feedback",
        "**Your submission could not be graded.**",
        md.text(reason),
        "This is a score of 0 for now, not a judgment of your work: fix the problem above and "
        "resubmit, or ask your instructor if it persists.",
    ])


def _title(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None) -> str:
    info = measurements.get("assignment") if isinstance(measurements, Mapping) else None
    if isinstance(info, Mapping) and info.get("title"):
        return str(info["title"])
    return str(grade.get("assignment") or "your submission")
