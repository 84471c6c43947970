"""The model worker's policy per lesson: ``[model_worker]`` parsed and validated, and honoured by the
real worker (operators beyond the allowlist, the optimization level per lesson and per call, limits)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from autograder.assignment import load_assignment
from autograder.errors import AssignmentError
from autograder.measure.model_policy import (
    DEFAULT_POLICY,
    MiB,
    ModelPolicy,
    known_operator,
    policy_from_table,
    qualified_op,
    split_op,
)
from autograder.measure.model_check import structure_problems
from autograder.measure.onnx_load import run_model_worker

GELU = "com.microsoft.Gelu"


def erf_gelu_model() -> onnx.ModelProto:
    """``Y = GELU(X @ W)`` written with Erf, the pattern ONNX Runtime fuses into com.microsoft.Gelu
    from ORT_ENABLE_EXTENDED on (6 nodes → MatMul + Gelu)."""
    rng = np.random.default_rng(0)
    const = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["h", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "erf_gelu",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 8])],
        [const("W", rng.standard_normal((8, 8))), const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_optimized(model: onnx.ModelProto, level: str, folder) -> bytes:
    """What ONNX Runtime itself saves for ``model`` optimised at ``level`` (a real, ORT-made file)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.optimized_model_filepath = str(folder / f"{level}.onnx")
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return (folder / f"{level}.onnx").read_bytes()


X = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)


# ── the table ──────────────────────────────────────────────────────────────────────────────────

VALID = [
    ({}, DEFAULT_POLICY),
    (
        {"extra_operators": [GELU, "com.microsoft.FusedMatMul"]},
        ModelPolicy(frozenset({GELU, "com.microsoft.FusedMatMul"})),
    ),
    ({"extra_operators": ["ai.onnx.Relu"]}, ModelPolicy(frozenset({"Relu"}))),  # the default domain's two names
    ({"graph_optimization_level": "ORT_ENABLE_EXTENDED"}, ModelPolicy(optimization_level="ORT_ENABLE_EXTENDED")),
    (
        {"max_model_mb": 8, "max_nodes": 50},
        ModelPolicy(limits=replace(DEFAULT_POLICY.limits, max_file_bytes=8 * MiB, max_nodes=50)),
    ),
]


@pytest.mark.parametrize(("table", "policy"), VALID)
def test_a_valid_table_gives_its_policy(table, policy):
    assert policy_from_table(table, "assignment.toml") == policy


def test_the_default_policy_keeps_todays_limits_and_level():
    assert DEFAULT_POLICY.limits.max_file_bytes == 64 * MiB and DEFAULT_POLICY.limits.max_nodes == 10_000
    assert DEFAULT_POLICY.optimization_level == "ORT_ENABLE_ALL" and not DEFAULT_POLICY.extra_operators


INVALID = [
    ({"extra_operators": ["com.microsoft.Gelus"]}, "extra_operators", "com.microsoft.Gelus"),  # a typo
    ({"extra_operators": ["FusedMatMul"]}, "extra_operators", "FusedMatMul"),  # a contrib op without its domain
    ({"extra_operators": ["com.example.Evil"]}, "extra_operators", "com.example.Evil"),
    ({"extra_operators": ["com.microsoft."]}, "extra_operators", "com.microsoft."),
    ({"extra_operators": GELU}, "extra_operators", "list"),
    ({"extra_operators": [1]}, "extra_operators", "list"),
    ({"graph_optimization_level": "ALL"}, "graph_optimization_level", "ORT_ENABLE_EXTENDED"),
    ({"graph_optimization_level": 99}, "graph_optimization_level", "99"),
    ({"max_model_mb": 0}, "max_model_mb", "got 0"),
    ({"max_model_mb": 4096}, "max_model_mb", "4096"),
    ({"max_model_mb": "64"}, "max_model_mb", "'64'"),
    ({"max_nodes": True}, "max_nodes", "True"),
    ({"max_nodes": 10.5}, "max_nodes", "10.5"),
    ({"max_node": 10}, "max_node", "known: extra_operators"),
]


