"""Read an ONNX graph: constants, producers, consumers, and the weights its MatMuls multiply by.

Pure (onnx + numpy). Shared by :mod:`autograder.measure.graph_facts`.

Vocabulary
----------
- A *constant* is an initializer that is not also a graph input, or the output of a ``Constant``
  node; a *runtime tensor* is anything else (the model input and everything computed from it).
- A *weight op* multiplies by a weight: ``MatMul``/``Gemm`` (float), ``MatMulInteger``,
  ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``, ``QLinearMatMul``, ``QGemm``.
- A *quantized weight* is an integer constant that a weight op multiplies by, directly or through
  ``DequantizeLinear``; its scale, zero point and channel axis come from that DQ or op (for
  ``MatMulInteger``, from the ``Cast → Mul`` chain after it, as ``quantize_dynamic`` writes it).
- A node is *live* when one of its outputs reaches a graph output; anything else is dead code that
  ONNX Runtime removes and that no fact may be read from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

# Float weight ops; FusedGemm/FusedMatMul are what ONNX Runtime saves for an optimised fp32 model.
FLOAT_MATMULS = ("MatMul", "Gemm", "FusedGemm", "FusedMatMul")
INT_TYPES = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                       TensorProto.INT32, TensorProto.INT4, TensorProto.UINT4})
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16})

# A per-channel quantizer fits each channel's scale to that channel's own range, so every channel's
# integers reach an end of the range the weight uses (±127 symmetric, ±64 with reduce_range, both
# ends asymmetric). One scale for the whole matrix, repeated per column, leaves most columns short
# of the ends (measured on the reference's 256×256 layers: 100% of channels reach an end per
# channel, 0.8% per tensor). 90% leaves room for a few all-zero (dead) channels.
CHANNEL_FIT_MIN = 0.9

# Weight position of each integer weight op: (weight input, scale input or None, zero point input).
INT_WEIGHT_INPUTS = {
    "MatMulInteger": (1, None, 3),
    "DynamicQuantizeMatMul": (1, 2, 3),
    "MatMulIntegerToFloat": (1, 3, 5),
    "QLinearMatMul": (3, 4, 5),
    "QGemm": (3, 4, 5),
}


def dtype_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type).lower()


@dataclass
class QuantWeight:
    """An integer weight with what is needed to dequantize it."""

    node: str          # op type of the weight op, for messages
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
        return (s is not None and s.ndim == 1 and self.block_size == 0
                and 0 <= self.axis < self.q.ndim and s.shape[0] == self.q.shape[self.axis])

    @property
    def per_channel(self) -> bool:
        """Really per channel: a per-channel-shaped scale whose values differ across channels and
        fit each channel's own range (see :data:`CHANNEL_FIT_MIN`). A weight with one channel has
        nothing to differ: its 1-D scale of one value is what a per-channel quantizer writes."""
        if not self.scale_per_channel_shape:
            return False
        if self.scale.shape[0] == 1:
            return True
        s = self.scale.astype(np.float64)
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
        return np.broadcast_to(_along_axis(self.scale.astype(np.float64), self.q, self.axis, self.block_size),
                               self.q.shape)


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


class GraphIndex:
    """Constants, producers and consumers of the main graph (subgraphs are not looked into)."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.model = model
        self.nodes = list(g.node)
        input_names = {i.name for i in g.input}
        self._const_protos: dict[str, TensorProto] = {t.name: t for t in g.initializer if t.name not in input_names}
        for n in self.nodes:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output:
                t = _constant_node_tensor(n)
                if t is not None:
                    self._const_protos[n.output[0]] = t
        self._arrays: dict[str, np.ndarray] = {}
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in self.nodes:
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)
        self.runtime_inputs = [i.name for i in g.input if i.name not in self._const_protos]
        self._live: set[int] | None = None

    def is_const(self, name: str) -> bool:
        return name in self._const_protos

    def elem_type(self, name: str) -> int | None:
        t = self._const_protos.get(name)
        return t.data_type if t is not None else None

    def array(self, name: str) -> np.ndarray | None:
        if name not in self._const_protos:
            return None
        if name not in self._arrays:
            self._arrays[name] = numpy_helper.to_array(self._const_protos[name])
        return self._arrays[name]

    def is_int_const(self, name: str) -> bool:
        return self.elem_type(name) in INT_TYPES

    def is_float_const(self, name: str) -> bool:
        return self.elem_type(name) in FLOAT_TYPES

    def made_by(self, name: str, *ops: str) -> onnx.NodeProto | None:
        n = self.producer.get(name)
        return n if n is not None and n.op_type in ops else None

    def is_live(self, node: onnx.NodeProto) -> bool:
        """Whether one of ``node``'s outputs reaches a graph output."""
        if self._live is None:
            self._live = live_nodes(self.model.graph, self.nodes)
        return id(node) in self._live


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The bodies of an If/Loop/Scan node (empty for any other node)."""
    out: list[onnx.GraphProto] = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def outer_names(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads from the scopes around it."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer} \
        | {o for n in graph.node for o in n.output}
    used = {i for n in graph.node for i in n.input if i} | {o.name for o in graph.output}
    for n in graph.node:
        for sub in subgraphs(n):
            used |= outer_names(sub)
    return used - local


def live_nodes(graph: onnx.GraphProto, nodes: list[onnx.NodeProto] | None = None) -> set[int]:
    """``id()`` of the nodes (of ``nodes``, default ``graph.node``) whose outputs reach an output of
    ``graph``. Nodes are in topological order, as the checker requires, so one backward pass
    finds them all."""
    needed = {o.name for o in graph.output}
    live: set[int] = set()
    for n in reversed(list(graph.node) if nodes is None else nodes):
        if any(o and o in needed for o in n.output):
            live.add(id(n))
            needed.update(i for i in n.input if i)
            for sub in subgraphs(n):
                needed |= outer_names(sub)
    return live


def _constant_node_tensor(node: onnx.NodeProto) -> TensorProto | None:
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            return a.t
        if a.name in ("value_float", "value_floats", "value_int", "value_ints"):
            v = onnx.helper.get_attribute_value(a)
            dtype = np.float32 if "float" in a.name else np.int64
            return numpy_helper.from_array(np.asarray(v, dtype=dtype))
    return None


def attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def input_at(node: onnx.NodeProto, i: int) -> str:
    return node.input[i] if len(node.input) > i else ""


# ── weights ────────────────────────────────────────────────────────────────────────────────────

def dq_weight(ix: GraphIndex, name: str, op: str, channel_axis: int) -> QuantWeight | None:
    """The weight behind ``name`` when it is DequantizeLinear(integer constant)."""
    dq = ix.made_by(name, "DequantizeLinear")
    if dq is None or not ix.is_int_const(dq.input[0]):
        return None
    scale, zp = ix.array(input_at(dq, 1)), ix.array(input_at(dq, 2))
    q = ix.array(dq.input[0])
    axis = int(attr(dq, "axis", 1))
    axis = axis + q.ndim if axis < 0 else axis
    if scale is None or scale.ndim == 0:
        axis = channel_axis
    return QuantWeight(op, dq.input[0], q, ix.elem_type(dq.input[0]), scale, zp, axis,
                       int(attr(dq, "block_size", 0)))


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
            q = ix.array(name)
            trans_b = n.op_type == "QGemm" and int(attr(n, "transB", 0)) == 1
            axis = 0 if trans_b else q.ndim - 1
            scale = _chain_scale(ix, n) if si is None else ix.array(input_at(n, si))
            out.append(QuantWeight(n.op_type, name, q, ix.elem_type(name), scale, ix.array(input_at(n, zi)), axis))
    return out


def float_weight_nodes(ix: GraphIndex) -> list[onnx.NodeProto]:
    """MatMul/Gemm nodes that still multiply by a float constant."""
    return [n for n in ix.nodes if n.op_type in FLOAT_MATMULS
            and any(ix.is_float_const(i) for i in n.input[:2])]


def float_weights(ix: GraphIndex) -> list[np.ndarray]:
    return [ix.array(i) for n in float_weight_nodes(ix) for i in n.input[:2] if ix.is_float_const(i)]
