"""The quantized weights of an ONNX graph: integer constants a weight op multiplies by, with the
scale, zero point and channel axis that dequantize them.

Pure (onnx + numpy), on a :class:`~autograder.measure.graph_index.GraphIndex` (its vocabulary:
constant, runtime tensor, weight op). A *quantized weight* is an integer constant that a weight op
multiplies by, directly or through ``DequantizeLinear``; its scale, zero point and channel axis come
from that DQ or op (for ``MatMulInteger``, from the ``Cast → Mul`` chain after it, as
``quantize_dynamic`` writes it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from ..graph_index import FLOAT_MATMULS, INT_WEIGHT_INPUTS, GraphIndex, attr, input_at

# A per-channel quantizer fits each channel's scale to that channel's own range, so every channel's
# integers reach an end of the range the weight uses (±127 symmetric, ±64 with reduce_range, both
# ends asymmetric). One scale for the whole matrix, repeated per column, leaves most columns short
# of the ends (measured on the reference's 256×256 layers: 100% of channels reach an end per
# channel, 0.8% per tensor). 90% leaves room for a few all-zero (dead) channels.
CHANNEL_FIT_MIN = 0.9


@dataclass
class QuantWeight:
    """An integer weight with what is needed to dequantize it."""

    node: str  # op type of the weight op, for messages
    name: str
    q: np.ndarray
    elem_type: int
    scale: np.ndarray | None
    zero_point: np.ndarray | None
    axis: int
    block_size: int = 0

    @property
    def scale_per_channel_shape(self) -> bool:
        """The scale has the shape of a per-channel scale: 1-D, one value per channel of ``axis``."""
        s = self.scale
        return (
            s is not None
            and s.ndim == 1
            and self.block_size == 0
            and 0 <= self.axis < self.q.ndim
            and s.shape[0] == self.q.shape[self.axis]
        )

    @property
    def per_channel(self) -> bool:
        """Really per channel: a per-channel-shaped scale whose values differ across channels and
        fit each channel's own range (see :data:`CHANNEL_FIT_MIN`). A weight with one channel has
        nothing to differ: its 1-D scale of one value is what a per-channel quantizer writes."""
        scale = self.scale
        if scale is None or not self.scale_per_channel_shape:
            return False
        if scale.shape[0] == 1:
            return True
        s = scale.astype(np.float64)
        return bool(np.ptp(s) > 0) and self.channel_fit_share() >= CHANNEL_FIT_MIN

    def channel_fit_share(self) -> float:
        """Share of channels (along ``axis``) whose integers reach an end of the weight's range."""
        q = np.moveaxis(self.q.astype(np.int64), self.axis, 0).reshape(self.q.shape[self.axis], -1)
        if q.size == 0:
            return 0.0
        lo, hi = q.min(), q.max()
        fits = (q.min(axis=1) <= lo + 1) | (q.max(axis=1) >= hi - 1)
        return float(np.mean(fits & (q.max(axis=1) > q.min(axis=1))))

    def dequantized(self) -> np.ndarray | None:
        if self.scale is None:
            return None
        scale = _along_axis(self.scale.astype(np.float64), self.q, self.axis, self.block_size)
        zp = np.zeros(1) if self.zero_point is None else self.zero_point.astype(np.float64)
        zp = _along_axis(zp, self.q, self.axis, self.block_size)
        return (self.q.astype(np.float64) - zp) * scale

    def scale_per_element(self) -> np.ndarray:
        if self.scale is None:
            raise ValueError(f"{self.name} has no scale to spread over its elements")
        return np.broadcast_to(
            _along_axis(self.scale.astype(np.float64), self.q, self.axis, self.block_size), self.q.shape
        )


def _along_axis(v: np.ndarray, q: np.ndarray, axis: int, block_size: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``q``."""
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if block_size:
        return np.repeat(v, block_size, axis=axis).take(range(q.shape[axis]), axis=axis)
    if v.ndim == 1:
        shape = [1] * q.ndim
        shape[axis] = v.shape[0]
        return v.reshape(shape)
    return v


def dq_weight(ix: GraphIndex, name: str, op: str, channel_axis: int) -> QuantWeight | None:
    """The weight behind ``name`` when it is DequantizeLinear(integer constant)."""
    dq = ix.made_by(name, "DequantizeLinear")
    if dq is None or not ix.is_int_const(dq.input[0]):
        return None
    scale, zp = ix.array(input_at(dq, 1)), ix.array(input_at(dq, 2))
    q = ix.const(dq.input[0])
    axis = int(attr(dq, "axis", 1))
    axis = axis + q.ndim if axis < 0 else axis
    if scale is None or scale.ndim == 0:
        axis = channel_axis
    return QuantWeight(op, dq.input[0], q, ix.const_type(dq.input[0]), scale, zp, axis, int(attr(dq, "block_size", 0)))


def _chain_scale(ix: GraphIndex, node: onnx.NodeProto) -> np.ndarray | None:
    """The weight scale of a MatMulInteger: MatMulInteger → Cast → Mul(·, [Mul(a_scale, w_scale)])."""
    frontier, seen = [node.output[0]], 0
    while frontier and seen < 4:
        seen += 1
        nxt = []
        for out in frontier:
            for c in ix.consumers.get(out, []):
                if c.op_type == "Cast":
                    nxt.append(c.output[0])
                elif c.op_type == "Mul":
                    other = c.input[1] if c.input[0] == out else c.input[0]
                    if ix.is_float_const(other):
                        return ix.array(other)
                    m = ix.made_by(other, "Mul")
                    if m is not None:
                        consts = [i for i in m.input if ix.is_float_const(i)]
                        if len(consts) == 1:
                            return ix.array(consts[0])
        frontier = nxt
    return None


def quantized_weights(ix: GraphIndex) -> list[QuantWeight]:
    out: list[QuantWeight] = []
    for n in ix.nodes:
        if n.op_type in FLOAT_MATMULS:
            trans_b = "Gemm" in n.op_type and int(attr(n, "transB", 0)) == 1
            w = dq_weight(ix, input_at(n, 1), n.op_type, 0 if trans_b else 1)
            if w is not None:
                out.append(w)
        elif n.op_type in INT_WEIGHT_INPUTS:
            wi, si, zi = INT_WEIGHT_INPUTS[n.op_type]
            name = input_at(n, wi)
            if not ix.is_int_const(name):
                continue
            q = ix.const(name)
            trans_b = n.op_type == "QGemm" and int(attr(n, "transB", 0)) == 1
            axis = 0 if trans_b else q.ndim - 1
            scale = _chain_scale(ix, n) if si is None else ix.array(input_at(n, si))
            out.append(QuantWeight(n.op_type, name, q, ix.const_type(name), scale, ix.array(input_at(n, zi)), axis))
    return out
