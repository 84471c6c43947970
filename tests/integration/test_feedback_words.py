"""Every example's feedback reads like a teacher wrote it, for every lesson: no internal name of
the grader (a dotted measurement path, a tolerance key, a template placeholder, None or nan) and
no line longer than a paragraph, in everything results.json shows the student. The examples are
graded once per run (the ``lessons`` fixture), so this adds no grading of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.assignment import assignment_ids

pytestmark = [pytest.mark.slow, pytest.mark.kernel]

ROOT = Path(__file__).resolve().parents[2]
PARAGRAPH = 700  # characters: a line longer than this is a run-on line, not a sentence or two
INTERNAL = [
    (re.compile(r"\b(?:functions|models|reported|execution|parity|figure)\.[a-z_][\w.]*"), "a measurement path"),
    (re.compile(r"\b[a-z0-9]+(?:_[a-z0-9]+)+_(?:min|max|share)\b"), "a tolerance or measurement key"),
    (re.compile(r"\{[a-z_.]+\}"), "a template placeholder left unfilled"),
    (
        re.compile(r"(?<![\w'`])(?<!reported )(?:None|nan|NaN|inf)(?![\w'`])"),
        "None, nan or inf (not the student's own)",
    ),
]


def _student_text(results: dict) -> list[tuple[str, str]]:
    texts = [("results.json output", str(results.get("output") or ""))]
    texts += [
        (f"test '{t.get('name')}'", str(t.get("output") or ""))
        for t in results.get("tests", [])
        if t.get("output_format") != "html"  # the picture: an image, not words
    ]
    return texts


@pytest.mark.parametrize("lesson_id", assignment_ids(ROOT))
def test_feedback_has_no_internal_names_and_no_run_on_lines(lessons, lesson_id):
    problems = []
    for name, graded in sorted(lessons(ROOT, lesson_id).graded.items()):
        for where, text in _student_text(graded.results):
            if "graded by hand" in where:
                continue  # the student's own answer, shown back as they wrote it
            for line in text.splitlines():
                if len(line) > PARAGRAPH:
                    problems.append(f"{name}, {where}: a line of {len(line)} characters: {line[:120]}…")
                for pattern, what in INTERNAL:
                    found = pattern.search(line)
                    if found:
                        problems.append(f"{name}, {where}: {what} ({found.group(0)!r}) in: {line[:200]}")
    assert not problems, f"{lesson_id}: {len(problems)} problems:\n" + "\n".join(problems[:25])
