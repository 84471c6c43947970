"""Which assignment a command or a notebook is for. There is no default assignment.

Rules (every command: grade, demo, batch, build, calibrate, gradescope build):

1. ``--assignment ID`` given: that one. A notebook that declares another assignment in its
   metadata is refused with a one-line reason before anything runs (the command exits 2; in a
   batch or on Gradescope that notebook gets the reason instead of a score).
2. Only one assignment in the tree: that one.
3. Several: the notebook's own metadata decides (``metadata.autograder.assignment``, written into
   the student notebook by ``autograder build``, else otter-assign's
   ``metadata.otter.assignment_name``), else its file name (the assignment's notebook name, or a
   name containing the assignment id, as in ``Copy of <id>.ipynb``). A batch takes
   the one assignment its notebooks agree on.
4. Otherwise: an error that lists the choices.

Notebooks are read as untrusted data, by the one bounded reader in a limited child process
(:mod:`autograder.notebook_reader.reader`): nothing of them is parsed in the grader's own process, and
only a bounded id made of ``[A-Za-z0-9._-]`` is taken from their metadata. A notebook that names
an assignment this course does not have is told which one it names.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from . import tree_walk
from .assignment import Assignment, assignment_ids, load_assignment, load_toml, project_root
from .errors import AssignmentError
from .notebook_reader import (
    DECLARED_AT,
    MAX_NOTEBOOK_BYTES,
    LoadedNotebook,
    UnreadableNotebook,
    load_notebook,
    read_each,
    read_notebook_bytes,
)

METADATA_KEY = DECLARED_AT["autograder"][0]  # notebook metadata written by `autograder build`: {"assignment": id}
SOURCE_PEEK_LIMIT = 500  # notebooks of a batch source looked at to decide
FOLDER_DEPTH = 64  # nested folders of a batch source looked into
_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_SOURCES = {"autograder": "its autograder metadata", "otter": "its otter-assign metadata"}  # ours first


@dataclass(frozen=True)
class Declared:
    """An assignment id a notebook declares, and where it says so."""

    id: str
    source: str  # "its autograder metadata" | "its otter-assign metadata"


@dataclass(frozen=True)
class NotebookFacts:
    """What deciding the assignment needs of one notebook, as the bounded reader gave it."""

    name: str  # its file name
    declared: Declared | None  # the assignment its metadata names, if any
    readable: bool = True  # False: the reader refused it (the grader reports why later)


def declared_assignment(loaded: LoadedNotebook) -> Declared | None:
    """The assignment a notebook's metadata names (ours first, then otter-assign's), or None."""
    for key, source in _SOURCES.items():
        value = loaded.declared.get(key)
        if isinstance(value, str) and _ID.match(value):
            return Declared(value, source)
    return None


def notebook_facts(path: Path) -> NotebookFacts:
    """The facts of the notebook file at ``path`` (read in the bounded child; no symlink)."""
    path = Path(path)
    try:
        return NotebookFacts(path.name, declared_assignment(load_notebook(path, cells=False)))
    except UnreadableNotebook:
        return NotebookFacts(path.name, None, readable=False)


def notebook_facts_of(name: str, data: bytes) -> NotebookFacts:
    """The facts of a notebook held as bytes (a zip entry), read in the same bounded child."""
    try:
        return NotebookFacts(name, declared_assignment(read_notebook_bytes(name, data, cells=False)))
    except UnreadableNotebook:
        return NotebookFacts(name, None, readable=False)


def mismatch_reason(name: str, facts: NotebookFacts, assignment: Assignment) -> str | None:
    """One line saying why ``name`` is for another assignment than ``assignment``, or None."""
    declared = facts.declared
    if declared is None or declared.id == assignment.id:
        return None
    return f"{_shown(name)} was made for assignment '{declared.id}' ({declared.source}), not '{assignment.id}'"


def matching_ids(facts: NotebookFacts, notebooks: dict[str, str]) -> tuple[list[str], str]:
    """Ids of ``notebooks`` (id → notebook file name) the notebook matches, and how it was decided."""
    declared = facts.declared
    if declared is not None and declared.id in notebooks:
        return [declared.id], declared.source
    base = Path(facts.name).name.lower()
    by_name = [i for i, nb in notebooks.items() if nb.lower() == base]
    if not by_name:
        by_name = [i for i in notebooks if i.lower() in Path(base).stem]
    return by_name, "its file name"


def resolve_assignment(
    requested: str | None,
    notebooks: Sequence[NotebookFacts] = (),
    *,
    root: Path | None = None,
    what: str = "",
    option: str = "--assignment",
) -> Assignment:
    """The assignment to use (the rules above); raises AssignmentError with one line otherwise.

    ``notebooks``: the facts of what will be graded (none for build, calibrate, …);
    ``what`` names them in messages ("the notebooks of subs/"); ``option`` is how the command
    takes an id ("--assignment", or "the ID argument").
    """
    root = root or project_root()
    ids = assignment_ids(root)
    if requested:
        assignment = load_assignment(requested, root)
        if len(notebooks) == 1:
            reason = mismatch_reason(notebooks[0].name, notebooks[0], assignment)
            if reason:
                declared = notebooks[0].declared
                hint = (
                    f"; grade it with --assignment {declared.id}"
                    if declared and declared.id in ids
                    else ", and it is not an assignment of this course"
                )
                raise AssignmentError(reason + hint)
        return assignment
    if not ids:
        raise AssignmentError(f"no assignment under {root / 'assignments'} (a folder with an assignment.toml)")
    if len(ids) == 1:
        return load_assignment(ids[0], root)
    choices = f"choose one with {option}: {', '.join(ids)}"
    names = {i: _notebook_name(root, i) for i in ids}
    votes: Counter[str] = Counter()
    for facts in notebooks:
        matched, _how = matching_ids(facts, names)
        if len(matched) == 1:
            votes[matched[0]] += 1
    if len(votes) == 1:
        return load_assignment(next(iter(votes)), root)
    subject = what or (_shown(notebooks[0].name) if len(notebooks) == 1 else "the notebooks")
    if not notebooks:
        raise AssignmentError(f"there are {len(ids)} assignments; {choices}")
    if not votes:
        raise AssignmentError(f"cannot tell which assignment {subject} is for ({_why_none(notebooks, ids)}); {choices}")
    counts = ", ".join(f"{i}: {n}" for i, n in votes.most_common())
    raise AssignmentError(f"{subject} are for different assignments ({counts}); {choices}")


def _why_none(notebooks: Sequence[NotebookFacts], ids: list[str]) -> str:
    """Why no notebook matched an assignment: unreadable, or naming one this course does not have."""
    foreign = Counter(
        f"'{f.declared.id}' ({f.declared.source})"
        for f in notebooks
        if f.declared is not None and f.declared.id not in ids
    )
    if len(notebooks) == 1:
        if not notebooks[0].readable:
            return "it could not be read"
        if foreign:
            return f"it names assignment {next(iter(foreign))}, which is not an assignment of this course"
    elif foreign:
        named = ", ".join(list(foreign)[:3]) + (" …" if len(foreign) > 3 else "")
        return (
            f"{sum(foreign.values())} of them name assignments this course does not have ({named}), "
            "and no file name matches one"
        )
    return "no metadata names one and no file name matches one"


def source_notebooks(source: Path, limit: int = SOURCE_PEEK_LIMIT) -> list[NotebookFacts]:
    """The facts of up to ``limit`` notebooks of a batch source (a folder, or a zip such as
    Gradescope's export), to decide its assignment; [] when the source cannot be read (the batch
    says why). Each is read by the bounded reader; a few at a time, never all at once."""
    source = Path(source)
    try:
        if source.is_dir():
            return _read_all(_folder_notebooks(source, limit))
        if zipfile.is_zipfile(source):
            return _read_all(_zip_notebooks(source, limit))
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return []
    return [notebook_facts(source)] if source.suffix == ".ipynb" else []


def files_facts(paths: Iterable[Path]) -> dict[Path, NotebookFacts]:
    """The facts of each notebook file of ``paths`` (a batch's staged notebooks), a few at a time."""
    paths = [Path(p) for p in paths]
    return dict(zip(paths, _read_all(paths)))


def _read_all(items: Iterable[Path | tuple[str, bytes]]) -> list[NotebookFacts]:
    """Facts of each item (a path, or a name and bytes), read a few at a time (:func:`read_each`)."""

    def one(item: Path | tuple[str, bytes]) -> NotebookFacts:
        return notebook_facts(item) if isinstance(item, Path) else notebook_facts_of(*item)

    return read_each(one, items)


def _folder_notebooks(root: Path, limit: int) -> Iterable[Path]:
    """Up to ``limit`` regular ``.ipynb`` files of the folder, walked as any tree students wrote
    (:mod:`autograder.tree_walk`: iterative, no link followed); hidden folders and those nested past
    FOLDER_DEPTH are not looked into."""
    found = 0
    top = tree_walk.open_folder(root)
    try:
        for e in tree_walk.walk(
            top,
            what=str(root),
            max_entries=1 << 62,
            include=lambda e: (
                not e.is_dir or (e.depth <= FOLDER_DEPTH and not (e.name.startswith(".") or e.name == "__MACOSX"))
            ),
        ):
            if e.is_dir or e.name.startswith(".") or not e.name.endswith(".ipynb") or not stat.S_ISREG(e.st.st_mode):
                continue
            yield root / e.path
            found += 1
            if found >= limit:
                return
    finally:
        os.close(top)


def _zip_notebooks(path: Path, limit: int) -> Iterable[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        found = 0
        for info in zf.infolist():
            parts = info.filename.split("/")
            if (
                info.is_dir()
                or not info.filename.endswith(".ipynb")
                or info.file_size > MAX_NOTEBOOK_BYTES
                or any(p.startswith(".") or p == "__MACOSX" for p in parts)
            ):
                continue
            with zf.open(info) as f:
                yield parts[-1], f.read(MAX_NOTEBOOK_BYTES + 1)
            found += 1
            if found >= limit:
                return


def _notebook_name(root: Path, assignment_id: str) -> str:
    config = load_toml(root / "assignments" / assignment_id / "assignment.toml")
    return str(config.get("notebook", f"{assignment_id}.ipynb"))


def _shown(name: str) -> str:
    s = "".join(ch if ch.isprintable() else "?" for ch in str(name))
    return s if len(s) <= 80 else s[:79] + "…"
