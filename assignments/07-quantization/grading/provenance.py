"""Which rows the static model's calibration could have used, read from its input quantizer.

The contract fixes the data: calibration rows come from ``X_train``. The model keeps a trace of
them. ONNX Runtime's MinMax calibration (the contract's; Entropy returned the same ranges) records
``rmin``/``rmax``, the smallest and largest value the calibration rows fed to the input (one
per-tensor range over both features), widens the range to include 0, and writes
``scale = (rmax − rmin) / (qmax − qmin)`` in float32 and ``zero_point = round(qmin − rmin / scale)``.
So the width ``rmax − rmin`` is known to float32 rounding and ``rmin`` to within ``scale / 2``. The
contract's values are float32 draws from a continuous distribution, distinct to every digit: the
one pair of values that fits identifies the rows that set the range, and whether they belong to
``X_train``, ``X_test`` or ``X_edge``. A symmetric range ``[−m, m]`` (``ActivationSymmetric``)
identifies only ``m``, the largest ``|value|``.

``source`` is:

- ``"X_train"``: the ends are values of ``X_train`` (the contract);
- ``"X_test"`` / ``"X_edge"``: an end is a value of that array and no pair within ``X_train``
  fits: some calibration rows came from there;
- ``"beyond X_train"``: no pair fits exactly, and the range reaches past ``X_train``'s own range
  further than the zero point's rounding allows (MinMax on any rows of ``X_train`` cannot):
  calibrated on other data (scaled, augmented, …);
- ``"undetermined"``: neither (Percentile calibration, for one, ends inside the data and on no
  value of it). Not a finding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import Split

# |width − (qmax − qmin)·scale| for an honest MinMax range: the float32 subtraction rmax − rmin and
# the float32 scale each round by at most 2^-24 relative; observed 1.8e-8 to 4.4e-8 × width. Four
# times the bound of both leaves room and stays far below the spacing of the data's extreme values.
WIDTH_RTOL = 4 * 2.0 * 2.0**-24
ABS_TOL = 1e-7
NOT_A_FINDING = ("X_train", "undetermined")


def _arrays(split: Split) -> dict[str, np.ndarray]:
    return {"X_train": split.X_train, "X_test": split.X_test, "X_edge": split.X_edge}


def _where(value: float, magnitude: bool, arrays: dict[str, np.ndarray], feature: int | None) -> list[dict[str, Any]]:
    """Every (array, row, feature) holding exactly the float32 ``value`` (or ``−value`` too when
    only the ``magnitude`` is known)."""
    out = []
    for name, a in arrays.items():
        cols = a if feature is None else a[:, feature : feature + 1]
        hit = cols == np.float32(value)
        if magnitude:
            hit = hit | (cols == np.float32(-value))
        for r, c in zip(*np.nonzero(hit)):
            out.append({"in": name, "row": int(r), "feature": int(c if feature is None else feature)})
    return out


def _candidates(values: np.ndarray, scale: float, zp: float, qmin: int, qmax: int) -> list[tuple]:
    """The data values that can be the ends of this range, as tuples of ``(value, magnitude_only)``
    (two ends for ``[rmin, rmax]``, one when the other end is 0 or the range is symmetric)."""
    width = (qmax - qmin) * scale
    tol = WIDTH_RTOL * width + ABS_TOL
    if zp in (qmin, qmax):  # the range was widened to reach 0: only its other end is a value
        end = width if zp == qmin else -width
        return [((float(v), False),) for v in np.unique(values[np.abs(values - end) <= tol])]
    lo_est = (qmin - zp) * scale  # rmin lies within scale/2 of it
    out = [
        ((float(a), False), (float(b), False))
        for a in np.unique(values[np.abs(values - lo_est) <= scale / 2 + tol])
        for b in np.unique(values[np.abs(values - (a + width)) <= tol])
    ]
    if not out and abs(zp - (qmin + qmax) / 2) <= 0.5:  # [−m, m]: only m = max |value| is known
        mags = np.abs(values)
        out = [((float(v), True),) for v in np.unique(mags[np.abs(mags - width / 2) <= tol])]
    return out


def _beyond_train(scale: float, zp: float, qmin: int, qmax: int, train: np.ndarray) -> list[str]:
    """Ends of the range that no MinMax calibration on rows of ``train`` can reach."""
    width = (qmax - qmin) * scale
    slack = WIDTH_RTOL * width + ABS_TOL
    if zp not in (qmin, qmax) and abs(zp - (qmin + qmax) / 2) <= 0.5:  # maybe symmetric: m only
        m, top = width / 2, float(np.abs(train).max())
        return [f"its half-width {m:.4g} > X_train's largest |value| {top:.4g}"] if m > top + slack else []
    out = []
    rmin_at_most, rmax_at_least = (qmin - zp + 0.5) * scale, (qmax - zp - 0.5) * scale
    if zp > qmin and rmin_at_most < float(train.min()) - slack:
        out.append(f"its low end ≤ {rmin_at_most:.4g} < X_train's minimum {float(train.min()):.4g}")
    if zp < qmax and rmax_at_least > float(train.max()) + slack:
        out.append(f"its high end ≥ {rmax_at_least:.4g} > X_train's maximum {float(train.max()):.4g}")
    return out


def _one(scale: float, zp: float, qmin: int, qmax: int, split: Split, feature: int | None) -> dict[str, Any]:
    arrays = _arrays(split)
    pick = (lambda a: a.ravel()) if feature is None else (lambda a: a[:, feature])
    values = np.concatenate([pick(a) for a in arrays.values()]).astype(np.float64)
    found = [
        [_where(v, mag, arrays, feature) for v, mag in ends] for ends in _candidates(values, scale, zp, qmin, qmax)
    ]
    in_train = [f for f in found if all(any(w["in"] == "X_train" for w in where) for where in f)]
    if in_train:
        return {"source": "X_train", "ends": in_train[0]}
    if found:
        names = {w["in"] for where in found[0] for w in where}
        return {"source": "X_test" if "X_test" in names else "X_edge", "ends": found[0]}
    beyond = _beyond_train(scale, zp, qmin, qmax, pick(split.X_train).astype(np.float64))
    if beyond:
        return {"source": "beyond X_train", "ends": [], "why": "; ".join(beyond)}
    return {"source": "undetermined", "ends": []}


def calibration_source(input_quantization: dict[str, Any], split: Split) -> dict[str, Any]:
    """``{"source", "detail", "ends"}`` for the live input quantizers of a model (graph fact
    ``input_quantization``), against the contract's public ``split``."""
    findings = []
    for q in input_quantization.get("live", []):
        scales = np.atleast_1d(np.asarray(q["scale"], dtype=np.float64))
        zps = np.atleast_1d(np.asarray(q["zero_point"], dtype=np.float64))
        per_feature = q.get("axis") is not None and len(scales) == split.X_train.shape[1]
        if len(scales) != 1 and not per_feature:
            continue
        for j, (s, z) in enumerate(zip(scales, zps)):
            if s > 0:
                findings.append(
                    _one(float(s), float(z), int(q["qmin"]), int(q["qmax"]), split, j if per_feature else None)
                )
    if not findings:
        return {"source": "undetermined", "ends": [], "detail": "no input quantizer with a usable scale"}
    worst = next((f for f in findings if f["source"] not in NOT_A_FINDING), findings[0])
    return {**worst, "detail": _detail(worst)}


