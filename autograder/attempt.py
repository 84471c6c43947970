"""Whether a grade holds any of the student's work: the one rule that an untouched or empty
notebook earns nothing, and that its feedback is the short form.

A grade shows work when some visible part about the work itself passed, a part whose measure is
not about how the notebook ran (``execution.*``). Hidden checks never decide it, so neither the
score nor the feedback's form tells anything about them. The judge applies it (how the notebook
ran earns points only beside graded work: the starter as handed out, run top to bottom, scores
0), and every report and the gradebook read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .statuses import Visibility

EXECUTION_PREFIX = "execution."
NO_WORK_MESSAGE = (
    "how the notebook ran earns points only beside work of yours that a check could grade; "
    "none could be graded this time"
)


def is_hidden(check: Mapping[str, Any]) -> bool:
    return check.get("visibility", Visibility.VISIBLE) != Visibility.VISIBLE


def is_about_running(part: Mapping[str, Any]) -> bool:
    """A part that measures how the notebook ran, not the work it holds."""
    return str(part.get("measure", "")).startswith(EXECUTION_PREFIX)


def nothing_to_grade(grade: Mapping[str, Any]) -> bool:
    """True when no visible part about the work itself passed (and there is such a part)."""
    return no_work_passed(grade.get("checks", []))


def no_work_passed(checks: Iterable[Mapping[str, Any]]) -> bool:
    work = [p for c in checks if not is_hidden(c) for p in c.get("parts", []) if not is_about_running(p)]
    return bool(work) and not any(p.get("passed") for p in work)
