"""The ``figure`` section of measurements.json: a picture of the student's own two models.

The lesson's point is that accuracy can hold while a quantized model turns brittle at the edges of
its input range. The picture shows it on the student's own files: the two-moons plane with the
decision boundary of their ``fp32.onnx`` and of their ``int8_qdq.onnx``, and the contract's
*public* points (``X_test`` and ``X_edge`` of the public split) coloured by how far the int8
model's probabilities drift from fp32 on that row, the worst rows marked.

Everything here is public, so nothing hidden can be identified from the picture:

- the grid spans the public points' range (plus a margin) and is evaluated by the model worker,
  in the limited child, in the same job as the other input sets (:func:`grid_points`);
- the points are the contract's public split (``data.public_split``), which the notebook itself
  builds; the grader's hidden test set is never drawn or counted here.

The core draws the section (``autograder/report/figure.py``, kind ``decision_plane``): it holds
numbers only, never text a notebook wrote. A model that is missing, unusable or not quantized
gives ``{"error": "<why there is no picture>"}``.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from autograder.lesson import metrics, run_failure_words

from . import data

GRID_SET = "figure_grid"  # the model worker's input set of the grid
GRID_N = 100  # 100 × 100 = 10,000 rows per model
MARGIN = 0.05  # of the public points' span, on each side
WORST = 5  # rows marked as the worst drifts
BASE, VARIANT = "fp32", "int8_qdq"
DECIMALS = 4


def grid_axes(public: data.Split) -> tuple[np.ndarray, np.ndarray]:
    """The grid's x and y coordinates: the public points' range (X_test and X_edge) with a margin."""
    pts = np.concatenate([public.X_test, public.X_edge]).astype(np.float64)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = MARGIN * (hi - lo)
    return (np.linspace(lo[0] - pad[0], hi[0] + pad[0], GRID_N), np.linspace(lo[1] - pad[1], hi[1] + pad[1], GRID_N))


def grid_points(public: data.Split) -> np.ndarray:
    """The grid as model input, ``[GRID_N * GRID_N, 2]`` float32, row by row (y outer, x inner)."""
    xs, ys = grid_axes(public)
    xx, yy = np.meshgrid(xs, ys)
    return np.column_stack([xx.ravel(), yy.ravel()]).astype(np.float32)


def row_rel_drift(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per row, the contract's drift: ``max_j |p - r| / max_j |r|`` (its maximum is ``max_rel_drift``)."""
    den = np.maximum(np.max(np.abs(r.astype(np.float64)), axis=1), float(np.finfo(np.float32).tiny))
    return metrics.row_abs_dp(p, r) / den


def encode_probabilities(p1: np.ndarray) -> str:
    """P(class 1) on the grid as base64 of uint8 steps of 1/255 (NaN drawn as 0.5)."""
    p1 = np.clip(np.nan_to_num(np.asarray(p1, dtype=np.float64), nan=0.5), 0.0, 1.0)
    return base64.b64encode(np.rint(p1 * 255).astype(np.uint8).tobytes()).decode("ascii")


def figure_section(runs: dict[str, Any], models: dict[str, Any], public: data.Split) -> dict[str, Any]:
    """The section from the model runs (``models.measure_models(..., runs=)``) and their facts."""
    why = _no_figure(runs, models)
    if why:
        return {"error": why}
    base, variant = runs[BASE], runs[VARIANT]
    grid = {name: art.run.outputs.get(f"{GRID_SET}__probabilities") for name, art in ((BASE, base), (VARIANT, variant))}
    if any(g is None or g.shape != (GRID_N * GRID_N, 2) for g in grid.values()):
        return {"error": "no picture: the models gave no probabilities on the grid of the plane"}
    xs, ys = grid_axes(public)
    sets, all_drift = [], []
    for name, key, X in (("X_test", "public_test", public.X_test), ("X_edge", "public_edge", public.X_edge)):
        drift = row_rel_drift(variant.p(key), base.p(key))
        all_drift.append((name, X, drift))
        sets.append(
            {
                "name": name,
                "label": f"{name} (public, {len(X)} rows)",
                "marker": "o" if name == "X_test" else "^",
                "xy": np.round(X.astype(np.float64), DECIMALS).tolist(),
                "value": _round(drift),
            }
        )
    worst = sorted(
        ((float(d[i]), name, int(i), X[i]) for name, X, d in all_drift for i in range(len(X))), key=lambda t: -t[0]
    )[:WORST]
    return {
        "kind": "decision_plane",
        "title": "Your fp32 and int8 QDQ models on the two-moons plane",
        "x_label": "feature x₀",
        "y_label": "feature x₁",
        "grid": {"x": [float(xs[0]), float(xs[-1])], "y": [float(ys[0]), float(ys[-1])], "shape": [GRID_N, GRID_N]},
        "boundaries": [
            {"name": BASE, "label": "fp32 boundary (fp32.onnx)", "p1": encode_probabilities(grid[BASE][:, 1])},
            {
                "name": VARIANT,
                "label": "int8 QDQ boundary (int8_qdq.onnx)",
                "p1": encode_probabilities(grid[VARIANT][:, 1]),
            },
        ],
        "points": sets,
        "value_label": "drift of int8 QDQ vs fp32, per row",
        "worst": [
            {"set": name, "row": i, "xy": np.round(x.astype(np.float64), DECIMALS).tolist(), "value": round(d, 6)}
            for d, name, i, x in worst
        ],
        "caption": (
            "Shaded red: where the two models pick different classes. Points: the contract's public "
            "X_test and X_edge (the rows your notebook uses; none of the grader's hidden inputs), coloured by "
            "max_j |p_int8 - p_fp32| / max_j |p_fp32| on that row, the measure of max_rel_drift (below "
            "0.0001 drawn at 0.0001). Far from the training data the int8 boundary can move while the "
            "accuracy on X_test stays the same."
        ),
        "data": "public",
    }


def _no_figure(runs: dict[str, Any], models: dict[str, Any]) -> str | None:
    """Why there is no picture (None when there is one)."""
    files = {BASE: "fp32.onnx", VARIANT: "int8_qdq.onnx"}
    for name in (BASE, VARIANT):
        facts, art = models.get(name), runs.get(name)
        if not isinstance(facts, dict) or art is None:
            return f"no picture: the grader measured no {files[name]}"
        if "error" in facts or art.error:
            return f"no picture: {files[name]} could not be measured ({_short(facts.get('error') or art.error)})"
        if art.outputs_error:
            return f"no picture: the outputs of {files[name]} are unusable ({_short(art.outputs_error)})"
    if not models[VARIANT].get("quantized"):
        return (
            "no picture: int8_qdq.onnx is not quantized, and the picture shows where int8 quantization moves "
            "your fp32 boundary; quantize it statically (QDQ) to see it"
        )
    return None


def _short(reason: object, limit: int = 200) -> str:
    text = run_failure_words(" ".join(str(reason).split()))  # a run failure's category only (leak_budget)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _round(values: np.ndarray) -> list[float]:
    """Drift values with 4 significant digits (enough for a colour), NaN as None."""
    return [float(f"{v:.4g}") if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]
