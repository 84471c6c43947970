"""summary.html: the instructor's one-page view of a graded batch.

Self-contained: plots are matplotlib PNGs embedded as ``data:`` URIs, the CSS is inline, and a
Content-Security-Policy forbids everything else (no scripts, no network). Every piece of text that
came from a submission (names, file names, error messages, measured strings) goes through
``html.escape``.

Sections: overview (counts by status, mean/median), warnings about the source, score distribution,
pass rate per check, a scatter of two measurements per submission with the rubric's thresholds as
lines (only when the assignment asks for one in assignment.toml: ``[summary.scatter]`` with ``x``,
``y``, ``series`` (name → measurement prefix) and optionally ``title``, ``x_label``, ``y_label``;
the core has no default), failed and slowest submissions with reasons, the most common failures,
and the full table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from matplotlib.figure import Figure

from ..judge import lookup

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
MAX_CELL = 300
TOP = 15
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def write_summary(path: Path, rows: list[dict[str, Any]], *, out: Path, assignment: Any,
                  rubric: dict[str, Any], tolerances: dict[str, Any], warnings: Iterable[str] = ()) -> Path:
    page = summary_html(rows, out=out, assignment=assignment, rubric=rubric, tolerances=tolerances,
                        warnings=list(warnings))
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return Path(path)


def summary_html(rows: list[dict[str, Any]], *, out: Path, assignment: Any, rubric: dict[str, Any],
                 tolerances: dict[str, Any], warnings: list[str]) -> str:
    titles = {str(c["id"]): str(c.get("title", c["id"])) for c in rubric.get("checks", []) if "id" in c}
    scatter = scatter_config(assignment)
    sections = [
        _overview(rows),
        _warnings(warnings),
        _figure_section("Score distribution", _score_histogram(rows)),
        _figure_section("Pass rate per check", _pass_rates(rows, titles), caption="; ".join(
            f"<b>{_e(i)}</b>: {_e(t)}" for i, t in titles.items())),
        _figure_section(scatter["title"], _scatter(rows, out, scatter, rubric, tolerances), optional=True)
        if scatter else "",
        _table_section("Failed submissions", ["submission", "status", "score", "what happened"],
                       [[_sub(r), r["status"], _pts(r), _what_happened(r)] for r in rows if _failed(r)],
                       empty="Every notebook ran to the end without an error."),
        _table_section("Slowest submissions", ["submission", "execution (s)", "status", "score"],
                       [[_sub(r), _num(r.get("execution_s")), r["status"], _pts(r)] for r in _slowest(rows)]),
        _table_section("Most common failures", ["submissions", "check", "part", "example"],
                       _common_failures(rows, titles), empty="No check failed."),
        _table_section("Most common errors in cells", ["submissions", "error"], _common_errors(rows),
                       empty="No cell raised an error."),
        _all_rows(rows, titles),
    ]
    title = f"{assignment.title}: batch summary"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{_e(title)}</title>", f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{len(rows)} submissions · generated {_e(time.strftime("%Y-%m-%d %H:%M"))}</p>',
        *[s for s in sections if s], "</body></html>", ""])


# ── sections ────────────────────────────────────────────────────────────────────────────────

def _overview(rows: list[dict[str, Any]]) -> str:
    scores = [r["score"] for r in rows]
    top = max((r["max"] for r in rows), default=0.0)
    stats = [("submissions", str(len(rows)))]
    if scores:
        stats += [("mean", f"{statistics.fmean(scores):.1f} / {top:g}"),
                  ("median", f"{statistics.median(scores):g} / {top:g}"),
                  ("full marks", str(sum(1 for r in rows if r["max"] and r["score"] >= r["max"])))]
    stats += [(status, str(n)) for status, n in sorted(Counter(r["status"] for r in rows).items())]
    stats.append(("from cache", str(sum(1 for r in rows if r.get("cached")))))
    cells = "".join(f'<div class="stat"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in stats)
    return f'<section><div class="stats">{cells}</div></section>'


def _warnings(warnings: list[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{_e(_cap(w))}</li>" for w in warnings[:50])
    more = f"<li>… and {len(warnings) - 50} more</li>" if len(warnings) > 50 else ""
    return f'<section class="warn"><h2>Warnings about the source</h2><ul>{items}{more}</ul></section>'


def _figure_section(title: str, figure: str | None, caption: str = "", optional: bool = False) -> str:
    if figure is None and optional:  # e.g. an assignment whose measurements have no such values
        return ""
    body = figure or '<p class="note">Nothing to plot yet.</p>'
    note = f'<p class="note">{caption}</p>' if figure and caption else ""
    return f"<section><h2>{_e(title)}</h2>{body}{note}</section>"


def _table_section(title: str, header: list[str], rows: list[list[Any]], empty: str = "None.") -> str:
    if not rows:
        return f'<section><h2>{_e(title)}</h2><p class="note">{_e(empty)}</p></section>'
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, _Html) else _e(_cap(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<section><h2>{_e(title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"


def _all_rows(rows: list[dict[str, Any]], titles: dict[str, str]) -> str:
    ids = list(titles) + [c for r in rows for c in r["checks"] if c not in titles]
    ids = list(dict.fromkeys(ids))
    head = "<th>submission</th><th>students</th><th>score</th><th>status</th>" + "".join(
        f'<th title="{_e(titles.get(i, i))}">{_e(i)}</th>' for i in ids) + "<th>feedback</th>"
    body = []
    for r in rows:
        cells = [_sub(r), _e(_cap(r.get("submitters") or "")), f'<span class="num">{_e(_pts(r))}</span>', _e(r["status"])]
        for i in ids:
            if i not in r["checks"]:
                cells.append('<span class="note">–</span>')
            else:
                cls = "pass" if r["checks_passed"].get(i) else "fail"
                cells.append(f'<span class="{cls}">{_e(_num(r["checks"][i]))}</span>')
        cells.append(f'<a href="{_e(quote(r["name"]))}/feedback.md">feedback.md</a>')
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f'<section><h2>All submissions</h2><div class="wide"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div></section>")


def _failed(row: dict[str, Any]) -> bool:
    return row["status"] != "ok" or bool(row.get("cells_errored"))


def _what_happened(row: dict[str, Any]) -> str:
    err = row.get("first_error") if isinstance(row.get("first_error"), dict) else None
    cell = (f"{row.get('cells_errored')} cell(s) raised an error; the first, cell {err.get('cell')}: "
            f"{err.get('ename')}: {err.get('evalue')}") if err else ""
    return " · ".join(x for x in (str(row.get("reason") or ""), cell) if x)


def _slowest(rows: list[dict[str, Any]], n: int = 10) -> list[dict[str, Any]]:
    timed = [r for r in rows if _finite(r.get("execution_s"))]
    return sorted(timed, key=lambda r: -float(r["execution_s"]))[:n]


def _common_failures(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[list[Any]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    example: dict[tuple[str, str, str], str] = {}
    for r in rows:
        for f in r.get("failures", []):
            key = (f["check"], f["part"], str(f.get("reason") or ""))
            counts[key] += 1
            example.setdefault(key, str(f.get("reason") or f.get("message") or ""))
    return [[n, titles.get(check, check), part, example[(check, part, reason)]]
            for (check, part, reason), n in counts.most_common(TOP)]


def _common_errors(rows: list[dict[str, Any]]) -> list[list[Any]]:
    counts: Counter[str] = Counter()
    for r in rows:
        err = r.get("first_error")
        if isinstance(err, dict) and err.get("ename"):
            counts[f"{err['ename']}: {str(err.get('evalue') or '')[:120]}"] += 1
    return [[n, text] for text, n in counts.most_common(TOP)]


# ── figures ─────────────────────────────────────────────────────────────────────────────────

def _score_histogram(rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    top = max((r["max"] for r in rows), default=0.0) or max(r["score"] for r in rows) or 1.0
    fig = Figure(figsize=(7, 3.2))
    ax = fig.add_subplot()
    ax.hist([min(r["score"], top) for r in rows], bins=[top * i / 10 for i in range(11)],
            color=COLORS[0], edgecolor="white")
    ax.set_xlabel(f"score (of {top:g})")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _img(fig, "Histogram of total scores")


def _pass_rates(rows: list[dict[str, Any]], titles: dict[str, str]) -> str | None:
    graded = [r for r in rows if r["checks"]]
    ids = [i for i in dict.fromkeys(list(titles) + [c for r in graded for c in r["checks"]])]
    if not graded or not ids:
        return None
    rates = [sum(1 for r in graded if r["checks_passed"].get(i)) / len(graded) for i in ids]
    fig = Figure(figsize=(7, 0.45 * len(ids) + 1))
    ax = fig.add_subplot()
    y = list(range(len(ids)))[::-1]
    ax.barh(y, rates, color=[COLORS[2] if x >= 0.5 else COLORS[1] for x in rates])
    ax.set_yticks(y, ids)
    ax.set_xlim(0, 1.08)
    ax.set_xlabel(f"share of {len(graded)} graded submissions that pass")
    for yi, rate in zip(y, rates):
        ax.text(min(rate, 1.0) + 0.01, yi, f"{rate:.0%}", va="center", fontsize=8)
    return _img(fig, "Pass rate per check")


def scatter_config(assignment: Any) -> dict[str, Any] | None:
    """The assignment's ``[summary.scatter]`` with its labels filled in, or None when it has none."""
    cfg = assignment.config.get("summary", {}).get("scatter")
    if not cfg:
        return None
    from ..errors import AssignmentError

    if not (isinstance(cfg, dict) and isinstance(cfg.get("x"), str) and isinstance(cfg.get("y"), str)
            and isinstance(cfg.get("series"), dict) and cfg["series"]):
        raise AssignmentError(f"{assignment.folder / 'assignment.toml'}: [summary.scatter] needs x, y "
                              "(measurement names) and a [summary.scatter.series] table (label → path prefix)")
    return {"title": f"{cfg['y']} against {cfg['x']}", "x_label": cfg["x"], "y_label": cfg["y"], **cfg}


