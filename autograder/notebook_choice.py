"""Which notebook of a submission folder is graded: one rule for every front end.

A submission folder (what a student uploaded to Gradescope; one ``submission_<id>/`` folder of a
Gradescope export, zipped or unpacked) may hold several files. ``gradescope run``, the export
reader of ``batch`` (:mod:`autograder.batch.sources`) and so ``batch`` of an export all call
:func:`choose_notebook`, so the same folder is graded the same way everywhere:

1. hidden files and folders (a name starting with ``.``, e.g. ``.ipynb_checkpoints``) and
   ``__MACOSX`` are ignored; symbolic links are never graded;
2. exactly one notebook (``.ipynb``): that one;
3. several: the one whose file name is the assignment's notebook name (``<id>.ipynb``),
   when exactly one is, and the others are named as ignored;
4. otherwise nothing is graded, and the reason says what was found and what to upload.

Messages are plain text for the student (file names are cleaned and bounded, never markup):
each front end escapes them for its output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Iterable

from .report.escape import clean

IGNORED_NAMES = frozenset({"__MACOSX"})
NAME_CHARS = 120  # of a file name quoted in a message
LISTED = 8  # file names listed in a message at most


@dataclass(frozen=True)
class NotebookChoice:
    chosen: str | None  # the notebook to grade, relative to the submission folder
    message: str  # why none was chosen, or a note about the choice ('' if none)


def ignored(relpath: str) -> bool:
    """A path the rule never looks at: a hidden part, or ``__MACOSX``."""
    return any(p.startswith(".") or p in IGNORED_NAMES for p in PurePosixPath(relpath).parts)


def is_notebook_name(relpath: str) -> bool:
    return relpath.lower().endswith(".ipynb")


def choose_notebook(files: Iterable[tuple[str, bool]], preferred_name: str) -> NotebookChoice:
    """The notebook to grade among ``files``: ``(path relative to the submission folder, is a
    regular file)`` for every file in it (a symlink or anything else is not regular).
    ``preferred_name`` is the assignment's notebook file name."""
    notebooks, links, others = [], [], []
    for rel, regular in sorted(files):
        if ignored(rel):
            continue
        if not is_notebook_name(rel):
            others.append(rel)
        elif regular:
            notebooks.append(rel)
        else:
            links.append(rel)
    if len(notebooks) == 1:
        return NotebookChoice(notebooks[0], "")
    if not notebooks:
        found = f" It holds {listing(others)}." if others else " It is empty."
        if links:
            found = f" {listing(links)} {'is a symbolic link' if len(links) == 1 else 'are symbolic links'}, not a notebook file."
        return NotebookChoice(
            None, f"No notebook (.ipynb) found in your submission.{found} Upload exactly one .ipynb file."
        )
    named = [n for n in notebooks if PurePosixPath(n).name == preferred_name]
    if len(named) == 1:
        rest = [n for n in notebooks if n != named[0]]
        return NotebookChoice(
            named[0],
            f"Your submission has {len(notebooks)} notebooks; graded {shown(named[0])}, ignored {listing(rest)}.",
        )
    return NotebookChoice(
        None,
        f"Your submission has {len(notebooks)} notebooks ({listing(notebooks)}), and "
        f"the grader cannot tell which one to grade. Upload exactly one .ipynb "
        f"file, or name the one to grade {shown(preferred_name)}.",
    )


def shown(name: str) -> str:
    """A student-chosen file name for a plain-text message: one line, bounded."""
    return clean(name, NAME_CHARS)


def listing(names: list[str], limit: int = LISTED) -> str:
    text = ", ".join(shown(n) for n in names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")
