"""summary.html: the instructor's one-page view of a graded batch, built to answer their questions.

Self-contained and offline: charts are inline SVG (``summary_charts``), the CSS is inline, the
only script sorts tables and is allowed by its hash in the Content-Security-Policy
(``summary_style``); nothing is loaded from anywhere. This module and its ``summary_*`` helpers
build plain data; the Jinja2 templates in ``templates/`` lay it out with autoescape on
(:mod:`.page_templates`), so every piece of text that came from a submission (names, file names,
error messages, code) is escaped where it is placed.

Pass rates and failures count the graded submissions only (:func:`graded_rows`): not attempted
ones (:func:`do_nothing`), unreadable and ungraded ones are listed under Needs attention instead.
Links go to each submission's feedback.html where it sits beside feedback.md.

Sections, top to bottom: overview; **needs attention** (timeouts, dead kernels, grader failures,
unreadable or ungraded notebooks, not attempted ones, version drift, integrity flags); warnings
about the source; score distribution; pass rate per check (bars coloured by rate, linking to the check); the
assignment's scatter (``[summary.scatter]`` in assignment.toml: ``title``, ``x``, ``y``, ``series``
(name → measurement prefix), ``x_label``, ``y_label``; no scatter without it) with each limit
drawn in its series' colour and named by its rubric part; failures by check with the submissions
that failed it; the most common failures, by root cause (:mod:`.summary_causes`);
the submissions that lost points; the integrity report; the slowest submissions; errors in cells;
the tolerances used; and the table of all submissions. Tables sort on a click on their header.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from ..cell_numbers import error_summary, where_of
from ..dotted import lookup
from ..grade_text import OP_TEXT
from ..safe_files import write_atomic
from ..statuses import SubmissionStatus
from ..student_text import clean
from . import summary_charts as charts
from ..attempt import nothing_to_grade
from .gradebook import outcome
from .summary_causes import root_causes
from .page_templates import render
from .summary_sections import attention_section, integrity_section, names_html, styled, table, tolerances_section
from .summary_style import CSP, SORT_SCRIPT

MAX_CELL = 300
TOP = 15
RAN = SubmissionStatus.OK


def write_summary(
    path: Path,
    rows: list[dict[str, Any]],
    *,
    out: Path,
    assignment: Any,
    rubric: dict[str, Any],
    tolerances: dict[str, Any],
    warnings: Iterable[str] = (),
    batch: dict[str, Any] | None = None,
    integrity: Any = None,
) -> Path:
    page = summary_html(
        rows,
        out=out,
        assignment=assignment,
        rubric=rubric,
        tolerances=tolerances,
        warnings=list(warnings),
        batch=batch or {},
        integrity=integrity,
    )
    return write_atomic(path, page)


def summary_html(
    rows: list[dict[str, Any]],
    *,
    out: Path,
    assignment: Any,
    rubric: dict[str, Any],
    tolerances: dict[str, Any],
    warnings: list[str],
    batch: dict[str, Any] | None = None,
    integrity: Any = None,
) -> str:
    token = charts.FEEDBACK_FOLDER.set(Path(out))  # links go to feedback.html where it was written
    try:
        return _summary_html(
            rows,
            out=Path(out),
            assignment=assignment,
            rubric=rubric,
            tolerances=tolerances,
            warnings=warnings,
            batch=batch or {},
            integrity=integrity,
        )
    finally:
        charts.FEEDBACK_FOLDER.reset(token)


def _summary_html(
    rows: list[dict[str, Any]],
    *,
    out: Path,
    assignment: Any,
    rubric: dict[str, Any],
    tolerances: dict[str, Any],
    warnings: list[str],
    batch: dict[str, Any],
    integrity: Any,
) -> str:
    titles = {str(c["id"]): str(c.get("title", c["id"])) for c in rubric.get("checks", []) if "id" in c}
    grades = {r["name"]: _read_json(out / r["name"] / "grade.json") if r["checks"] else {} for r in rows}
    idle = do_nothing(rows, integrity, grades)
    # the tables' outcome says what the attention box says (gradebook.outcome reads it)
    rows = [{**r, "attempted": False} if r["name"] in idle else r for r in rows]
    graded = graded_rows(rows, idle, grades)
    drift = sorted({*batch.get("version_drift", []), *(w for r in rows for w in r.get("version_drift", []))})
    scatter_cfg = scatter_config(assignment)
    sections = [
        _overview(rows, graded, idle),
        attention_section(rows, drift, integrity, not_attempted=sorted(idle)),
        _warnings(warnings),
        _chart(
            "Score distribution",
            charts.score_histogram(rows, _top(rows)) if rows else None,
            "Hover a bar for the submissions in it.",
        ),
        _chart(
            "Pass rate per check",
            _pass_rates(graded, titles),
            f"Share of the {len(graded)} graded submissions that pass each check (not attempted, "
            "unreadable and ungraded ones are left out: see Needs attention); click a bar for who failed it.",
        ),
        _scatter_section(rows, out, scatter_cfg, rubric, tolerances) if scatter_cfg else None,
        _failures_by_check(graded, titles),
        _common_failures(graded, titles, grades, len(rows)),
        _lost_points(rows, titles),
        integrity_section(integrity),
        table(
            "Slowest submissions",
            ["submission", "execution (s)", "status", "score"],
            [[names_html([r["name"]]), _num(r.get("execution_s")), r["status"], _pts(r)] for r in _slowest(rows)],
        ),
        table(
            "Most common errors in cells",
            ["count", "error", "who"],
            _common_errors(rows),
            empty="No cell raised an error.",
            widths=[7, 60, 33],
        ),
        tolerances_section(batch.get("tolerances_used"), drift),
        _all_rows(rows, titles),
    ]
    title = f"{getattr(assignment, 'title', '')}: batch summary"
    return render(
        "summary.html",
        csp=CSP,
        script=SORT_SCRIPT,
        title=title,
        count=len(rows),
        generated=time.strftime("%Y-%m-%d %H:%M"),
        sections=[s for s in sections if s],
    )


def do_nothing(rows: list[dict[str, Any]], integrity: Any, grades: dict[str, Any] | None = None) -> set[str]:
    """Not attempted: notebooks that ran but hold no code of their own (the starter as handed out),
    or of which nothing about the work could be graded (:func:`~.nothing_graded.nothing_to_grade`,
    the rule that gives the student the short feedback), or that scored 0. Listed under Needs
    attention; their failures say nothing about what the class finds hard."""
    empty = set(getattr(integrity, "no_own_code", []) or [])
    grades = grades or {}
    return {
        r["name"]
        for r in rows
        if r["status"] == RAN
        and (
            r["name"] in empty
            or r["score"] <= 0
            or (
                isinstance(grades.get(r["name"]), dict)
                and grades[r["name"]].get("checks")
                and nothing_to_grade(grades[r["name"]])
            )
        )
    }


def graded_rows(rows: list[dict[str, Any]], idle: set[str], grades: dict[str, Any]) -> list[dict[str, Any]]:
    """The submissions whose work was graded: the ones pass rates and failures count. Left out:
    not attempted (``idle``), unreadable, never started or not graded, and any other whose grade
    measured nothing of the work (a kernel that died in its first cell)."""
    out = []
    for r in rows:
        grade = grades.get(r["name"])
        if not r["checks"] or r["name"] in idle:
            continue
        if isinstance(grade, dict) and grade.get("checks") and nothing_to_grade(grade):
            continue
        out.append(r)
    return out


# ── sections ────────────────────────────────────────────────────────────────────────────────


def _overview(rows: list[dict[str, Any]], graded: list[dict[str, Any]], idle: set[str]) -> dict[str, Any]:
    scores = [r["score"] for r in rows]
    top = _top(rows)
    stats = [("submissions", str(len(rows))), ("graded", str(len(graded))), ("not attempted", str(len(idle)))]
    if scores:
        stats += [
            ("mean", f"{statistics.fmean(scores):.1f} / {top:g}"),
            ("median", f"{statistics.median(scores):g} / {top:g}"),
            ("full marks", str(sum(1 for r in rows if r["max"] and r["score"] >= r["max"]))),
        ]
    stats += [(status, str(n)) for status, n in sorted(Counter(r["status"] for r in rows).items())]
    stats.append(("from cache", str(sum(1 for r in rows if r.get("cached")))))
    return {"kind": "overview", "stats": [(value, label) for label, value in stats]}


def _warnings(warnings: list[str]) -> dict[str, Any] | None:
    if not warnings:
        return None
    return {"kind": "warnings", "warnings": [_cap(w) for w in warnings[:50]], "more": max(0, len(warnings) - 50)}


def _chart(title: str, chart: dict[str, Any] | None, caption: str) -> dict[str, Any]:
    return {"kind": "chart", "title": title, "chart": chart, "caption": caption}


def _pass_rates(rows: list[dict[str, Any]], titles: dict[str, str]) -> dict[str, Any] | None:
    graded = [r for r in rows if r["checks"]]
    ids = _check_ids(graded, titles)
    if not graded or not ids:
        return None
    return charts.pass_rate_bars(
        [
            {
                "id": i,
                "title": titles.get(i, i),
                "graded": len(graded),
                "passed": sum(1 for r in graded if r["checks_passed"].get(i)),
            }
            for i in ids
        ]
    )


def scatter_config(assignment: Any) -> dict[str, Any] | None:
    """The assignment's ``[summary.scatter]`` with its labels filled in, or None when it has none
    (the core has no lesson default)."""
    cfg = (getattr(assignment, "config", {}) or {}).get("summary", {}).get("scatter")
    if not cfg:
        return None
    from ..errors import AssignmentError

    if not (
        isinstance(cfg, dict)
        and isinstance(cfg.get("x"), str)
        and isinstance(cfg.get("y"), str)
        and isinstance(cfg.get("series"), dict)
        and cfg["series"]
    ):
        raise AssignmentError(
            f"{assignment.folder / 'assignment.toml'}: [summary.scatter] needs x, y "
            "(measurement names) and a [summary.scatter.series] table (label → path prefix)"
        )
    return {"title": f"{cfg['y']} against {cfg['x']}", "x_label": cfg["x"], "y_label": cfg["y"], **cfg}


def _scatter_section(
    rows: list[dict[str, Any]], out: Path, cfg: dict[str, Any], rubric: dict[str, Any], tolerances: dict[str, Any]
) -> dict[str, Any] | None:
    series = dict(cfg.get("series", {}))
    points: dict[str, list[tuple[float, float, str]]] = {}
    for r in rows:
        m = _read_json(out / r["name"] / "measurements.json")
        for label, prefix in series.items():
            x, _ = lookup(m, f"{prefix}.{cfg.get('x')}")
            y, _ = lookup(m, f"{prefix}.{cfg.get('y')}")
            if _finite(x) and _finite(y):
                points.setdefault(label, []).append((float(x), float(y), r["name"]))
    if not points:
        return None
    limits = []
    for label, prefix in series.items():
        for axis in ("x", "y"):
            found = rubric_limit(rubric, tolerances, f"{prefix}.{cfg.get(axis)}")
            if found is not None:
                limits.append({"axis": axis, "series": label, **found})
    colors = {label: charts.SERIES_COLORS[k % len(charts.SERIES_COLORS)] for k, label in enumerate(points)}
    chart = charts.scatter(points, limits, str(cfg.get("x_label", cfg.get("x"))), str(cfg.get("y_label", cfg.get("y"))))
    return {
        "kind": "scatter",
        "title": str(cfg.get("title", "Measurements per submission")),
        "chart": chart,
        "series": [
            {"label": label, "circle": k % 2 == 0, "color": colors[label], "count": len(points[label])}
            for k, label in enumerate(points)
        ],
        "limits": [
            {
                "label": lim["label"],
                "color": colors.get(lim["series"], "#555"),
                "dash": charts.LIMIT_DASHES[k % len(charts.LIMIT_DASHES)],
            }
            for k, lim in enumerate(limits)
        ],
    }


def rubric_limit(rubric: dict[str, Any], tolerances: dict[str, Any], measure: str) -> dict[str, Any] | None:
    """The rubric's limit on ``measure``: {value, op, label}, the label in the rubric's words."""
    for check in rubric.get("checks", []):
        for part in check.get("parts", []):
            if part.get("measure") != measure or part.get("op") not in ("<=", "<", ">=", ">"):
                continue
            value = rubric_threshold(rubric, tolerances, measure)
            if value is not None:
                label = (
                    f"{part.get('name', measure)} {OP_TEXT.get(part['op'], part['op'])} {value:g} "
                    f"({check.get('title', check.get('id'))})"
                )
                return {"value": value, "op": part["op"], "label": label}
    return None


def rubric_threshold(rubric: dict[str, Any], tolerances: dict[str, Any], measure: str) -> float | None:
    """The numeric threshold the rubric applies to ``measure`` (a literal value or a tolerance)."""
    for check in rubric.get("checks", []):
        for part in check.get("parts", []):
            if part.get("measure") != measure:
                continue
            value = part.get("value")
            if "tolerance" in part:
                value, _ = lookup(tolerances, str(part["tolerance"]))
                if isinstance(value, dict):
                    value = value.get("value")
            if _finite(value):
                return float(value)
    return None


def _failures_by_check(rows: list[dict[str, Any]], titles: dict[str, str]) -> dict[str, Any]:
    graded = [r for r in rows if r["checks"]]
    checks = []
    for cid in _check_ids(graded, titles):
        failed = [r for r in graded if cid in r["checks"] and not r["checks_passed"].get(cid)]
        if not failed:
            continue
        parts = Counter(f["part"] for r in failed for f in r["failures"] if f["check"] == cid)
        checks.append(
            {
                "id": cid,
                "title": titles.get(cid, cid),
                "failed": len(failed),
                "graded": len(graded),
                "parts": parts.most_common(6),
                "names": names_html(sorted(r["name"] for r in failed)),
            }
        )
    return {"kind": "failures", "checks": checks}


def _common_failures(
    graded: list[dict[str, Any]], titles: dict[str, str], grades: dict[str, Any], total: int
) -> dict[str, Any]:
    """Failures grouped by root cause, each submission counted once per cause: a broken cell that
    leaves three functions unmeasured is one cause, not 30 parts (:func:`root_causes`)."""
    counts: Counter[tuple[str, ...]] = Counter()
    who: dict[tuple[str, ...], list[str]] = {}
    label: dict[tuple[str, ...], str] = {}
    example: dict[tuple[str, ...], str] = {}
    for r in graded:
        for key, (said, shown) in root_causes(r, grades.get(r["name"]), titles).items():
            counts[key] += 1
            who.setdefault(key, []).append(r["name"])
            label.setdefault(key, said)
            example.setdefault(key, shown)
    body = [[n, label[k], example[k], names_html(who[k], limit=8)] for k, n in counts.most_common(TOP)]
    note = (
        f"Among the {len(graded)} graded submissions, each counted once per cause; the {total - len(graded)} "
        "not attempted, unreadable or not graded are under Needs attention."
    )
    return table(
        "Most common failures",
        ["count", "cause (check: part)", "example", "who"],
        body,
        empty="No check failed in a graded submission.",
        note=note,
        widths=[7, 30, 36, 27],
    )


def _lost_points(rows: list[dict[str, Any]], titles: dict[str, str]) -> dict[str, Any]:
    lost = sorted((r for r in rows if r["score"] < r["max"]), key=lambda r: (r["score"], r["name"].lower()))
    body = [
        [
            names_html([r["name"]], submitters=r.get("submitters")),
            (_pts(r), r["score"]),
            outcome(r),
            ", ".join(titles.get(c, c) for c, ok in r["checks_passed"].items() if not ok) or "–",
            _what_happened(r),
        ]
        for r in lost
    ]
    return table(
        "Submissions that lost points",
        ["submission", "score", "status", "checks failed", "what happened"],
        body,
        empty="Every submission has full marks.",
        widths=[18, 9, 9, 30, 34],
        note=f"{len(lost)} of {len(rows)} submissions, lowest score first." if lost else "",
    )


def _all_rows(rows: list[dict[str, Any]], titles: dict[str, str]) -> dict[str, Any]:
    ids = _check_ids(rows, titles)
    header = ["submission", "score", "status"] + [titles.get(i, i) for i in ids]
    body = []
    for r in rows:
        cells: list[Any] = [names_html([r["name"]], submitters=r.get("submitters")), (_pts(r), r["score"]), outcome(r)]
        for i in ids:
            if i not in r["checks"]:
                cells.append(("–", -1))
            else:
                cls = "pass" if r["checks_passed"].get(i) else "fail"
                score = r["checks"][i]
                cells.append((styled(_num(score), cls), score))
        body.append(cells)
    return table(
        "All submissions",
        header,
        body,
        note="Check columns show each check's score (red: failed).",
        widths=[16, 8, 8] + [68 / max(1, len(ids))] * len(ids),
    )


def _what_happened(row: dict[str, Any]) -> str:
    err = row.get("first_error") if isinstance(row.get("first_error"), dict) else None
    reason = str(row.get("reason") or "")
    cell = ""
    if err:
        where = where_of(err)
        said = f"{error_summary(err.get('ename'), err.get('evalue'))}"
        # a reason that already names the cell (a timeout, a dead kernel) is not told it twice
        cell = (
            f"{row.get('cells_errored')} cell(s) raised an error; the first: {said}"
            if where and where in reason
            else f"{row.get('cells_errored')} cell(s) raised an error; the first, {where}: {said}"
        )
    return " · ".join(x for x in (reason, cell) if x)


def _slowest(rows: list[dict[str, Any]], n: int = 10) -> list[dict[str, Any]]:
    timed = [r for r in rows if _finite(r.get("execution_s"))]
    return sorted(timed, key=lambda r: -float(r["execution_s"]))[:n]


def _common_errors(rows: list[dict[str, Any]]) -> list[list[Any]]:
    counts: Counter[str] = Counter()
    who: dict[str, list[str]] = {}
    for r in rows:
        err = r.get("first_error")
        if isinstance(err, dict) and err.get("ename"):
            text = f"{err['ename']}: {str(err.get('evalue') or '')[:120]}"
            counts[text] += 1
            who.setdefault(text, []).append(r["name"])
    return [[n, text, names_html(who[text], limit=8)] for text, n in counts.most_common(TOP)]


# ── small helpers ───────────────────────────────────────────────────────────────────────────


def _check_ids(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(list(titles) + [c for r in rows for c in r["checks"]]))


def _top(rows: list[dict[str, Any]]) -> float:
    return max((r["max"] for r in rows), default=0.0) or max((r["score"] for r in rows), default=0.0) or 1.0


def _pts(row: dict[str, Any]) -> str:
    return f"{row['score']:g} / {row['max']:g}"


def _num(x: Any) -> str:
    return f"{x:.1f}" if isinstance(x, float) else ("" if x is None else str(x))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _cap(x: Any, n: int = MAX_CELL) -> str:
    return clean(x, n)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
