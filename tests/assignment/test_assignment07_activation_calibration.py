"""Lesson 07's static calibration is read from every activation's range, not the input's alone:
a range that only rows outside X_train can give, at any quantized activation, is found
(``provenance.activation_source`` on ``autograder.measure.quantization.activation_ranges``, real
ONNX Runtime on small hand-built models)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from autograder.assignment import load_assignment
from autograder.measure.model_check import make_session
from autograder.measure.quantization.activation_ranges import activation_ranges

ROOT = Path(__file__).resolve().parents[2]
W = np.array([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]], dtype=np.float32)


@pytest.fixture(scope="module")
def provenance():
    return load_assignment("07-quantization", ROOT).grading.provenance


def fp32() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Relu", ["h"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3])],
        [numpy_helper.from_array(W, "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def qdq(rows: np.ndarray) -> onnx.ModelProto:
    """The fp32 model with its ReLU output quantized to uint8 by MinMax on ``rows`` (ONNX Runtime's rule)."""
    h = np.maximum(rows @ W, 0)
    rmax = max(float(h.max()), 0.0)
    scale = np.float32(rmax / 255)
    model = fp32()
    g = model.graph
    g.initializer.extend([numpy_helper.from_array(np.array(scale), "s"), numpy_helper.from_array(np.uint8(0), "z")])
    g.node.extend(
        [
            helper.make_node("QuantizeLinear", ["Y", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["Yq"]),
        ]
    )
    g.output[0].name = "Yq"
    return model


def ranges(rows_calibrated: np.ndarray, train: np.ndarray, test: np.ndarray) -> dict:
    sets = {"public_train": {"X": train}, "public_test": {"X": test}, "hidden_test": {"X": test * 100}}
    return activation_ranges(fp32(), qdq(rows_calibrated), sets, lambda m: make_session(m, "ORT_DISABLE_ALL"))


RNG = np.random.default_rng(0)
TRAIN = RNG.normal(size=(300, 2)).astype(np.float32)
TEST = RNG.normal(size=(100, 2)).astype(np.float32)
TEST[0] = [-6.0, 6.0]  # a test row beyond every training row: the largest value of the activation


def test_only_public_sets_are_read():
    r = ranges(TRAIN, TRAIN, TEST)
    (q,) = r["quantizers"]
    assert q["tensor"] == "Y" and set(q["ranges"]) == {"public_train", "public_test"}


@pytest.mark.parametrize(
    "calibrated, source",
    [
        (TRAIN, "X_train"),
        (TRAIN[:50], "X_train"),  # a subset of the training rows: a narrower range, fine
        (np.concatenate([TRAIN, TEST]), "X_test"),  # test rows among the calibration rows
        (TRAIN * 3, "beyond X_train"),  # data the contract does not give
    ],
)
def test_an_activation_range_names_the_rows_that_set_it(provenance, calibrated, source):
    found = provenance.activation_source(ranges(calibrated, TRAIN, TEST))
    assert found["source"] == source and found["checked"] == 1
    if source != "X_train":
        assert "'Y'" in found["detail"]


def test_without_ranges_nothing_is_found(provenance):
    assert provenance.activation_source(None)["source"] == "undetermined"
    assert provenance.activation_source({"quantizers": []})["source"] == "undetermined"
