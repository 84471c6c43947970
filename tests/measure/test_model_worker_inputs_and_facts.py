"""The model worker beyond one input and quantization facts: named input sets, the fact groups an
assignment chooses, and the ``adapt`` interface (a float64 export, ZipMap). Real child processes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from autograder.measure.graph_facts import GRAPH_FACTS, QUANTIZATION_FACTS
from autograder.measure.model_interface import ModelInterface, TensorSpec
from autograder.measure.onnx_load import run_model_worker


def two_input_model() -> bytes:
    """Z = A + B, both float32 [N, 3]."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["Z"])], "two_inputs",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


TWO = ModelInterface(inputs=(TensorSpec("A", "float32", (None, 3)), TensorSpec("B", "float32", (None, 3))),
                     outputs=(TensorSpec("Z", "float32", (None, 3)),))


def test_a_model_with_two_inputs_is_fed_by_name():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    run = run_model_worker(two_input_model(), inputs={"set": {"A": a, "B": 10 * a}, "other": {"B": a, "A": a}},
                           interface=TWO, facts=("graph",))
    assert run.ok and run.result["run_error"] is None, run
    np.testing.assert_array_equal(run.outputs["set__Z"], 11 * a)
    np.testing.assert_array_equal(run.outputs["other__Z"], 2 * a)
    facts = run.result["facts"]
    assert facts["interface_ok"] and facts["op_histogram"] == {"Add": 1}
    assert set(GRAPH_FACTS) <= set(facts) and not set(QUANTIZATION_FACTS) & set(facts), "only the chosen groups"


def test_missing_data_for_an_input_is_a_reason():
    a = np.zeros((2, 3), np.float32)
    run = run_model_worker(two_input_model(), inputs={"set": a}, interface=TWO, facts=())
    assert run.ok and "cannot feed the test set" in run.result["run_error"]
    assert set(run.result["facts"]) == {"interface_ok", "problems"}
    run = run_model_worker(two_input_model(), inputs={"set": {"A": a}}, interface=TWO, facts=())
    assert "no data for the inputs ['B']" in run.result["run_error"]


def test_an_unknown_fact_group_is_reported():
    run = run_model_worker(two_input_model(), inputs={"set": {"A": np.zeros((1, 3), np.float32),
                                                              "B": np.zeros((1, 3), np.float32)}},
                           interface=TWO, facts=("graph", "astrology"))
    assert not run.ok and "unknown model fact groups ['astrology']" in run.reason


def test_input_set_names_cannot_hold_the_separator():
    with pytest.raises(ValueError, match="no '__'"):
        run_model_worker(two_input_model(), inputs={"a__b": np.zeros((1, 3), np.float32)})


# ── adapt: the right computation behind the wrong interface ──────────────────────────────────

@pytest.fixture(scope="module")
def exports():
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(0, 1, (200, 4)).astype(np.float32)
    clf = LogisticRegression().fit(X, (X[:, 0] + X[:, 1] > 0).astype(int))
    models = {"float32": to_onnx(clf, X[:1], options={"zipmap": False}),
              "float64": to_onnx(clf, X[:1].astype(np.float64), options={"zipmap": False}),
              "zipmap": to_onnx(clf, X[:1])}
    return {k: m.SerializeToString() for k, m in models.items()}, X[:50], clf.predict_proba(X[:50])


def interface(adapt: bool) -> ModelInterface:
    return ModelInterface(inputs=(TensorSpec("X", "float32", (None, 4)),),
                          outputs=(TensorSpec("label", "int64", (None,)),
                                   TensorSpec("probabilities", "float32", (None, 2))), adapt=adapt)


@pytest.mark.parametrize("kind, adapted", [
    ("float64", ["input X fed as float64, the type the model declares"]),
    ("zipmap", ["output label read from the model's output output_label (by position)",
                "output probabilities read from the model's output output_probability (by position)",
                "output probabilities converted from a sequence of maps (ZipMap) to an array"]),
])
def test_adapt_runs_a_deviating_model_and_still_reports_the_deviation(exports, kind, adapted):
    models, X, expected = exports
    strict = run_model_worker(models[kind], inputs={"test": X}, interface=interface(False), facts=("graph",))
    assert strict.ok and strict.result["run_error"], "without adapt the contract's data cannot be used"
    run = run_model_worker(models[kind], inputs={"test": X}, interface=interface(True), facts=("graph",))
    assert run.ok and run.result["run_error"] is None, run
    assert run.result["adapted"] == adapted
    assert run.result["facts"]["interface_ok"] is False and run.result["facts"]["problems"]
    np.testing.assert_allclose(run.outputs["test__probabilities"], expected, atol=1e-6)


def test_adapt_changes_nothing_for_a_conforming_model(exports):
    models, X, expected = exports
    run = run_model_worker(models["float32"], inputs={"test": X}, interface=interface(True), facts=("graph",))
    assert run.ok and run.result["facts"]["interface_ok"] and "adapted" not in run.result
    assert run.outputs["test__probabilities"].dtype == np.float32
    assert onnx.load_from_string(models["float32"]).graph.input[0].name == "X"
