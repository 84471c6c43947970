"""Rich tables for the instructor's terminal: one grade in detail, or several submissions side by side.

Instructors see everything, hidden checks included (marked as such). Every cell is a
:class:`rich.text.Text`, never a string: rich would parse a string as console markup, and a
reason, a note or a submission's name is data a notebook controls (``"[/]x"`` raised
``MarkupError``); what comes from a submission is also cleaned of control characters and ANSI
escapes (:func:`autograder.report.escape.plain`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table
from rich.text import Text

from ..grade_text import OP_TEXT
from ..statuses import Visibility
from .escape import plain

NOTE_CHARS = 300  # of a reason or a note in a table cell


def grade_table(grade: Mapping[str, Any], *, parts: bool = True) -> Table:
    """One row per check (its score), then (``parts``) one row per part: measured, threshold, points."""
    table = Table(
        title=_data(
            f"{grade.get('assignment', '')}: {_pts(grade.get('score', 0))} / {_pts(grade.get('max_score', 0))}"
        ),
        show_lines=False,
        title_justify="left",
    )
    table.add_column("check")
    table.add_column("measured", justify="right")
    table.add_column("threshold", justify="right")
    table.add_column("points", justify="right")
    for check in grade.get("checks", []):
        label = _data(check.get("title", check.get("id")), style="bold")
        if check.get("visibility", Visibility.VISIBLE) != Visibility.VISIBLE:
            label.append(f" ({plain(check['visibility'], 40)})", style="dim")
        table.add_row(
            label,
            Text(),
            Text(),
            _score_text(check.get("score", 0), check.get("max_score", 0), check.get("passed")),
            end_section=False,
        )
        for part in check.get("parts", []) if parts else []:
            mark = Text("  ✓ " if part.get("passed") else "  ✗ ", style="green" if part.get("passed") else "red")
            mark.append(plain(part.get("name", ""), NOTE_CHARS))
            measured = _data(
                part.get("reason") or part.get("measured_text", "?"), style="yellow" if part.get("reason") else ""
            )
            threshold = _data(
                f"{OP_TEXT.get(str(part.get('op')), part.get('op', ''))} {part.get('threshold_text', '?')}"
            )
            table.add_row(
                mark, measured, threshold, _data(f"{_pts(part.get('score', 0))} / {_pts(part.get('points', 0))}")
            )
        table.add_section()
    for item in grade.get("manual", []) or []:
        table.add_row(
            _data(f"{item.get('title', item.get('id'))} (graded by hand)", style="dim"),
            Text(),
            Text(),
            _data(f"– / {_pts(item.get('points', 0))}"),
        )
    return table


def print_grade_table(
    grade: Mapping[str, Any], console: Console | None = None, measurements: Mapping[str, Any] | None = None
) -> Table:
    """The grade's table; when nothing of the work could be graded, one row per check and the
    short paragraph (:mod:`.nothing_graded`) instead of ~35 "not measured" rows."""
    from ..attempt import nothing_to_grade
    from .nothing_graded import short_text

    short = nothing_to_grade(grade)
    table = grade_table(grade, parts=not short)
    console = console or Console()
    console.print(table)
    if short:
        console.print(_data(short_text(grade, measurements), limit=2000))
    return table


WIDE_LOG_COLUMNS = 200  # width of a scores table written to a log, where nothing wraps it
NAME_MIN = 12  # a submission's name is cut (…) to no less than this
NOTE_MIN = 16  # the note column wraps down to this width, else it moves below the table


@dataclass(frozen=True)
class ScoresLayout:
    """How a scores table fits a width: the total is always whole; what gives, in this order, is
    the note column (wrapped, then moved below the table), the check names (numbered, with a
    legend below), then the check columns (left to gradebook.csv), and the submission's name (cut)."""

    numbered: bool = False  # check columns headed 1, 2, … with a legend below
    notes: bool = True  # the note column (else one line per note below the table)
    checks: bool = True  # the check columns
    name_width: int | None = None


def scores_table(
    rows: Iterable[Mapping[str, Any]], title: str | None = None, *, layout: ScoresLayout = ScoresLayout()
) -> Table:
    """Several submissions: ``rows`` of ``{"name", "score", "max", "checks": {id: score}}``.

    A check's value may be a number or ``{"score": …, "max_score": …}``; an optional
    ``"checks_max": {id: max}`` adds the maxima; an optional ``"note"`` (or ``"reason"``, e.g.
    "timeout") gets its own column. Columns follow the checks in first-seen order.
    """
    rows = list(rows)
    check_ids = _check_ids(rows) if layout.checks else []
    table = Table(title=_data(title) if title is not None else None, title_justify="left")
    table.add_column("submission", no_wrap=True, overflow="ellipsis", max_width=layout.name_width)
    for n, cid in enumerate(check_ids, 1):
        header = str(n) if layout.numbered else markup_escape(plain(cid, 80))  # a header is markup
        table.add_column(header, justify="right", no_wrap=True)
    totals = [_total(row) for row in rows]
    table.add_column(
        "total", justify="right", style="bold", no_wrap=True, min_width=max([len("total"), *(len(t) for t in totals)])
    )
    with_notes = layout.notes and any(_note(row) for row in rows)
    if with_notes:
        table.add_column("note", overflow="fold", min_width=NOTE_MIN)
    for row, total in zip(rows, totals):
        checks = row.get("checks", {}) or {}
        cells: list[Any] = [_data(row.get("name", "?"))]
        maxima = row.get("checks_max", {}) or {}
        cells += [_check_cell(checks.get(cid), maxima.get(cid)) for cid in check_ids]
        cells.append(Text(total))
        if with_notes:
            cells.append(_note(row))
        table.add_row(*cells)
    return table


