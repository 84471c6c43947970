"""autograder.measure.canonical: the canonical re-serialisation computes the same outputs and
cannot be padded, on hand-built graphs (subgraphs, Constant nodes, wordy encodings)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from autograder.measure.canonical import canonical_model, size_facts

W = np.arange(6, dtype=np.float32).reshape(2, 3) / 7


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})


def _model(weight: onnx.TensorProto, *, name_pad: str = "", extra_opsets=()) -> onnx.ModelProto:
    """Y = If(cond, then: X·W + c, else: X·W − c), c a Constant node; names padded by ``name_pad``."""
    n = lambda s: s + name_pad  # noqa: E731
    c = helper.make_node("Constant", [], [n("c")], value=numpy_helper.from_array(np.array(0.5, np.float32)))
    then_g = helper.make_graph(
        [helper.make_node("Add", [n("xw"), n("c")], [n("t")])],
        "then",
        [],
        [helper.make_tensor_value_info(n("t"), TensorProto.FLOAT, None)],
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", [n("xw"), n("c")], [n("e")])],
        "else",
        [],
        [helper.make_tensor_value_info(n("e"), TensorProto.FLOAT, None)],
    )
    nodes = [
        c,
        helper.make_node("MatMul", ["X", weight.name], [n("xw")], name=n("mm")),
        helper.make_node("If", ["cond"], ["Y"], then_branch=then_g, else_branch=else_g),
    ]
    graph = helper.make_graph(
        nodes,
        "g" + name_pad,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])],
        initializer=[weight, numpy_helper.from_array(np.array(True), "cond")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *extra_opsets])
    m.ir_version = 8
    return m


def test_subgraphs_and_constants_survive_and_compute_the_same():
    m = _model(numpy_helper.from_array(W, "W"))
    c = canonical_model(m)
    onnx.checker.check_model(c, full_check=True)
    x = np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32)
    np.testing.assert_array_equal(_run(c, x)[0], _run(m, x)[0])
    assert [i.name for i in c.graph.input] == ["X"] and [o.name for o in c.graph.output] == ["Y"]


def test_names_doc_strings_opsets_and_encodings_do_not_count():
    plain = _model(numpy_helper.from_array(W, "W"))
    wordy_weight = helper.make_tensor("W" + "w" * 300, TensorProto.FLOAT, [2, 3], W.ravel().tolist())  # float_data
    wordy = _model(wordy_weight, name_pad="_" + "n" * 300, extra_opsets=[helper.make_opsetid("com.unused", 1)])
    wordy.doc_string = "d" * 10_000
    wordy.producer_name = "p" * 1000
    wordy.metadata_props.add(key="k", value="v" * 10_000)
    wordy.graph.node[1].doc_string = "x" * 10_000
    assert len(wordy.SerializeToString()) > len(plain.SerializeToString()) + 30_000
    assert canonical_model(wordy).SerializeToString() == canonical_model(plain).SerializeToString()
    assert size_facts(wordy) == size_facts(plain)
    assert size_facts(plain)["canonical_constant_bytes"] == W.nbytes + 1 + 4  # W, cond, the Constant c


def test_dead_nodes_and_unused_initializers_are_dropped_but_used_ones_are_not():
    m = _model(numpy_helper.from_array(W, "W"))
    before = size_facts(m)["canonical_bytes"]
    m.graph.initializer.append(numpy_helper.from_array(np.zeros(10_000, np.float32), "unused"))
    m.graph.node.append(helper.make_node("Identity", ["X"], ["dead"]))
    assert size_facts(m)["canonical_bytes"] == before
    assert len(m.SerializeToString()) > before + 40_000
