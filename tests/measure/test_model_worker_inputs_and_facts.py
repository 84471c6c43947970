"""The model worker beyond one input and quantization facts: named input sets, the fact groups an
assignment chooses, and the ``adapt`` interface (every deviation that still computes the right thing:
input names, a fixed batch, float64, ZipMap, output names and order). Real child processes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from autograder.measure.graph_facts import GRAPH_FACTS
from autograder.measure.quantization.facts import QUANTIZATION_FACTS
from autograder.measure.model_interface import ModelInterface, TensorSpec
from autograder.measure.onnx_load import run_model_worker


def two_input_model() -> bytes:
    """Z = A + B, both float32 [N, 3]."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["Z"])],
        "two_inputs",
        [
            helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 3]),
        ],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


TWO = ModelInterface(
    inputs=(TensorSpec("A", "float32", (None, 3)), TensorSpec("B", "float32", (None, 3))),
    outputs=(TensorSpec("Z", "float32", (None, 3)),),
)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_model_with_two_inputs_is_fed_by_name():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    run = run_model_worker(
        two_input_model(),
        inputs={"set": {"A": a, "B": 10 * a}, "other": {"B": a, "A": a}},
        interface=TWO,
        facts=("graph",),
    )
    assert run.ok and run.result["run_error"] is None, run
    np.testing.assert_array_equal(run.outputs["set__Z"], 11 * a)
    np.testing.assert_array_equal(run.outputs["other__Z"], 2 * a)
    facts = run.result["facts"]
    assert facts["interface_ok"] and facts["op_histogram"] == {"Add": 1}
    assert set(GRAPH_FACTS) <= set(facts) and not set(QUANTIZATION_FACTS) & set(facts), "only the chosen groups"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_missing_data_for_an_input_is_a_reason():
    a = np.zeros((2, 3), np.float32)
    run = run_model_worker(two_input_model(), inputs={"set": a}, interface=TWO, facts=())
    assert run.ok and "cannot feed the test set" in run.result["run_error"]
    assert set(run.result["facts"]) == {"interface_ok", "problems"}
    run = run_model_worker(two_input_model(), inputs={"set": {"A": a}}, interface=TWO, facts=())
    assert "no data for the inputs ['B']" in run.result["run_error"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_an_unknown_fact_group_is_reported():
    run = run_model_worker(
        two_input_model(),
        inputs={"set": {"A": np.zeros((1, 3), np.float32), "B": np.zeros((1, 3), np.float32)}},
        interface=TWO,
        facts=("graph", "astrology"),
    )
    assert not run.ok and "unknown model fact groups ['astrology']" in run.reason


def test_input_set_names_cannot_hold_the_separator():
    with pytest.raises(ValueError, match="no '__'"):
        run_model_worker(two_input_model(), inputs={"a__b": np.zeros((1, 3), np.float32)})


# ── adapt: the right computation behind the wrong interface ──────────────────────────────────
# Every way a model can compute the right thing behind the wrong interface, alone and all at once:
# without ``adapt`` the contract's data cannot be used; with it the model runs, gives the right
# probabilities, still fails the interface facts, and the worker says what it adapted.

FLOAT_INPUT = "input X fed to the model's input float_input (by position)"
FLOAT64 = "input X fed as float64, the type the model declares"
ZIPMAP = [
    "output label read from the model's output output_label (by position)",
    "output probabilities read from the model's output output_probability (by position)",
    "output probabilities converted from a sequence of maps (ZipMap) to an array",
]
RENAMED = [
    "output label read from the model's output y_pred (by its type and shape)",
    "output probabilities read from the model's output p (by its type and shape)",
]


def batches(n: int) -> str:
    return f"inputs fed {n} row(s) per call, the fixed batch size the model declares"


def _renamed_and_reversed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The outputs renamed (label → y_pred, probabilities → p) and listed in the other order."""
    names = {"label": "y_pred", "probabilities": "p"}
    for node in model.graph.node:
        node.output[:] = [names.get(o, o) for o in node.output]
        node.input[:] = [names.get(i, i) for i in node.input]
    outputs = list(model.graph.output)[::-1]
    for o in outputs:
        o.name = names.get(o.name, o.name)
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model


# deviation → (export arguments: input name, float type, batch, zipmap, renamed outputs), adapted
DEVIATIONS = {
    "float64": (("X", "double", None, False, False), [FLOAT64]),
    "zipmap": (("X", "float", None, True, False), ZIPMAP),
    "float_input": (("float_input", "float", None, False, False), [FLOAT_INPUT]),
    "batch_of_one": (("X", "float", 1, False, False), [batches(1)]),
    "batch_of_seven": (("X", "float", 7, False, False), [batches(7)]),  # 50 rows: the last call padded
    "outputs_renamed_and_reversed": (("X", "float", None, False, True), RENAMED),
    "all_at_once_float64": (("float_input", "double", 1, False, True), [FLOAT_INPUT, FLOAT64, batches(1), *RENAMED]),
    "all_at_once_zipmap": (("float_input", "float", 3, True, False), [FLOAT_INPUT, batches(3), *ZIPMAP]),
}


@pytest.fixture(scope="module")
def exports():
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(0, 1, (200, 4)).astype(np.float32)
    clf = LogisticRegression().fit(X, (X[:, 0] + X[:, 1] > 0).astype(int))

    def export(name, kind, batch, zipmap, renamed):
        tensor = {"float": FloatTensorType, "double": DoubleTensorType}[kind]
        model = to_onnx(clf, initial_types=[(name, tensor([batch, 4]))], options={"zipmap": zipmap})
        return _renamed_and_reversed(model) if renamed else model

    models = {kind: export(*args) for kind, (args, _) in DEVIATIONS.items()}
    models["float32"] = export("X", "float", None, False, False)
    return {k: m.SerializeToString() for k, m in models.items()}, X[:50], clf.predict_proba(X[:50])


def interface(adapt: bool) -> ModelInterface:
    return ModelInterface(
        inputs=(TensorSpec("X", "float32", (None, 4)),),
        outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))),
        adapt=adapt,
    )


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("kind", sorted(DEVIATIONS))
def test_adapt_runs_a_deviating_model_and_still_reports_the_deviation(exports, kind):
    models, X, expected = exports
    strict = run_model_worker(models[kind], inputs={"test": X}, interface=interface(False), facts=("graph",))
    assert strict.ok and strict.result["run_error"], "without adapt the contract's data cannot be used"
    run = run_model_worker(
        models[kind], inputs={"test": X, "one_row": X[:1]}, interface=interface(True), facts=("graph",)
    )
    assert run.ok and run.result["run_error"] is None, run
    assert sorted(run.result["adapted"]) == sorted(DEVIATIONS[kind][1])
    assert run.result["facts"]["interface_ok"] is False and run.result["facts"]["problems"]
    np.testing.assert_allclose(run.outputs["test__probabilities"], expected, atol=1e-6)
    np.testing.assert_array_equal(run.outputs["test__label"], expected.argmax(axis=1))
    np.testing.assert_allclose(run.outputs["one_row__probabilities"], expected[:1], atol=1e-6)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_fixed_batch_is_named_in_the_problems_with_how_it_was_fed(exports):
    models, X, _ = exports
    run = run_model_worker(models["batch_of_one"], inputs={"test": X}, interface=interface(True), facts=())
    assert run.result["facts"]["problems"] == [
        "input X has a fixed batch size 1, expected a free dimension N (a caller sends any number of rows "
        "in one call; the grader fed it 1 row(s) per call)"
    ]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_adapt_changes_nothing_for_a_conforming_model(exports):
    models, X, expected = exports
    run = run_model_worker(models["float32"], inputs={"test": X}, interface=interface(True), facts=("graph",))
    assert run.ok and run.result["facts"]["interface_ok"] and "adapted" not in run.result
    assert run.outputs["test__probabilities"].dtype == np.float32
    assert onnx.load_from_string(models["float32"]).graph.input[0].name == "X"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_adapt_still_refuses_what_computes_something_else(exports):
    """Adapting stops at the interface: another number of inputs, or another row width, is not fed."""
    models, X, _ = exports
    run = run_model_worker(
        models["float_input"], inputs={"test": np.hstack([X, X])}, interface=interface(True), facts=()
    )
    assert run.ok and run.result["run_error"].startswith("ONNX Runtime could not run it on the grader's rows")
    run = run_model_worker(
        two_input_model(),
        inputs={"set": np.zeros((2, 3), np.float32)},
        interface=ModelInterface(
            inputs=(TensorSpec("X", "float32", (None, 3)),),
            outputs=(TensorSpec("Z", "float32", (None, 3)),),
            adapt=True,
        ),
        facts=(),
    )
    assert run.ok and "cannot feed the test set" in run.result["run_error"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_fixed_batch_beyond_the_cap_is_not_padded_up_to():
    """A model fixing a batch of more rows than MAX_FIXED_BATCH is run as it is (and fails), so
    a declared batch cannot make the worker allocate without bound."""
    from autograder.measure.model_worker import MAX_FIXED_BATCH

    def fixed(batch: int) -> bytes:
        graph = helper.make_graph(
            [helper.make_node("Relu", ["X"], ["Z"])],
            "fixed",
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, 3])],
            [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [batch, 3])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model.SerializeToString()

    x = -np.arange(6, dtype=np.float32).reshape(2, 3)
    relu = ModelInterface(
        inputs=(TensorSpec("X", "float32", (None, 3)),), outputs=(TensorSpec("Z", "float32", (None, 3)),), adapt=True
    )
    run = run_model_worker(fixed(MAX_FIXED_BATCH + 1), inputs={"set": x}, interface=relu, facts=())
    assert (
        run.ok
        and run.result["run_error"].startswith("ONNX Runtime could not run it on the grader's rows")
        and "adapted" not in run.result
    )
    run = run_model_worker(fixed(3), inputs={"set": x}, interface=relu, facts=())  # padded up to 3 rows
    assert run.ok and run.result["run_error"] is None, run
    np.testing.assert_array_equal(run.outputs["set__Z"], np.maximum(x, 0))


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_an_input_fed_by_position_has_its_type_and_shape_checked_too(exports):
    models, X, _ = exports
    run = run_model_worker(models["all_at_once_float64"], inputs={"test": X}, interface=interface(True), facts=())
    assert run.result["facts"]["problems"] == [
        "inputs are ['float_input'], expected exactly ['X']",
        "outputs are ['p', 'y_pred'], expected ['label', 'probabilities']",
        "input float_input is float64, expected float32",
    ]
    run = run_model_worker(models["all_at_once_zipmap"], inputs={"test": X}, interface=interface(True), facts=())
    assert (
        "input float_input has a fixed batch size 3, expected a free dimension N (a caller sends any number "
        "of rows in one call; the grader fed it 3 row(s) per call)" in run.result["facts"]["problems"]
    )
