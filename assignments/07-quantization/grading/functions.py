"""Assignment 07's function checks: the grader's hidden probe inputs and the ``functions`` section.

``probe_cases()`` lists every call the probe makes in the student's kernel, as named data: literal
inputs with explicit dtypes for the edge cases (exact .5 ties with power-of-two scales, saturation
at both ends, negative zero, zero points at their bounds, scalars, lists, empty and N-d arrays,
degenerate and one-sided ranges) plus a few seeded random arrays. Expected values are never written
here: ``measure_functions`` asks ONNX Runtime for them (``autograder.measure.quantization.reference_ops``) on the
same inputs and compares with ``autograder.measure.compare``.

Fairness at near-ties (the contract's rule, implemented in ``compare.near_tie``/``tie_offsets``):
ONNX Runtime rounds ``float32(x) / float32(scale)``; an honest student who divides in float64 or
multiplies by ``1 / scale`` may land on the other side of a ``k + 0.5`` tie when the quotient lies
within a few float32 ulps of it. There, and only there, either neighbour is accepted (after the zero
point and saturation). Exact ties are tested where the quotient is exact (power-of-two scales,
1.25 / 0.5 = 2.5 → 2) and must round half to even. ``choose_qparams``' zero point gets the same
allowance when ``qmin - rmin / scale`` lands within rounding of a tie.

Result checks: ``quantize`` must return an ndarray of the requested dtype (int8/uint8) and of x's
shape (a Python float gives a 0-d array), bit for bit; ``dequantize`` a float32 ndarray of q's shape,
to float32 rounding; ``choose_qparams`` a tuple ``(scale, zero_point)``: any float scale to float32
rounding, any integer zero point, exactly.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from autograder.lesson import (
    STEP,
    Arg,
    AutograderError,
    Expect,
    ProbeCase,
    ProbeResult,
    compare,
    hidden_secret,
    measure_functions as measure_all,
)

FUNCTIONS = ("quantize", "dequantize", "choose_qparams")
# the contract's parameter names, to name the arguments of a failed call in the feedback
PARAMETERS = {
    "quantize": ("x", "scale", "zero_point", "dtype"),
    "dequantize": ("q", "scale", "zero_point"),
    "choose_qparams": ("rmin", "rmax", "dtype", "symmetric"),
}
PROBE_STREAM = "07-quantization/probe-cases"  # the random inputs: a submission stream of the hidden-data secret
WARM_UP_STREAM = "07-quantization/warm-up-cases"  # warm_references' inputs (answers dropped)


def _reference():
    """``autograder.lesson.quantization_ops``, imported when the first answer is needed: it imports
    onnx and onnxruntime, which the probe's cases (built before the kernel starts) do not need."""
    from autograder.lesson import quantization_ops as reference_ops

    return reference_ops


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def _q(name: str, group: str, x, scale, zero_point, dtype: str | None) -> ProbeCase:
    kwargs = {"dtype": Arg.dtype(dtype)} if dtype else {}
    return ProbeCase(f"quantize/{name}", "quantize", (x, scale, zero_point), kwargs, group)


def _dq(name: str, group: str, q, scale, zero_point) -> ProbeCase:
    return ProbeCase(
        f"dequantize/{name}",
        "dequantize",
        (Arg.array(q) if isinstance(q, np.ndarray) else q, scale, zero_point),
        {},
        group,
    )


def _cq(name: str, group: str, rmin, rmax, dtype: str | None = None, symmetric: bool | None = None) -> ProbeCase:
    kwargs: dict[str, Any] = {}
    if dtype:
        kwargs["dtype"] = Arg.dtype(dtype)
    if symmetric is not None:
        kwargs["symmetric"] = symmetric
    return ProbeCase(f"choose_qparams/{name}", "choose_qparams", (rmin, rmax), kwargs, group)


def exact_ties(x, scale) -> np.ndarray:
    """Where ``x / scale`` is exactly ``k + 0.5`` in real arithmetic, so that only the rounding rule
    decides (the float32 quotient is the tie and times the scale gives back ``x`` exactly). A float32
    quotient that only rounds to ``k + 0.5`` is a near tie: there the grader accepts either
    neighbour (``quantize_tie_offsets``), and a float64 division may honestly land on the other."""
    x32, s32 = np.asarray(x, dtype=np.float32), np.float32(scale)
    with np.errstate(all="ignore"):
        q = x32 / s32
        return ((q - np.floor(q)) == np.float32(0.5)) & (
            q.astype(np.float64) * np.float64(s32) == x32.astype(np.float64)
        )


