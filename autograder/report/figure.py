"""The picture of a student's own model: measurements.json's optional ``figure`` section, drawn.

An assignment's ``measure(ctx)`` may return a section named ``figure`` (docs/ADDING-AN-ASSIGNMENT.md);
the report draws it into feedback.html (:mod:`.feedback_html`) and a Gradescope test
(:mod:`.gradescope_figure`). Without one (an assignment that has no picture) nothing is drawn.
The section holds numbers the trusted grader measured (in the model worker), never text or images
a notebook wrote; the picture is rendered here, by matplotlib's Agg/SVG backends, from them.

One kind so far, ``decision_plane``: a two-class classifier on a 2-D input plane::

    {"kind": "decision_plane", "title": str, "x_label": str, "y_label": str,
     "grid": {"x": [lo, hi], "y": [lo, hi], "shape": [ny, nx]},
     "boundaries": [{"name": str, "label": str, "p1": base64 of ny*nx uint8 (P(class 1) * 255), row by row}],
                    # the first is the baseline; each is drawn as its p1 = 0.5 contour, and where the
                    # first two pick different classes is shaded
     "points": [{"name": str, "label": str, "marker": "o", "xy": [[x, y], …], "value": [v | null, …]}],
     "value_label": str,            # what the points' colour means (a drift, ≥ 0; log scale)
     "worst": [{"set": str, "row": int, "xy": [x, y], "value": float}],   # ringed and numbered
     "caption": str, "data": "public"}

In the SVG, the drawn parts carry ids: ``classes``, ``disagree``, ``boundary-<i>`` (the i-th
boundary's contour), ``points-<i>`` (one marker per point) and ``worst-<rank>``.

``{"error": reason}`` instead says why there is no picture; :func:`figure_problem` says it, or why a
section cannot be drawn. A broken section never fails grading: it becomes such a sentence.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..safe_files import write_atomic

if TYPE_CHECKING:  # matplotlib itself is imported when a figure is drawn
    from matplotlib.typing import RcKeyType

SECTION = "figure"
RENDER_VERSION = 4  # bump when the drawing changes: cached pictures are keyed by it
CACHE_PREFIX = "figure-"
KIND = "decision_plane"
MAX_POINTS = 20_000  # per set: a bound on what a section can ask the renderer to draw
MAX_GRID = 400  # per side
BOUNDARY_STYLES: tuple[dict[str, Any], ...] = (
    dict(colors="black", linewidths=2.2, linestyles="solid"),
    dict(colors="#d62728", linewidths=2.2, linestyles="dashed"),
    dict(colors="#1f77b4", linewidths=1.8, linestyles="dotted"),
)
CLASS_SHADES = ("#eef3fb", "#fbf3ea")  # the baseline's two classes, very light
DISAGREE_SHADE = "#f4b6b6"
VALUE_FLOOR = 1e-4  # the colour scale's lowest drift (log scale)
SVG_DPI = 96
RC: dict[RcKeyType, Any] = {"svg.fonttype": "none", "svg.hashsalt": "autograder-figure", "font.size": 11}
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class FigureError(ValueError):
    """The section cannot be drawn (a plugin bug): its message says why, for the page."""


def figure_section(measurements: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ``figure`` section of ``measurements``, or None when the assignment has none."""
    if not isinstance(measurements, Mapping):
        return None
    section = measurements.get(SECTION)
    return section if isinstance(section, Mapping) else None


def no_picture_to_show(grade: Mapping[str, Any], measurements: Mapping[str, Any] | None) -> bool:
    """True when nothing could be graded and there is no picture either: then the short form
    alone speaks (a sentence on why there is no picture would only add noise)."""
    from ..attempt import nothing_to_grade

    section = figure_section(measurements)
    return nothing_to_grade(grade) and (section is None or figure_problem(section) is not None)


def figure_problem(section: Mapping[str, Any]) -> str | None:
    """Why ``section`` gives no picture (its ``error``, or what is malformed), None when it gives one."""
    if "error" in section:
        return str(section["error"])
    try:
        _parse(section)
    except FigureError as e:
        return f"no picture: the grader's figure data is malformed ({e})"
    return None


