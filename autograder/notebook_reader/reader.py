"""Read a submitted notebook into plain code cells, with every piece of metadata dropped.

nbclient obeys the notebook: ``metadata.kernelspec`` picks the kernel, the tag
``skip-execution`` skips a cell, ``raises-exception`` hides its error. None of that survives
here: the result is the list of code cells (source and original index) and a fresh nbformat-4
notebook that holds only them, with empty metadata and no outputs. The file itself is parsed in
a limited child process (:mod:`.parse_child`), so no notebook can cost the grader memory or
time beyond its limits.

This is the one reader of submitted notebooks: the pipeline, deciding the assignment
(:mod:`autograder.assignment_match`), the batch client, Gradescope's ``run`` and the integrity
report all read through :func:`load_notebook` (a file) or :func:`read_notebook_bytes` (bytes,
e.g. a zip entry). No byte of a submission is parsed by ``json`` in the grader's own process.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from ..cell_numbers import cell_where
from ..safe_files import scrub_strings
from . import parse_child

MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024
MAX_CODE_CELLS = 2_000  # a notebook of this course has < 100; each runs as one request
MAX_JSON_OBJECTS = 500_000  # outputs and metadata included (they are parsed, then dropped)
MAX_JSON_ARRAYS = 500_000  # counted before parsing: a file of millions of [] costs a scan
MAX_INT_DIGITS = 4_300  # Python's own limit for int(str)
MAX_CODE_CHARS = 8 * 1024 * 1024  # of code in all cells (what comes back to the grader is bounded)
MAX_ANSWER_CHARS = 20_000  # of one hand-graded answer sent back (a page of text is a few thousand)
PARSE_MEMORY_BYTES = 3 * 1024**3  # the parsing child's address space
PARSE_TIMEOUT_S = 60.0
# metadata paths whose strings the reader returns (``LoadedNotebook.declared``): the assignment a
# notebook says it is for, written by ``autograder build`` or by otter-assign
DECLARED_AT = {"autograder": ("autograder", "assignment"), "otter": ("otter", "assignment_name")}


class UnreadableNotebook(Exception):
    """The file is not a notebook the grader can run; the message is for the student."""


@dataclass(frozen=True)
class CodeCell:
    index: int  # position in the submitted notebook, from 0 (markdown and raw cells counted)
    source: str
    number: int = 0  # position among the code cells, from 1 (0: not known)

    @property
    def where(self) -> str:
        """How the student reads it: ``code cell 20 (cell 41 of the notebook)``."""
        return cell_where(self.number or None, self.index)


@dataclass(frozen=True)
class LoadedNotebook:
    cells: list[CodeCell]
    total: int  # cells of every kind
    language: str | None  # the language the metadata names, when not Python
    declared: dict[str, str] = field(default_factory=dict)  # DECLARED_AT key -> string found there (≤ 101 chars)
    # question text -> the cells of its answer (otter's BEGIN/END QUESTION block), when asked for
    answers: dict[str, str] = field(default_factory=dict)


def _open_notebook(path: Path) -> int:
    """A descriptor of ``path``: a regular file of at most MAX_NOTEBOOK_BYTES, no symlink, no FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UnreadableNotebook(f"{path.name} cannot be opened ({e.strerror}; symlinks are not accepted)") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnreadableNotebook(f"{path.name} is not a regular file")
    if st.st_size > MAX_NOTEBOOK_BYTES:
        os.close(fd)
        raise UnreadableNotebook(
            f"{path.name} is {st.st_size:,} bytes, more than the "
            f"{MAX_NOTEBOOK_BYTES:,} allowed; hint: clear the outputs before submitting"
        )
    return fd


@functools.lru_cache(maxsize=1)
def _parser_source() -> str:
    text = Path(parse_child.__file__).read_text()
    return text.split('"""', 2)[2].lstrip() if text.startswith('"""') else text


def load_code_cells(path: Path, timeout_s: float = PARSE_TIMEOUT_S) -> tuple[list[CodeCell], int]:
    """``(code cells, number of cells)`` of the notebook at ``path``, or :class:`UnreadableNotebook`."""
    loaded = load_notebook(path, timeout_s)
    return loaded.cells, loaded.total