def without_exact_ties(x, scale) -> np.ndarray:
    """``x`` as float32, each element whose quotient is an exact tie moved to the next float32
    towards 0 (a near tie, which the grader's allowance covers)."""
    x = np.array(x, dtype=np.float32)
    for _ in range(64):
        tie = exact_ties(x, scale)
        if not tie.any():
            return x
        x[tie] = np.nextafter(x[tie], np.float32(0.0))
    raise AutograderError("could not move the random inputs off exact ties")


def quantize_cases(rng: np.random.Generator) -> list[ProbeCase]:
    A, S = Arg.array, Arg.scalar
    return [
        # exact ties: power-of-two scales, so x / scale is exactly k + 0.5 → round half to even; no tie case
        # saturates, not even when the zero point is added after clipping (tests/assignment/test_probe_groups.py)
        _q(
            "ties_pow2_int8",
            "ties",
            A(f32(0.25, 0.75, 1.25, 1.75, 2.25, -0.25, -0.75, -1.25, -1.75, -2.25)),
            0.5,
            0,
            "int8",
        ),
        _q("ties_pow2_uint8_zp128", "ties", A(f32(0.125, 0.375, 2.625, 5.125, 10.375, 31.625)), 0.25, 128, "uint8"),
        _q("ties_pow2_int8_zp_odd", "ties", A(f32(1, 3, 5, 7, -1, -3, -5)), 2.0, -3, "int8"),
        _q(
            "ties_pow2_uint8_near_top",
            "ties",
            A(f32(0.0625, 0.1875, 15.9375, 31.8125)),
            S(np.float32(0.125)),
            0,
            "uint8",
        ),
        # saturation at both ends, with and without a zero point (and no exact ties)
        _q(
            "saturation_uint8_zp128_numpy_scalars",
            "saturation",
            A(f32(0, 2, 4, 1000, -254, -1000)),
            S(np.float32(2)),
            S(np.uint8(128)),
            "uint8",
        ),
        _q(
            "saturation_int8",
            "saturation",
            A(f32(127.4, 127.6, -128.4, -128.6, 200, -200, 1e6, -1e6, 1e9, -1e9)),
            1.0,
            0,
            "int8",
        ),
        _q("saturation_uint8_zp10", "saturation", A(f32(-1.0, -1.1, 24.5, 24.6, 100, -100)), 0.1, 10, "uint8"),
        _q("saturation_int8_zp100", "saturation", A(f32(27, 28, 30, -228, -229, -300)), 1.0, 100, "int8"),
        # negative zero and values rounding to -0
        _q("negative_zero_int8", "negative_zero", A(f32(-0.0, 0.0, -1e-30, -0.2)), 0.5, 5, "int8"),
        _q("negative_zero_uint8", "negative_zero", A(f32(-0.0, -0.25, -1e-20)), 0.5, 0, "uint8"),
        # the groups below test one kind of input each: no exact tie, and no value saturates, not even
        # before the zero point is added
        # scalars: a Python float or a NumPy float32 gives a 0-d array
        _q("scalar_python_float_int8", "scalar", 1.2, 0.5, 0, "int8"),
        _q("scalar_float32_uint8", "scalar", S(np.float32(3.7)), 0.5, 128, "uint8"),
        # Python lists, flat and nested
        _q("list_1d_int8", "list", Arg.list(f32(0.4, 1.6, -2.6, 30.0, 0.1)), 1.0, 0, "int8"),
        _q("list_nested_uint8", "list", Arg.list(f32(0.0, 0.5, 1.0, 1.5, 2.0, 2.5).reshape(2, 3)), 0.5, 3, "uint8"),
        # empty inputs keep their shape
        _q("empty_int8", "empty", A(np.zeros(0, np.float32)), 0.5, 0, "int8"),
        _q("empty_list_uint8", "empty", Arg.list(np.zeros(0, np.float32)), 0.5, 128, "uint8"),
        _q("empty_2d_int8", "empty", A(np.zeros((3, 0), np.float32)), 0.5, 0, "int8"),
        # N-d inputs keep their shape
        _q(
            "multi_dim_3d_int8",
            "multi_dim",
            A((np.arange(-12, 12, dtype=np.float32) * 0.75).reshape(2, 3, 4)),
            0.25,
            0,
            "int8",
        ),
        _q(
            "multi_dim_3d_uint8",
            "multi_dim",
            A(np.linspace(0, 8, 24, dtype=np.float32).reshape(2, 3, 4)),
            0.1,
            40,
            "uint8",
        ),
        # the lesson's own example (scale 0.1: 1.2 → 12 and 1.24 → 12) and plain uint8
        _q("int8_lesson_scale_0_1", "int8", A(f32(1.2, 1.24, -1.2, 0.0, 12.7, -12.8)), 0.1, 0, "int8"),
        _q("uint8_scale_0_1", "uint8", A(f32(0.0, 0.1, 1.0, 12.7, 25.5)), 0.1, 0, "uint8"),
        # zero points at the bounds of their range (int32 arithmetic, no wraparound; these saturate too)
        _q("zero_point_int8_max", "zero_point_bounds", A(f32(0, -1, 1, -255, -256, 5)), 1.0, 127, "int8"),
        _q("zero_point_int8_min", "zero_point_bounds", A(f32(0, 1, 255, 256, -1)), 1.0, S(np.int8(-128)), "int8"),
        _q("zero_point_uint8_max", "zero_point_bounds", A(f32(0, -1, 1, -255, -300)), 1.0, S(np.uint8(255)), "uint8"),
        # seeded random data with arbitrary scales, inside the range (near-ties get the fairness allowance;
        # no exact tie, whatever the seed: the ties group owns them, so a rounding bug loses that part only)
        _q(
            "random_int8",
            "random",
            A(without_exact_ties(np.clip(rng.normal(0.0, 2.0, 400), -4.4, 4.4), 0.0371)),
            float(np.float32(0.0371)),
            -7,
            "int8",
        ),
        _q(
            "random_uint8",
            "random",
            A(without_exact_ties(rng.uniform(0.0, 5.9, 400), 0.03)),
            S(np.float32(0.03)),
            57,
            "uint8",
        ),
        _q(
            "random_near_ties_int8",
            "random",
            A(without_exact_ties((np.arange(-128, 127) + 0.5) * np.float64(np.float32(0.0137)), 0.0137)),
            float(np.float32(0.0137)),
            0,
            "int8",
        ),
        # the contract's default dtype (int8)
        _q("default_dtype_int8", "defaults", A(f32(-3.0, 1.4, 2.6, 30.0)), 1.0, 0, None),
    ]


