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
