"""The execution.json record (its schema: autograder/schemas/execution.schema.json) and its per-cell entries.

Everything in it that a kernel sent is cleaned on the way in
(:func:`autograder.student_text.clean_lines`: ANSI escapes and control characters removed, lone
surrogates replaced, grader paths redacted, capped) and the whole record is bounded: the error details
of all cells together take at most ``DETAILS_BUDGET`` characters (later errors keep their
name and a short message), so execution.json stays small whatever a notebook does.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from ..cell_numbers import NO_NAME, CellPlaces, cell_where, error_line, error_summary, place_errors, without_place
from ..defining_cells import find_definitions, is_stub
from ..student_text import clean_lines as clean
from ..statuses import CellStatus, RunStatus

EVALUE_CAP = 1000
TRACEBACK_CAP = 4000
ENAME_CAP = 200
REASON_CAP = 2000
DETAILS_BUDGET = 256 * 1024  # characters of evalue + traceback kept over all cells
SHORT_EVALUE_CAP = 200  # a cell's message once the budget is spent
# a file a cell names (a quoted relative path with an extension), for "X is missing: the cell that
# uses it failed"; bounded in count, length and the text scanned
_PATH_LITERAL = re.compile(r"""(['"])([\w.\-/]{1,120}\.[A-Za-z0-9]{1,8})\1""")
MAX_FILES = 64
MAX_SCANNED_CHARS = 200_000
REPLY_OK = "ok"  # a Jupyter execute_reply's status (the protocol's word, not execution.json's)


@dataclass
class Outcome:
    status: RunStatus
    reason: str | None
    kernel_usable: bool = True  # may the probe still run in this kernel?
    # of a timeout: the share of the CPU time the kernel's processes wanted that they spent waiting
    # for a CPU (neighbours' load), None when unknown; a batch regrades alone only a starved timeout
    cpu_denied_share: float | None = None


@dataclass
class CellRecord:
    index: int
    status: CellStatus
    duration_s: float
    ename: str | None = None
    evalue: str | None = None
    traceback: str | None = None
    number: int = 0  # position among the code cells, from 1 (0: not known)
    count: int | None = None  # the kernel's execution count (its tracebacks say "Cell In[count]")
    line: int | None = None  # the line of this cell where its error happened

    def as_dict(self) -> dict:
        d = {"index": self.index, "status": self.status, "duration_s": round(self.duration_s, 3)}
        if self.number:
            d["code_cell"] = self.number
        if self.status == CellStatus.ERROR:
            d.update(ename=self.ename, evalue=self.evalue, traceback=self.traceback)
            if self.line is not None:
                d["line"] = self.line
        return d


def reply_to_cell(index: int, content: dict | None, duration_s: float, *, number: int = 0) -> CellRecord:
    """A cell's record from its execute_reply content (None: an empty cell nbclient skipped).

    A kernel may report an error without a name (``ename`` missing, null, or Python's
    ``NoneType`` with the value ``None``, what formatting "no exception" gives): the name is then
    empty and the message is the last line of the traceback, or :data:`NO_NAME`."""
    count = content.get("execution_count") if isinstance(content, dict) else None
    count = count if isinstance(count, int) and not isinstance(count, bool) else None
    if not content or content.get("status") == REPLY_OK:
        return CellRecord(index, CellStatus.OK, duration_s, number=number, count=count)
    tb = content.get("traceback")
    tb_text = "\n".join(map(str, tb)) if isinstance(tb, list) else str(tb or "")
    ename, evalue = content.get("ename"), content.get("evalue")
    if not isinstance(ename, str) or not ename.strip() or (ename == "NoneType" and str(evalue) in ("None", "")):
        last = [line for line in clean(tb_text, TRACEBACK_CAP).splitlines() if line.strip()]
        last = [line for line in last if line.strip() != "NoneType: None"]
        return CellRecord(
            index,
            CellStatus.ERROR,
            duration_s,
            "",
            clean(last[-1].strip() if last else NO_NAME, EVALUE_CAP),
            clean(tb_text, TRACEBACK_CAP),
            number=number,
            count=count,
        )
    return CellRecord(
        index,
        CellStatus.ERROR,
        duration_s,
        clean(ename, ENAME_CAP),
        clean(evalue if evalue is not None else "", EVALUE_CAP),
        clean(tb_text, TRACEBACK_CAP),
        number=number,
        count=count,
    )


def build_record(
    outcome: Outcome,
    cells: list[CellRecord],
    isolation: dict,
    started: float,
    *,
    probe: str,
    output_truncated: bool = False,
    cells_in_notebook: int | None = None,
    language: str | None = None,
    sources: list[str] | None = None,
    names: list[str] | None = None,
    kernel: str = "fresh",
    kernel_reason: str | None = None,
) -> dict:
    """execution.json. ``cells_total`` counts code cells; ``cells_in_notebook`` every cell;
    ``first_error.where`` names the cell as students read it (:mod:`autograder.cell_numbers`);
    ``language`` is the non-Python language the notebook's metadata names (it still ran as Python).
    With the cells' ``sources``, errors are placed by cell and line (never by a kernel's temporary
    file name), and ``definitions`` names the cell that defines each of ``names`` and how it ran.
    ``kernel``: ``template`` (a child of the slot's kernel template) or ``fresh``; ``kernel_reason``:
    why a fresh one although a template was asked for, or why the run was done twice."""
    if sources is not None and len(sources) == len(cells):
        cells = _placed(cells, sources)
    cells = _within_budget(cells)
    errors = [c for c in cells if c.status == CellStatus.ERROR]
    first = errors[0] if errors else None
    first_error = None
    if first is not None:
        first_error = {
            "cell": first.index,
            "code_cell": first.number or None,
            "where": cell_where(first.number or None, first.index),
            "ename": first.ename,
            "evalue": first.evalue,
            "summary": error_summary(first.ename, first.evalue),
        }
        if first.line is not None:  # "SyntaxError: expected ':' (line 4)", its place said once
            first_error["line"] = first.line
            first_error["summary"] = (
                f"{error_summary(first.ename, without_place(first.evalue or ''))} (line {first.line})"
            )
    return {
        "status": outcome.status,
        "reason": clean(outcome.reason, REASON_CAP)
        if outcome.reason and outcome.status != RunStatus.COMPLETED
        else None,
        "cells_total": len(cells),
        "cells_in_notebook": cells_in_notebook if cells_in_notebook is not None else len(cells),
        "language": clean(language, 40) if language else None,
        "cells_run": sum(c.status != CellStatus.NOT_RUN for c in cells),
        "cells_errored": len(errors),
        "cells": [c.as_dict() for c in cells],
        "first_error": first_error,
        "probe": probe,
        "duration_s": round(time.monotonic() - started, 3),
        "output_truncated": bool(output_truncated),
        "isolation": isolation,
        "kernel": kernel,
        "kernel_reason": clean(kernel_reason, REASON_CAP) if kernel_reason else None,
        "cpu_denied_share": outcome.cpu_denied_share,
        "definitions": _definitions(names or [], cells, sources) if sources is not None else {},
        "files": _files_of_failed_cells(cells, sources) if sources is not None else {},
    }


def _placed(cells: list[CellRecord], sources: list[str]) -> list[CellRecord]:
    """Each error's message and traceback with the kernel's names of cells (a temporary file,
    ``Cell In[9]``) replaced by the student's "code cell 9 (cell 16 of the notebook), line 4"."""
    places = CellPlaces([(cell_where(c.number or None, c.index), src, c.count) for c, src in zip(cells, sources)])
    return [
        replace(
            c,
            line=error_line(c.evalue, c.traceback),  # still within the caps once the names are longer
            evalue=clean(place_errors(c.evalue or "", places), EVALUE_CAP),
            traceback=clean(place_errors(c.traceback or "", places), TRACEBACK_CAP),
        )
        if c.status == CellStatus.ERROR
        else c
        for c in cells
    ]


def _definitions(names: list[str], cells: list[CellRecord], sources: list[str]) -> dict:
    """name → the code cell that defines it with how it ran (the last one that ran cleanly, else
    the last one: when none ran cleanly, that is why the name is missing), or None when no cell
    defines it."""
    found = find_definitions(names, sources)
    out: dict = {}
    for name in names:
        spots = found.get(name)
        if not spots:
            out[name] = None
            continue
        pos, line = next((s for s in reversed(spots) if cells[s[0]].status == CellStatus.OK), spots[-1])
        c = cells[pos]
        out[name] = {
            "cell": c.index,
            "code_cell": c.number or None,
            "where": cell_where(c.number or None, c.index),
            "line": line,
            "status": c.status,
        }
        if c.status == CellStatus.ERROR:
            out[name].update(ename=c.ename, evalue=c.evalue, error_line=c.line)
        if is_stub(sources[pos], name):  # still the starter's `raise NotImplementedError`
            out[name]["stub"] = True
    return out


def _files_of_failed_cells(cells: list[CellRecord], sources: list[str]) -> dict:
    """path → the first code cell that names the file (a quoted relative path) and did not run
    cleanly (an error, a timeout, not run), with how it ran: why a file may be missing. A file no
    failed cell names is left out. Read from the notebook's own sources, before any hidden input."""
    out: dict = {}
    for c, source in zip(cells, sources):
        if c.status == CellStatus.OK or not isinstance(source, str):
            continue
        for match in _PATH_LITERAL.finditer(source[:MAX_SCANNED_CHARS]):
            path = match.group(2)
            if path in out or len(out) >= MAX_FILES or path.startswith("/"):
                continue
            out[path] = {
                "cell": c.index,
                "code_cell": c.number or None,
                "where": cell_where(c.number or None, c.index),
                "status": c.status,
            }
            if c.status == CellStatus.ERROR:
                out[path].update(ename=c.ename, evalue=c.evalue, error_line=c.line)
    return out


def _within_budget(cells: list[CellRecord]) -> list[CellRecord]:
    """The records with error details kept in order until DETAILS_BUDGET is spent; after that a
    cell keeps its status, name and a short message, not its traceback."""
    left, out = DETAILS_BUDGET, []
    for c in cells:
        if c.status == CellStatus.ERROR:
            size = len(c.evalue or "") + len(c.traceback or "")
            if size > left:
                c = replace(c, evalue=(c.evalue or "")[:SHORT_EVALUE_CAP], traceback="")
                size = len(c.evalue or "")
            left = max(0, left - size)
        out.append(c)
    return out