def render(section: Mapping[str, Any], fmt: str = "svg", *, dpi: int = SVG_DPI) -> bytes:
    """The picture as ``svg`` or ``png`` bytes (raises :class:`FigureError` for a malformed section)."""
    return render_formats(section, [(fmt, dpi)])[0]


def render_formats(section: Mapping[str, Any], formats: Sequence[tuple[str, int]]) -> list[bytes]:
    """The picture in each ``(format, dpi)`` of ``formats``, drawn once and saved in each (about a
    third cheaper than drawing it per format); the same bytes as :func:`render` gives per format."""
    from matplotlib import rc_context

    spec = _parse(section)
    with rc_context(RC):
        fig = _draw(spec)
        pictures = []
        for fmt, dpi in formats:
            out = io.BytesIO()
            meta = dict.fromkeys(("Date", "Creator", "Format", "Type")) if fmt == "svg" else {}  # no RDF block
            fig.savefig(out, format=fmt, dpi=dpi, metadata=meta)
            pictures.append(out.getvalue())
    return pictures


def _draw(spec: Mapping[str, Any]):
    """The matplotlib ``Figure`` of a parsed section (call inside ``rc_context(RC)``)."""
    from matplotlib.colors import ListedColormap, LogNorm
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    (x0, x1), (y0, y1), (ny, nx) = spec["x"], spec["y"], spec["shape"]
    xs, ys = np.linspace(x0, x1, nx), np.linspace(y0, y1, ny)
    values = [v for s in spec["points"] for v in s["value"] if np.isfinite(v)]
    vmax = max([VALUE_FLOOR * 10, *values])
    norm = LogNorm(vmin=VALUE_FLOOR, vmax=vmax, clip=True)

    fig = Figure(figsize=(9.2, 6.6))  # a fixed layout: constrained layout would double the drawing time
    ax = fig.add_axes((0.075, 0.175, 0.76, 0.765))
    grids = [b["p1"] for b in spec["boundaries"]]
    base = grids[0] >= 0.5
    ax.contourf(xs, ys, base.astype(float), levels=[-0.5, 0.5, 1.5], colors=CLASS_SHADES).set_gid("classes")
    legend = []
    for i, (b, style) in enumerate(zip(spec["boundaries"], BOUNDARY_STYLES)):
        if np.nanmin(b["p1"]) < 0.5 < np.nanmax(b["p1"]):  # else the class is the same everywhere
            ax.contour(xs, ys, b["p1"], levels=[0.5], **style).set_gid(f"boundary-{i}")
        legend.append(
            Line2D([], [], color=style["colors"], lw=style["linewidths"], ls=style["linestyles"], label=b["label"])
        )
    if len(grids) > 1:
        differ = (grids[1] >= 0.5) != base
        if differ.any():
            ax.contourf(
                xs, ys, differ.astype(float), levels=[0.5, 1.5], cmap=ListedColormap([DISAGREE_SHADE]), alpha=0.75
            ).set_gid("disagree")
        legend.append(_patch(DISAGREE_SHADE, "the models pick different classes"))
    scatter = None
    for i, (s, marker) in enumerate(zip(spec["points"], ("o", "^", "s", "D"))):
        v = np.where(np.isfinite(s["value"]), s["value"], np.nan)
        scatter = ax.scatter(
            s["xy"][:, 0],
            s["xy"][:, 1],
            c=np.maximum(v, VALUE_FLOOR),
            cmap="viridis",
            norm=norm,
            marker=s.get("marker", marker),
            s=22,
            edgecolors="#333333",
            linewidths=0.3,
            plotnonfinite=True,
            zorder=3,
            gid=f"points-{i}",
        )
        legend.append(
            Line2D(
                [],
                [],
                marker=s.get("marker", marker),
                ls="",
                color="#999999",
                markeredgecolor="#333333",
                markersize=6,
                label=s["label"],
            )
        )
    if spec["worst"]:
        legend.append(
            Line2D(
                [],
                [],
                marker="o",
                ls="",
                markersize=12,
                markerfacecolor="none",
                markeredgecolor="#d62728",
                markeredgewidth=2,
                label=f"the {len(spec['worst'])} largest drifts, numbered",
            )
        )
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    _draw_worst(fig, ax, spec["worst"])
    ax.set_xlabel(spec["x_label"])
    ax.set_ylabel(spec["y_label"])
    ax.set_title(spec["title"], fontsize=13, fontweight="bold")
    fig.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.47, 0.0), ncol=3, fontsize=9.5, frameon=False)
    if scatter is not None:
        bar = fig.colorbar(scatter, cax=fig.add_axes((0.855, 0.175, 0.022, 0.765)))
        bar.set_label(spec["value_label"] + " (log scale)")
        # decades only, labelled as plain text: minor ticks and mathtext labels were a third of
        # the drawing time
        bar.ax.minorticks_off()
        bar.ax.yaxis.set_major_formatter(FuncFormatter(_decade))
    return fig


