"""How a notebook cell, and the error it raised, are named to a student: one numbering everywhere.

execution.json keeps nbformat's 0-based list index (``index``, markdown and raw cells counted);
a student counts from 1, and the number Jupyter shows next to a code cell depends on how often it
ran. So every reason, message and table names a cell the same way: its position among the code
cells, then its position in the whole notebook, both from 1:

    code cell 20 (cell 41 of the notebook)

An error is ``KeyError: 'latency'``; a kernel may send one without a name (Python formats "no
exception" as ``NoneType: None``), and then what is known is shown instead, never that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def cell_where(code_number: int | None, notebook_index: int | None) -> str:
    """``code cell N (cell M of the notebook)``; ``notebook_index`` is 0-based (execution.json's)."""
    code = _int(code_number)
    nb = _int(notebook_index)
    if code is not None and nb is not None:
        return f"code cell {code} (cell {nb + 1} of the notebook)"
    if code is not None:
        return f"code cell {code}"
    if nb is not None:
        return f"cell {nb + 1} of the notebook"
    return "a cell"


def where_of(record: Any) -> str:
    """The cell of an execution.json ``first_error`` (or cell) record, also of a record written
    before ``where`` and ``code_cell`` existed (then only the notebook position is known)."""
    if not isinstance(record, Mapping):
        return "a cell"
    if isinstance(record.get("where"), str) and record["where"]:
        return record["where"][:80]
    return cell_where(record.get("code_cell"), record.get("cell", record.get("index")))


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


NO_NAME = "the kernel reported an error without a name"


def error_summary(ename: Any, evalue: Any) -> str:
    """``KeyError: 'latency'``; the message alone when the error has no name, else :data:`NO_NAME`."""
    ename = ename.strip() if isinstance(ename, str) else ""
    evalue = evalue.strip() if isinstance(evalue, str) else ""
    if ename == "NoneType" and evalue in ("None", ""):
        ename, evalue = "", ""
    if ename and evalue:
        return f"{ename}: {evalue}"
    return ename or evalue or NO_NAME


# ── placing an error in the student's notebook ──────────────────────────────────────────────────
#
# A kernel names the code it ran by names the student never saw: ipykernel compiles each cell as
# a temporary file ``/tmp/ipykernel_<pid>/<murmur2 of the source>.py`` (Python's SyntaxError
# prints its base name: ``expected ':' (734921960.py, line 4)``), and IPython's tracebacks say
# ``Cell In[9], line 4`` by execution count (older IPythons: ``Input In [9]``,
# ``<ipython-input-9-…>``). :func:`place_errors` rewrites every such form to the cell as the
# student reads it, "code cell 9 (cell 16 of the notebook), line 4"; code that is none of the
# notebook's cells becomes :data:`OTHER_CODE`, never a temporary file name.

OTHER_CODE = "code run outside the notebook's cells"
HASHED_CHARS = 500_000  # of cell sources hashed to recognise a temporary file name (larger ones: OTHER_CODE)
_LINE = r"(?:(?::|, line )(\d+))?"
_FORMS = (
    ("file", re.compile(r"(?<=\()(\d+)\.py, line (\d+)(?=\))")),  # SyntaxError's str
    ("file", re.compile(r"(?:File )?\"?(?:[^\s\"]*/)?ipykernel_\d+/(\d+)\.py\"?" + _LINE)),  # a path
    ("count", re.compile(r"Cell In ?\[(\d+)\]" + _LINE)),  # IPython ≥ 8.5
    ("count", re.compile(r"Input In ?\[(\d+)\]" + _LINE)),  # IPython 8.0-8.4
    ("count", re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>" + _LINE)),  # IPython 7
)
_ERROR_LINE = re.compile(r"\(\d+\.py, line (\d+)\)|Cell In ?\[\d+\], line (\d+)|Input In ?\[\d+\].*?line: (\d+)")


class CellPlaces:
    """Which cell a kernel's name stands for: by the temporary file name of its source, or by the
    execution count it ran with. ``cells``: (where, source, execution count or None) per code cell."""

    def __init__(self, cells: list[tuple[str, str, int | None]]) -> None:
        self._cells = cells
        self._by_count = {count: where for where, _, count in cells if isinstance(count, int)}
        self._by_file: dict[str, str] | None = None

    def by_count(self, count: str) -> str | None:
        return self._by_count.get(int(count)) if len(count) < 10 else None

    def by_file(self, digits: str) -> str | None:
        if self._by_file is None:  # hashed only when an error names a file (ipykernel's own hash)
            from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

            seed, budget = get_tmp_hash_seed(), HASHED_CHARS  # a pure-Python hash: bounded work
            self._by_file = {}
            for where, source, _ in self._cells:
                if len(source) <= budget:
                    budget -= len(source)
                    self._by_file.setdefault(str(murmur2_x86(source, seed)), where)
        return self._by_file.get(digits)


def place_errors(text: str, places: CellPlaces) -> str:
    """``text`` (an error message or traceback) with every kernel name of a cell replaced by the
    student's "code cell 9 (cell 16 of the notebook), line 4"."""
    for kind, form in _FORMS:

        def named(m: re.Match[str], kind: str = kind) -> str:
            where = (places.by_file if kind == "file" else places.by_count)(m.group(1)) or OTHER_CODE
            line = next((g for g in m.groups()[1:] if g), None)
            return f"{where}, line {line}" if line else where

        text = form.sub(named, text)
    return text


def error_line(evalue: Any, traceback: Any) -> int | None:
    """The line of the failing cell where its error happened: a SyntaxError's own line, else the
    first frame of the traceback (the cell's top level; a call into another cell comes after)."""
    for text in (evalue, traceback):
        m = _ERROR_LINE.search(text) if isinstance(text, str) else None
        if m:
            return int(next(g for g in m.groups() if g))
    return None


def without_place(evalue: str) -> str:
    """A SyntaxError's message without its ``(file, line N)`` suffix: ``expected ':'``."""
    return re.sub(
        r"\s*\((?:\d+\.py|code cell [^()]*\([^()]*\)|" + re.escape(OTHER_CODE) + r"), line \d+\)\s*$", "", evalue
    )