def _scatter(rows: list[dict[str, Any]], out: Path, cfg: dict[str, Any], rubric: dict[str, Any],
             tolerances: dict[str, Any]) -> str | None:
    points: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        m = _read_json(out / r["name"] / "measurements.json")
        for label, prefix in cfg["series"].items():
            x, _ = lookup(m, f"{prefix}.{cfg['x']}")
            y, _ = lookup(m, f"{prefix}.{cfg['y']}")
            if _finite(x) and _finite(y):
                points.setdefault(label, []).append((float(x), float(y)))
    if not points:
        return None
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    limits: dict[tuple[str, float], list[str]] = {}
    for k, (label, prefix) in enumerate(cfg["series"].items()):
        pts = points.get(label, [])
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=22, alpha=0.75, color=COLORS[k % len(COLORS)],
                       label=f"{label} ({len(pts)})")
        for axis in ("x", "y"):
            t = rubric_threshold(rubric, tolerances, f"{prefix}.{cfg[axis]}")
            if t is not None:
                limits.setdefault((axis, t), []).append(label)
    for (axis, t), labels in limits.items():
        draw = ax.axvline if axis == "x" else ax.axhline
        draw(t, color="#555", linestyle="--" if axis == "x" else ":", linewidth=1,
             label=f"{cfg[axis]} limit {t:g} ({', '.join(labels)})")
    ax.set_xlabel(cfg["x_label"])
    ax.set_ylabel(cfg["y_label"])
    ax.legend(fontsize=7, loc="best")
    return _img(fig, f"{cfg['x']} against {cfg['y']} per submission, with the rubric's limits")


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


