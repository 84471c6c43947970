"""Numbers that compare a model's outputs with labels or with another model's outputs.

Pure numpy (plus a clock in :func:`interleaved_medians`). ``p`` is a variant's ``probabilities``
and ``r`` the fp32 model's, both ``(N, 2)`` float32 from one call on the same batch. Every
function returns a plain Python number.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

# Row sums of a genuine model's probabilities: fp32 computes 1 - p exactly to float32 rounding; a
# QDQ model quantizes both columns separately to 256 levels (step ~1/255 ≈ 0.004), so its rows may
# sum to 1 ± 2 steps. 0.02 allows five steps and still catches outputs that are not a distribution.
PROB_SUM_ATOL = 0.02


def accuracy(p: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose ``argmax(p)`` equals ``y`` (the contract's accuracy)."""
    return float(np.mean(np.argmax(p, axis=1) == np.asarray(y)))


def label_agreement(p: np.ndarray, r: np.ndarray) -> float:
    """Share of rows where both models predict the same class (argmax of probabilities)."""
    return float(np.mean(np.argmax(p, axis=1) == np.argmax(r, axis=1)))


def row_abs_dp(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``max_j |p[i,j] - r[i,j]|`` per row, in float64."""
    return np.max(np.abs(p.astype(np.float64) - r.astype(np.float64)), axis=1)


def max_abs_dp(p: np.ndarray, r: np.ndarray) -> float:
    return float(np.max(row_abs_dp(p, r))) if len(p) else 0.0


def p99_abs_dp(p: np.ndarray, r: np.ndarray) -> float:
    """99th percentile over rows of the row's largest ``|Δp|``."""
    return float(np.percentile(row_abs_dp(p, r), 99)) if len(p) else 0.0


def max_rel_drift(p: np.ndarray, r: np.ndarray) -> float:
    """The contract's drift: ``max_i ( max_j |p[i,j] - r[i,j]| / max_j |r[i,j]| )``.

    Per-row normalisation keeps it finite for two-class probabilities (``max_j |r| >= 0.5``); a
    row of zeros in ``r`` (not a distribution) is divided by float32's smallest normal instead.
    """
    if not len(p):
        return 0.0
    den = np.maximum(np.max(np.abs(r.astype(np.float64)), axis=1), float(np.finfo(np.float32).tiny))
    return float(np.max(row_abs_dp(p, r) / den))


def elementwise_max_rel_drift(p: np.ndarray, r: np.ndarray) -> float | None:
    """``max |p - r| / |r|`` element by element: NOT the contract's measure, kept to recognise it
    in a report (it explodes where ``r`` is near 0). None when it is infinite or undefined."""
    if not len(p):
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.max(np.abs(p.astype(np.float64) - r.astype(np.float64)) / np.abs(r.astype(np.float64)))
    return float(v) if np.isfinite(v) else None


def size_ratio(q_bytes: int, fp32_bytes: int) -> float:
    """Quantized file size over fp32 file size (0.27 means 3.7× smaller)."""
    return float(q_bytes) / float(fp32_bytes) if fp32_bytes else float("nan")


def latency_ratio(model_ms: float, baseline_ms: float) -> float:
    """Median latency over the fp32 model's, timed interleaved (< 1 means faster)."""
    return float(model_ms) / float(baseline_ms) if baseline_ms > 0 else float("nan")


def coverage(x: np.ndarray, lo, hi) -> float:
    """Share of rows of ``x`` whose every feature lies inside ``[lo, hi]`` (numbers, or arrays
    with one bound per feature)."""
    if not len(x):
        return 0.0
    return float(np.mean(np.all((x >= np.asarray(lo)) & (x <= np.asarray(hi)), axis=1)))


def probability_problems(p: np.ndarray) -> list[str]:
    """Why ``p`` is not a batch of two-class distributions (empty when it is)."""
    if not np.all(np.isfinite(p)):
        return [f"probabilities contain NaN or infinity ({int(np.sum(~np.isfinite(p)))} values)"]
    problems = []
    lo, hi = float(np.min(p)), float(np.max(p))
    if lo < -PROB_SUM_ATOL or hi > 1 + PROB_SUM_ATOL:
        problems.append(f"probabilities range over [{lo:.4g}, {hi:.4g}], outside [0, 1]")
    sums = np.sum(p.astype(np.float64), axis=1)
    if np.any(np.abs(sums - 1.0) > PROB_SUM_ATOL):
        problems.append(f"probability rows sum to {float(sums.min()):.4g}…{float(sums.max()):.4g}, "
                        f"not 1 (± {PROB_SUM_ATOL})")
    return problems


def median_ms(fn: Callable[[], object], rounds: int, warmup: int = 3) -> float:
    """Median wall time in ms of ``rounds`` consecutive calls after ``warmup`` untimed ones: how
    the contracts time one warm session."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return float(np.median(times))


def interleaved_medians(runs: dict[str, Callable[[], object]], rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median wall time in ms of each callable, timed A B A B … so load drift hits all alike."""
    for fn in runs.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1000.0)
    return {k: float(np.median(v)) for k, v in times.items()}
