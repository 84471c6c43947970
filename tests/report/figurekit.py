"""A ``decision_plane`` figure section from fixed numbers, and a reader of the drawn SVG.

Not a test module; the figure tests import it.
"""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET

import numpy as np

SVG = "{http://www.w3.org/2000/svg}"
N = 40


def p1_grid(shift: float, n: int = N) -> np.ndarray:
    """P(class 1) on an n × n grid over [-2, 3] × [-1, 2]: a logistic boundary x = y + shift."""
    xs, ys = np.linspace(-2, 3, n), np.linspace(-1, 2, n)
    xx, yy = np.meshgrid(xs, ys)
    return 1 / (1 + np.exp(-4 * (xx - yy - shift)))


def encode(p1: np.ndarray) -> str:
    return base64.b64encode(np.rint(np.clip(p1, 0, 1) * 255).astype(np.uint8).tobytes()).decode()


def section(**change) -> dict:
    """Two boundaries (the second moved by 0.4), 30 + 20 points with drifts 0 … 1.2, 3 worst."""
    rng = np.random.default_rng(0)
    test_xy = rng.uniform([-2, -1], [3, 2], size=(30, 2)).round(4)
    edge_xy = rng.uniform([-2, -1], [3, 2], size=(20, 2)).round(4)
    test_v = np.linspace(0, 0.05, 30).round(5)
    edge_v = np.linspace(0.001, 1.2, 20).round(5)
    worst = sorted([(float(v), "X_edge", i, edge_xy[i]) for i, v in enumerate(edge_v)], key=lambda t: -t[0])[:3]
    s = {
        "kind": "decision_plane",
        "title": "Fixed numbers on a plane",
        "x_label": "feature x0",
        "y_label": "feature x1",
        "grid": {"x": [-2.0, 3.0], "y": [-1.0, 2.0], "shape": [N, N]},
        "boundaries": [
            {"name": "a", "label": "model A boundary", "p1": encode(p1_grid(0.0))},
            {"name": "b", "label": "model B boundary", "p1": encode(p1_grid(0.4))},
        ],
        "points": [
            {"name": "X_test", "label": "test points", "marker": "o", "xy": test_xy.tolist(), "value": test_v.tolist()},
            {"name": "X_edge", "label": "edge points", "marker": "^", "xy": edge_xy.tolist(), "value": edge_v.tolist()},
        ],
        "value_label": "drift per row",
        "worst": [{"set": n, "row": i, "xy": xy.tolist(), "value": v} for v, n, i, xy in worst],
        "caption": "A caption under the picture.",
        "data": "public",
    }
    s.update(change)
    return s


def parts(svg: str) -> dict[str, int]:
    """Drawn parts by id (``boundary-0``, ``points-1``, …) → how many shapes each holds (a scatter:
    one per point, whether matplotlib wrote them as ``<use>`` or ``<path>``)."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        gid = g.get("id", "")
        if gid.split("-")[0] in ("classes", "disagree", "boundary", "points", "worst"):
            defs = {id(p) for d in g.iter(f"{SVG}defs") for p in d.iter()}
            out[gid] = sum(1 for e in g.iter() if e.tag in (f"{SVG}use", f"{SVG}path") and id(e) not in defs)
    return out


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [" ".join("".join(t.itertext()).split()) for t in root.iter(f"{SVG}text")]


def screenshot_checks(shot) -> dict:
    """What a screenshot of feedback.html shows: shares of dark (text), coloured, red and viridis-like pixels."""
    from matplotlib.image import imread

    rgb = imread(shot)[..., :3]
    return {
        "shape": rgb.shape,
        "dark": float((rgb.mean(axis=2) < 0.4).mean()),
        "coloured": float(((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()),
        "red": float(((rgb[..., 0] > 0.7) & (rgb[..., 1] < 0.3) & (rgb[..., 2] < 0.3)).mean()),
        "purple": float(
            ((rgb[..., 0] > 0.2) & (rgb[..., 0] < 0.4) & (rgb[..., 1] < 0.15) & (rgb[..., 2] > 0.3)).mean()
        ),
    }
