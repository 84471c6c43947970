"""What the integrity report shows: the shared code highlighted (escaped, bounded) and
``integrity.csv``, with the gradebook's protection against spreadsheet formulas."""

from __future__ import annotations

import csv
import html
import io
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from markupsafe import Markup

from ..safe_files import write_atomic

CONTEXT_LINES = 2
SNIPPET_CHARS = 4000
CSV_COLUMNS = [
    "rank",
    "name_a",
    "name_b",
    "overlap_share",
    "share_a",
    "share_b",
    "flagged",
    "cells_a",
    "cells_b",
]  # cells: "code cell 9 (cell 16 of the notebook); …", the feedback's numbering


def highlight(text: str, slices: list[tuple[int, int]], *, budget: int = SNIPPET_CHARS) -> Markup:
    """The lines around the overlap, escaped, with ``<mark>`` around the shared code; ``…`` for
    lines left out. Bounded to about ``budget`` characters of code.

    The one place the shared code becomes markup (the summary's template places it as it is):
    every piece of the code is escaped here, and the only tags are the ``<mark>`` added here."""
    if not slices:
        return Markup("")
    starts = [0]
    for k, ch in enumerate(text):
        if ch == "\n":
            starts.append(k + 1)
    line_of = np.searchsorted(np.array(starts), np.arange(len(text) + 1), side="right") - 1
    keep: set[int] = set()
    for s, e in slices:
        first, last = int(line_of[min(s, len(text))]), int(line_of[min(max(e - 1, s), len(text))])
        keep.update(range(max(0, first - CONTEXT_LINES), last + CONTEXT_LINES + 1))
    marked = np.zeros(len(text), dtype=bool)
    for s, e in slices:
        marked[s:e] = True
    out, used, previous = [], 0, -1
    lines = text.split("\n")
    for n in sorted(k for k in keep if k < len(lines)):
        if used > budget:
            out.append("…")
            break
        if n != previous + 1:
            out.append("…")
        start = starts[n]
        out.append(_mark_line(lines[n], marked[start : start + len(lines[n])]))
        used += len(lines[n])
        previous = n
    return Markup("\n".join(out))


def _mark_line(line: str, marked: Any) -> str:
    out, k = [], 0
    while k < len(line):
        j = k
        while j < len(line) and bool(marked[j]) == bool(marked[k]):
            j += 1
        piece = html.escape(line[k:j], quote=False)
        out.append(f"<mark>{piece}</mark>" if marked[k] else piece)
        k = j
    return "".join(out)


# ── integrity.csv ─────────────────────────────────────────────────────────────────────────────


def integrity_csv(report: Any) -> str:
    from .gradebook import number_cell, text_cell

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for rank, p in enumerate(report.pairs, start=1):
        writer.writerow(
            [
                rank,
                text_cell(p.a),
                text_cell(p.b),
                number_cell(p.share),
                number_cell(p.share_a),
                number_cell(p.share_b),
                "yes" if p.flagged else "expected" if p.expected else "no",
                _cell_list(p.cells_a),
                _cell_list(p.cells_b),
            ]
        )
    return buf.getvalue()


def write_integrity_csv(path: Path, report: Any) -> Path:
    return write_atomic(path, integrity_csv(report))


def _cell_list(cells: Iterable[str]) -> str:
    return cells_text(cells)


_WHERE = re.compile(r"code cell (\d+) \(cell (\d+) of the notebook\)")


def cells_text(cells: Iterable[str]) -> str:
    """Cells named as the feedback names them, several at once: "code cells 7, 9 (cells 12, 16 of
    the notebook)"; one cell keeps its own words."""
    cells = [str(c) for c in cells]
    found = [_WHERE.fullmatch(c) for c in cells]
    if len(cells) < 2 or not all(found):
        return "; ".join(cells)
    codes = ", ".join(m.group(1) for m in found if m)
    whole = ", ".join(m.group(2) for m in found if m)
    return f"code cells {codes} (cells {whole} of the notebook)"
