"""A hand-graded question's answer in a student's notebook: the cells of otter's
``<!-- BEGIN QUESTION -->`` block whose first cell contains the ``[[manual]]`` item's ``question``
text, up to ``<!-- END QUESTION -->``, read by the bounded notebook reader. Used by ``autograder
manual gather`` (a class's answers on one page) and by ``gradescope run`` (the answer beside the
autograder's results, where Gradescope's manual grading shows it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .student_text import clean, clean_lines
from .statuses import TestStatus, Visibility

NO_QUESTION = "(no answer: the notebook has no cell asking this question)"
MAX_SHOWN = 20_000
TEST_SUFFIX = " (graded by hand)"


def answers_of(notebook: Path, items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """item id → the answer's text (cleaned, bounded), for each item that has a ``question``;
    a notebook that cannot be read gives its reason as every answer."""
    from .notebook_reader import UnreadableNotebook, load_notebook

    asked = {str(i["id"]): str(i["question"]) for i in items if i.get("question")}
    if not asked:
        return {}
    try:
        loaded = load_notebook(Path(notebook), cells=False, questions=tuple(dict.fromkeys(asked.values())))
    except UnreadableNotebook as e:
        return dict.fromkeys(asked, f"(the notebook could not be read: {clean(str(e), 300)})")
    return {
        item: clean_lines(loaded.answers[q], MAX_SHOWN) if q in loaded.answers else NO_QUESTION
        for item, q in asked.items()
    }


def answer_tests(notebook: Path, rubric: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Gradescope test per hand-graded question with a ``question``: 0 points here, the
    student's answer as its output, so that course staff read it beside the autograder's results
    while grading by hand (Gradescope's manual grading of the programming assignment)."""
    items = list(rubric.get("manual", []))
    answers = answers_of(notebook, items)
    return [
        {
            "name": clean(item.get("title", item["id"]), 200) + TEST_SUFFIX,
            "score": 0.0,
            "max_score": 0.0,
            "status": TestStatus.PASSED,  # nothing to fail here: course staff grade it by hand
            "tags": [str(item["id"])],
            "output": f"Your answer, for course staff to grade by hand:\n\n{answers[item['id']]}",
            "visibility": Visibility.VISIBLE,
        }
        for item in items
        if item.get("id") in answers
    ]
