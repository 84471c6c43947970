"""The execution.json record (schema in docs/ARCHITECTURE.md) and its per-cell entries.

Everything in it that a kernel sent is cleaned on the way in (:func:`clean`: ANSI escapes
removed, lone surrogates replaced, capped) and the whole record is bounded: the error details
of all cells together take at most ``DETAILS_BUDGET`` characters (later errors keep their
name and a short message), so execution.json stays small whatever a notebook does.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from ..redact import redact
from ..safe_files import scrub

EVALUE_CAP = 1000
TRACEBACK_CAP = 4000
ENAME_CAP = 200
REASON_CAP = 2000
DETAILS_BUDGET = 256 * 1024      # characters of evalue + traceback kept over all cells
SHORT_EVALUE_CAP = 200           # a cell's message once the budget is spent
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


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

    def as_dict(self) -> dict:
        d = {"index": self.index, "status": self.status, "duration_s": round(self.duration_s, 3)}
        if self.status == "error":
            d.update(ename=self.ename, evalue=self.evalue, traceback=self.traceback)
        return d


def clean(text: object, cap: int) -> str:
    """ANSI escapes removed, lone surrogates replaced, grader paths redacted, capped to ``cap``
    characters (keeping the end, where the error is)."""
    s = str(text)
    if len(s) > 4 * cap + 4096:      # bound the work on a huge message: only its end is kept
        s = s[-(4 * cap + 4096):]
    s = redact(scrub(ANSI.sub("", s)))
    return s if len(s) <= cap else "…" + s[-(cap - 1):]


def reply_to_cell(index: int, content: dict | None, duration_s: float) -> CellRecord:
    """A cell's record from its execute_reply content (None: an empty cell nbclient skipped)."""
    if not content or content.get("status") == "ok":
        return CellRecord(index, "ok", duration_s)
    tb = content.get("traceback")
    tb_text = "\n".join(map(str, tb)) if isinstance(tb, list) else str(tb or "")
    return CellRecord(index, "error", duration_s,
                      clean(content.get("ename") or content.get("status") or "Error", ENAME_CAP),
                      clean(content.get("evalue", ""), EVALUE_CAP), clean(tb_text, TRACEBACK_CAP))


def build_record(outcome: Outcome, cells: list[CellRecord], isolation: dict, started: float, *,
                 probe: str, output_truncated: bool = False) -> dict:
    cells = _within_budget(cells)
    errors = [c for c in cells if c.status == "error"]
    first = errors[0] if errors else None
    return {
        "status": outcome.status,
        "reason": clean(outcome.reason, REASON_CAP) if outcome.reason and outcome.status != "completed" else None,
        "cells_total": len(cells),
        "cells_run": sum(c.status != "not_run" for c in cells),
        "cells_errored": len(errors),
        "cells": [c.as_dict() for c in cells],
        "first_error": {"cell": first.index, "ename": first.ename, "evalue": first.evalue} if first else None,
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
