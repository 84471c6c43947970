"""Gradescope's ``results.json`` from a grade, and the zero-score result when grading failed.

Format: Gradescope's autograder specification (docs/specs.md of gradescope/autograder_samples;
autograder/schemas/gradescope_results.schema.json holds it as a JSON Schema). One test per check:
``name`` = title, ``tags`` = [check id], ``score``, ``max_score``, ``status``, ``visibility``,
``number``, Markdown ``output``. Top level: ``score`` (it overrides the tests' sum), a Markdown
``output`` that counts hidden checks without naming them (and, with any, shows neither the total
nor their results: Gradescope hides the total while a test is hidden), ``execution_time`` in whole seconds and
``extra_data`` for instructors (versions, isolation layers, execution status, per-check scores).

Everything returned is plain JSON: numpy values become numbers and lists, and non-finite floats
become the strings "nan", "inf", "-inf" (Gradescope's parser rejects bare NaN).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..statuses import TestStatus, Visibility
from ..safe_files import json_safe
from . import markdown as md
from .execution_text import execution_lines
from ..attempt import nothing_to_grade
from .nothing_graded import short_check_markdown, short_lines
from .figure import no_picture_to_show
from .gradescope_figure import figure_tests

MAX_TEST_OUTPUT_CHARS = 20_000
MAX_OUTPUT_CHARS = 50_000
FAILURE_TAG = "grading_failed"
_EXECUTION_KEYS = (
    "status",
    "reason",
    "cells_total",
    "cells_run",
    "cells_errored",
    "first_error",
    "probe",
    "duration_s",
    "output_truncated",
    "completed",
)


def results_json(
    grade: Mapping[str, Any],
    measurements: Mapping[str, Any] | None = None,
    *,
    execution_time: float | None = None,
    extra: Mapping[str, Any] | None = None,
    figure_cache: Path | None = None,
) -> dict[str, Any]:
    """The Gradescope results for ``grade`` (grade.json); ``measurements`` adds execution notes
    (and the picture of a ``figure`` section, kept in ``figure_cache``: gradescope_figure.py)."""
    checks = list(grade.get("checks", []))
    short = nothing_to_grade(grade)
    result: dict[str, Any] = {
        "score": _number(grade.get("score", 0.0)),
        "output": _cap(summary_markdown(grade, measurements), MAX_OUTPUT_CHARS),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "stdout_visibility": Visibility.HIDDEN,
        "tests": [_test(check, number, short) for number, check in enumerate(checks, start=1)],
        "extra_data": _extra_data(grade, measurements, extra),
    }
    if not no_picture_to_show(grade, measurements):  # the picture, or why there is none
        result["tests"] += figure_tests(measurements, len(checks) + 1, figure_cache)
    if execution_time is not None:
        result["execution_time"] = _seconds(execution_time)
    return json_safe(result)


def summary_markdown(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None) -> str:
    """The top-level output: score, visible tally, hidden count, how the notebook ran, manual items;
    when nothing could be graded, the short paragraph first."""
    blocks = ["\n".join(md.score_lines(grade))]
    causes = md.cause_lines(grade, short=nothing_to_grade(grade))
    if causes:
        blocks.append("**Fix this first**\n\n" + "\n".join(causes))
    if nothing_to_grade(grade):
        blocks.append("**Nothing to grade yet**\n\n" + "\n".join(short_lines(grade, measurements)))
    execution = execution_lines(measurements)
    if execution:
        blocks.append("**Running your notebook**\n\n" + "\n".join(execution))
    manual = md.manual_lines(grade)
    if manual:
        blocks.append("**Graded by hand**\n\n" + "\n".join(manual))
    return md.join_blocks(blocks)


def failure_results_json(
    reason: str, *, extra: Mapping[str, Any] | None = None, execution_time: float | None = None
) -> dict[str, Any]:
    """A valid zero-score result for when no grade could be made (unreadable notebook, grader bug).

    ``reason`` is shown to the student: say what went wrong in their words, never a traceback.
    """
    output = md.join_blocks(
        [
            "**Your submission could not be graded.**",
            md.text(reason),
            "This is a score of 0 for now, not a judgment of your work: fix the problem above and "
            "resubmit, or ask your instructor if it persists.",
        ]
    )
    result: dict[str, Any] = {
        "score": 0.0,
        "output": output,
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "stdout_visibility": Visibility.HIDDEN,
        "tests": [
            {
                "name": "Grading",
                "name_format": "text",
                "number": "1",
                "tags": [FAILURE_TAG],
                "score": 0.0,
                "max_score": 0.0,
                "status": TestStatus.FAILED,
                "visibility": Visibility.VISIBLE,
                "output": md.text(reason),
                "output_format": "md",
            }
        ],
        "extra_data": {"autograder": __version__, "failure": str(reason), **dict(extra or {})},
    }
    if execution_time is not None:
        result["execution_time"] = _seconds(execution_time)
    return json_safe(result)


# ── pieces ────────────────────────────────────────────────────────────────────────────────────


def _test(check: Mapping[str, Any], number: int, short: bool = False) -> dict[str, Any]:
    return {
        "name": str(check.get("title", check.get("id", f"check {number}"))),
        "name_format": "text",
        "number": str(number),
        "tags": [str(check["id"])],
        "score": _number(check.get("score", 0.0)),
        "max_score": _number(check.get("max_score", 0.0)),
        "status": TestStatus.PASSED if check.get("passed") else TestStatus.FAILED,
        "visibility": check.get("visibility", Visibility.VISIBLE),
        "output": _cap(short_check_markdown(check) if short else md.check_markdown(check), MAX_TEST_OUTPUT_CHARS),
        "output_format": "md",
    }


def _extra_data(
    grade: Mapping[str, Any], measurements: Mapping[str, Any] | None, extra: Mapping[str, Any] | None
) -> dict[str, Any]:
    m = measurements if isinstance(measurements, Mapping) else {}
    execution = found if isinstance(found := m.get("execution"), Mapping) else {}
    data: dict[str, Any] = {
        "autograder": __version__,
        "assignment": m.get("assignment", grade.get("assignment")),
        "environment": m.get("environment"),
        "execution": (
            {"error": execution["error"]}
            if execution.get("error") is not None
            else {k: execution[k] for k in _EXECUTION_KEYS if k in execution}
        ),
        "isolation": execution.get("isolation"),
        "checks": {
            str(c["id"]): {"score": c.get("score"), "max_score": c.get("max_score"), "passed": c.get("passed")}
            for c in grade.get("checks", [])
        },
    }
    data.update(extra or {})
    return data


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0


def _seconds(t: float) -> int:
    return max(0, int(round(t))) if isinstance(t, (int, float)) and math.isfinite(t) else 0


def _cap(s: str, limit: int) -> str:
    if len(s) <= limit:
        return s
    return s[: limit - 60].rstrip() + "\n\n… (output cut: it was longer than the grader keeps)\n"
