"""Graph and quantization facts on real skl2onnx + ONNX Runtime quantizer models: classification, weights, derivation."""

from __future__ import annotations

import onnx
import pytest
import quant_model_factory as factory

from autograder.measure.fact_groups import model_facts
from autograder.measure.quantization.facts import DERIVED_RESIDUAL_MAX, derived_from
from autograder.measure.model_interface import ModelInterface, TensorSpec


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return factory.model_set(tmp_path_factory.getbasetemp() / "quant_models")


INTERFACE = ModelInterface(
    inputs=(TensorSpec("X", "float32", (None, 2)),),
    outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))),
)


def facts_of(models, name):
    return model_facts(onnx.load(str(models[name])), INTERFACE, ("graph", "quantization", "size"))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("fp32", "fp32"),
        ("int8_dynamic", "dynamic"),
        ("int8_dynamic_pc", "dynamic"),
        ("int8_qdq", "static_qdq"),
        ("int8_qdq_pt", "static_qdq"),
        ("int8_qop", "static_qoperator"),
        ("weights_only_qdq", "weights_only_qdq"),
        ("partial_dynamic", "unknown"),
        # as ONNX Runtime saves them optimised: FusedGemm; DynamicQuantizeMatMul; QLinearMatMul + QLinearAdd
        ("ort_fp32", "fp32"),
        ("ort_int8_dynamic", "dynamic"),
        ("ort_int8_qdq", "static_qoperator"),
    ],
)
def test_classification(models, name, expected):
    facts = facts_of(models, name)
    assert facts["classification"] == expected, f"{name}: {facts['classification_detail']}"


def test_partial_dynamic_says_why(models):
    facts = facts_of(models, "partial_dynamic")
    assert facts["float_weights_left"] == 1
    assert "float constant weight" in facts["classification_detail"]


@pytest.mark.parametrize(
    "name, per_channel, weight_dtypes, float_left",
    [
        ("fp32", False, [], 3),
        ("int8_dynamic", False, ["int8"], 0),
        ("int8_dynamic_pc", True, ["int8"], 0),  # scales found through MatMulInteger → Cast → Mul
        ("int8_qdq", True, ["int8"], 0),
        ("int8_qdq_pt", False, ["int8"], 0),
        ("int8_qop", False, ["int8"], 0),
        ("weights_only_qdq", True, ["int8"], 0),
    ],
)
def test_weight_facts(models, name, per_channel, weight_dtypes, float_left):
    facts = facts_of(models, name)
    assert (facts["per_channel"], facts["weight_dtypes"], facts["float_weights_left"]) == (
        per_channel,
        weight_dtypes,
        float_left,
    )
    assert facts["quantized_weights"] == (0 if name == "fp32" else 3)


@pytest.mark.parametrize(
    "name, activations",
    [
        ("fp32", []),
        ("int8_dynamic", ["uint8"]),
        ("int8_qdq", ["uint8"]),
        ("weights_only_qdq", []),
    ],
)
def test_activation_dtypes(models, name, activations):
    assert facts_of(models, name)["activation_dtypes"] == activations


def test_calibrated_input_range_covers_the_calibration_rows(models):
    lo, hi = facts_of(models, "int8_qdq")["calibrated_input_range"]
    rows = factory.contract_data()[0][:300]
    step = (hi - lo) / 255
    # MinMax over the 300 calibration rows (widened to include 0), up to one step of zero-point rounding.
    assert lo <= min(rows.min(), 0) + step and lo >= min(rows.min(), 0) - step
    assert hi >= rows.max() - step and hi <= rows.max() + step
    assert facts_of(models, "int8_dynamic")["calibrated_input_range"] is None


def test_param_count_is_the_same_for_every_variant(models):
    # (64, 64): 2*64 + 64 + 64*64 + 64 + 64 + 1 weights and biases
    expected = 2 * 64 + 64 + 64 * 64 + 64 + 64 * 1 + 1
    for name in ("fp32", "int8_dynamic", "int8_qdq", "int8_qop", "ort_fp32", "ort_int8_dynamic"):
        assert facts_of(models, name)["param_count"] == expected, name


def test_interface_of_a_good_model_and_a_zipmap_model(models):
    assert facts_of(models, "int8_qdq")["interface_ok"]
    facts = facts_of(models, "zipmap")
    assert not facts["interface_ok"]
    assert any("zipmap" in p for p in facts["problems"]), facts["problems"]


def test_interface_fixed_batch_wrong_input_name_and_type(models):
    model = onnx.load(str(models["fp32"]))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert INTERFACE.problems(model) == [
        "input X has a fixed batch size 1, expected a free dimension N (the grader runs the whole test set in one call)"
    ]
    model = onnx.load(str(models["fp32"]))
    model.graph.input[0].name = "input"
    assert "inputs are ['input'], expected exactly ['X']" in INTERFACE.problems(model)
    model = onnx.load(str(models["fp32"]))
    model.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    assert INTERFACE.problems(model) == ["output probabilities is float64, expected float32"]


def test_output_problem_at_run_time():
    import numpy as np

    label, probs = INTERFACE.outputs
    assert INTERFACE.output_problem(probs, np.zeros((4, 2), np.float32), 4) is None
    assert "shape (4, 3)" in INTERFACE.output_problem(probs, np.zeros((4, 3), np.float32), 4)
    assert "is a list" in INTERFACE.output_problem(label, [{0: 0.5}], 4)
    assert "missing" in INTERFACE.output_problem(label, None, 4)


def test_interface_json_round_trip():
    assert ModelInterface.from_json(INTERFACE.to_json()) == INTERFACE


@pytest.mark.parametrize(
    "name",
    [
        "int8_dynamic",
        "int8_dynamic_pc",
        "int8_qdq",
        "int8_qdq_pt",
        "int8_qop",
        "weights_only_qdq",
        "ort_int8_dynamic",
        "ort_int8_qdq",
    ],
)
def test_genuine_variants_are_derived_from_their_fp32(models, name):
    d = derived_from(onnx.load(str(models["fp32"])), onnx.load(str(models[name])))
    assert d["derived"], d
    assert 0.5 < d["residual"] <= DERIVED_RESIDUAL_MAX
    assert d["fp32_weights_covered"] == d["fp32_weights"] == 3


def test_a_model_of_another_seed_is_not_derived(models):
    d = derived_from(onnx.load(str(models["fp32"])), onnx.load(str(models["other_int8_dynamic"])))
    assert not d["derived"]
    assert d["residual"] > 20, d


def test_one_tampered_weight_is_caught(models):
    d = derived_from(onnx.load(str(models["fp32"])), onnx.load(str(models["tampered_dynamic"])))
    assert not d["derived"]
    assert d["residual"] >= 2.9, d  # two steps off: |deq - W| >= 1.5 scale


def test_an_fp32_model_is_not_derived_from_anything(models):
    d = derived_from(onnx.load(str(models["fp32"])), onnx.load(str(models["fp32"])))
    assert d["quantized_weights"] == 0 and d["residual"] is None and not d["derived"]
