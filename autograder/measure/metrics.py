"""Numbers that compare one model's outputs with another's (its baseline), and time them.

Pure numpy (plus a clock in :func:`median_ms` and :func:`interleaved_medians`). ``p`` is a model's
output and ``r`` the baseline's for the same batch, of the same shape: the first axis is the rows
(one per input row), any further axes are flattened into the row's values (an ``(N,)`` output has
one value per row, an ``(N, C)`` one C). Every function returns a plain Python number. Class
probabilities have their own checks: :mod:`autograder.measure.probabilities`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 rows: ``(N, values)`` (an ``(N,)`` array has one value per row)."""
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:]))) if a.ndim else a.reshape(1, 1)


def row_abs_dp(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``max_j |p[i,j] - r[i,j]|`` per row, in float64."""
    d = np.abs(_rows(p) - _rows(r))
    return d.max(axis=1) if d.shape[1] else np.zeros(len(d))


def max_abs_dp(p: np.ndarray, r: np.ndarray) -> float:
    return float(np.max(row_abs_dp(p, r))) if len(p) else 0.0


def p99_abs_dp(p: np.ndarray, r: np.ndarray) -> float:
    """99th percentile over rows of the row's largest ``|Δp|``."""
    return float(np.percentile(row_abs_dp(p, r), 99)) if len(p) else 0.0


def max_rel_drift(p: np.ndarray, r: np.ndarray) -> float:
    """The relative drift: ``max_i ( max_j |p[i,j] - r[i,j]| / max_j |r[i,j]| )``.

    Per-row normalisation keeps it finite where a row of ``r`` has a large value (class
    probabilities: ``max_j |r| >= 1/C``); a row of zeros in ``r`` is divided by float32's smallest
    normal instead.
    """
    if not len(p):
        return 0.0
    den = np.maximum(np.max(np.abs(_rows(r)), axis=1), float(np.finfo(np.float32).tiny))
    return float(np.max(row_abs_dp(p, r) / den))


def elementwise_max_rel_drift(p: np.ndarray, r: np.ndarray) -> float | None:
    """``max |p - r| / |r|`` element by element: NOT :func:`max_rel_drift`, kept to recognise it in
    a report (it explodes where ``r`` is near 0). None when it is infinite or undefined."""
    if not len(p):
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.max(np.abs(p.astype(np.float64) - r.astype(np.float64)) / np.abs(r.astype(np.float64)))
    return float(v) if np.isfinite(v) else None


def size_ratio(model_bytes: int, baseline_bytes: int) -> float:
    """A model's size over its baseline's (0.27 means 3.7× smaller)."""
    return float(model_bytes) / float(baseline_bytes) if baseline_bytes else float("nan")


def latency_ratio(model_ms: float, baseline_ms: float) -> float:
    """Median latency over the baseline's, timed interleaved (< 1 means faster)."""
    return float(model_ms) / float(baseline_ms) if baseline_ms > 0 else float("nan")


def coverage(x: np.ndarray, lo, hi) -> float:
    """Share of rows of ``x`` whose every feature lies inside ``[lo, hi]`` (numbers, or arrays
    with one bound per feature)."""
    if not len(x):
        return 0.0
    return float(np.mean(np.all((x >= np.asarray(lo)) & (x <= np.asarray(hi)), axis=1)))


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