def dequantize_cases(rng: np.random.Generator) -> list[ProbeCase]:
    S = Arg.scalar
    i8 = lambda *v: np.array(v, dtype=np.int8)  # noqa: E731
    u8 = lambda *v: np.array(v, dtype=np.uint8)  # noqa: E731
    return [
        _dq("int8_scale_0_1", "int8", i8(-128, -1, 0, 1, 127), 0.1, 0),
        _dq("onnx_conformance_uint8", "uint8", u8(0, 3, 128, 255), S(np.float32(2)), S(np.uint8(128))),
        _dq("uint8_zp10", "uint8", u8(0, 1, 127, 200, 255), 0.5, 10),
        _dq("zero_point_int8_max", "zero_point_bounds", i8(-128, 0, 127), 0.25, 127),
        _dq("zero_point_int8_min", "zero_point_bounds", i8(-128, 0, 127), 0.5, S(np.int8(-128))),
        _dq("zero_point_uint8_max", "zero_point_bounds", u8(0, 128, 255), 0.5, S(np.uint8(255))),
        _dq("scalar_int8", "scalar", S(np.int8(-5)), 0.5, 3),
        _dq("scalar_uint8", "scalar", S(np.uint8(200)), S(np.float32(0.02)), 128),
        _dq("empty_uint8", "empty", np.zeros(0, np.uint8), 0.5, 128),
        _dq("multi_dim_3d_int8", "multi_dim", (np.arange(-12, 12) * 10).astype(np.int8).reshape(2, 3, 4), 0.05, -3),
        _dq(
            "random_all_uint8",
            "random",
            rng.permutation(256).astype(np.uint8).reshape(16, 16),
            float(np.float32(0.0037)),
            77,
        ),
        _dq("random_int8_scale_0_1", "random", rng.integers(-128, 128, 300).astype(np.int8), 0.1, -20),
    ]