def _img(fig: Figure, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_e(alt)}">'


# ── small helpers ───────────────────────────────────────────────────────────────────────────

class _Html(str):
    """Markup built here from escaped parts (not escaped again)."""


def _sub(row: dict[str, Any]) -> _Html:
    who = f' <span class="note">({_e(_cap(row["submitters"], 80))})</span>' if row.get("submitters") else ""
    return _Html(f"{_e(row['name'])}{who}")


def _pts(row: dict[str, Any]) -> str:
    return f"{row['score']:g} / {row['max']:g}"


def _num(x: Any) -> str:
    return f"{x:.1f}" if isinstance(x, float) else ("" if x is None else str(x))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _cap(x: Any, n: int = MAX_CELL) -> str:
    s = " ".join(str(x).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
.meta,.note{color:#777} .stats{display:flex;flex-wrap:wrap;gap:.6rem}
.stat{border:1px solid #ddd;border-radius:6px;padding:.4rem .8rem;min-width:6rem}
.stat b{display:block;font-size:1.2rem} .stat span{color:#666;font-size:.85rem}
.warn{background:#fff8e1;padding:.2rem 1rem;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:13px} th,td{border-bottom:1px solid #eee;padding:.25rem .4rem;
text-align:left;vertical-align:top} th{background:#f6f6f6} img{max-width:100%}
.pass{color:#1b7f3b} .fail{color:#b3261e;font-weight:600} .wide{overflow-x:auto} .num{white-space:nowrap}
"""
