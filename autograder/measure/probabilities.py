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


NOT_FINITE = "probabilities contain NaN or infinity"
OUT_OF_RANGE = "probabilities fall outside [0, 1]"
ROWS_NOT_ONE = f"probability rows do not sum to 1 (± {PROB_SUM_ATOL})"


def probability_problems(p: np.ndarray) -> list[str]:
    """Why ``p`` is not a batch of class distributions (empty when it is), in fixed sentences:
    ``p`` may be a model's outputs on the grader's hidden rows, so no count, range or sum of it is
    told (a model can map a hidden row into its range: SECURITY.md, "The leak budget")."""
    if not np.all(np.isfinite(p)):
        return [NOT_FINITE]
    problems = []
    if float(np.min(p)) < -PROB_SUM_ATOL or float(np.max(p)) > 1 + PROB_SUM_ATOL:
        problems.append(OUT_OF_RANGE)
    sums = np.sum(p.astype(np.float64), axis=1)
    if np.any(np.abs(sums - 1.0) > PROB_SUM_ATOL):
        problems.append(ROWS_NOT_ONE)
    return problems
