"""Quantization facts of an ONNX graph: how it is quantized, and whether it came from a given fp32 model.

Pure functions of ``onnx.ModelProto`` (onnx + numpy, no ONNX Runtime, no I/O), run in the model
worker for the fact groups a lesson names (:mod:`autograder.measure.fact_groups`):
``"quantization"`` (:func:`quantization_facts`) and the pair group ``"derived_from"``
(:func:`derived_from`, against the job's baseline).

Classification (ort-quantization-facts §6): ``dynamic`` (``DynamicQuantizeLinear`` feeding
integer MatMuls with integer constant weights, or the fused ``DynamicQuantizeMatMul``; no float
weight left; no constant-scale Q on an activation), ``static_qdq`` (every MatMul/Gemm takes B from
DQ(integer constant) and A from DQ(Q(runtime tensor)) with constant scales), ``static_qoperator``
(QLinearMatMul/QGemm with integer constant weights, no float weight op left),
``weights_only_qdq`` (every MatMul/Gemm takes B from DQ(integer constant), no activation Q/DQ in
front of any), ``fp32`` (float weights only, no quantization op at all), else ``unknown``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ..graph_index import FLOAT_MATMULS, GraphIndex, attr, dtype_name, float_weight_nodes, float_weights, input_at
from .input_quant import input_quantization_facts
from .weights import QuantWeight, dq_weight, quantized_weights

CLASSES = ("fp32", "dynamic", "static_qdq", "static_qoperator", "weights_only_qdq", "unknown")

QUANT_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QLinearMatMul",
        "QGemm",
        "QLinearConv",
        "QLinearAdd",
        "QLinearMul",
        "QLinearSigmoid",
        "QLinearConcat",
        "QLinearLeakyRelu",
        "QLinearSoftmax",
    }
)

# A genuine quantization rounds each weight to the nearest step: |deq - W| <= scale/2, so the
# residual max|deq - W| / (scale/2) is <= 1. The 1% slack covers float32 arithmetic in
# (q - zp) * scale; a model trained elsewhere scores in the hundreds (research: 374-409).
DERIVED_RESIDUAL_MAX = 1.01


# ── classification ─────────────────────────────────────────────────────────────────────────────


def _static_activation_qs(ix: GraphIndex) -> list[onnx.NodeProto]:
    """QuantizeLinear nodes on runtime tensors with a constant scale (fixed by calibration)."""
    return [
        n
        for n in ix.nodes
        if n.op_type == "QuantizeLinear" and not ix.is_const(n.input[0]) and ix.is_const(input_at(n, 1))
    ]


def _dq_of_static_q(ix: GraphIndex, name: str) -> bool:
    dq = ix.made_by(name, "DequantizeLinear")
    if dq is None or not ix.is_const(input_at(dq, 1)):
        return False
    q = ix.made_by(dq.input[0], "QuantizeLinear")
    return q is not None and not ix.is_const(q.input[0]) and ix.is_const(input_at(q, 1))


def _dynamic_matmuls(ix: GraphIndex) -> list[onnx.NodeProto]:
    out = []
    for n in ix.nodes:
        if n.op_type == "DynamicQuantizeMatMul" and ix.is_int_const(input_at(n, 1)):
            out.append(n)
        elif (
            n.op_type in ("MatMulInteger", "MatMulIntegerToFloat")
            and ix.is_int_const(input_at(n, 1))
            and ix.made_by(n.input[0], "DynamicQuantizeLinear") is not None
        ):
            out.append(n)
    return out


def classify(ix: GraphIndex) -> tuple[str, str]:
    """``(classification, detail)``: one of :data:`CLASSES` and a sentence saying why."""
    mms = [n for n in ix.nodes if n.op_type in FLOAT_MATMULS]
    floats = float_weight_nodes(ix)
    dyn = _dynamic_matmuls(ix)
    qop = [n for n in ix.nodes if n.op_type in ("QLinearMatMul", "QGemm") and ix.is_int_const(input_at(n, 3))]
    act_q = _static_activation_qs(ix)
    w_dq = [n for n in mms if dq_weight(ix, input_at(n, 1), n.op_type, 1) is not None]
    full = [n for n in w_dq if _dq_of_static_q(ix, n.input[0])]
    quant_ops = sum(1 for n in ix.nodes if n.op_type in QUANT_OPS)
    n_weight_ops = len(mms) + len(dyn) + len(qop)

    if n_weight_ops == 0:
        return "unknown", "no MatMul or Gemm with a constant weight was found"
    if dyn and not floats and not act_q and not qop and not w_dq:
        return "dynamic", (
            f"{len(dyn)} integer MatMul(s) take integer constant weights and activations "
            "quantized at run time by DynamicQuantizeLinear"
        )
    if mms and len(full) == len(mms) and not dyn and not qop:
        return "static_qdq", (
            f"all {len(mms)} MatMul/Gemm take weights from DequantizeLinear(integer constant) "
            "and activations from Quantize→DequantizeLinear pairs with constant scales"
        )
    if qop and not mms and not dyn:
        return "static_qoperator", f"{len(qop)} QLinearMatMul/QGemm with integer constant weights (QOperator format)"
    if mms and len(w_dq) == len(mms) and not full and not dyn and not qop:
        return "weights_only_qdq", (
            f"all {len(mms)} MatMul/Gemm take weights from DequantizeLinear, but no "
            "activation passes through a QuantizeLinear with a constant scale"
        )
    if mms and len(floats) == len(mms) and quant_ops == 0:
        return "fp32", f"{len(mms)} MatMul/Gemm with float weights and no quantization operator"
    parts = []
    if floats:
        parts.append(f"{len(floats)} MatMul/Gemm still multiply by a float constant weight")
    if dyn:
        parts.append(f"{len(dyn)} dynamically quantized MatMul(s)")
    if w_dq:
        parts.append(
            f"{len(w_dq)} of {len(mms)} MatMul/Gemm take weights from DequantizeLinear, "
            f"{len(full)} of them with statically quantized activations"
        )
    if qop:
        parts.append(f"{len(qop)} QLinearMatMul/QGemm")
    if act_q and dyn:
        parts.append(f"{len(act_q)} constant-scale QuantizeLinear on activations")
    return "unknown", "a mix: " + "; ".join(parts or ["no recognised quantization pattern"])


# ── other facts ────────────────────────────────────────────────────────────────────────────────


def activation_dtypes(ix: GraphIndex) -> list[str]:
    """Integer types activations are quantized to: outputs of Q on runtime tensors (and DQL: uint8)."""
    found = set()
    for n in ix.nodes:
        if n.op_type in ("DynamicQuantizeLinear", "DynamicQuantizeMatMul"):
            found.add("uint8")
        elif n.op_type == "QuantizeLinear" and not ix.is_const(n.input[0]):
            zp = input_at(n, 2)
            if zp and ix.is_const(zp):
                found.add(dtype_name(ix.const_type(zp)))
            else:
                found.add(dtype_name(int(attr(n, "output_dtype", 0)) or TensorProto.UINT8))
    return sorted(found)


QUANTIZATION_FACTS = (
    "classification",
    "classification_detail",
    "weight_dtypes",
    "quantized_weights",
    "float_weights_left",
    "per_channel",
    "per_channel_weights",
    "per_channel_shaped_weights",
    "activation_dtypes",
    "calibrated_input_range",
    "input_quantization",
)


def quantization_facts(model: onnx.ModelProto) -> dict[str, Any]:
    """The ``"quantization"`` group: :data:`QUANTIZATION_FACTS` (classification, weight and
    activation types, per-channel, the calibrated input range of the live input quantizers,
    :mod:`.input_quant`)."""
    ix = GraphIndex(model)
    weights = quantized_weights(ix)
    classification, detail = classify(ix)
    return {
        "classification": classification,
        "classification_detail": detail,
        "weight_dtypes": sorted({dtype_name(w.elem_type) for w in weights}),
        "quantized_weights": len(weights),
        "float_weights_left": len(float_weight_nodes(ix)),
        "per_channel": bool(weights) and all(w.per_channel for w in weights),
        "per_channel_weights": sum(1 for w in weights if w.per_channel),
        "per_channel_shaped_weights": sum(1 for w in weights if w.scale_per_channel_shape),
        "activation_dtypes": activation_dtypes(ix),
        **input_quantization_facts(ix),
    }


# ── derived from ───────────────────────────────────────────────────────────────────────────────


def _residual(w: QuantWeight, deq: np.ndarray, ref: np.ndarray) -> float:
    try:
        half = w.scale_per_element() / 2.0
    except (ValueError, IndexError):  # a scale that does not fit its weight: no match
        return float("inf")
    diff = np.abs(deq - ref.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(half > 0, diff / np.where(half > 0, half, 1.0), np.where(diff == 0, 0.0, np.inf))
    return float(r.max()) if r.size else 0.0


def derived_from(fp32_model: onnx.ModelProto, q_model: onnx.ModelProto) -> dict[str, Any]:
    """How well ``q_model``'s weights dequantize to ``fp32_model``'s.

    Each quantized weight is matched by value to the fp32 weight of the same shape (or its
    transpose) that fits it best; residual = max|deq - W| / (scale/2) per weight, and the result is
    the max over weights (<= 1 for a genuine quantization, hundreds for another model).
    ``covered`` counts fp32 weights matched by a quantized weight or left bit-identical in float.
    """
    ref_ix, q_ix = GraphIndex(fp32_model), GraphIndex(q_model)
    refs = float_weights(ref_ix)
    weights = quantized_weights(q_ix)
    residuals, covered = [], set()
    for w in weights:
        try:
            deq = w.dequantized()
        except (ValueError, IndexError):
            deq = None
        best, best_k = np.inf, None
        for k, ref in enumerate(refs):
            for cand in (ref, ref.T if ref.ndim == 2 else None):
                if deq is not None and cand is not None and cand.shape == deq.shape:
                    r = _residual(w, deq, cand)
                    if r < best:
                        best, best_k = r, k
        residuals.append(best)
        if best_k is not None and best <= DERIVED_RESIDUAL_MAX:
            covered.add(best_k)
    for left in float_weights(q_ix):
        covered.update(k for k, ref in enumerate(refs) if ref.shape == left.shape and np.array_equal(ref, left))
    residual = max(residuals) if residuals else None
    return {
        "residual": None if residual is None or not np.isfinite(residual) else float(residual),
        "quantized_weights": len(weights),
        "unmatched_weights": sum(1 for r in residuals if not np.isfinite(r)),
        "fp32_weights": len(refs),
        "fp32_weights_covered": len(covered),
        "derived": bool(weights)
        and residual is not None
        and residual <= DERIVED_RESIDUAL_MAX
        and len(covered) == len(refs),
    }
