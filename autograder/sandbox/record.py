"""The execution.json record (schema in docs/ARCHITECTURE.md) and its per-cell entries."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

EVALUE_CAP = 1000
TRACEBACK_CAP = 4000
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
    """ANSI escapes removed, capped to ``cap`` characters (keeping the end, where the error is)."""
    s = ANSI.sub("", str(text))
    return s if len(s) <= cap else "…" + s[-(cap - 1):]


def reply_to_cell(index: int, content: dict | None, duration_s: float) -> CellRecord:
    """A cell's record from its execute_reply content (None: an empty cell nbclient skipped)."""
    if not content or content.get("status") == "ok":
        return CellRecord(index, "ok", duration_s)
    tb = content.get("traceback")
    tb_text = "\n".join(map(str, tb)) if isinstance(tb, list) else str(tb or "")
    return CellRecord(index, "error", duration_s,
                      clean(content.get("ename") or content.get("status") or "Error", 200),
                      clean(content.get("evalue", ""), EVALUE_CAP), clean(tb_text, TRACEBACK_CAP))


def build_record(outcome: Outcome, cells: list[CellRecord], isolation: dict, started: float, *,
                 probe: str, output_truncated: bool = False) -> dict:
    errors = [c for c in cells if c.status == "error"]
    first = errors[0] if errors else None
    return {
        "status": outcome.status,
        "reason": outcome.reason if outcome.status != "completed" else None,
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
