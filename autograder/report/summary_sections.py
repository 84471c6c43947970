"""Pieces of summary.html as plain data: sortable tables, links to submissions, and the sections
that are lists rather than charts (needs attention, integrity, tolerances). Each section is a
dict whose ``kind`` names the template that lays it out (``templates/summary_<kind>.html``);
the templates escape every text they place, so nothing here escapes anything."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..student_text import clean
from ..statuses import SubmissionStatus
from .integrity_view import cells_text
from .summary_charts import feedback_href

MAX_CELL = 300
NEEDS_ATTENTION = {
    SubmissionStatus.TIMEOUT: "ran out of time",
    SubmissionStatus.KERNEL_DIED: "the kernel died (memory, a crash)",
    SubmissionStatus.GRADER_ERROR: "the grader itself failed (see their submission.json)",
    SubmissionStatus.SANDBOX_ERROR: "the jail could not run them",
    SubmissionStatus.STARTUP_FAILED: "the kernel did not start",
    SubmissionStatus.UNREADABLE: "no notebook could be read",
    SubmissionStatus.NOT_GRADED: "not graded yet (the batch did not finish)",
}


def _cap(x: Any, n: int = MAX_CELL) -> str:
    return clean(x, n)


def names_html(names: Iterable[str], *, limit: int | None = None, submitters: str | None = None) -> dict[str, Any]:
    """Links to each submission's feedback; ``limit`` shows the first ones and counts the rest
    (``templates/summary_macros.html``'s ``names``)."""
    names = list(names)
    shown = names if limit is None else names[:limit]
    return {
        "links": [{"href": feedback_href(n), "name": n} for n in shown],
        "more": len(names) - limit if limit is not None and len(names) > limit else 0,
        "submitters": _cap(submitters, 80) if submitters else "",
    }


def styled(text: str, cls: str) -> dict[str, Any]:
    """A table cell's text in a CSS class (``pass``, ``fail``)."""
    return {"text": text, "cls": cls}


def _cell(value: Any) -> dict[str, Any]:
    sort = None
    if isinstance(value, tuple):
        value, sort = value
    cell: dict[str, Any] = {"text": "", "cls": None, "names": None, "sort": sort}
    if isinstance(value, dict) and "links" in value:
        cell["names"] = value
    elif isinstance(value, dict):
        cell.update(value)
    else:
        cell["text"] = _cap(value)
    return cell


def table(
    title: str,
    header: list[str],
    rows: list[list[Any]],
    *,
    empty: str = "None.",
    note: str = "",
    widths: list[float] | None = None,
    anchor: str = "",
) -> dict[str, Any]:
    """A section with a sortable table. A cell is text, links (:func:`names_html`), :func:`styled`
    text, or ``(shown, sort key)``."""
    return {
        "kind": "table",
        "title": title,
        "header": header,
        "rows": [[_cell(c) for c in row] for row in rows],
        "empty": empty,
        "note": note,
        "widths": [f"{w:.2f}" for w in widths or []],
        "anchor": anchor,
    }


# ── needs attention ───────────────────────────────────────────────────────────────────────────


def attention_section(
    rows: list[dict[str, Any]], drift: list[str], integrity: Any, *, not_attempted: Sequence[str] = ()
) -> dict[str, Any]:
    """What needs a human: ``problems``, each with a ``kind`` the template lays out (none: all clear)."""
    items: list[dict[str, Any]] = []
    for status, meaning in NEEDS_ATTENTION.items():
        hit = [r for r in rows if r["status"] == status]
        if hit:
            reasons = {str(r.get("reason") or "") for r in hit} - {""}
            items.append(
                {
                    "kind": "status",
                    "count": len(hit),
                    "status": status,
                    "meaning": meaning,
                    "names": names_html(sorted(r["name"] for r in hit), limit=30),
                    "example": _cap(sorted(reasons)[0], 160) if reasons else "",
                }
            )
    if not_attempted:
        items.append(
            {"kind": "not_attempted", "count": len(not_attempted), "names": names_html(not_attempted, limit=30)}
        )
    for message in drift:
        items.append({"kind": "drift", "message": message})
    flagged = list(getattr(integrity, "flagged", []) or [])
    if flagged:
        items.append(
            {
                "kind": "flagged",
                "count": len(flagged),
                "more": len(flagged) > 10,
                "pairs": [{"a": p.a, "b": p.b, "share": f"{p.share:.0%}"} for p in flagged[:10]],
            }
        )
    if getattr(integrity, "error", None):
        items.append({"kind": "integrity_error", "error": _cap(integrity.error)})
    return {"kind": "attention", "problems": items}


# ── integrity ─────────────────────────────────────────────────────────────────────────────────


def integrity_section(report: Any) -> dict[str, Any] | None:
    if report is None:
        return None
    intro = (
        f"Every pair of the {report.compared} notebooks with code of their own was compared (copydetect "
        "fingerprints; comments, whitespace and names do not count; the starter's code is left out). "
        f"Pairs sharing at least {report.threshold:.0%} are flagged: a lead for a human to read, never a "
        "verdict. Highlighted: the code found in both."
    )
    if report.too_little_code:
        intro += (
            f" Not compared, too little code of their own: "
            f"{', '.join(report.too_little_code[:10])}{' …' if len(report.too_little_code) > 10 else ''}."
        )
    expected = sum(1 for p in report.pairs if getattr(p, "expected", False))
    if expected:
        intro += (
            f" {len(report.family)} submissions are, byte for byte, the assignment's own examples (variants "
            f"of one solution, e.g. what the demo grades): their {expected} listed pair(s) share code by "
            "construction and are marked expected, not flagged."
        )
    shown = [p for p in report.pairs[:10]] + [p for p in report.flagged[10:30]]
    pairs = [
        {
            "a": p.a,
            "b": p.b,
            "names_a": names_html([p.a]),
            "names_b": names_html([p.b]),
            "share": p.share,
            "shown_share": f"{p.share:.0%}",
            "flagged": bool(p.flagged),
            "expected": bool(getattr(p, "expected", False)),
            "cells_a": cells_text(p.cells_a),
            "cells_b": cells_text(p.cells_b),
            "open": k < 3 and bool(p.flagged),
            "snippet_a": p.snippet_a,
            "snippet_b": p.snippet_b,
        }
        for k, p in enumerate(shown)
    ]
    return {"kind": "integrity", "title": "Integrity: notebooks that share code", "intro": intro, "pairs": pairs}


# ── tolerances ────────────────────────────────────────────────────────────────────────────────


def tolerances_section(record: Any, drift: list[str]) -> dict[str, Any] | None:
    if not isinstance(record, dict):
        return None
    cal = record.get("calibrated") or {}
    override = record.get("override")
    if isinstance(override, dict):
        changed = override.get("changed") or {}
        override = {
            "path": override.get("path", ""),
            "sha256": str(override.get("sha256", ""))[:16],
            "count": len(changed),
            "rows": [
                {"key": k, "calibrated": v.get("calibrated"), "value": v.get("value")} for k, v in changed.items()
            ],
        }
    else:
        override = None
    calibrated = {"path": cal.get("path", ""), "sha256": str(cal.get("sha256", ""))[:16]}
    return {"kind": "tolerances", "calibrated": calibrated, "override": override, "drift": bool(drift)}
