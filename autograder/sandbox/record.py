"""The execution.json record (schema in docs/ARCHITECTURE.md) and its per-cell entries.

Everything in it that a kernel sent is cleaned on the way in
(:func:`autograder.student_text.clean_lines`: ANSI escapes and control characters removed, lone
surrogates replaced, grader paths redacted, capped) and the whole record is bounded: the error details
of all cells together take at most ``DETAILS_BUDGET`` characters (later errors keep their
name and a short message), so execution.json stays small whatever a notebook does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..cell_numbers import NO_NAME, cell_where, error_summary
from ..student_text import clean_lines as clean

EVALUE_CAP = 1000
TRACEBACK_CAP = 4000
ENAME_CAP = 200
REASON_CAP = 2000
DETAILS_BUDGET = 256 * 1024      # characters of evalue + traceback kept over all cells
SHORT_EVALUE_CAP = 200           # a cell's message once the budget is spent


@dataclass
class Outcome:
    status: str          # completed | timeout | kernel_died | startup_failed | unreadable | sandbox_error
    reason: str | None
    kernel_usable: bool = True   # may the probe still run in this kernel?


@dataclass
class CellRecord:
    index: int
    status: str          # ok | error | timeout | not_run
    duration_s: float
    ename: str | None = None
    evalue: str | None = None
    traceback: str | None = None
    number: int = 0      # position among the code cells, from 1 (0: not known)

    def as_dict(self) -> dict:
        d = {"index": self.index, "status": self.status, "duration_s": round(self.duration_s, 3)}
        if self.number:
            d["code_cell"] = self.number
        if self.status == "error":
            d.update(ename=self.ename, evalue=self.evalue, traceback=self.traceback)
        return d


def reply_to_cell(index: int, content: dict | None, duration_s: float, *, number: int = 0) -> CellRecord:
    """A cell's record from its execute_reply content (None: an empty cell nbclient skipped).

    A kernel may report an error without a name (``ename`` missing, null, or Python's
    ``NoneType`` with the value ``None``, what formatting "no exception" gives): the name is then
    empty and the message is the last line of the traceback, or :data:`NO_NAME`."""
    if not content or content.get("status") == "ok":
        return CellRecord(index, "ok", duration_s, number=number)
    tb = content.get("traceback")
    tb_text = "\n".join(map(str, tb)) if isinstance(tb, list) else str(tb or "")
    ename, evalue = content.get("ename"), content.get("evalue")
    if not isinstance(ename, str) or not ename.strip() or (ename == "NoneType" and str(evalue) in ("None", "")):
        last = [line for line in clean(tb_text, TRACEBACK_CAP).splitlines() if line.strip()]
        last = [line for line in last if line.strip() != "NoneType: None"]
        return CellRecord(index, "error", duration_s, "", clean(last[-1].strip() if last else NO_NAME, EVALUE_CAP),
                          clean(tb_text, TRACEBACK_CAP), number=number)
    return CellRecord(index, "error", duration_s, clean(ename, ENAME_CAP),
                      clean(evalue if evalue is not None else "", EVALUE_CAP), clean(tb_text, TRACEBACK_CAP),
                      number=number)


def build_record(outcome: Outcome, cells: list[CellRecord], isolation: dict, started: float, *,
                 probe: str, output_truncated: bool = False, cells_in_notebook: int | None = None,
                 language: str | None = None) -> dict:
    """execution.json. ``cells_total`` counts code cells; ``cells_in_notebook`` every cell;
    ``first_error.where`` names the cell as students read it (:mod:`autograder.cell_numbers`);
    ``language`` is the non-Python language the notebook's metadata names (it still ran as Python)."""
    cells = _within_budget(cells)
    errors = [c for c in cells if c.status == "error"]
    first = errors[0] if errors else None
    first_error = None
    if first is not None:
        first_error = {"cell": first.index, "code_cell": first.number or None,
                       "where": cell_where(first.number or None, first.index),
                       "ename": first.ename, "evalue": first.evalue, "summary": error_summary(first.ename, first.evalue)}
    return {
        "status": outcome.status,
        "reason": clean(outcome.reason, REASON_CAP) if outcome.reason and outcome.status != "completed" else None,
        "cells_total": len(cells),
        "cells_in_notebook": cells_in_notebook if cells_in_notebook is not None else len(cells),
        "language": clean(language, 40) if language else None,
        "cells_run": sum(c.status != "not_run" for c in cells),
        "cells_errored": len(errors),
        "cells": [c.as_dict() for c in cells],
        "first_error": first_error,
        "probe": probe,
        "duration_s": round(time.monotonic() - started, 3),
        "output_truncated": bool(output_truncated),
        "isolation": isolation,
    }


def _within_budget(cells: list[CellRecord]) -> list[CellRecord]:
    """The records with error details kept in order until DETAILS_BUDGET is spent; after that a
    cell keeps its status, name and a short message, not its traceback."""
    left, out = DETAILS_BUDGET, []
    for c in cells:
        if c.status == "error":
            size = len(c.evalue or "") + len(c.traceback or "")
            if size > left:
                c = replace(c, evalue=(c.evalue or "")[:SHORT_EVALUE_CAP], traceback="")
                size = len(c.evalue)
            left = max(0, left - size)
        out.append(c)
    return out
