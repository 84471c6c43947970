"""The summary page's charts as inline SVG: every bar and point carries a ``<title>`` (shown on
hover) and links to what it counts. Sizes are in a viewBox, so a chart takes the page's width.

This module computes each chart's geometry as plain data (numbers formatted as strings, names,
titles); ``templates/summary_charts.html`` draws it, escaping every text where it places it.
Axis ticks come from matplotlib's MaxNLocator.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import quote

from matplotlib.ticker import MaxNLocator

from ..student_text import clean

WIDTH = 1000
SERIES_COLORS = ("#1565c0", "#c2185b", "#2e7d32", "#6a1b9a", "#ef6c00")
LIMIT_DASHES = ("8 5", "2 4", "12 4 2 4", "4 4")


FEEDBACK_FOLDER: ContextVar[Path | None] = ContextVar("feedback_folder", default=None)


def feedback_href(name: str) -> str:
    """The submission's feedback page: ``feedback.html`` when it sits beside ``feedback.md`` in
    the batch folder the page is written for (:data:`FEEDBACK_FOLDER`), else ``feedback.md``."""
    folder = FEEDBACK_FOLDER.get()
    page = "feedback.md"
    if folder is not None and name not in ("", ".", "..") and "/" not in name and "\x00" not in name:
        try:
            if (folder / name / "feedback.html").is_file() and (folder / name / "feedback.md").is_file():
                page = "feedback.html"
        except OSError:
            pass
    return f"{quote(name)}/{page}"


def rate_color(rate: float) -> str:
    """Red at 0 %, amber at 50 %, green at 100 % (interpolated)."""
    stops = ((0.0, (198, 40, 40)), (0.5, (239, 160, 0)), (1.0, (46, 125, 50)))
    rate = min(1.0, max(0.0, rate))
    for (r0, c0), (r1, c1) in zip(stops, stops[1:]):
        if rate <= r1:
            t = (rate - r0) / (r1 - r0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1))
    return "#2e7d32"


def _svg(kind: str, height: float, label: str, **data: Any) -> dict[str, Any]:
    return {"chart": kind, "width": WIDTH, "height": f"{height:.0f}", "label": label, **data}


# ── pass rate per check ───────────────────────────────────────────────────────────────────────


def pass_rate_bars(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """``checks``: [{id, title, passed, graded}] in rubric order; one coloured bar each, linking to
    the check's failures (a check nobody failed has none to link to)."""
    row, left, right = 30, 370, 60
    span = WIDTH - left - right
    bars = []
    for k, c in enumerate(checks):
        rate = c["passed"] / c["graded"] if c["graded"] else 0.0
        y = 10 + k * row
        bars.append(
            {
                "href": f"#check-{c['id']}" if c["passed"] < c["graded"] else None,
                "title": f"{c['title']}: {c['passed']} of {c['graded']} pass ({rate:.0%})",
                "label": _short(c["title"], 46),
                "label_x": left - 8,
                "text_y": y + 15,
                "x": left,
                "y": y + 2,
                "span": span,
                "width": f"{max(span * rate, 1):.1f}",
                "height": row - 10,
                "color": rate_color(rate),
                "value_x": left + span + 6,
                "value": f"{rate:.0%}",
            }
        )
    return _svg("bars", 20 + len(checks) * row, "pass rate per check", bars=bars)


# ── score histogram ───────────────────────────────────────────────────────────────────────────


def score_histogram(rows: list[dict[str, Any]], top: float) -> dict[str, Any]:
    bins = 10
    counts: list[list[str]] = [[] for _ in range(bins)]
    for r in rows:
        k = min(bins - 1, max(0, int(r["score"] / top * bins))) if top else 0
        counts[k].append(r["name"])
    height, base, left = 220, 190, 50
    width = (WIDTH - left - 20) / bins
    peak = max((len(c) for c in counts), default=0) or 1
    ticks = [t for t in MaxNLocator(nbins=4, integer=True).tick_values(0, peak) if 0 <= t <= peak]
    grid = []
    for t in ticks:
        y = base - (base - 20) * t / peak
        grid.append({"y": f"{y:.1f}", "text_y": f"{y + 4:.1f}", "text": f"{t:g}"})
    bars = []
    for k, names in enumerate(counts):
        lo, hi = top * k / bins, top * (k + 1) / bins
        x = left + k * width
        h = (base - 20) * len(names) / peak
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        bars.append(
            {
                "title": f"{len(names)} submission(s) scored {lo:g}–{hi:g}" + (f": {shown}" if names else ""),
                "x": f"{x + 2:.1f}",
                "y": f"{base - h:.1f}",
                "width": f"{width - 4:.1f}",
                "height": f"{max(h, 0):.1f}",
                "color": rate_color((k + 0.5) / bins),
                "count": len(names),
                "mid": f"{x + width / 2:.1f}",
                "count_y": f"{base - h - 4:.1f}",
                "range": f"{lo:g}–{hi:g}",
            }
        )
    return _svg(
        "histogram",
        height,
        f"histogram of total scores (of {top:g})",
        left=left,
        base=base,
        right=WIDTH - 20,
        tick_x=left - 6,
        range_y=base + 16,
        grid=grid,
        bars=bars,
    )