def scores_layout(rows: list[Mapping[str, Any]], width: int) -> ScoresLayout:
    """The first layout whose table fits ``width`` columns with every total whole (widths in terminal
    cells, not characters: a full-width letter takes two)."""
    names = max([cell_len(plain(row.get("name", "?"), NOTE_CHARS)) for row in rows] + [len("submission")])
    total = max([len("total")] + [len(_total(row)) for row in rows])
    ids = _check_ids(rows)
    named = [
        max(
            [cell_len(plain(cid, 80))]
            + [len(_check_cell((r.get("checks") or {}).get(cid), (r.get("checks_max") or {}).get(cid))) for r in rows]
        )
        for cid in ids
    ]
    numbered = [
        max(
            [len(str(n))]
            + [len(_check_cell((r.get("checks") or {}).get(cid), (r.get("checks_max") or {}).get(cid))) for r in rows]
        )
        for n, cid in enumerate(ids, 1)
    ]
    has_notes = any(_note(row) for row in rows)
    choices = [
        ScoresLayout(),
        ScoresLayout(numbered=True),
        ScoresLayout(notes=False),
        ScoresLayout(numbered=True, notes=False),
        ScoresLayout(checks=False),
        ScoresLayout(checks=False, notes=False),
    ]
    for layout in choices:
        columns = [] if not layout.checks else numbered if layout.numbered else named
        columns = [*columns, total] + ([NOTE_MIN] if layout.notes and has_notes else [])
        room = width - sum(columns) - 3 * (len(columns) + 1) - 1  # each column: 2 of padding, 1 of border
        if room >= min(names, NAME_MIN):
            return ScoresLayout(
                numbered=layout.numbered,
                notes=layout.notes,
                checks=layout.checks,
                name_width=None if room >= names else room,
            )
    return ScoresLayout(checks=False, notes=False, name_width=NAME_MIN)


def print_scores_table(
    rows: Iterable[Mapping[str, Any]], console: Console | None = None, title: str | None = None
) -> Table:
    """The scores table at the console's width (``scores_layout``), then what did not fit in it:
    the numbered checks' legend, the notes, or the check columns left out."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # a log or a pipe: don't squeeze the table into 80 columns
            console = Console(width=WIDE_LOG_COLUMNS)
    rows = list(rows)
    layout = scores_layout(rows, console.width)
    table = scores_table(rows, title, layout=layout)
    console.print(table)
    ids = _check_ids(rows)
    if ids and not layout.checks:
        console.print(
            Text(f"{len(ids)} check columns do not fit {console.width} columns: see gradebook.csv", style="dim")
        )
    elif layout.numbered:
        console.print(
            _data("checks: " + " · ".join(f"{n} {cid}" for n, cid in enumerate(ids, 1)), limit=2000), style="dim"
        )
    if not layout.notes:
        for row in rows:
            if _note(row):
                console.print(_data(f"{plain(row.get('name', '?'), 80)}: {_note(row)}"))
    return table


def _check_ids(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = []
    for row in rows:
        for cid in row.get("checks", {}) or {}:
            if cid not in ids:
                ids.append(cid)
    return ids


def _total(row: Mapping[str, Any]) -> str:
    return plain(f"{_pts(row.get('score', 0))} / {_pts(row.get('max', 0))}", 40)


def _data(value: Any, style: str = "", limit: int = NOTE_CHARS) -> Text:
    """Data as a table cell: a Text (never parsed as markup), cleaned of control characters."""
    return Text(plain(value, limit), style=style)


def _note(row: Mapping[str, Any]) -> Text:
    return _data(row.get("note") or row.get("reason") or "")


def _check_cell(value: Any, max_score: Any = None) -> Text:
    if value is None:
        return Text("–", style="dim")
    if isinstance(value, Mapping) or max_score is not None:
        if isinstance(value, Mapping):
            value, max_score = value.get("score", 0), value.get("max_score")
        score = value if isinstance(value, (int, float)) else 0
        style = "green" if max_score is not None and score >= max_score else ("red" if not score else "yellow")
        return Text(f"{_pts(score)}" + (f"/{_pts(max_score)}" if max_score is not None else ""), style=style)
    return _data(_pts(value))


def _score_text(score: float, max_score: float, passed: Any) -> Text:
    return Text(f"{_pts(score)} / {_pts(max_score)}", style="green" if passed else ("red" if not score else "yellow"))


def _pts(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)
