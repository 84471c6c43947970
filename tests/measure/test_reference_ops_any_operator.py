"""Reference ops beyond quantization: ort_node runs any ONNX operator on the grader's arrays."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.errors import AutograderError
from autograder.measure.reference_ops import node_model, ort_model, ort_node


def test_softmax_matches_a_float64_softmax_to_float32_rounding():
    x = np.random.default_rng(0).normal(0, 3, (20, 7)).astype(np.float32)
    y = ort_node("Softmax", x, axis=-1)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_several_outputs_and_any_dtype():
    values, indices = ort_node("TopK", np.array([[1.0, 5.0, 3.0]]), np.array([2]), outputs=2, axis=-1)
    assert values.tolist() == [[5.0, 3.0]] and values.dtype == np.float64 and indices.tolist() == [[1, 2]]
    assert ort_node("ArgMax", np.array([[0.5, 0.5], [0.2, 0.8]]), axis=1, keepdims=0).tolist() == [0, 1]


def test_shapes_are_free_so_one_graph_serves_every_size():
    a = ort_node("Relu", np.array([-1.0, 2.0], np.float32))
    b = ort_node("Relu", np.arange(-3, 3, dtype=np.float32).reshape(2, 3))
    assert a.tolist() == [0.0, 2.0] and b.shape == (2, 3) and b.min() == 0.0


def test_a_grader_built_model_runs_with_ort_model():
    model = node_model("Add", [np.zeros(2, np.float32), np.zeros(2, np.float32)])
    assert ort_model(model, {"i0": np.array([1, 2], np.float32), "i1": np.array([3, 4], np.float32)})[0].tolist() == [
        4,
        6,
    ]


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("NoSuchOperator", np.zeros(2, np.float32)), {}),
        (("Softmax", np.zeros(2, np.float32)), {"no_such_attribute": 1}),
        (("Add", np.zeros(2, np.float32), np.zeros(2, np.int64)), {}),
    ],
)
def test_an_invalid_node_is_the_graders_error_not_a_crash(args, kwargs):
    with pytest.raises(AutograderError, match="reference"):
        ort_node(*args, **kwargs)
