"""Quantization references for contracted functions: ONNX Runtime itself, on the same inputs.

For the per-tensor arithmetic the contract pins down bit for bit:

- ``ort_quantize`` runs a one-node ``QuantizeLinear`` graph (per tensor, opset 19),
- ``ort_dequantize`` runs a one-node ``DequantizeLinear`` graph (per tensor, opset 19),
- ``ort_choose_qparams`` calls ``onnxruntime.quantization.quant_utils.compute_scale_zp``, the MinMax
  rule of ONNX Runtime's quantizer.

The graphs are built with ``onnx.helper`` and run on ``CPUExecutionProvider`` with graph
optimisations off and one thread; one session per (operator, integer dtype) is cached for the life
of the process. The data tensor is 1-D with a dynamic length, so any input (a Python float, a
list, an empty or N-d array) is flattened for the graph and reshaped back, and a scalar gives a
0-d result. Inputs have float32 semantics, as in the contract: ``x`` and ``scale`` are cast to
float32 before the graph sees them; the zero point must lie inside the integer range (anything
else is a bug in the grader's own cases and raises :class:`AutograderError`).

Any other operator: :mod:`autograder.measure.reference_ops` (``ort_node``). Like it, this runs only
the grader's own graphs on the grader's own inputs, in the grader's process.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ...errors import AutograderError
from ...ort_platform import session_options
from ..reference_ops import IR_VERSION, OPSET, run_lock

# OPSET 19: QuantizeLinear/DequantizeLinear-19, per-tensor int8/uint8 unchanged since 13

# The integer ranges of the contract (and of onnx.reference's _QUANT_INTEGER_RANGES).
QUANT_RANGES: dict[type, tuple[int, int]] = {np.int8: (-128, 127), np.uint8: (0, 255)}
_ONNX_TYPES = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}


def qrange(dtype) -> tuple[int, int]:
    """``(qmin, qmax)`` of ``np.int8`` or ``np.uint8`` (given as a type, dtype or name)."""
    t = np.dtype(dtype).type
    if t not in QUANT_RANGES:
        raise AutograderError(f"reference ops support int8 and uint8 only, got {np.dtype(dtype)}")
    return QUANT_RANGES[t]


def build_graph(op: str, dtype) -> onnx.ModelProto:
    """A one-node ``QuantizeLinear`` or ``DequantizeLinear`` model with scalar scale and zero point.

    Inputs: ``x`` (1-D, length N), ``scale`` (float32, 0-d), ``zero_point`` (``dtype``, 0-d);
    output ``y`` (1-D, length N): ``dtype`` for QuantizeLinear, float32 for DequantizeLinear.
    """
    qtype = _ONNX_TYPES[np.dtype(dtype).type]
    if op == "QuantizeLinear":
        x_type, y_type = TensorProto.FLOAT, qtype
    elif op == "DequantizeLinear":
        x_type, y_type = qtype, TensorProto.FLOAT
    else:
        raise AutograderError(f"unknown reference operator {op!r}")
    node = helper.make_node(op, ["x", "scale", "zero_point"], ["y"])
    graph = helper.make_graph(
        [node],
        f"reference_{op}_{np.dtype(dtype).name}",
        [
            helper.make_tensor_value_info("x", x_type, ["N"]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("zero_point", qtype, []),
        ],
        [helper.make_tensor_value_info("y", y_type, ["N"])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="autograder.quantization.reference_ops"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


@lru_cache(maxsize=None)
def _session(op: str, dtype_name: str) -> ort.InferenceSession:
    options = session_options("ORT_DISABLE_ALL")
    model = build_graph(op, np.dtype(dtype_name))
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _zero_point(zero_point, dtype) -> np.ndarray:
    qmin, qmax = qrange(dtype)
    zp = np.asarray(zero_point)
    if zp.shape != () or zp.dtype.kind not in "iu" or not qmin <= int(zp) <= qmax:
        raise AutograderError(
            f"reference zero point {zero_point!r} is not an integer scalar in "
            f"[{qmin}, {qmax}] for {np.dtype(dtype).name}"
        )
    return np.array(int(zp), dtype=dtype)


def _scale(scale) -> np.ndarray:
    s = np.asarray(scale, dtype=np.float32)
    if s.shape != () or not np.isfinite(s) or s <= 0:
        raise AutograderError(f"reference scale {scale!r} must be a finite positive scalar (per tensor)")
    return s


def _run(op: str, dtype, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    session = _session(op, np.dtype(dtype).name)
    flat = np.ascontiguousarray(x.reshape(-1))
    with run_lock:
        (y,) = session.run(["y"], {"x": flat, "scale": scale, "zero_point": zero_point})
    return y.reshape(x.shape)


def ort_quantize(x, scale, zero_point, dtype=np.int8) -> np.ndarray:
    """ONNX Runtime's ``QuantizeLinear(float32(x), float32(scale), dtype(zero_point))``, x's shape."""
    xa = np.asarray(x, dtype=np.float32)
    return _run("QuantizeLinear", dtype, xa, _scale(scale), _zero_point(zero_point, dtype))


def ort_dequantize(q, scale, zero_point) -> np.ndarray:
    """ONNX Runtime's ``DequantizeLinear(q, float32(scale), zero_point)`` as float32 of q's shape.

    ``q`` must be an int8 or uint8 array (or NumPy scalar); the zero point takes q's dtype.
    """
    qa = np.asarray(q)
    if qa.dtype.type not in QUANT_RANGES:
        raise AutograderError(f"reference dequantize needs int8 or uint8 q, got {qa.dtype}")
    return _run("DequantizeLinear", qa.dtype, qa, _scale(scale), _zero_point(zero_point, qa.dtype))


def ort_choose_qparams(rmin, rmax, dtype=np.uint8, symmetric: bool = False) -> tuple[float, int]:
    """``(scale, zero_point)`` from ONNX Runtime's ``compute_scale_zp`` for float32 ``[rmin, rmax]``.

    qmin/qmax are the full ranges of the contract (int8 [-128, 127], uint8 [0, 255]). The scale is
    the float32 that ONNX Runtime stores, returned as a Python float (exactly that value).
    """
    from onnxruntime.quantization.quant_utils import compute_scale_zp

    qmin, qmax = qrange(dtype)
    lo = np.array(rmin, dtype=np.float32)
    hi = np.array(rmax, dtype=np.float32)
    if lo.shape != () or hi.shape != () or not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise AutograderError(f"reference range [{rmin!r}, {rmax!r}] must be finite scalars with rmin <= rmax")
    zero_point, scale = compute_scale_zp(
        lo, hi, np.array(qmin, dtype=dtype), np.array(qmax, dtype=dtype), symmetric=bool(symmetric)
    )
    return float(np.float32(scale)), int(zero_point)
