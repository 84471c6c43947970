"""Lesson 07: each function part's hint says what its cases vary, and its cases vary only that.

A part's hint is shown when the part fails, so it must point at what the part's cases test: a
rounding bug must not be told to "divide in float32" because exact ties sat among the arbitrary
scales, and a range that was not widened must not be told its "(widened) range has no width"
because an all-negative zero-width range sat among the degenerate ones.

``CLAIMS`` states, for every probe group of every function, the words of its hint (or message)
that make a claim and the property every case of the group has. The test holds them against the
rubric's text and against the cases built from many seeds (hypothesis: the seed source may
change, the rule may not), so a new group, a reworded hint or a generated case that breaks the
claim fails here.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.measure.quantization.reference_ops import qrange

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fn = _load(ROOT / "assignments" / "07-quantization" / "grading" / "functions.py", "a07_functions_for_hints")


def cases_for(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return fn.quantize_cases(rng) + fn.dequantize_cases(rng) + fn.choose_qparams_cases(rng)


# ---------------------------------------------------------------- what a case varies


def _quantize_with(case, rounding) -> np.ndarray:
    x = np.asarray(fn._arg(case, 0, "x"), dtype=np.float32)
    zp, (lo, hi) = int(fn._arg(case, 2, "zero_point")), qrange(fn._arg(case, 3, "dtype", np.int8))
    with np.errstate(all="ignore"):
        v = (x / np.float32(fn._arg(case, 1, "scale"))).astype(np.float64)
    return np.clip(np.clip(rounding(v), -(2.0**24), 2.0**24).astype(np.int64) + zp, lo, hi)


def rounding_decides(case) -> bool:
    """Half to even, half away from zero and half up give different results for this call where
    the quotient is an exact tie (a float32 quotient that only rounds to k + 0.5 is a near tie,
    where the grader accepts either neighbour)."""
    exact = fn.exact_ties(fn._arg(case, 0, "x"), fn._arg(case, 1, "scale"))
    even = _quantize_with(case, np.rint)[exact]
    away = _quantize_with(case, lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5))[exact]
    up = _quantize_with(case, lambda v: np.floor(v + 0.5))[exact]
    return not (np.array_equal(even, away) and np.array_equal(even, up))


def saturates(case) -> bool:
    x = np.asarray(fn._arg(case, 0, "x"), dtype=np.float32)
    zp, (lo, hi) = int(fn._arg(case, 2, "zero_point")), qrange(fn._arg(case, 3, "dtype", np.int8))
    with np.errstate(all="ignore"):
        r = np.rint(x / np.float32(fn._arg(case, 1, "scale")))
    return bool(np.any((r < lo) | (r > hi) | (r + zp < lo) | (r + zp > hi)))


def plain(case) -> bool:
    """A kind-of-input case: no saturation, and no tie the rounding rule decides."""
    return not saturates(case) and not rounding_decides(case)


def widened(case) -> tuple[float, float]:
    rmin, rmax = float(fn._arg(case, 0, "rmin")), float(fn._arg(case, 1, "rmax"))
    return min(rmin, 0.0), max(rmax, 0.0)


def dtype_of(case, default) -> np.dtype:
    return np.dtype(fn._arg(case, 2 if case.function == "choose_qparams" else 3, "dtype", default))


def zero_point(case) -> int:
    return int(fn._arg(case, 2, "zero_point"))


def q_shape(case) -> tuple:
    return np.shape(fn._arg(case, 0, "q" if case.function == "dequantize" else "x"))


# (function, group): (words of the part's hint or message that make the claim, what every case has)
CLAIMS = {
    ("quantize", "ties"): (
        "exactly k + 0.5 goes to the even neighbour",
        lambda c: rounding_decides(c) and not saturates(c),
    ),
    ("quantize", "saturation"): ("clip to the range", lambda c: saturates(c) and not rounding_decides(c)),
    ("quantize", "zero_point_bounds"): (
        "zero point 127 (int8) or 255 (uint8)",
        lambda c: zero_point(c) in qrange(dtype_of(c, np.int8)) and not rounding_decides(c),
    ),
    ("quantize", "negative_zero"): (
        "−0.0",
        lambda c: bool(np.any(np.signbit(np.asarray(fn._arg(c, 0, "x"))))) and not rounding_decides(c),
    ),
    ("quantize", "int8"): ("scale 0.1, zero point 0, int8", lambda c: dtype_of(c, np.int8) == np.int8 and plain(c)),
    ("quantize", "uint8"): ("dtype np.uint8", lambda c: dtype_of(c, np.int8) == np.uint8 and plain(c)),
    ("quantize", "scalar"): ("a Python float or a NumPy scalar", lambda c: q_shape(c) == () and plain(c)),
    ("quantize", "list"): ("x may be a list", lambda c: isinstance(fn._arg(c, 0, "x"), list) and plain(c)),
    ("quantize", "empty"): ("An empty array or list", lambda c: np.size(fn._arg(c, 0, "x")) == 0),
    ("quantize", "multi_dim"): ("the result has x's shape", lambda c: len(q_shape(c)) >= 2 and plain(c)),
    # the hint: "a float64 division only differs next to a tie": so no exact tie decides a call
    ("quantize", "random"): ("only differs next to a tie", lambda c: not rounding_decides(c) and not saturates(c)),
    ("quantize", "defaults"): (
        "default is dtype=np.int8",
        lambda c: "dtype" not in c.kwargs and len(c.args) == 3 and plain(c),
    ),
    ("dequantize", "int8"): ("with zero point 0", lambda c: np.asarray(fn._arg(c, 0, "q")).dtype == np.int8),
    ("dequantize", "uint8"): (
        "q equal to the zero point",
        lambda c: np.asarray(fn._arg(c, 0, "q")).dtype == np.uint8 and zero_point(c) != 0,
    ),
    ("dequantize", "zero_point_bounds"): (
        "In uint8, 0 − 255 wraps around",
        lambda c: zero_point(c) in qrange(np.asarray(fn._arg(c, 0, "q")).dtype),
    ),
    ("dequantize", "scalar"): ("a NumPy integer scalar", lambda c: q_shape(c) == ()),
    ("dequantize", "empty"): ("An empty q", lambda c: np.size(fn._arg(c, 0, "q")) == 0),
    ("dequantize", "multi_dim"): ("the result has q's shape", lambda c: len(q_shape(c)) >= 2),
    ("dequantize", "random"): ("Multiply in float32", lambda c: np.size(fn._arg(c, 0, "q")) > 100),
    ("choose_qparams", "asymmetric_uint8"): (
        "after widening the range to include 0",
        lambda c: dtype_of(c, np.uint8) == np.uint8 and widened(c)[0] < 0 < widened(c)[1],
    ),
    ("choose_qparams", "asymmetric_int8"): (
        "For int8, qmin = −128",
        lambda c: dtype_of(c, np.uint8) == np.int8 and not fn._arg(c, 3, "symmetric", False),
    ),
    ("choose_qparams", "symmetric_int8"): (
        "Symmetric means [−absmax, absmax]",
        lambda c: dtype_of(c, np.uint8) == np.int8 and fn._arg(c, 3, "symmetric"),
    ),
    ("choose_qparams", "symmetric_uint8"): (
        "A symmetric uint8 range",
        lambda c: dtype_of(c, np.uint8) == np.uint8 and fn._arg(c, 3, "symmetric"),
    ),
    ("choose_qparams", "positive_only"): (
        "a range like [0.5, 2] is treated as [0, 2]",
        lambda c: float(fn._arg(c, 0, "rmin")) > 0,
    ),
    ("choose_qparams", "negative_only"): ("[−3, −1] is treated as [−3, 0]", lambda c: float(fn._arg(c, 1, "rmax")) < 0),
    # the hint: "[0, 0] has no width, even widened to include 0": so every range is empty once widened
    ("choose_qparams", "degenerate"): (
        "has no width, even widened to include 0",
        lambda c: widened(c)[0] == widened(c)[1] == 0.0,
    ),
    ("choose_qparams", "tiny"): ("np.finfo(np.float32).tiny", lambda c: 0 < widened(c)[1] - widened(c)[0] < 1e-5),
    ("choose_qparams", "random"): ("make the range contain 0", lambda c: widened(c)[0] < 0 < widened(c)[1]),
    ("choose_qparams", "defaults"): ("dtype=np.uint8 and symmetric=False", lambda c: not c.kwargs and len(c.args) == 2),
}


def _parts(assignment) -> dict[tuple[str, str], dict]:
    out = {}
    for check in assignment.rubric()["checks"]:
        for part in check["parts"]:
            m = re.fullmatch(r"functions\.(\w+)\.groups\.(\w+)\.agree_share", part.get("measure", ""))
            if m:
                out[(m.group(1), m.group(2))] = part
    return out


def test_every_group_states_its_claim_in_its_part(assignment07):
    parts = _parts(assignment07)
    groups = {(c.function, c.group) for c in fn.probe_cases()}
    assert set(CLAIMS) == groups == set(parts), "every probe group needs a claim here and a part in the rubric"
    for key, (words, _) in CLAIMS.items():
        text = parts[key]["hint"] + " " + parts[key]["message"]
        assert words in text, f"{key}: the part's words no longer say {words!r}: {parts[key]['hint']}"


def _check(cases) -> None:
    for case in cases:
        _, holds = CLAIMS[(case.function, case.group)]
        assert holds(case), f"{case.id} ({case.group}) does not have what its part's hint says"


def test_the_graders_cases_vary_only_what_their_hints_name():
    _check(fn.probe_cases())


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_the_rule_holds_for_every_seed(seed):
    _check(cases_for(seed))


@pytest.mark.parametrize(
    "x, scale",
    [
        (np.arange(-20, 20, dtype=np.float64) * 0.25, 0.5),  # every one a tie
        ((np.arange(-128, 127) + 0.5) * np.float64(np.float32(0.0137)), 0.0137),  # near ties, two exact
        (np.array([0.0, -0.0, 1e-30, 3.4e38]), 1e-30),
    ],
)
def test_without_exact_ties_moves_every_tie_and_only_ties(x, scale):
    before = fn.exact_ties(x, scale)
    moved = fn.without_exact_ties(x, scale)
    assert not fn.exact_ties(moved, scale).any()
    same = moved == np.asarray(x, dtype=np.float32)
    assert np.array_equal(same, ~before), "only the ties move"
    assert np.all(np.abs(moved.astype(np.float64) - np.float32(x)) <= np.abs(np.spacing(np.float32(x))) * 64)