def _decade(value: float, _position: Any = None) -> str:
    """A colour bar label: ``10⁻³`` for a power of ten, else the number as ``%g``."""
    exponent = np.log10(value) if value > 0 else np.nan
    if np.isfinite(exponent) and abs(exponent - round(exponent)) < 1e-9:
        return "10" + str(int(round(exponent))).translate(SUPERSCRIPTS)
    return f"{value:g}"


def warm_up(formats: Sequence[str] = ("svg", "png")) -> None:
    """Import matplotlib and draw a tiny picture through the same code in each of ``formats``
    (fonts, text, contours, a colour bar), so that the first real drawing of this process does not
    pay for them. Once per process and format (:mod:`autograder.warm_ups` keeps count), in a
    background thread while the kernel runs (the grader is idle then)."""
    p1 = base64.b64encode(bytes([0, 60, 200, 255] * 4)).decode("ascii")
    tiny = {
        "kind": KIND,
        "title": "x",
        "x_label": "x",
        "y_label": "y",
        "grid": {"x": [0, 1], "y": [0, 1], "shape": [4, 4]},
        "boundaries": [{"label": "a", "p1": p1}, {"label": "b", "p1": p1}],
        "points": [{"label": "p", "xy": [[0.2, 0.2], [0.8, 0.8]], "value": [1e-3, 1e-1]}],
        "value_label": "v",
        "worst": [{"xy": [0.2, 0.2]}],
    }
    render_formats(tiny, [(fmt, 20) for fmt in formats])


def _draw_worst(fig: Any, ax: Any, worst: Sequence[Mapping[str, Any]]) -> None:
    """Ring and number the largest drifts; each number placed where it covers no other number and
    no ring (:func:`label_offsets`), a short line to the ring it names."""
    if not worst:
        return
    to_points = 72.0 / fig.dpi
    centres = [tuple(float(v) * to_points for v in ax.transData.transform(w["xy"])) for w in worst]
    for rank, (w, (dx, dy)) in enumerate(zip(worst, label_offsets(centres)), start=1):
        ax.scatter(
            [w["xy"][0]],
            [w["xy"][1]],
            s=220,
            facecolors="none",
            edgecolors="#d62728",
            linewidths=1.8,
            zorder=4,
            gid=f"worst-{rank}",
        )
        ax.annotate(
            str(rank),
            (w["xy"][0], w["xy"][1]),
            xytext=(dx, dy),
            textcoords="offset points",
            ha="center",
            va="center",
            color="#d62728",
            fontsize=11,
            fontweight="bold",
            zorder=5,
            gid=f"worst-label-{rank}",
            bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8),
            arrowprops=dict(arrowstyle="-", color="#d62728", lw=0.8, shrinkA=5, shrinkB=8),  # which ring it names
        )


LABEL_NEAR = 22.0  # points from a ring's centre to its number when nothing is in the way
LABEL_HALF = (6.0, 7.0)  # half the width and height of a one-digit number's box, points
RING_RADIUS = 8.0  # points: the ring (s=220) is about 15 points across