def load_notebook(
    path: Path, timeout_s: float = PARSE_TIMEOUT_S, *, cells: bool = True, questions: tuple[str, ...] = ()
) -> LoadedNotebook:
    """The code cells of the notebook at ``path``, how many cells it has, the language its
    metadata names (when not Python) and what its metadata declares (``DECLARED_AT``), or
    :class:`UnreadableNotebook`.

    The JSON is parsed in a child process (:mod:`.parse_child`) with an address-space limit
    and ``timeout_s``: what a notebook's structure costs to parse is the child's, never the
    grader's, and a notebook of more than MAX_CODE_CELLS code cells is refused with a reason.
    ``cells=False``: the code cells are not sent back (the caller needs only the metadata).
    ``questions``: texts of hand-graded questions whose answers to send back (``answers``; at most
    MAX_ANSWER_CHARS each).
    """
    path = Path(path)
    fd = _open_notebook(path)
    try:
        return _parse_in_child(path.name, fd, timeout_s, cells, questions)
    finally:
        os.close(fd)


def read_notebook_bytes(
    name: str, data: bytes, timeout_s: float = PARSE_TIMEOUT_S, *, cells: bool = True
) -> LoadedNotebook:
    """:func:`load_notebook` for a notebook the grader holds as bytes (a zip entry): the same
    child, limits and reasons. ``name`` is how messages call it."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise UnreadableNotebook(
            f"{name} is {len(data):,} bytes, more than the {MAX_NOTEBOOK_BYTES:,} "
            "allowed; hint: clear the outputs before submitting"
        )
    return _parse_in_child(name, data, timeout_s, cells)


def _parse_in_child(
    name: str, source: int | bytes, timeout_s: float, cells: bool, questions: tuple[str, ...] = ()
) -> LoadedNotebook:
    """Run :mod:`.parse_child` on ``source`` (a descriptor, or bytes fed on its stdin)."""
    limits = {
        "name": name,
        "max_bytes": MAX_NOTEBOOK_BYTES,
        "max_objects": MAX_JSON_OBJECTS,
        "max_arrays": MAX_JSON_ARRAYS,
        "max_int_digits": MAX_INT_DIGITS,
        "max_code_cells": MAX_CODE_CELLS,
        "max_code_chars": MAX_CODE_CHARS,
        "memory_bytes": PARSE_MEMORY_BYTES,
        "cells": cells,
        "declared_at": DECLARED_AT,
        "questions": list(questions),
        "max_answer_chars": MAX_ANSWER_CHARS,
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _parser_source(), json.dumps(limits)],
            capture_output=True,
            timeout=timeout_s,
            cwd="/",
            input=source if isinstance(source, bytes) else None,  # bytes in memory, or the open file
            stdin=None if isinstance(source, bytes) else source,
        )
    except subprocess.TimeoutExpired:
        raise UnreadableNotebook(
            f"{name} took more than {timeout_s:g} s to read; it is not a notebook the grader can run"
        ) from None
    try:
        result = scrub_strings(json.loads(proc.stdout.decode("utf-8")))  # lone surrogates: U+FFFD
        if not isinstance(result, dict):
            raise ValueError("not an object")
    except (UnicodeDecodeError, ValueError):
        why = "killed by a signal" if proc.returncode < 0 else f"exit code {proc.returncode}"
        raise UnreadableNotebook(
            f"{name} could not be read as a notebook (the reader stopped: {why}; "
            "hint: it may be far too large or complex)"
        ) from None
    if "error" in result:
        raise UnreadableNotebook(str(result["error"]))
    code = [CodeCell(int(i), src, n) for n, (i, src) in enumerate(result["cells"], start=1)]
    language = result.get("language")
    declared = found if isinstance(found := result.get("declared"), dict) else {}
    answers = got if isinstance(got := result.get("answers"), dict) else {}
    return LoadedNotebook(
        code,
        int(result["total"]),
        language if isinstance(language, str) else None,
        {str(k): v for k, v in declared.items() if isinstance(v, str)},
        {str(k): v[:MAX_ANSWER_CHARS] for k, v in answers.items() if isinstance(v, str)},
    )


_Item = TypeVar("_Item")
_Read = TypeVar("_Read")


def read_each(read: Callable[[_Item], _Read], items: Iterable[_Item]) -> list[_Read]:
    """``read(item)`` for each item, in order, by as many reader children at a time as there are
    cores (at most 8): each read is a child process, the threads only wait for them. At most that
    many items are taken from ``items`` at once (an item may hold a notebook's bytes)."""
    width = max(1, min(8, os.cpu_count() or 1))
    results: list[_Read] = []
    with ThreadPoolExecutor(width) as pool:
        chunk: list[_Item] = []
        for item in items:
            chunk.append(item)
            if len(chunk) == width:
                results.extend(pool.map(read, chunk))
                chunk = []
        results.extend(pool.map(read, chunk))
    return results


def stripped_notebook(cells: list[CodeCell]) -> nbformat.NotebookNode:
    """A fresh notebook of just these code cells: no metadata, tags, kernelspec or outputs."""
    return new_notebook(cells=[new_code_cell(c.source) for c in cells], metadata={})
