"""A classifier's outputs: class probabilities ``(N, C)``, one row per input row, any C.

Pure numpy. ``p`` is a model's ``probabilities`` and ``r`` another model's (or scikit-learn's) for
the same batch; ``y`` the labels. Every function returns a plain Python number or a list of
sentences. How far two outputs are apart, in any shape: :mod:`autograder.measure.metrics`.
"""

from __future__ import annotations

import numpy as np

# Row sums of a genuine model's probabilities: fp32 computes 1 - p exactly to float32 rounding; a
# QDQ model quantizes each column separately to 256 levels (step ~1/255 ≈ 0.004), so its rows may
# sum to 1 ± 2 steps. 0.02 allows five steps and still catches outputs that are not a distribution.
PROB_SUM_ATOL = 0.02


def accuracy(p: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose ``argmax(p)`` equals ``y`` (the contracts' accuracy)."""
    return float(np.mean(np.argmax(p, axis=1) == np.asarray(y)))


def label_agreement(p: np.ndarray, r: np.ndarray) -> float:
    """Share of rows where both models predict the same class (argmax of probabilities)."""
    return float(np.mean(np.argmax(p, axis=1) == np.argmax(r, axis=1)))


def probability_problems(p: np.ndarray) -> list[str]:
    """Why ``p`` is not a batch of class distributions (empty when it is)."""
    if not np.all(np.isfinite(p)):
        return [f"probabilities contain NaN or infinity ({int(np.sum(~np.isfinite(p)))} values)"]
    problems = []
    lo, hi = float(np.min(p)), float(np.max(p))
    if lo < -PROB_SUM_ATOL or hi > 1 + PROB_SUM_ATOL:
        problems.append(f"probabilities range over [{lo:.4g}, {hi:.4g}], outside [0, 1]")
    sums = np.sum(p.astype(np.float64), axis=1)
    if np.any(np.abs(sums - 1.0) > PROB_SUM_ATOL):
        problems.append(
            f"probability rows sum to {float(sums.min()):.4g}…{float(sums.max()):.4g}, not 1 (± {PROB_SUM_ATOL})"
        )
    return problems
