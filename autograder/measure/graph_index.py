"""Read an ONNX graph: constants, producers, consumers, live nodes, and the float weights its MatMuls
multiply by.

Pure (onnx + numpy). Shared by :mod:`autograder.measure.graph_facts` and
:mod:`autograder.measure.quantization` (whose :mod:`~autograder.measure.quantization.weights` reads
the quantized weights).

Vocabulary
----------
- A *constant* is an initializer that is not also a graph input, or the output of a ``Constant``
  node; a *runtime tensor* is anything else (the model input and everything computed from it).
- A *weight op* multiplies by a weight: ``MatMul``/``Gemm`` (float), ``MatMulInteger``,
  ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``, ``QLinearMatMul``, ``QGemm``.
- A *quantized weight* (:mod:`autograder.measure.quantization.weights`) is an integer constant
  that a weight op multiplies by, directly or through ``DequantizeLinear``.
- A node is *live* when one of its outputs reaches a graph output; anything else is dead code that
  ONNX Runtime removes and that no fact may be read from.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

# Float weight ops; FusedGemm/FusedMatMul are what ONNX Runtime saves for an optimised fp32 model.
FLOAT_MATMULS = ("MatMul", "Gemm", "FusedGemm", "FusedMatMul")
INT_TYPES = frozenset(
    {
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.INT16,
        TensorProto.UINT16,
        TensorProto.INT32,
        TensorProto.INT4,
        TensorProto.UINT4,
    }
)
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16})

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

    def const(self, name: str) -> np.ndarray:
        """The value of the constant ``name``; a KeyError when it is none (ask ``is_const``,
        ``is_int_const`` or ``is_float_const`` first)."""
        value = self.array(name)
        if value is None:
            raise KeyError(f"{name} is not a constant of the graph")
        return value

    def const_type(self, name: str) -> int:
        """The element type of the constant ``name``; a KeyError when it is none."""
        return self._const_protos[name].data_type

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
    local = (
        {i.name for i in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    )
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


# ── float weights ─────────────────────────────────────────────────────────────────────────────


def float_weight_nodes(ix: GraphIndex) -> list[onnx.NodeProto]:
    """MatMul/Gemm nodes that still multiply by a float constant."""
    return [n for n in ix.nodes if n.op_type in FLOAT_MATMULS and any(ix.is_float_const(i) for i in n.input[:2])]


def float_weights(ix: GraphIndex) -> list[np.ndarray]:
    return [ix.const(i) for n in float_weight_nodes(ix) for i in n.input[:2] if ix.is_float_const(i)]