@pytest.mark.parametrize(("table", "key", "detail"), INVALID)
def test_a_bad_value_names_its_key(table, key, detail):
    with pytest.raises(AssignmentError) as e:
        policy_from_table(table, "assignments/x/assignment.toml")
    assert f"[model_worker] {key}" in str(e.value) or repr(key) in str(e.value)
    assert detail in str(e.value) and "assignments/x/assignment.toml" in str(e.value)


def test_a_bad_table_fails_when_the_assignment_loads(tmp_path):
    folder = tmp_path / "assignments" / "lesson"
    folder.mkdir(parents=True)
    (folder / "assignment.toml").write_text(
        'id = "lesson"\n[model_worker]\nextra_operators = ["com.microsoft.Gelu_"]\n'
    )
    with pytest.raises(AssignmentError, match=r"extra_operators .*com\.microsoft\.Gelu_"):
        load_assignment("lesson", tmp_path)
    (folder / "assignment.toml").write_text(
        'id = "lesson"\n[model_worker]\nextra_operators = ["com.microsoft.Gelu"]\n'
        'graph_optimization_level = "ORT_ENABLE_BASIC"\n'
    )
    policy = load_assignment("lesson", tmp_path).model_policy
    assert policy.extra_operators == {GELU} and policy.optimization_level == "ORT_ENABLE_BASIC"


@pytest.mark.parametrize("assignment_id", ["03-export-parity", "06-performance", "07-quantization"])
def test_the_existing_lessons_keep_the_strict_default(project_root, assignment_id):
    assert load_assignment(assignment_id, project_root).model_policy == DEFAULT_POLICY


# ── operators: names and the allowlist ─────────────────────────────────────────────────────────


@given(
    domain=st.sampled_from(["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc", "x.y"]),
    op_type=st.from_regex(r"[A-Z][A-Za-z0-9]{0,12}", fullmatch=True),
)
def test_qualified_op_and_split_op_agree(domain, op_type):
    name = qualified_op(helper.make_node(op_type, [], [], domain=domain))
    assert name == (op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}")
    assert split_op(name) == ("" if domain in ("", "ai.onnx") else domain, op_type)


def one_node(op_type: str, domain: str) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["X"], ["Y"], domain=domain)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    )


OPERATOR_CASES = [  # (op_type, domain, extra_operators, accepted)
    ("Gelu", "com.microsoft", (), False),  # the default rejects ORT's Gelu
    ("Gelu", "com.microsoft", (GELU,), True),  # a lesson allowing it
    ("BiasGelu", "com.microsoft", (GELU,), False),  # only what is named
    ("FastGelu", "com.microsoft", (GELU,), False),
    ("Conv", "com.microsoft.nchwc", (), False),  # a domain outside the default ones
    ("Conv", "com.microsoft.nchwc", ("com.microsoft.nchwc.Conv",), True),
    ("QLinearAdd", "com.microsoft", (), True),  # the default allowlist is unchanged
    ("Relu", "", (), True),
    ("NoSuchOp", "", (), False),
]


@pytest.mark.parametrize(("op_type", "domain", "extra", "accepted"), OPERATOR_CASES)
def test_the_allowlist_is_the_default_plus_the_lessons_operators(op_type, domain, extra, accepted):
    problems = structure_problems(
        one_node(op_type, domain), extra_operators=ModelPolicy(frozenset(extra)).extra_operators
    )
    assert (problems == []) == accepted, problems
    if not accepted and domain == "com.microsoft":
        assert f"operator com.microsoft.{op_type}" in problems[0] and "allows only" in problems[0]


def test_every_default_microsoft_operator_is_one_ort_knows():
    from autograder.measure.model_check import MICROSOFT_OPS

    assert all(known_operator(f"com.microsoft.{op}") for op in MICROSOFT_OPS)


# ── the real worker ────────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def extended_model(tmp_path_factory) -> bytes:
    data = ort_optimized(erf_gelu_model(), "ORT_ENABLE_EXTENDED", tmp_path_factory.mktemp("ort"))
    assert GELU in {qualified_op(n) for n in onnx.load_from_string(data).graph.node}
    return data


@pytest.mark.kernel
def test_the_default_refuses_a_model_ort_optimised_with_a_clear_reason(extended_model):
    run = run_model_worker(extended_model, inputs={"x": X}, facts=("graph",))
    assert not run.ok
    assert "operator com.microsoft.Gelu is not an allowed ONNX operator" in run.reason
    assert "this assignment allows only" in run.reason


