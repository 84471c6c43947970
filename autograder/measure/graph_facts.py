"""Facts about any ONNX graph: what it computes with, how big it is, and what ONNX Runtime runs.

Pure functions of ``onnx.ModelProto`` (onnx + numpy, no ONNX Runtime, no I/O). They run in the
model worker on models that already passed :mod:`autograder.measure.onnx_load`'s checks, for the
fact groups the caller names (:mod:`autograder.measure.fact_groups`): ``"graph"``
(:func:`graph_group`), ``"size"`` (:func:`autograder.measure.canonical.size_facts`) and
``"session"`` (:func:`session_facts`, the model ONNX Runtime optimised). Operators are named by
:func:`qualified_op` (``MatMul``, ``com.microsoft.Gelu``, ``ai.onnx.ml.ZipMap``), the one naming
every lesson's reference uses too.

The vocabulary (constant, runtime tensor, weight op) is :mod:`autograder.measure.graph_index`'s.
Quantization facts are :mod:`autograder.measure.quantization`'s.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx

from .graph_index import FLOAT_MATMULS, INT_WEIGHT_INPUTS, GraphIndex, input_at
from .model_policy import qualified_op as qualified_op  # noqa: F401  (the op names of op_counts)

GRAPH_FACTS = ("node_count", "op_counts", "op_histogram", "opset", "param_count")
# The fused ops' float bias input (ORT-optimised models fold the Add into them).
_FLOAT_BIAS_INPUT = {"DynamicQuantizeMatMul": 4, "MatMulIntegerToFloat": 6}


def param_count(ix: GraphIndex) -> int:
    """Elements of the layers' weights and biases (float constants of MatMul/Gemm/Add/Conv, and
    integer weights behind DequantizeLinear or integer weight ops)."""
    names: set[str] = set()
    for n in ix.nodes:
        if n.op_type in FLOAT_MATMULS or n.op_type in ("Add", "Conv"):
            names.update(i for i in n.input if ix.is_float_const(i))
        elif n.op_type == "DequantizeLinear" and ix.is_int_const(n.input[0]):
            names.add(n.input[0])
        elif n.op_type in INT_WEIGHT_INPUTS and ix.is_int_const(input_at(n, INT_WEIGHT_INPUTS[n.op_type][0])):
            names.add(n.input[INT_WEIGHT_INPUTS[n.op_type][0]])
        elif n.op_type == "QLinearAdd" and ix.is_int_const(input_at(n, 3)):
            names.add(n.input[3])
        if n.op_type in _FLOAT_BIAS_INPUT and ix.is_float_const(input_at(n, _FLOAT_BIAS_INPUT[n.op_type])):
            names.add(n.input[_FLOAT_BIAS_INPUT[n.op_type]])
    return sum(int(ix.const(nm).size) for nm in names)


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    """Nodes of the main graph per ``op_type``, domains ignored (:func:`op_counts` keeps them)."""
    return dict(sorted(Counter(n.op_type for n in model.graph.node).items()))


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Nodes of the main graph per domain-qualified operator (:func:`qualified_op`: ``MatMul``,
    ``com.microsoft.Gelu``, ``ai.onnx.ml.ZipMap``); subgraph bodies are not counted."""
    return dict(sorted(Counter(qualified_op(n) for n in model.graph.node).items()))


def graph_group(model: onnx.ModelProto) -> dict[str, Any]:
    """The ``"graph"`` group, :data:`GRAPH_FACTS`: the main graph's node count and operator counts
    (domain-qualified, and by type alone), the opsets it imports, and its parameter count."""
    return {
        "node_count": len(model.graph.node),
        "op_counts": op_counts(model),
        "op_histogram": op_histogram(model),
        "opset": {(o.domain or "ai.onnx"): int(o.version) for o in model.opset_import},
        "param_count": param_count(GraphIndex(model)),
    }


def session_facts(optimized: onnx.ModelProto, level: str) -> dict[str, Any]:
    """The ``"session"`` group: the graph ONNX Runtime runs at ``level`` (the optimised model it saved)."""
    return {"optimization_level": level, "node_count": len(optimized.graph.node), "op_counts": op_counts(optimized)}
