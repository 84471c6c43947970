"""Builders of hostile ONNX models (bytes), each with the contract's interface where it can:
input ``X`` float32 ``[N, 2]``, outputs ``label`` int64 ``[N]`` and ``probabilities`` float32 ``[N, 2]``.

- :func:`external_data` — an initializer whose data lives in another file (``../../etc/passwd``,
  an absolute path to the grader's tolerances, or a file next to the model);
- :func:`custom_domain` — a node of the domain ``com.evil`` (passes ``check_model(full_check=True)``);
- :func:`constant_of_shape_bomb` — 106 bytes of graph that ask for a 14.4 GB tensor at run time;
- :func:`nested_if` — ``If`` bodies nested ``depth`` deep (built as raw protobuf for big depths);
- :func:`huge_declared_initializer` — dims that declare 40 GB with no data behind them;
- :func:`local_functions` — a model-local function (a custom operator by another name);
- :func:`loop_forever` — a ``Loop`` with an INT64_MAX trip count and a true condition (a hang).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]
IR_VERSION = 8


def _io():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])
    label = helper.make_tensor_value_info("label", TensorProto.INT64, ["N"])
    probs = helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])
    return x, label, probs


def _head(prob_source: str) -> list:
    """``probabilities = Softmax(prob_source)``, ``label = ArgMax(probabilities)``."""
    return [
        helper.make_node("Softmax", [prob_source], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0),
    ]


def _model(nodes, initializers=(), opset=OPSET, functions=()) -> onnx.ModelProto:
    x, label, probs = _io()
    graph = helper.make_graph(nodes, "hostile", [x], [label, probs], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=opset, functions=list(functions))
    model.ir_version = IR_VERSION
    return model


def external_data(location: str, length: int = 16) -> bytes:
    """``probabilities = Softmax(X @ W)`` with W's 16 bytes read from ``location`` at load time."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [2, 2], vals=np.zeros(4, np.float32).tobytes(), raw=True)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    nodes = [helper.make_node("MatMul", ["X", "W"], ["logits"])] + _head("logits")
    return _model(nodes, [w]).SerializeToString()


def custom_domain() -> bytes:
    nodes = [helper.make_node("Backdoor", ["X"], ["logits"], domain="com.evil")] + _head("logits")
    return _model(nodes, opset=OPSET + [helper.make_opsetid("com.evil", 1)]).SerializeToString()


def constant_of_shape_bomb(side: int = 60_000) -> bytes:
    """A float32 ``[side, side]`` tensor (14.4 GB for 60,000) built at run time from an 16-byte shape."""
    shape = numpy_helper.from_array(np.array([side, side], np.int64), "shape")
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["big"], value=one),
        helper.make_node("ReduceMax", ["big"], ["m"], keepdims=0),
        helper.make_node("Mul", ["X", "m"], ["logits"]),
    ] + _head("logits")
    return _model(nodes, [shape]).SerializeToString()


def _leaf_graph(name: str) -> onnx.GraphProto:
    out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, ["N", 2])
    return helper.make_graph([helper.make_node("Identity", ["X"], [f"{name}_out"])], name, [], [out])


def _nested_if_helper(depth: int) -> onnx.ModelProto:
    body = _leaf_graph("leaf")
    for level in range(depth):
        out = helper.make_tensor_value_info(f"l{level}_out", TensorProto.FLOAT, ["N", 2])
        node = helper.make_node(
            "If", ["cond"], [f"l{level}_out"], then_branch=body, else_branch=_leaf_graph(f"else{level}")
        )
        body = helper.make_graph([node], f"level{level}", [], [out])
    cond = numpy_helper.from_array(np.array(True), "cond")
    top = helper.make_node("If", ["cond"], ["logits"], then_branch=body, else_branch=_leaf_graph("top_else"))
    return _model([top] + _head("logits"), [cond])


# Raw protobuf, for nesting deeper than the Python bindings will serialise.
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _graph_with_if(inner_graph: bytes, level: int) -> bytes:
    attr = _field(1, b"then_branch") + _field(6, inner_graph) + _varint(20 << 3) + _varint(5)
    node = _field(1, b"cond") + _field(2, b"o%d" % level) + _field(4, b"If") + _field(5, attr)
    return _field(1, node) + _field(2, b"g%d" % level)


def nested_if(depth: int) -> bytes:
    """``If`` bodies nested ``depth`` deep; past a few hundred levels only raw bytes can express it."""
    if depth <= 20:
        return _nested_if_helper(depth).SerializeToString()
    graph = _field(1, _field(1, b"X") + _field(2, b"leaf") + _field(4, b"Identity"))
    for level in range(depth):
        graph = _graph_with_if(graph, level)
    opset = _field(1, b"") + _varint(2 << 3) + _varint(17)
    return _varint(1 << 3) + _varint(IR_VERSION) + _field(8, opset) + _field(7, graph)


def huge_declared_initializer() -> bytes:
    w = onnx.TensorProto()
    w.name, w.data_type = "W", TensorProto.FLOAT
    w.dims.extend([100_000, 100_000])  # 40 GB declared, 0 bytes present
    nodes = [helper.make_node("MatMul", ["X", "W"], ["logits"])] + _head("logits")
    return _model(nodes, [w]).SerializeToString()


def local_functions() -> bytes:
    fn = helper.make_function("local.evil", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])], OPSET)
    nodes = [helper.make_node("Twice", ["X"], ["logits"], domain="local.evil")] + _head("logits")
    return _model(nodes, opset=OPSET + [helper.make_opsetid("local.evil", 1)], functions=[fn]).SerializeToString()


def loop_forever() -> bytes:
    """``Loop`` with trip count INT64_MAX and a condition that stays true: runs until killed."""
    trips = numpy_helper.from_array(np.array(np.iinfo(np.int64).max, np.int64), "trips")
    cond = numpy_helper.from_array(np.array(True), "cond")
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["N", 2]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["N", 2]),
        ],
    )
    nodes = [helper.make_node("Loop", ["trips", "cond", "X"], ["logits"], body=body)] + _head("logits")
    return _model(nodes, [trips, cond]).SerializeToString()