@pytest.mark.kernel
def test_a_lesson_allowing_gelu_loads_and_runs_that_model(extended_model):
    policy = policy_from_table({"extra_operators": [GELU]}, "assignment.toml")
    run = run_model_worker(extended_model, inputs={"x": X}, facts=("graph",), policy=policy)
    assert run.ok, run.reason
    facts = run.result["facts"]
    assert facts["op_counts"] == {"MatMul": 1, GELU: 1} and facts["node_count"] == 2
    expected = ort.InferenceSession(erf_gelu_model().SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"X": X}
    )[0]
    np.testing.assert_allclose(run.outputs["x__Y"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.kernel
def test_the_level_comes_from_the_policy_and_a_call_may_override_it():
    model = erf_gelu_model().SerializeToString()
    basic = ModelPolicy(optimization_level="ORT_ENABLE_BASIC")
    runs = {
        "policy": run_model_worker(model, inputs={"x": X}, facts=("graph", "session"), policy=basic),
        "call": run_model_worker(
            model, inputs={"x": X}, facts=("session",), policy=basic, optimization_level="ORT_ENABLE_EXTENDED"
        ),
    }
    assert all(r.ok for r in runs.values()), {k: r.reason for k, r in runs.items()}
    at_basic, at_extended = (runs[k].result["facts"]["session"] for k in ("policy", "call"))
    assert at_basic["optimization_level"] == "ORT_ENABLE_BASIC" and at_basic["node_count"] == 6
    assert "com.microsoft.Gelu" not in at_basic["op_counts"]
    assert at_extended["optimization_level"] == "ORT_ENABLE_EXTENDED"
    assert at_extended["node_count"] < at_basic["node_count"] and at_extended["op_counts"].get(GELU) == 1
    assert runs["policy"].result["facts"]["node_count"] == 6  # the file as submitted
    np.testing.assert_allclose(runs["call"].outputs["x__Y"], runs["policy"].outputs["x__Y"], rtol=1e-5, atol=1e-6)


@pytest.mark.kernel
def test_the_policys_limits_reach_the_worker():
    tight = ModelPolicy(limits=replace(DEFAULT_POLICY.limits, max_nodes=3))
    run = run_model_worker(erf_gelu_model().SerializeToString(), inputs={"x": X}, facts=(), policy=tight)
    assert not run.ok and "more than 3 nodes" in run.reason


# ── node_count and op_counts on real models ────────────────────────────────────────────────────


def test_op_counts_qualify_every_domain_on_an_skl2onnx_pipeline():
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from autograder.measure.fact_groups import model_facts

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 3)).astype(np.float32), np.arange(40) % 2
    model = to_onnx(make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y), x[:1])
    facts = model_facts(model)
    assert facts["op_counts"]["ai.onnx.ml.ZipMap"] == 1 and facts["op_counts"]["ai.onnx.ml.LinearClassifier"] == 1
    assert facts["op_counts"]["ai.onnx.ml.Scaler"] == 1
    assert facts["node_count"] == sum(facts["op_counts"].values()) == len(model.graph.node)
    assert facts["op_histogram"]["ZipMap"] == 1  # by type alone, as before
    assert set(facts) >= {"node_count", "op_counts", "op_histogram", "opset", "param_count", "canonical_bytes"}
    assert "classification" not in facts  # quantization facts only when named


def test_op_counts_of_what_ort_saved(tmp_path):
    from autograder.measure.graph_facts import graph_group

    for level, counts in [
        ("ORT_DISABLE_ALL", {"MatMul": 1, "Div": 1, "Erf": 1, "Add": 1, "Mul": 2}),
        ("ORT_ENABLE_EXTENDED", {"MatMul": 1, GELU: 1}),
    ]:
        facts = graph_group(onnx.load_from_string(ort_optimized(erf_gelu_model(), level, tmp_path)))
        assert facts["op_counts"] == counts and facts["node_count"] == sum(counts.values()), level


def test_a_call_cannot_ask_for_a_level_that_does_not_exist():
    with pytest.raises(ValueError, match="ORT_ENABLE_EXTENDED"):
        DEFAULT_POLICY.at_level("ORT_FAST")
    assert DEFAULT_POLICY.at_level(None) is DEFAULT_POLICY
