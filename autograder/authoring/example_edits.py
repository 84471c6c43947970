"""Example submissions made from a lesson's solution by small code edits: what every
``reference/<id>/make_examples.py`` declares (its :class:`Mistake` and :class:`Variant` values) and
the one way they become notebooks (:func:`examples_from`).

Each edit ``(old, new)`` must match exactly once in the solution's code cells, so a changed
solution makes ``autograder build`` fail loudly instead of writing an example that no longer
makes its mistake. Each example's first cell says what it does and what grade it expects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import nbformat
from nbformat.v4 import new_markdown_cell


@dataclass(frozen=True)
class Mistake:
    """A realistic mistake: loses points at exactly one check."""

    file: str
    check: str  # the one check id that loses points
    title: str
    what: str  # what the submission gets wrong, for the first cell
    edits: tuple  # ((old, new), ...) applied to code cells; each `old` must occur exactly once

    def first_cell(self) -> nbformat.NotebookNode:
        return new_markdown_cell(
            f"**Example submission · {self.title}.** This is the reference solution with one realistic "
            f"mistake. {self.what}\n\n"
            f"Expected grade: loses points at the `{self.check}` check only; every other check passes."
        )


@dataclass(frozen=True)
class Variant:
    """A valid way to write the solution that is not the reference's: full marks, every self-check passes."""

    file: str
    title: str
    what: str
    edits: tuple

    def first_cell(self) -> nbformat.NotebookNode:
        return new_markdown_cell(
            f"**Example submission · {self.title}.** This is the reference solution written another valid "
            f"way. {self.what}\n\n"
            "Expected grade: full marks; every self-check passes."
        )


@dataclass(frozen=True)
class Gamed:
    """A submission that games the grader (constants or the README's values in ``RESULTS``, a
    comparison that echoes what it should be compared with, only the cells that print): made from
    the student notebook (``base = "student"``) or the solution, it must score at most
    ``max_score`` (the lesson's ``expected_examples.toml`` row: ``gamed = true``, ``max_score``)."""

    file: str
    title: str
    what: str
    edits: tuple
    base: str = "student"  # "student" (the notebook as shipped) or "solution"

    def first_cell(self) -> nbformat.NotebookNode:
        return new_markdown_cell(
            f"**Example submission · gamed: {self.title}.** {self.what}\n\n"
            "Expected grade: low; the points this notebook seeks need evidence that its own code produced them."
        )


def apply_edit(nb: nbformat.NotebookNode, old: str, new: str) -> None:
    hits = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
    count = sum(c.source.count(old) for c in hits)
    if count != 1:
        raise ValueError(f"example edit must match exactly once in the solution's code, matched {count}: {old!r}")
    hits[0].source = hits[0].source.replace(old, new)


def edited(solution: nbformat.NotebookNode, example: Mistake | Variant | Gamed) -> nbformat.NotebookNode:
    nb = copy.deepcopy(solution)
    for old, new in example.edits:
        apply_edit(nb, old, new)
    nb.cells.insert(0, example.first_cell())
    return nb


def examples_from(
    solution: nbformat.NotebookNode,
    student: nbformat.NotebookNode,
    examples: tuple[Mistake | Variant | Gamed, ...],
) -> dict[str, nbformat.NotebookNode]:
    """``reference.ipynb`` (the solution), ``untouched.ipynb`` (the student notebook) and every
    example (a :class:`Gamed` one edits the student notebook unless its ``base`` is the solution)."""
    out = {"reference.ipynb": copy.deepcopy(solution), "untouched.ipynb": copy.deepcopy(student)}
    for example in examples:
        base = student if isinstance(example, Gamed) and example.base == "student" else solution
        out[example.file] = edited(base, example)
    return out
