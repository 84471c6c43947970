"""measure_models and measure_reported of assignment 07 on real workspaces."""

from __future__ import annotations

import copy
import importlib
import json
import os

import numpy as np
import pytest
import quant_model_factory as factory

from autograder import hidden_secret
from autograder.hidden_secret import HiddenSecret

MODEL_KEYS = {
    "path",
    "size_bytes",
    "valid",
    "problems",
    "interface_ok",
    "classification",
    "classification_detail",
    "node_count",
    "op_counts",
    "op_histogram",
    "opset",
    "param_count",
    "weight_dtypes",
    "quantized_weights",
    "float_weights_left",
    "per_channel",
    "per_channel_weights",
    "per_channel_shaped_weights",
    "activation_dtypes",
    "calibrated_input_range",
    "input_quantization",
    "canonical_bytes",
    "canonical_constant_bytes",
    "quantized",
    "latency_ms",
    "accuracy",
    "public_split",
}
COMPARISON_KEYS = {
    "file_size_ratio",
    "size",
    "derived_from_fp32",
    "derived_residual",
    "derived_detail",
    "latency_ratio",
    "quality",
}
QUALITY_KEYS = {
    "accuracy_drop",
    "label_agreement",
    "max_abs_dp",
    "p99_abs_dp",
    "max_rel_drift",
    "edge_max_rel_drift",
    "edge_max_abs_dp",
    "edge_label_agreement",
}
CALIBRATION_KEYS = {
    "input_range",
    "data_range",
    "coverage",
    "live_input_quantizers",
    "unused_input_quantizers",
    "source",
    "source_detail",
    "source_ends",
    "activations_checked",
    "activations_source",
}


@pytest.fixture(scope="session")
def grading(assignment07):
    pkg = assignment07.grading
    return (importlib.import_module(pkg.__name__ + ".models"), importlib.import_module(pkg.__name__ + ".data"))


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return factory.model_set(tmp_path_factory.getbasetemp() / "quant_models")


@pytest.fixture(scope="session")
def good(tmp_path_factory, models, grading, assignment07):
    """A good workspace, its measurements and its honest RESULTS."""
    ws = factory.make_workspace(tmp_path_factory.mktemp("good_ws"), models)
    measured = grading[0].measure_models(assignment07, ws)
    paths = {k: ws / "artifacts" / f"{k}.onnx" for k in ("fp32", "int8_dynamic", "int8_qdq")}
    return ws, measured, factory.contract_results(paths)


def test_public_split_is_the_contracts_data(grading):
    data = grading[1]
    X_train, X_test, y_train, y_test, X_edge = factory.contract_data()
    s = data.public_split()
    for got, want in ((s.X_train, X_train), (s.X_test, X_test), (s.y_test, y_test), (s.X_edge, X_edge)):
        np.testing.assert_array_equal(got, want)
    assert s.X_test.dtype == np.float32 and not s.X_test.flags.writeable


def test_hidden_split_comes_from_the_secret_in_effect(grading, assignment07):
    data = grading[1]
    one, two = HiddenSecret(b"\x01" * 32), HiddenSecret(b"\x02" * 32)
    with hidden_secret.using(one):
        h = data.hidden_split(assignment07)
        assert data.hidden_split(assignment07) is h  # cached per process (per secret)
    assert h.seed == f"secret:{one.fingerprint()}"
    assert h.X_test.shape == (500, 2) and not np.array_equal(h.X_test, data.public_split().X_test)
    with hidden_secret.using(two):
        assert not np.array_equal(data.hidden_split(assignment07).X_test, h.X_test)
    assert data.hidden_split(assignment07).seed == f"secret:{hidden_secret.fingerprint()}"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_good_workspace_has_every_fact(good):
    _, m, _ = good
    json.dumps(m, allow_nan=False)  # plain JSON numbers only
    assert set(m) == {"fp32", "int8_dynamic", "int8_qdq"}
    for name, facts in m.items():
        assert "error" not in facts, facts
        assert MODEL_KEYS <= set(facts), MODEL_KEYS - set(facts)
        assert facts["valid"] and facts["interface_ok"] and facts["problems"] == []
        if name != "fp32":
            assert COMPARISON_KEYS <= set(facts), COMPARISON_KEYS - set(facts)
            assert "comparison_error" not in facts and facts["quantized"] is True
            assert set(facts["quality"]) == QUALITY_KEYS
    assert [m[k]["classification"] for k in m] == ["fp32", "dynamic", "static_qdq"]
    assert m["int8_qdq"]["per_channel"] and m["int8_qdq"]["activation_dtypes"] == ["uint8"]
    assert m["int8_dynamic"]["derived_from_fp32"] and m["int8_qdq"]["derived_from_fp32"]
    assert set(m["int8_qdq"]["calibration"]) == CALIBRATION_KEYS and "calibration" not in m["int8_dynamic"]
    assert m["int8_qdq"]["calibration"]["source"] == "X_train"  # the factory calibrates on X_train[:300]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_good_workspace_numbers_are_sane(good):
    _, m, _ = good
    assert m["fp32"]["accuracy"] > 0.9
    assert m["fp32"]["public_split"] == {
        "accuracy": m["fp32"]["public_split"]["accuracy"],
        "max_rel_drift": 0.0,
        "edge_max_rel_drift": 0.0,
    }
    for name in ("int8_dynamic", "int8_qdq"):
        f, q = m[name], m[name]["quality"]
        assert abs(q["accuracy_drop"]) < 0.05 and q["label_agreement"] > 0.95
        assert 0 < q["p99_abs_dp"] <= q["max_abs_dp"] < 0.3
        assert q["max_rel_drift"] >= q["max_abs_dp"]  # divided by max_j |r| <= 1
        assert f["file_size_ratio"] == f["size_bytes"] / m["fp32"]["size_bytes"]
        assert f["size"]["ratio"] == f["canonical_bytes"] / m["fp32"]["canonical_bytes"] < f["file_size_ratio"]
        assert f["latency_ratio"] > 0 and f["latency_ms"] > 0
    assert 0.9 < m["int8_qdq"]["calibration"]["coverage"] <= 1.0


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_honest_results_are_honest(good, grading, assignment07):
    ws, m, results = good
    rep = grading[0].measure_reported(assignment07, ws, results, None, m)
    json.dumps(rep, allow_nan=False)
    assert rep["present"] and rep["checked"] == 15
    assert rep["honest"] == 15, rep["problems"]
    assert rep["honest_share"] == 1.0
    # timed in another process a moment apart: how close is the calibrated window's business
    assert rep["latency"]["excess"] >= 0 and rep["latency"]["worst"] in results, rep["latency"]
    assert rep["fields"]["fp32.size_bytes"] == {
        "reported": results["fp32"]["size_bytes"],
        "measured": results["fp32"]["size_bytes"],
        "ok": True,
    }


