"""The reference ops (ONNX Runtime) against ONNX's literal conformance cases and onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from autograder.errors import AutograderError
from autograder.measure.quantization import reference_ops as ro


def reference_evaluator(op: str, dtype, x, scale, zero_point) -> np.ndarray:
    """onnx.reference's answer on the same one-node graph (the second oracle)."""
    model = ro.build_graph(op, dtype)
    flat = np.asarray(x).reshape(-1)
    (y,) = ReferenceEvaluator(model).run(
        None, {"x": flat, "scale": np.asarray(scale, np.float32), "zero_point": np.asarray(zero_point, dtype)}
    )
    return y.reshape(np.shape(x))


# ---------------------------------------------------------------- ONNX's own literal cases


def test_quantize_onnx_conformance_uint8():
    # onnx/backend/test/case/node/quantizelinear.py, test_quantizelinear: 3/2 = 1.5 → 2, ±1000 saturate
    x = np.array([0, 2, 3, 1000, -254, -1000]).astype(np.float32)
    y = np.array([128, 129, 130, 255, 1, 0]).astype(np.uint8)
    got = ro.ort_quantize(x, np.float32(2), np.uint8(128), np.uint8)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, y, err_msg="QuantizeLinear conformance case (uint8, zp 128)")


def test_dequantize_onnx_conformance_uint8():
    # onnx/backend/test/case/node/dequantizelinear.py, test_dequantizelinear
    x = np.array([0, 3, 128, 255]).astype(np.uint8)
    y = np.array([-256, -250, 0, 254], dtype=np.float32)
    got = ro.ort_dequantize(x, np.float32(2), np.uint8(128))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, y, err_msg="DequantizeLinear conformance case (uint8, zp 128)")


def test_quantize_lesson_example_scale_0_1():
    # the contract: scale 0.1, zero point 0: 1.2 → 12 and 1.24 → 12
    got = ro.ort_quantize(np.array([1.2, 1.24], np.float32), 0.1, 0, np.int8)
    np.testing.assert_array_equal(got, np.array([12, 12], np.int8))


def test_quantize_exact_ties_round_half_to_even():
    x = np.array([1.25, 1.75, -1.25, 0.25, -0.25], np.float32)
    got = ro.ort_quantize(x, 0.5, 0, np.int8)
    np.testing.assert_array_equal(got, np.array([2, 4, -2, 0, 0], np.int8), err_msg="x / 0.5 = 2.5, 3.5, -2.5, ±0.5")


def test_quantize_zero_point_added_in_int32_then_saturated():
    got = ro.ort_quantize(np.array([-1, 1, -300, 300], np.float32), 1.0, 255, np.uint8)
    np.testing.assert_array_equal(got, np.array([254, 255, 0, 255], np.uint8))
    got = ro.ort_quantize(np.array([0, 255, 256], np.float32), 1.0, -128, np.int8)
    np.testing.assert_array_equal(got, np.array([-128, 127, 127], np.int8))


# ---------------------------------------------------------------- shapes and dtypes


@pytest.mark.parametrize(
    "x, shape",
    [
        (1.25, ()),
        (np.float32(-3.75), ()),
        ([0.5, 1.5], (2,)),
        ([[0.5], [1.5]], (2, 1)),
        ([], (0,)),
        (np.zeros((3, 0), np.float32), (3, 0)),
        (np.ones((2, 3, 4), np.float32), (2, 3, 4)),
    ],
)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantize_keeps_shape_and_returns_dtype(x, shape, dtype):
    got = ro.ort_quantize(x, 0.5, 0, dtype)
    assert (got.shape, got.dtype) == (shape, np.dtype(dtype)), f"quantize({x!r}) gave {got.dtype} {got.shape}"


@pytest.mark.parametrize(
    "q", [np.int8(-5), np.zeros(0, np.uint8), np.zeros((2, 0), np.int8), np.arange(24, dtype=np.uint8).reshape(2, 3, 4)]
)
def test_dequantize_keeps_shape_and_returns_float32(q):
    got = ro.ort_dequantize(q, 0.5, 3)
    assert (got.shape, got.dtype) == (np.shape(q), np.dtype(np.float32))


# ---------------------------------------------------------------- ONNX Runtime vs onnx.reference


