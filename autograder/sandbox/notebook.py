"""Read a submitted notebook into plain code cells, with every piece of metadata dropped.

nbclient obeys the notebook: ``metadata.kernelspec`` picks the kernel, the tag
``skip-execution`` skips a cell, ``raises-exception`` hides its error. None of that survives
here: the result is the list of code cells (source and original index) and a fresh nbformat-4
notebook that holds only them, with empty metadata and no outputs.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024


class UnreadableNotebook(Exception):
    """The file is not a notebook the grader can run; the message is for the student."""


@dataclass(frozen=True)
class CodeCell:
    index: int   # position in the submitted notebook (markdown cells counted)
    source: str


def _read_text(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise UnreadableNotebook(f"{path.name} cannot be opened ({e.strerror}; symlinks are not accepted)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableNotebook(f"{path.name} is not a regular file")
        if st.st_size > MAX_NOTEBOOK_BYTES:
            raise UnreadableNotebook(f"{path.name} is {st.st_size:,} bytes, more than the "
                                     f"{MAX_NOTEBOOK_BYTES:,} allowed; hint: clear the outputs before submitting")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_NOTEBOOK_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableNotebook(f"{path.name} is not UTF-8 text ({e.reason} at byte {e.start})") from None


def _source(cell: dict, index: int) -> str:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    raise UnreadableNotebook(f"cell {index} has a source that is neither text nor a list of lines")


def load_code_cells(path: Path) -> tuple[list[CodeCell], int]:
    """``(code cells, number of cells)`` of the notebook at ``path``, or :class:`UnreadableNotebook`."""
    text = _read_text(Path(path))
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise UnreadableNotebook(f"{Path(path).name} is not valid JSON ({str(e)[:120]}); "
                                 "hint: it may be truncated or not a .ipynb file") from None
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw:
        raise UnreadableNotebook(f"{Path(path).name} is JSON but not a Jupyter notebook (no 'cells')")
    major = raw.get("nbformat")
    if not isinstance(major, int) or major < 4:
        raise UnreadableNotebook(f"{Path(path).name} uses notebook format {major!r}; format 4 is needed "
                                 "(hint: open and save it in a current Jupyter)")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise UnreadableNotebook(f"{Path(path).name}: 'cells' is not a list")
    out = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise UnreadableNotebook(f"cell {i} of {Path(path).name} is malformed (no cell_type)")
        if cell["cell_type"] == "code":
            out.append(CodeCell(i, _source(cell, i)))
    return out, len(cells)


def stripped_notebook(cells: list[CodeCell]) -> nbformat.NotebookNode:
    """A fresh notebook of just these code cells: no metadata, tags, kernelspec or outputs."""
    return new_notebook(cells=[new_code_cell(c.source) for c in cells], metadata={})