def label_offsets(centres: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Where each ring's number goes, as an offset in points from its centre (the centres in
    points): the first of eight directions at growing distances whose box overlaps no number placed
    before it and no ring; the last tried when none is free (a bounded search, never a failure)."""
    placed: list[tuple[float, float]] = []
    out: list[tuple[float, float]] = []
    directions = [(math.cos(a), math.sin(a)) for a in (math.pi / 4 + k * math.pi / 2 for k in range(4))]
    directions += [(1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0)]
    for cx, cy in centres:
        choice = (LABEL_NEAR, LABEL_NEAR)
        for distance in (LABEL_NEAR, 32.0, 44.0, 58.0, 74.0):
            free = [
                (ux * distance, uy * distance)
                for ux, uy in directions
                if _free(cx + ux * distance, cy + uy * distance, placed, centres)
            ]
            if free:
                choice = free[0]
                break
        placed.append((cx + choice[0], cy + choice[1]))
        out.append(choice)
    return out


def _free(x: float, y: float, placed: Sequence[tuple[float, float]], rings: Sequence[tuple[float, float]]) -> bool:
    w, h = LABEL_HALF
    if any(abs(x - px) < 2 * w and abs(y - py) < 2 * h for px, py in placed):
        return False
    return all(abs(x - rx) > w + RING_RADIUS or abs(y - ry) > h + RING_RADIUS for rx, ry in rings)


def svg_inline(section: Mapping[str, Any], cache: Path | None = None) -> str:
    """The picture as an ``<svg>`` element for an HTML page (no XML prolog or DOCTYPE)."""
    svg = cached_render(section, "svg", cache).decode("utf-8")
    return svg[svg.index("<svg") :]


def png_data_uri(section: Mapping[str, Any], dpi: int = 80, cache: Path | None = None) -> str:
    """The picture as a ``data:image/png;base64,…`` URI (for outputs whose sanitizer drops inline SVG)."""
    return "data:image/png;base64," + base64.b64encode(cached_render(section, "png", cache, dpi=dpi)).decode("ascii")


def cached_render(section: Mapping[str, Any], fmt: str, cache: Path | None, *, dpi: int = SVG_DPI) -> bytes:
    """:func:`render`, kept in ``cache`` (the grade's output folder) as ``figure-<key>.<fmt>``.

    The key hashes the section, the format, the resolution, :data:`RENDER_VERSION` and matplotlib's
    version: a rescore (same measurements, new tolerances) reads the picture back instead of drawing
    it again, and anything that would change the picture changes the key. The folder is the
    grader's own (nothing a notebook writes is read from it).
    """
    if cache is None:
        return render(section, fmt, dpi=dpi)
    path = _cache_path(section, fmt, dpi, cache)
    if _kept(path):
        return path.read_bytes()
    data = render(section, fmt, dpi=dpi)
    _keep(path, fmt, data)
    return data


def cache_pictures(section: Mapping[str, Any], cache: Path, formats: Sequence[tuple[str, int]]) -> None:
    """Draw ``section`` once into each ``(format, dpi)`` that ``cache`` does not hold yet, so that the
    reports' :func:`cached_render` calls read them (raises :class:`FigureError` for a malformed section)."""
    paths = {(fmt, dpi): _cache_path(section, fmt, dpi, cache) for fmt, dpi in formats}
    missing = [key for key, path in paths.items() if not _kept(path)]
    if missing:
        for (fmt, dpi), data in zip(missing, render_formats(section, missing)):
            _keep(paths[fmt, dpi], fmt, data)


def _cache_path(section: Mapping[str, Any], fmt: str, dpi: int, cache: Path) -> Path:
    return Path(cache) / f"{CACHE_PREFIX}{_key(section, fmt, dpi)}.{fmt}"


def _kept(path: Path) -> bool:
    """A picture kept by an earlier drawing (a plain file, never followed through a link)."""
    return path.is_file() and not path.is_symlink()


def _keep(path: Path, fmt: str, data: bytes) -> None:
    """``data`` as the cache's only picture of its format."""
    clear_cache(path.parent, fmt)
    write_atomic(path, data)


def clear_cache(cache: Path, fmt: str = "*") -> None:
    """Remove the pictures :func:`cached_render` kept in ``cache`` (of one format, or all)."""
    for old in Path(cache).glob(f"{CACHE_PREFIX}*.{fmt}"):
        old.unlink(missing_ok=True)


def _key(section: Mapping[str, Any], fmt: str, dpi: int) -> str:
    import matplotlib

    text = json.dumps(section, sort_keys=True, default=str, allow_nan=True)
    salt = f"{fmt}|{dpi}|{RENDER_VERSION}|{matplotlib.__version__}|"
    return hashlib.sha256((salt + text).encode("utf-8", "surrogatepass")).hexdigest()[:20]


# ── the section, checked ──────────────────────────────────────────────────────────────────────


def _parse(section: Mapping[str, Any]) -> dict[str, Any]:
    if section.get("kind") != KIND:
        raise FigureError(f"kind {str(section.get('kind'))[:40]!r}, expected {KIND!r}")
    try:
        grid = section["grid"]
        (x0, x1), (y0, y1) = (float(v) for v in grid["x"]), (float(v) for v in grid["y"])
        ny, nx = (int(v) for v in grid["shape"])
    except (KeyError, TypeError, ValueError) as e:
        raise FigureError(f"grid: {type(e).__name__}") from None
    if (
        not (2 <= nx <= MAX_GRID and 2 <= ny <= MAX_GRID)
        or not all(np.isfinite([x0, x1, y0, y1]))
        or x0 >= x1
        or y0 >= y1
    ):
        raise FigureError("grid: an empty or oversized plane")
    boundaries = []
    for b in _list(section, "boundaries")[: len(BOUNDARY_STYLES)]:
        try:
            raw = np.frombuffer(base64.b64decode(str(b["p1"]), validate=True), dtype=np.uint8)
        except (KeyError, TypeError, ValueError) as e:
            raise FigureError(f"boundary: {type(e).__name__}") from None
        if raw.size != nx * ny:
            raise FigureError(f"boundary: {raw.size} grid values for a {ny} x {nx} grid")
        boundaries.append({"label": _label(b), "p1": raw.reshape(ny, nx) / 255.0})
    if not boundaries:
        raise FigureError("no boundary")
    points = []
    for s in _list(section, "points")[:4]:
        try:
            xy = np.asarray(s["xy"], dtype=np.float64).reshape(-1, 2)
            value = np.asarray([np.nan if v is None else v for v in s["value"]], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise FigureError(f"points: {type(e).__name__}") from None
        if len(xy) != len(value) or len(xy) > MAX_POINTS:
            raise FigureError(f"points: {len(xy)} points and {len(value)} values")
        points.append(
            {
                "label": _label(s),
                "marker": s.get("marker") if s.get("marker") in ("o", "^", "s", "D") else None,
                "xy": xy,
                "value": value,
            }
        )
    worst = []
    for w in _list(section, "worst")[:10]:
        try:
            worst.append({"xy": [float(w["xy"][0]), float(w["xy"][1])]})
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise FigureError(f"worst: {type(e).__name__}") from None
    for p in points:
        if p["marker"] is None:
            del p["marker"]
    return {
        "x": (x0, x1),
        "y": (y0, y1),
        "shape": (ny, nx),
        "boundaries": boundaries,
        "points": points,
        "worst": worst,
        "title": _label(section, "title"),
        "x_label": _label(section, "x_label"),
        "y_label": _label(section, "y_label"),
        "value_label": _label(section, "value_label"),
    }


def _list(section: Mapping[str, Any], key: str) -> list:
    value = section.get(key, [])
    if not isinstance(value, list):
        raise FigureError(f"{key}: not a list")
    return value


def _label(d: Any, key: str = "label", limit: int = 120) -> str:
    """A label for the picture, bounded; ``$`` escaped so that it is drawn, never read as mathtext
    (matplotlib's SVG writer escapes XML itself)."""
    text = str(d.get(key, "") if isinstance(d, Mapping) else "")
    return " ".join(text.split())[:limit].replace("$", r"\$")


def _patch(color: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=color, edgecolor="#b05050", label=label)