def elementwise_drift(ws, variant):
    import onnxruntime as ort

    from autograder import ort_platform

    X_test = factory.contract_data()[1]
    options = ort_platform.session_options("ORT_ENABLE_ALL")  # as the notebook's session in the jail
    s = {
        k: ort.InferenceSession(str(ws / "artifacts" / f"{k}.onnx"), options, providers=["CPUExecutionProvider"])
        for k in ("fp32", variant)
    }
    p, r = (s[k].run(["probabilities"], {"X": X_test})[0] for k in (variant, "fp32"))
    return float(np.max(np.abs(p - r) / np.abs(r)))


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_dishonest_results_are_flagged(good, grading, assignment07):
    ws, m, results = good
    bad = copy.deepcopy(results)
    bad["int8_qdq"]["accuracy"] += 0.01
    bad["int8_dynamic"]["max_rel_drift"] = elementwise_drift(ws, "int8_dynamic")
    bad["int8_qdq"]["latency_ms"] /= 1000.0  # seconds reported as ms
    bad["fp32"]["size_bytes"] += 1
    rep = grading[0].measure_reported(assignment07, ws, bad, None, m)
    failed = {k for k, f in rep["fields"].items() if not f["ok"]}
    assert failed == {"int8_qdq.accuracy", "int8_dynamic.max_rel_drift", "fp32.size_bytes"}
    assert rep["honest"] == 12
    # latencies are judged apart, against a calibrated window: 1000× off is far outside any
    assert rep["latency"]["worst"] == "int8_qdq" and rep["latency"]["max_excess"] > 500
    drift_problem = next(p for p in rep["problems"] if p.startswith("int8_dynamic.max_rel_drift"))
    assert "per row" in drift_problem


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_malformed_or_missing_results(good, grading, assignment07):
    ws, m, results = good
    measure_reported = grading[0].measure_reported
    missing = measure_reported(assignment07, ws, None, "RESULTS is not defined", m)
    assert missing["present"] is False and missing["honest_share"] == 0.0
    assert missing["problems"] == ["RESULTS is not defined"]
    assert missing["latency"] == {"error": "RESULTS is not defined"}
    partial = copy.deepcopy(results)
    del partial["int8_qdq"]
    partial["fp32"]["accuracy"] = "0.96"
    partial["fp32"]["latency_ms"] = True
    rep = measure_reported(assignment07, ws, partial, None, m)
    assert rep["checked"] == 15 and rep["honest"] == 8
    assert "RESULTS['int8_qdq'] is missing" in rep["problems"]
    assert not rep["fields"]["fp32.latency_ms"]["ok"]  # a bool is not a number
    assert "fp32: reported a boolean (true), not a finite number" in rep["latency"]["error"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_missing_symlinked_and_invalid_artifacts(tmp_path, models, grading, assignment07):
    ws = factory.make_workspace(tmp_path, models, names=("int8_dynamic",))
    os.symlink(models["fp32"], ws / "artifacts" / "fp32.onnx")
    (ws / "artifacts" / "int8_qdq.onnx").write_bytes(b"not a model")
    m = grading[0].measure_models(assignment07, ws)
    assert m["fp32"] == {"error": "artifacts/fp32.onnx is a symlink, not a regular file"}
    assert m["int8_qdq"]["error"].startswith("invalid model: not an ONNX model file")
    dyn = m["int8_dynamic"]
    assert dyn["classification"] == "dynamic" and "accuracy" in dyn
    why = "not compared with the fp32 model: artifacts/fp32.onnx is a symlink, not a regular file"
    assert dyn["comparison_error"] == why
    assert dyn["quality"] == dyn["size"] == {"error": why}
    assert not (COMPARISON_KEYS - {"quality", "size"}) & set(dyn)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_missing_artifact_and_reported_sizes(tmp_path, models, grading, assignment07):
    ws = factory.make_workspace(tmp_path, models, names=("fp32", "int8_dynamic"))
    m = grading[0].measure_models(assignment07, ws)
    assert m["int8_qdq"] == {"error": "artifacts/int8_qdq.onnx is missing"}
    results = {
        k: {"size_bytes": 1, "accuracy": 0.9, "latency_ms": 1.0, "max_rel_drift": 0.0, "edge_max_rel_drift": 0.0}
        for k in ("fp32", "int8_dynamic", "int8_qdq")
    }
    rep = grading[0].measure_reported(assignment07, ws, results, None, m)
    assert rep["fields"]["int8_qdq.size_bytes"]["reason"] == "cannot be re-measured: artifacts/int8_qdq.onnx is missing"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_zipmap_fp32_keeps_graph_facts_but_not_metrics(tmp_path, models, grading, assignment07):
    ws = factory.make_workspace(tmp_path, models, names=("int8_qdq",))
    (ws / "artifacts" / "fp32.onnx").write_bytes(models["zipmap"].read_bytes())
    (ws / "artifacts" / "int8_dynamic.onnx").write_bytes(models["other_int8_dynamic"].read_bytes())
    m = grading[0].measure_models(assignment07, ws)
    fp32 = m["fp32"]
    assert fp32["valid"] and not fp32["interface_ok"] and "accuracy" not in fp32
    assert (
        "zipmap" in fp32["problems"][0] and "is missing on a batch of <n> rows" in fp32["metrics_error"]
    )  # masked: written after the rows were fed
    qdq = m["int8_qdq"]
    assert qdq["derived_from_fp32"] is True  # weights compare without running fp32
    assert qdq["comparison_error"].startswith("the fp32 model's outputs are unusable")
    assert qdq["quality"] == {"error": qdq["comparison_error"]} and "accuracy" in qdq
    assert qdq["size"]["ratio"] < 0.5  # sizes compare without running fp32
    assert m["int8_dynamic"]["derived_from_fp32"] is False  # quantized from another model


# ── a submission's models in its shared children ─────────────────────────────────────────────


def _without_timings(value):
    """The measurements with every timing left out (the rest is deterministic)."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if "latency" not in k}
    return value


@pytest.fixture
def served(monkeypatch):
    from autograder.measure import worker_process

    pids: list[int] = []
    run = worker_process.WorkerProcess.run

    def counting_run(self, files):
        pids.append(self.proc.pid)
        return run(self, files)

    monkeypatch.setattr(worker_process.WorkerProcess, "run", counting_run)
    return pids


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_one_shared_child_measures_what_fresh_children_measure(good, grading, assignment07, served):
    from autograder.measure.warm_pool import warm_workers

    ws, fresh, _ = good
    with warm_workers(1, assignment07.model_policy.limits) as children:
        shared = grading[0].measure_models(assignment07, ws, children=children)
    assert len(served) == 3 and len(set(served)) == 1, "the three models were not measured by one child"
    assert _without_timings(shared) == _without_timings(fresh)
    assert all("latency_ms" in facts for facts in shared.values())


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("hostile", ["custom_domain", "memory_bomb"])
@pytest.mark.parametrize("position", ["fp32", "int8_dynamic", "int8_qdq"])
def test_a_hostile_model_costs_the_submission_only_its_own_measurement(
    tmp_path, models, good, grading, assignment07, hostile, position
):
    from autograder.measure.warm_pool import warm_workers

    _, fresh, _ = good
    ws = factory.make_workspace(tmp_path / "ws", models)
    getattr(factory, f"hostile_{hostile}")(ws / "artifacts" / f"{position}.onnx")
    with warm_workers(1, assignment07.model_policy.limits) as children:
        m = grading[0].measure_models(assignment07, ws, children=children)
    assert "error" in m[position], m[position]
    for name, facts in m.items():
        if name == position:
            continue
        assert "error" not in facts and facts["valid"] and "accuracy" in facts, (name, facts)
        if position == "fp32":  # the variants lose only what compares them with the fp32 model
            assert facts["comparison_error"].startswith("not compared with the fp32 model"), facts
            assert facts["accuracy"] == fresh[name]["accuracy"]
            assert facts["node_count"] == fresh[name]["node_count"]
        else:
            assert _without_timings(facts) == _without_timings(fresh[name]), name