# ── scatter ───────────────────────────────────────────────────────────────────────────────────


def scatter(
    points: dict[str, list[tuple[float, float, str]]], limits: list[dict[str, Any]], x_label: str, y_label: str
) -> dict[str, Any]:
    """``points``: series → [(x, y, submission)]; ``limits``: [{axis, value, label, series}].

    Points at the same place are drawn once with a count, and their title lists every name;
    points beyond a limit are labelled with their submission's name."""
    left, right, top, bottom, height = 80, 30, 20, 60, 460
    xs = [p[0] for pts in points.values() for p in pts] + [lim["value"] for lim in limits if lim["axis"] == "x"]
    ys = [p[1] for pts in points.values() for p in pts] + [lim["value"] for lim in limits if lim["axis"] == "y"]
    x_ticks, (x0, x1) = _axis(xs)
    y_ticks, (y0, y1) = _axis(ys)

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (WIDTH - left - right)

    def py(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    # one grid line and its tick label per tick: {x1, y1, x2, y2, tx, ty, text, anchor}, numbers as text
    ticks = [
        {
            "x1": f"{px(t):.1f}",
            "y1": top,
            "x2": f"{px(t):.1f}",
            "y2": height - bottom,
            "tx": f"{px(t):.1f}",
            "ty": height - bottom + 18,
            "text": f"{t:g}",
            "anchor": "middle",
        }
        for t in x_ticks
    ]
    ticks += [
        {
            "x1": left,
            "y1": f"{py(t):.1f}",
            "x2": WIDTH - right,
            "y2": f"{py(t):.1f}",
            "tx": left - 6,
            "ty": f"{py(t) + 4:.1f}",
            "text": f"{t:g}",
            "anchor": "end",
        }
        for t in y_ticks
    ]
    mid_y = (top + height - bottom) / 2
    axes = {
        "x_label": x_label,
        "x_at": (left + WIDTH - right) / 2,
        "x_y": height - 14,
        "y_label": y_label,
        "y_at": mid_y,
    }
    series = list(points)
    lines = []
    for k, lim in enumerate(limits):
        color = SERIES_COLORS[series.index(lim["series"]) % len(SERIES_COLORS)] if lim["series"] in series else "#555"
        line = {"title": lim["label"], "color": color, "dash": LIMIT_DASHES[k % len(LIMIT_DASHES)]}
        if lim["axis"] == "x":
            x = px(lim["value"])
            lines.append({**line, "x1": f"{x:.1f}", "y1": top, "x2": f"{x:.1f}", "y2": height - bottom})
        else:
            y = py(lim["value"])
            lines.append({**line, "x1": left, "y1": f"{y:.1f}", "x2": WIDTH - right, "y2": f"{y:.1f}"})
    labelled = 0
    taken: list[tuple[float, float, float]] = []
    marks = []
    for k, (label, pts) in enumerate(points.items()):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        groups: dict[tuple[float, float], list[str]] = {}
        for x, y, name in pts:
            groups.setdefault((round(x, 6), round(y, 6)), []).append(name)
        for (x, y), names in sorted(groups.items()):
            beyond = any(_beyond(lim, x, y) for lim in limits if lim["series"] == label)
            title = f"{label}: {', '.join(names[:12])}{' …' if len(names) > 12 else ''} · x = {x:g}, y = {y:g}" + (
                " · beyond a limit" if beyond else ""
            )
            r = 6 + min(6, 2 * math.log2(len(names))) if len(names) > 1 else 6
            cx, cy = _free_spot(px(x), py(y), r, taken)
            name_label: dict[str, str] | None = None
            if beyond and labelled < 15:  # placed once every mark is known (_place_labels)
                name_label = {"text": _short(names[0], 24) + (f" +{len(names) - 1}" if len(names) > 1 else "")}
            marks.append(
                {
                    "href": feedback_href(names[0]),
                    "title": title,
                    "circle": k % 2 == 0,
                    "cx": f"{cx:.1f}",
                    "cy": f"{cy:.1f}",
                    "r": f"{r:.1f}",
                    "x": f"{cx - r:.1f}",
                    "y": f"{cy - r:.1f}",
                    "side": f"{2 * r:.1f}",
                    "color": color,
                    "count": len(names),
                    "count_y": f"{cy + 4:.1f}",
                    "name": name_label,
                }
            )
            labelled += beyond
    _place_labels(marks, (left, top, WIDTH - right, height - bottom))
    return _svg(
        "scatter",
        height,
        f"{x_label} against {y_label} per submission",
        ticks=ticks,
        axes=axes,
        limits=lines,
        marks=marks,
    )


def _free_spot(x: float, y: float, r: float, taken: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(x, y), or the nearest nudged place where the mark covers no mark drawn before (marks of
    two series at the same values stay both visible and clickable)."""
    for step in range(0, 12):
        for angle in (0,) if step == 0 else (0, 180, 45, 135, -45, -135, 90, -90):  # sideways first
            cx = x + step * 5 * math.cos(math.radians(angle))
            cy = y - step * 5 * math.sin(math.radians(angle))
            if all(math.hypot(cx - tx, cy - ty) >= r + tr + 2 for tx, ty, tr in taken):
                taken.append((cx, cy, r))
                return cx, cy
    taken.append((x, y, r))
    return x, y


def _beyond(lim: dict[str, Any], x: float, y: float) -> bool:
    value = x if lim["axis"] == "x" else y
    return value > lim["value"] if lim.get("op", "<=") in ("<=", "<") else value < lim["value"]


def _axis(values: list[float]) -> tuple[list[float], tuple[float, float]]:
    """Ticks and range: the data with a margin, not below 0 when no value is (ratios, drifts)."""
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 * (abs(lo) or 1), hi + 0.5 * (abs(hi) or 1)
    pad = (hi - lo) * 0.08
    floor = 0.0 if lo >= 0 else -math.inf
    ticks = [t for t in MaxNLocator(nbins=6).tick_values(max(lo - pad, floor), hi + pad) if t >= floor]
    lo, hi = min(ticks[0], max(lo - pad, floor)), max(ticks[-1], hi + pad)
    return [t for t in ticks if lo <= t <= hi], (lo, hi)


def _short(text: str, n: int) -> str:
    return clean(text, n)


LABEL_CHAR_PX = 6.6  # the average width of a label's character at the chart's font size
LABEL_HEIGHT_PX = 12.0


def _place_labels(marks: list[dict[str, Any]], frame: tuple[float, float, float, float]) -> None:
    """Give each named mark's label a spot (x, y, anchor) where its box covers no mark and no label
    placed before it, inside the plot's frame when it can; the first candidate when none is free."""
    circles = [(float(m["cx"]), float(m["cy"]), float(m["r"])) for m in marks]
    boxes: list[tuple[float, float, float, float]] = []
    for m in marks:
        label = m.get("name")
        if not label:
            continue
        cx, cy, r = float(m["cx"]), float(m["cy"]), float(m["r"])
        width = LABEL_CHAR_PX * len(label["text"])
        options = []
        for gap in (4.0, 14.0, 26.0):
            for side in ("start", "end"):
                for dy in (-r, r + LABEL_HEIGHT_PX, -r - LABEL_HEIGHT_PX):
                    x = cx + r + gap if side == "start" else cx - r - gap
                    box = (
                        (x, cy + dy - LABEL_HEIGHT_PX, x + width, cy + dy)
                        if side == "start"
                        else (x - width, cy + dy - LABEL_HEIGHT_PX, x, cy + dy)
                    )
                    options.append((x, cy + dy, side, box))
        free = [o for o in options if _inside(o[3], frame) and _clear(o[3], circles, boxes)]
        x, y, side, box = (free or options)[0]
        boxes.append(box)
        label.update({"x": f"{x:.1f}", "y": f"{y:.1f}", "anchor": side})


def _inside(box: tuple[float, float, float, float], frame: tuple[float, float, float, float]) -> bool:
    return box[0] >= frame[0] and box[1] >= frame[1] and box[2] <= frame[2] and box[3] <= frame[3]


def _clear(
    box: tuple[float, float, float, float],
    circles: list[tuple[float, float, float]],
    boxes: list[tuple[float, float, float, float]],
) -> bool:
    x0, y0, x1, y1 = box
    for cx, cy, r in circles:  # the box's nearest point to the centre is farther than the radius
        nx, ny = min(max(cx, x0), x1), min(max(cy, y0), y1)
        if (nx - cx) ** 2 + (ny - cy) ** 2 < (r + 1) ** 2:
            return False
    return all(x1 <= b[0] or x0 >= b[2] or y1 <= b[1] or y0 >= b[3] for b in boxes)
