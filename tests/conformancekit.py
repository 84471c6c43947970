"""The conformance checks (:mod:`autograder.authoring.conformance`, what ``autograder
check-assignment ID`` runs) as pytest parameters, in the manner of scikit-learn's
``parametrize_with_checks``: one test per lesson and check (tests/conformance/test_conformance.py),
so ``-k 05`` or ``-k tolerances`` selects. The session fixture ``lessons`` (tests/conftest.py) makes
one :class:`Lesson` per root and id, whose examples every xdist worker of the run shares, so a
lesson's own end-to-end tests read the same grades.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.assignment import assignment_ids
from autograder.authoring.conformance import (
    CHECKS,
    TABLE_FILE,
    UNTOUCHED_MAX_SHARE,
    Check,
    ConformanceFailure,
    Graded,
    Lesson,
    failures,
    problems,
    read_graded,
)

__all__ = [
    "CHECKS",
    "TABLE_FILE",
    "UNTOUCHED_MAX_SHARE",
    "Check",
    "ConformanceFailure",
    "Graded",
    "Lesson",
    "failures",
    "parametrize_with_checks",
    "problems",
    "read_graded",
]


def parametrize_with_checks(root: Path) -> pytest.MarkDecorator:
    """``@parametrize_with_checks(ROOT)`` on ``test(lesson_id, conformance_check)``: one test per
    lesson and check, id ``<lesson>-<check>``; the checks that grade carry the ``kernel`` and
    ``slow`` markers (tests/needs.py)."""
    params = []
    for lesson_id in assignment_ids(root):
        for c in CHECKS:
            marks = [pytest.mark.kernel, pytest.mark.slow] if c.graded else []
            params.append(pytest.param(lesson_id, c, marks=marks, id=f"{lesson_id}-{c.short}"))
    return pytest.mark.parametrize("lesson_id, conformance_check", params)
