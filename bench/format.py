"""Numbers, goals and section titles for RESULTS.md: the bottom layer of bench/.

Every benchmark module (``bench_*.py``) writes its section and its goals with these; ``report_md``
assembles the document from the benchmark modules. Imports go one way only:
``run.py`` → ``report_md`` → ``bench_*`` → ``format``, ``common``, ``memory_sampling``, ``cpu_accounting``.

A goal is a dict ``{"subject", "measured", "target", "unit", "lower_is_better", "met", "fix"}``;
:func:`goal` builds one, :func:`goal_line` renders it, and :func:`goals_table` is the summary table
at the top of RESULTS.md.
"""

from __future__ import annotations

from typing import Any

SECTION_TITLES = (
    "## 1 · Overhead of grading vs bare execution",
    "## 2 · Batch grading: autograder vs otter-grader",
    "## 3 · Rescoring stored submissions",
    "## 4 · Peak memory per submission in flight",
    "## 5 · Dask distributed vs the local pool",
)


# ── numbers ──────────────────────────────────────────────────────────────────────────────────


def fmt_s(x: float | None, *, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.2f} s" if signed else f"{x:.2f} s"


def fmt_x(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f} %"


def fmt_mb(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f} MB"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "s":
        return fmt_s(value)
    if unit == "×":
        return fmt_x(value)
    if unit == "MB":
        return fmt_mb(value)
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "overhead":  # a ratio shown as the overhead it implies
        return f"{(value - 1) * 100:+.1f} % ({value:.3f}×)"
    return f"{value:g} {unit}"


# ── goals ────────────────────────────────────────────────────────────────────────────────────


def goal(
    subject: str, measured: float | None, target: float, unit: str, *, lower_is_better: bool, fix: str
) -> dict[str, Any]:
    met = None if measured is None else (measured <= target if lower_is_better else measured >= target)
    return {
        "subject": subject,
        "measured": measured,
        "target": target,
        "unit": unit,
        "lower_is_better": lower_is_better,
        "met": met,
        "fix": fix,
    }


def miss(g: dict[str, Any]) -> str:
    """By how much a missed goal was missed, in its unit and relative to the target."""
    m, t, unit = g["measured"], g["target"], g["unit"]
    if unit == "overhead":
        return f"{(m - t) * 100:.1f} percentage points"
    gap = (m - t) if g["lower_is_better"] else (t - m)
    rel = gap / t * 100 if t else float("inf")
    text = {"s": f"{gap:.2f} s", "MB": f"{gap:,.0f} MB", "×": f"{gap:.2f}×"}.get(unit, f"{gap:.3g} {unit}")
    return f"{text} ({rel:.0f} % of the goal)"


def goal_line(g: dict[str, Any]) -> str:
    bound = "≤" if g["lower_is_better"] else "≥"
    head = f"{g['subject']}: measured {_fmt(g['measured'], g['unit'])}, goal {bound} {_fmt(g['target'], g['unit'])}"
    if g["met"] is None:
        return f"- ⚪ **not measured**: {head}."
    if g["met"]:
        return f"- ✅ **met**: {head}."
    return f"- ❌ **missed** by {miss(g)}: {head}. What would close it: {g['fix']}."


def goal_lines(goals: list[dict[str, Any]]) -> list[str]:
    """The goals' lines; a fix already given by the line before is referred to, not repeated."""
    lines, previous = [], None
    for g in goals:
        line = goal_line(g)
        if g["met"] is False and g["fix"] == previous:
            line = line.replace(f"What would close it: {g['fix']}.", "What would close it: as above.")
        previous = g["fix"] if g["met"] is False else previous
        lines.append(line)
    return lines


def goals_table(goals: list[dict[str, Any]]) -> list[str]:
    lines = ["| goal | measured | target | result |", "|---|---:|---:|---|"]
    for g in goals:
        bound = "≤" if g["lower_is_better"] else "≥"
        verdict = "not measured" if g["met"] is None else "✅ met" if g["met"] else f"❌ missed by {miss(g)}"
        lines.append(
            f"| {g['subject']} | {_fmt(g['measured'], g['unit'])} | {bound} {_fmt(g['target'], g['unit'])} "
            f"| {verdict} |"
        )
    return lines
