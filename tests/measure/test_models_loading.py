"""The safe ONNX loading pipeline against hostile artifacts: every one is data, never a crash."""

from __future__ import annotations

import os
import resource

import numpy as np
import onnx
import pytest
import quant_model_factory as factory

from autograder.errors import UnsafeFileError
from autograder.measure import worker_process
from autograder.measure.model_interface import ModelInterface, TensorSpec
from autograder.measure.model_check import structure_problems
from autograder.measure.onnx_load import LoadLimits, read_model_bytes, run_model_worker

X = factory.contract_data()[1]
INTERFACE = ModelInterface(
    inputs=(TensorSpec("X", "float32", (None, 2)),),
    outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))),
)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return factory.model_set(tmp_path_factory.getbasetemp() / "quant_models")


def run(path, **kw):
    return run_model_worker(path.read_bytes(), inputs={"test": X}, interface=INTERFACE, **kw)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_good_model_runs_and_returns_outputs(models):
    r = run(
        models["int8_qdq"],
        baseline=models["fp32"].read_bytes(),
        latency_input="test",
        facts=("graph", "quantization", "derived_from"),
        latency_rounds=5,
        latency_baseline=True,
    )
    assert r.ok, r.reason
    assert r.outputs["test__probabilities"].shape == (len(X), 2)
    assert r.outputs["test__label"].dtype == np.int64
    assert r.result["facts"]["classification"] == "static_qdq"
    assert r.result["derived"]["derived"]
    assert r.result["latency"]["model_ms"] > 0 and r.result["latency"]["baseline_ms"] > 0


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("name", ["int8_qop", "ort_fp32", "ort_int8_dynamic", "ort_int8_qdq"])
def test_models_with_onnx_runtime_contrib_ops_load(models, name):
    r = run(models[name])
    assert r.ok and r.result["run_error"] is None, (r.reason, r.result.get("run_error"))


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_external_data_pointing_outside_is_refused_unread(models, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"\x00" * 1024)
    (tmp_path / "ws").mkdir()
    bad = factory.hostile_external_data(models["fp32"], tmp_path / "ws" / "fp32.onnx", "../secret")
    before = os.stat(secret).st_atime_ns
    r = run(bad)
    assert not r.ok
    assert "external file ('../secret')" in r.reason
    assert os.stat(secret).st_atime_ns == before


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_custom_domain_is_refused(tmp_path):
    r = run(factory.hostile_custom_domain(tmp_path / "evil.onnx"))
    assert not r.ok and "com.evil" in r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_memory_bomb_is_an_invalid_model_stopped_by_the_memory_limit(tmp_path):
    bomb = factory.hostile_memory_bomb(tmp_path / "bomb.onnx")  # 14.4 GB ConstantOfShape
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = run(bomb, limits=LoadLimits(timeout_s=300))  # the memory limit must fire, not this one
    # Either ONNX Runtime reports the failed allocation or the child dies: never the grader.
    assert not r.ok or r.result.get("run_error"), r
    assert r.ok or "took longer than" not in r.reason, f"the time limit fired, not the memory limit: {r.reason}"
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 100, f"the grader's own memory grew by {grown_mb:.0f} MB"


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_subgraphs_nested_past_the_cap_are_refused(tmp_path):
    r = run(factory.hostile_deep_if(tmp_path / "if5.onnx", 5))
    assert not r.ok and "nested more than 3 deep" in r.reason
    assert run(factory.hostile_deep_if(tmp_path / "if2.onnx", 2)).ok


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_nesting_too_deep_for_the_parser_is_refused_cleanly(tmp_path):
    r = run(factory.hostile_deep_if_wire(tmp_path / "if400.onnx", 400))
    assert not r.ok and r.reason.startswith("not an ONNX model file"), r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("content", [b"", b"hello, this is not a model\n" * 10, b"\x08\x0a"])
def test_non_onnx_bytes_are_refused(tmp_path, content):
    p = tmp_path / "junk.onnx"
    p.write_bytes(content)
    r = run(p)
    assert not r.ok
    assert "empty" in r.reason or "not an ONNX model file" in r.reason, r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_hang_becomes_a_timeout(models):
    r = run(models["fp32"], limits=LoadLimits(timeout_s=0.01))
    assert not r.ok and "took longer than" in r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_zipmap_model_loads_but_has_no_usable_outputs(models):
    r = run(models["zipmap"])
    assert r.ok
    assert not r.result["facts"]["interface_ok"]
    assert "output label is missing" in r.result["run_error"]
    assert r.outputs == {}


def test_structure_problems_in_process(models):
    model = onnx.load(str(models["fp32"]))
    assert structure_problems(model) == []
    model.graph.node[1].op_type = "NoSuchOp"
    assert any("ai.onnx.NoSuchOp is not an allowed" in p for p in structure_problems(model))
    model = onnx.load(str(models["fp32"]))
    model.graph.node[1].domain = "com.microsoft"
    model.graph.node[1].op_type = "Gelu"  # a real contrib op, but not a quantization op
    assert any("com.microsoft.Gelu" in p for p in structure_problems(model))
    assert any("nodes" in p for p in structure_problems(onnx.load(str(models["fp32"])), LoadLimits(max_nodes=3)))


def test_symlink_and_fifo_artifacts_are_refused_before_reading(models, tmp_path):
    (tmp_path / "artifacts").mkdir()
    os.symlink(models["fp32"], tmp_path / "artifacts" / "fp32.onnx")
    os.mkfifo(tmp_path / "artifacts" / "int8_qdq.onnx")
    with pytest.raises(UnsafeFileError, match="is a symlink, not a regular file"):
        read_model_bytes(tmp_path, "artifacts/fp32.onnx")
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        read_model_bytes(tmp_path, "artifacts/int8_qdq.onnx")  # would block forever if opened blocking
    with pytest.raises(UnsafeFileError, match="is missing"):
        read_model_bytes(tmp_path, "artifacts/int8_dynamic.onnx")


def test_oversized_file_is_refused(models):
    with pytest.raises(UnsafeFileError, match="more than the 1,000 allowed"):
        read_model_bytes(models["fp32"].parent, models["fp32"].name, LoadLimits(max_file_bytes=1000))


def test_child_environment_has_no_ort_configuration(monkeypatch):
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    env = worker_process._child_env("/tmp")
    assert not any(k.startswith(("ORT_", "PYTHON")) for k in env)


@pytest.mark.parametrize(
    "script, expected",
    [
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
            "crashed the ONNX checker or ONNX Runtime (SIGSEGV",
        ),
        ("import sys; sys.exit(3)", "stopped (exit 3) without a result"),
    ],
)
@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_dying_child_is_an_invalid_model(models, monkeypatch, script, expected):
    import sys

    monkeypatch.setattr(worker_process, "_worker_command", lambda job_dir: [sys.executable, "-c", script])
    r = run(models["fp32"])
    assert not r.ok and expected in r.reason, r.reason


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_without_an_interface_every_numeric_output_is_kept(models):
    r = run_model_worker(models["fp32"].read_bytes(), inputs={"test": X})
    assert r.ok and "interface_ok" not in r.result["facts"]
    assert set(r.outputs) == {"test__label", "test__probabilities"}