@pytest.mark.parametrize(
    "dtype, zero_point",
    [(np.int8, 0), (np.int8, -128), (np.int8, 127), (np.int8, -7), (np.uint8, 0), (np.uint8, 128), (np.uint8, 255)],
)
def test_quantize_matches_reference_evaluator(dtype, zero_point):
    rng = np.random.default_rng(11)
    scales = [0.5, 0.0371, 0.1, 3.0, 1e-3]
    for scale in scales:
        s = np.float32(scale)
        x = np.concatenate(
            [rng.normal(0, 200 * s, 2000), (np.arange(-300, 300) + 0.5) * np.float64(s), [0.0, -0.0, 1e6, -1e6]]
        ).astype(np.float32)  # x / s stays in int32
        got = ro.ort_quantize(x, s, zero_point, dtype)
        want = reference_evaluator("QuantizeLinear", dtype, x, s, zero_point)
        np.testing.assert_array_equal(got, want, err_msg=f"QuantizeLinear {np.dtype(dtype)} scale={s} zp={zero_point}")


@pytest.mark.parametrize(
    "dtype, zero_point", [(np.int8, -128), (np.int8, 127), (np.int8, 3), (np.uint8, 0), (np.uint8, 255), (np.uint8, 77)]
)
def test_dequantize_matches_reference_evaluator(dtype, zero_point):
    info = np.iinfo(dtype)
    q = np.arange(info.min, info.max + 1).astype(dtype)
    for scale in (0.5, 0.1, 0.0037, 123.25):
        got = ro.ort_dequantize(q, scale, zero_point)
        want = reference_evaluator("DequantizeLinear", dtype, q, scale, zero_point)
        np.testing.assert_array_equal(got, want, err_msg=f"DequantizeLinear {np.dtype(dtype)} scale={scale}")


def test_quantize_is_float32_division_then_rint():
    # the contract's claim the fairness rule rests on: ORT rounds float32(x) / float32(scale)
    rng = np.random.default_rng(5)
    s = np.float32(0.0137)
    x = np.concatenate([rng.normal(0, 1, 20000), (np.arange(-126, 126) + 0.5) * np.float64(s)]).astype(np.float32)
    got = ro.ort_quantize(x, s, 0, np.int8)
    rint32 = np.clip(np.rint(x / s), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got, rint32, err_msg="ONNX Runtime is not rint(float32 x / float32 scale)")


# ---------------------------------------------------------------- compute_scale_zp


@pytest.mark.parametrize(
    "rmin, rmax, dtype, symmetric, scale, zero_point",
    [
        (-1.0, 3.0, np.uint8, False, np.float32(4 / 255), 64),
        (-2.0, 6.0, np.int8, False, np.float32(8 / 255), -64),
        (-1.0, 3.0, np.int8, True, np.float32(6 / 255), 0),
        (-2.0, 1.0, np.uint8, True, np.float32(4 / 255), 128),
        (0.5, 2.0, np.uint8, False, np.float32(2 / 255), 0),  # widened to include 0
        (-3.0, -1.0, np.uint8, False, np.float32(3 / 255), 255),  # widened to include 0
        (0.0, 0.0, np.uint8, False, np.float32(1.0), 0),  # zero-width range
        (0.0, 0.0, np.uint8, True, np.float32(1.0), 0),  # zero-width beats the symmetric midpoint
    ],
)
def test_choose_qparams_literals(rmin, rmax, dtype, symmetric, scale, zero_point):
    got = ro.ort_choose_qparams(rmin, rmax, dtype, symmetric)
    assert got == (float(scale), zero_point), f"compute_scale_zp({rmin}, {rmax}, {np.dtype(dtype)}, {symmetric})"
    assert isinstance(got[0], float) and isinstance(got[1], int)


# ---------------------------------------------------------------- the grader's own mistakes fail loudly


@pytest.mark.parametrize(
    "call",
    [
        lambda: ro.ort_quantize([1.0], 0.5, 300, np.uint8),
        lambda: ro.ort_quantize([1.0], 0.5, -1, np.uint8),
        lambda: ro.ort_quantize([1.0], 0.0, 0, np.int8),
        lambda: ro.ort_quantize([1.0], 0.5, 0, np.int16),
        lambda: ro.ort_dequantize(np.array([1], np.int32), 0.5, 0),
        lambda: ro.ort_choose_qparams(2.0, 1.0, np.uint8, False),
    ],
)
def test_reference_rejects_inputs_outside_the_contract(call):
    with pytest.raises(AutograderError):
        call()


def test_sessions_are_cached_per_op_and_dtype():
    ro.ort_quantize([1.0], 0.5, 0, np.int8)
    a = ro._session("QuantizeLinear", "int8")
    ro.ort_quantize([2.0], 0.25, 0, np.int8)
    assert ro._session("QuantizeLinear", "int8") is a
    assert ro._session("QuantizeLinear", "uint8") is not a