def _detail(f: dict[str, Any]) -> str:
    if f["source"] == "beyond X_train":
        return f"the calibrated range reaches beyond every row of X_train: {f['why']}"
    if not f["ends"]:
        return "the range matches no value of the contract's data exactly (not MinMax calibration): no finding"
    spots = []
    for where in f["ends"]:
        spots.append(" or ".join(f"{w['in']}[{w['row']}, {w['feature']}]" for w in where[:3]) or "no row")
    return "the calibrated range's ends are the values at " + " and ".join(spots)


# ── every activation's range, not the input's alone ──────────────────────────────────────────────
# The activations are computed by the worker in the student's fp32 model (another session than the
# notebook's calibration, maybe other kernels): their float32 values may differ in the last bits.
# A calibration row from outside X_train moves an end by far more (the gap between a tensor's two
# largest values over hundreds of rows); rounding, scale/2 and this slack are all allowed.
ACT_RTOL = 1e-4
TRAIN_SET, TEST_SET = "public_train", "public_test"


def _act_beyond(q: dict[str, Any], train: list[float], slack: float) -> list[str]:
    """Ends of ``q``'s range that MinMax on rows of X_train cannot reach, given the tensor's
    ``train`` = [min, max] over all of X_train."""
    scale, zp, qmin, qmax = q["scale"], q["zero_point"], q["qmin"], q["qmax"]
    width = (qmax - qmin) * scale
    lo, hi = min(train[0], 0.0), max(train[1], 0.0)  # MinMax widens every range to hold 0
    if zp == qmin:
        bounds = (0.0, width)  # widened to 0 at the low end: the high end is the width, to float32 rounding
    elif zp == qmax:
        bounds = (-width, 0.0)
    elif abs(zp - (qmin + qmax) / 2) <= 0.5:  # maybe symmetric [−m, m]
        m = width / 2
        return [f"half-width {m:.4g} > {max(-lo, hi):.4g}"] if m > max(-lo, hi) + slack else []
    else:
        bounds = ((qmin - zp + 0.5) * scale, (qmax - zp - 0.5) * scale)  # rmin at most, rmax at least
    out = []
    if bounds[0] < lo - slack:
        out.append(f"low end {bounds[0]:.4g} < {lo:.4g}")
    if bounds[1] > hi + slack:
        out.append(f"high end {bounds[1]:.4g} > {hi:.4g}")
    return out


def activation_source(ranges: dict[str, Any] | None) -> dict[str, Any]:
    """``{"source", "detail", "checked"}`` from the worker's ``activation_ranges``: ``"X_train"`` when
    every activation's calibrated range is one MinMax on rows of X_train can give; ``"X_test"`` when
    one reaches past X_train's values of that tensor but not past those of X_train and X_test
    together; ``"beyond X_train"`` otherwise; ``"undetermined"`` without ranges."""
    quantizers = [q for q in (ranges or {}).get("quantizers", []) if TRAIN_SET in q.get("ranges", {})]
    if not quantizers:
        return {"source": "undetermined", "checked": 0, "detail": "no activation range to check"}
    for q in quantizers:
        train = q["ranges"][TRAIN_SET]
        slack = ACT_RTOL * max((q["qmax"] - q["qmin"]) * q["scale"], abs(train[0]), abs(train[1])) + 1e-7
        beyond = _act_beyond(q, train, slack)
        if not beyond:
            continue
        test = q["ranges"].get(TEST_SET)
        both = [min(train[0], test[0]), max(train[1], test[1])] if test else None
        source = "X_test" if both is not None and not _act_beyond(q, both, slack) else "beyond X_train"
        where = "X_train's values there" if source == "beyond X_train" else "X_train's, within X_test's"
        return {
            "source": source,
            "checked": len(quantizers),
            "detail": f"the calibrated range of the activation {q['tensor'][:60]!r} reaches past {where}: "
            + "; ".join(beyond),
        }
    return {"source": "X_train", "checked": len(quantizers), "detail": "every activation range fits X_train"}