def choose_qparams_cases(rng: np.random.Generator) -> list[ProbeCase]:
    S = Arg.scalar
    tiny = lambda v: float(np.float32(v))  # noqa: E731  (float32-exact literals, as calibration ranges are)
    cases = [
        _cq("asymmetric_uint8", "asymmetric_uint8", -1.0, 3.0, "uint8", False),
        _cq("asymmetric_uint8_moons_range", "asymmetric_uint8", -1.625, 2.478515625, "uint8", False),
        _cq(
            "asymmetric_uint8_float32_args",
            "asymmetric_uint8",
            S(np.float32(-0.75)),
            S(np.float32(1.5)),
            "uint8",
            False,
        ),
        _cq("asymmetric_uint8_balanced", "asymmetric_uint8", -1.0, 1.0, "uint8", False),
        _cq("asymmetric_int8", "asymmetric_int8", -2.0, 6.0, "int8", False),
        _cq("symmetric_int8", "symmetric_int8", -1.0, 3.0, "int8", True),
        _cq("symmetric_uint8", "symmetric_uint8", -2.0, 1.0, "uint8", True),
        _cq("positive_only_uint8", "positive_only", 0.5, 2.0, "uint8", False),
        _cq("positive_only_int8", "positive_only", 0.5, 2.0, "int8", False),
        _cq("positive_only_symmetric_int8", "positive_only", 0.5, 2.0, "int8", True),
        _cq("negative_only_uint8", "negative_only", -3.0, -1.0, "uint8", False),
        _cq("negative_only_int8", "negative_only", -3.0, -1.0, "int8", False),
        _cq("negative_only_zero_width_int8", "negative_only", -1.5, -1.5, "int8", False),  # widens to [-1.5, 0]
        _cq("degenerate_zero_uint8", "degenerate", 0.0, 0.0, "uint8", False),
        _cq("degenerate_zero_int8_symmetric", "degenerate", 0.0, 0.0, "int8", True),
        _cq("degenerate_zero_uint8_symmetric", "degenerate", 0.0, 0.0, "uint8", True),
        _cq("tiny_uint8", "tiny", tiny(-1e-6), tiny(2e-6), "uint8", False),
        _cq("tiny_symmetric_int8", "tiny", tiny(-1e-30), tiny(1e-30), "int8", True),
    ]
    for i, (dtype, symmetric) in enumerate([("uint8", False), ("int8", True)]):
        lo, hi = rng.uniform(0.01, 10.0, 2).astype(np.float32)
        cases.append(
            _cq(
                f"random_{i}_{dtype}{'_symmetric' if symmetric else ''}",
                "random",
                -float(lo),
                float(hi),
                dtype,
                symmetric,
            )
        )
    cases.append(_cq("default_uint8_asymmetric", "defaults", -1.0, 3.0))
    return cases


def probe_cases() -> list[ProbeCase]:
    """The grader's hidden probe inputs, in order (ties first, so a first mismatch names them); the
    random ones drawn for the submission being graded (``hidden_secret.submission_generator``)."""
    rng = hidden_secret.submission_generator(PROBE_STREAM)
    return quantize_cases(rng) + dequantize_cases(rng) + choose_qparams_cases(rng)


# ---------------------------------------------------------------- the reference's answers


def _arg(case: ProbeCase, index: int, name: str, default=None):
    if name in case.kwargs:
        return case.raw(name)
    if index < len(case.args):
        return case.raw(index)
    return default


def quantize_tie_offsets(x, scale, zero_point, dtype, expected: np.ndarray) -> np.ndarray:
    """The near-tie allowance for ``quantize``: offsets to the other accepted neighbour (0: none)."""
    x64, x32 = np.asarray(x, dtype=np.float64), np.asarray(x, dtype=np.float32)
    s64, s32 = np.float64(scale), np.float32(scale)
    with np.errstate(all="ignore"):
        t32 = x32 / s32  # ONNX Runtime's quotient
        variants = [
            t32,
            x64 / s64,
            x32.astype(np.float64) / np.float64(s32),
            x32 * np.float32(np.float32(1.0) / s32),
            x64 * (1.0 / s64),
        ]
        exact = (x64 == x32) & (s64 == s32) & (t32.astype(np.float64) * np.float64(s32) == x32.astype(np.float64))
    lo, hi = _reference().qrange(dtype)
    return compare.tie_offsets(variants, expected, add=int(zero_point), lo=lo, hi=hi, exact=exact)


