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

Notebooks are read as untrusted data: size-capped, parsed as JSON, and only a bounded id made of
``[A-Za-z0-9._-]`` is taken from them.
"""

from __future__ import annotations

import json
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

METADATA_KEY = "autograder"            # notebook metadata written by `autograder build`: {"assignment": id}
NOTEBOOK_MAX_BYTES = 64 * 1024 * 1024  # larger notebooks are not read to decide (the grader reports them)
SOURCE_PEEK_LIMIT = 500                # notebooks of a batch source looked at to decide
FOLDER_DEPTH = 64                      # nested folders of a batch source looked into
_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class Declared:
    """An assignment id a notebook declares, and where it says so."""

    id: str
    source: str       # "its autograder metadata" | "its otter-assign metadata"


def declared_assignment(data: bytes) -> Declared | None:
    """The assignment a notebook's metadata names (ours first, then otter-assign's), or None."""
    if len(data) > NOTEBOOK_MAX_BYTES:
        return None
    try:
        nb = json.loads(data)
    except (ValueError, RecursionError):
        return None
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    if not isinstance(meta, dict):
        return None
    for key, field, source in ((METADATA_KEY, "assignment", "its autograder metadata"),
                               ("otter", "assignment_name", "its otter-assign metadata")):
        block = meta.get(key)
        value = block.get(field) if isinstance(block, dict) else None
        if isinstance(value, str) and _ID.match(value):
            return Declared(value, source)
    return None


def mismatch_reason(name: str, data: bytes, assignment: Assignment) -> str | None:
    """One line saying why ``name`` is for another assignment than ``assignment``, or None."""
    declared = declared_assignment(data)
    if declared is None or declared.id == assignment.id:
        return None
    return (f"{_shown(name)} was made for assignment '{declared.id}' ({declared.source}), "
            f"not '{assignment.id}'")


def matching_ids(name: str, data: bytes, notebooks: dict[str, str]) -> tuple[list[str], str]:
    """Ids of ``notebooks`` (id → notebook file name) the notebook matches, and how it was decided."""
    declared = declared_assignment(data)
    if declared is not None and declared.id in notebooks:
        return [declared.id], declared.source
    base = Path(name).name.lower()
    by_name = [i for i, nb in notebooks.items() if nb.lower() == base]
    if not by_name:
        by_name = [i for i in notebooks if i.lower() in Path(base).stem]
    return by_name, "its file name"


def resolve_assignment(requested: str | None, notebooks: Sequence[tuple[str, bytes]] = (), *,
                       root: Path | None = None, what: str = "", option: str = "--assignment") -> Assignment:
    """The assignment to use (the rules above); raises AssignmentError with one line otherwise.

    ``notebooks``: ``(file name, bytes)`` of what will be graded (none for build, calibrate, …);
    ``what`` names them in messages ("the notebooks of subs/"); ``option`` is how the command
    takes an id ("--assignment", or "the ID argument").
    """
    root = root or project_root()
    ids = assignment_ids(root)
    if requested:
        assignment = load_assignment(requested, root)
        if len(notebooks) == 1:
            reason = mismatch_reason(notebooks[0][0], notebooks[0][1], assignment)
            if reason:
                declared = declared_assignment(notebooks[0][1])
                hint = f"; grade it with --assignment {declared.id}" if declared and declared.id in ids else ""
                raise AssignmentError(reason + hint)
        return assignment
    if not ids:
        raise AssignmentError(f"no assignment under {root / 'assignments'} (a folder with an assignment.toml)")
    if len(ids) == 1:
        return load_assignment(ids[0], root)
    choices = f"choose one with {option}: {', '.join(ids)}"
    names = {i: _notebook_name(root, i) for i in ids}
    votes: Counter[str] = Counter()
    for name, data in notebooks:
        matched, _how = matching_ids(name, data, names)
        if len(matched) == 1:
            votes[matched[0]] += 1
    if len(votes) == 1:
        return load_assignment(next(iter(votes)), root)
    subject = what or (_shown(notebooks[0][0]) if len(notebooks) == 1 else "the notebooks")
    if not notebooks:
        raise AssignmentError(f"there are {len(ids)} assignments; {choices}")
    if not votes:
        why = ("it could not be read" if len(notebooks) == 1 and not notebooks[0][1]
               else "no metadata names one and no file name matches one")
        raise AssignmentError(f"cannot tell which assignment {subject} is for ({why}); {choices}")
    counts = ", ".join(f"{i}: {n}" for i, n in votes.most_common())
    raise AssignmentError(f"{subject} are for different assignments ({counts}); {choices}")


def read_notebook(path: Path) -> tuple[str, bytes]:
    """``(file name, bytes)`` of a notebook given on the command line (b"" when unreadable or too
    large: the grader itself reports that as the submission's outcome)."""
    try:
        if os.path.getsize(path) > NOTEBOOK_MAX_BYTES:
            return path.name, b""
        return path.name, Path(path).read_bytes()
    except OSError:
        return Path(path).name, b""


def source_notebooks(source: Path, limit: int = SOURCE_PEEK_LIMIT) -> list[tuple[str, bytes]]:
    """Up to ``limit`` notebooks of a batch source (a folder, or a zip such as Gradescope's
    export), to decide its assignment; [] when the source cannot be read (the batch says why)."""
    source = Path(source)
    try:
        if source.is_dir():
            return list(_folder_notebooks(source, limit))
        if zipfile.is_zipfile(source):
            return list(_zip_notebooks(source, limit))
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return []
    return [read_notebook(source)] if source.suffix == ".ipynb" else []


def _folder_notebooks(root: Path, limit: int) -> Iterable[tuple[str, bytes]]:
    """Up to ``limit`` regular ``.ipynb`` files of the folder, walked as any tree students wrote
    (:mod:`autograder.tree_walk`: iterative, no link followed); hidden folders and those nested past
    FOLDER_DEPTH are not looked into."""
    found = 0
    top = tree_walk.open_folder(root)
    try:
        for e in tree_walk.walk(top, what=str(root), max_entries=1 << 62,
                                include=lambda e: not e.is_dir or (e.depth <= FOLDER_DEPTH and not (
                                    e.name.startswith(".") or e.name == "__MACOSX"))):
            if (e.is_dir or e.name.startswith(".") or not e.name.endswith(".ipynb")
                    or not stat.S_ISREG(e.st.st_mode)):
                continue
            yield read_notebook(root / e.path)
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
            if (info.is_dir() or not info.filename.endswith(".ipynb") or info.file_size > NOTEBOOK_MAX_BYTES
                    or any(p.startswith(".") or p == "__MACOSX" for p in parts)):
                continue
            with zf.open(info) as f:
                yield parts[-1], f.read(NOTEBOOK_MAX_BYTES + 1)
            found += 1
            if found >= limit:
                return


def _notebook_name(root: Path, assignment_id: str) -> str:
    config = load_toml(root / "assignments" / assignment_id / "assignment.toml")
    return str(config.get("notebook", f"{assignment_id}.ipynb"))


def _shown(name: str) -> str:
    s = "".join(ch if ch.isprintable() else "?" for ch in str(name))
    return s if len(s) <= 80 else s[:79] + "…"