def zero_point_tie_offset(rmin, rmax, dtype, symmetric: bool, expected_zp: int) -> np.ndarray:
    """The near-tie allowance for ``choose_qparams``' asymmetric zero point ``round(qmin - rmin / scale)``."""
    qmin, qmax = _reference().qrange(dtype)
    lo64, hi64 = min(float(rmin), 0.0), max(float(rmax), 0.0)
    lo32, hi32 = np.minimum(np.float32(rmin), np.float32(0)), np.maximum(np.float32(rmax), np.float32(0))
    if symmetric or hi64 - lo64 <= 0 or hi32 - lo32 <= 0:
        return np.zeros((), np.int8)
    with np.errstate(all="ignore"):
        s64 = (np.float64(hi32) - np.float64(lo32)) / (qmax - qmin)  # ONNX Runtime's scale
        s32 = np.float32((hi32 - lo32) / np.float32(qmax - qmin))  # all in float32
        variants = [
            qmin - np.float64(lo32) / s64,  # ONNX Runtime's quotient
            qmin - np.float64(lo32) / np.float64(np.float32(s64)),  # the stored float32 scale
            np.float32(qmin) - lo32 / s32,
            qmin - lo64 / ((hi64 - lo64) / (qmax - qmin)),
        ]  # the raw (float64) inputs
    return compare.tie_offsets(variants, np.int64(expected_zp), lo=qmin, hi=qmax)


def expect_quantize(case: ProbeCase) -> Expect:
    x, scale, zp = _arg(case, 0, "x"), _arg(case, 1, "scale"), _arg(case, 2, "zero_point")
    dtype = _arg(case, 3, "dtype", np.int8)
    expected = _reference().ort_quantize(x, scale, zp, dtype)
    return Expect(expected, unit=STEP, ambiguous=quantize_tie_offsets(x, scale, zp, dtype, expected))


def expect_dequantize(case: ProbeCase) -> Expect:
    scale = _arg(case, 1, "scale")
    expected = _reference().ort_dequantize(_arg(case, 0, "q"), scale, _arg(case, 2, "zero_point"))
    return Expect(expected, step=abs(float(scale)))


def expect_choose_qparams(case: ProbeCase) -> tuple[Expect, Expect]:
    rmin, rmax = _arg(case, 0, "rmin"), _arg(case, 1, "rmax")
    dtype, symmetric = _arg(case, 2, "dtype", np.uint8), bool(_arg(case, 3, "symmetric", False))
    scale, zp = _reference().ort_choose_qparams(rmin, rmax, dtype, symmetric)
    return (
        Expect(np.array(scale, dtype=np.float32), dtype_kinds="f", label="scale"),
        Expect(
            np.array(zp),
            dtype_kinds="iu",
            label="zero_point",
            unit=STEP,
            ambiguous=zero_point_tie_offset(rmin, rmax, dtype, symmetric, zp),
        ),
    )


EXPECTATIONS: dict[str, Callable[[ProbeCase], Any]] = {
    "quantize": expect_quantize,
    "dequantize": expect_dequantize,
    "choose_qparams": expect_choose_qparams,
}


def warm_references() -> None:
    """Every probe case's reference answer computed once and dropped: imports onnx and onnxruntime
    and builds the reference sessions (cached), so that measuring after the probe starts warm
    (``prepare`` calls it while the kernel runs). On cases of its own stream: ``prepare`` is once
    per process and secret, never a submission's (autograder/warm_ups.py), and the sessions it
    warms are the same for any inputs."""
    rng = hidden_secret.generator(WARM_UP_STREAM)
    for case in quantize_cases(rng) + dequantize_cases(rng) + choose_qparams_cases(rng):
        EXPECTATIONS[case.function](case)


# ---------------------------------------------------------------- the measurement


def measure_functions(cases: list[ProbeCase], probe: ProbeResult) -> dict[str, Any]:
    """The ``functions`` section of measurements.json (see docs/ARCHITECTURE.md)."""
    unknown = sorted({c.function for c in cases} - set(EXPECTATIONS))
    if unknown:
        raise AutograderError(f"no reference for probe function(s) {unknown}")
    return measure_all(cases, probe, EXPECTATIONS, parameters=PARAMETERS)
