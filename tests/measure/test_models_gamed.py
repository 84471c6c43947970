"""Model files gamed to earn points they should not, measured and judged for real.

Each case is built with onnx.helper or ONNX Runtime's quantizer (quant_model_factory) and goes
through the real model worker; the judge then grades the measurements with the assignment's
rubric and tolerances. Every test has a control (the honest model) that shows it can fail.
"""

from __future__ import annotations

import importlib
import shutil

import numpy as np
import onnx
import pytest
import quant_model_factory as factory

from autograder.judge import judge
from autograder.measure.fact_groups import model_facts

NOT_QUANTIZED = "not judged: the file is not quantized"


@pytest.fixture(scope="module")
def grading(assignment07):
    name = assignment07.grading.__name__
    return (importlib.import_module(name + ".models"), importlib.import_module(name + ".reported"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return factory.model_set(tmp_path_factory.getbasetemp() / "quant_models")


def _grade(assignment07, grading, ws, results=None):
    m = grading[0].measure_models(assignment07, ws)
    rep = grading[1].measure_reported(assignment07, ws, results, None if results else "RESULTS was not found", m)
    grade = judge(assignment07.rubric(), assignment07.tolerances(), {"models": m, "reported": rep})
    checks = {c["id"]: c for c in grade["checks"]}
    return m, rep, checks


def _parts(check):
    return {p["name"]: p for p in check["parts"]}


@pytest.fixture(scope="module")
def honest(tmp_path_factory, models, grading, assignment07):
    ws = factory.make_workspace(tmp_path_factory.mktemp("honest"), models)
    paths = {k: ws / "artifacts" / f"{k}.onnx" for k in ("fp32", "int8_dynamic", "int8_qdq")}
    return ws, _grade(assignment07, grading, ws, factory.contract_results(paths, rounds=5))


QUALITY_PARTS = {
    "dynamic_model": ("accuracy drop", "label agreement with fp32", "probability drift"),
    "static_model": (
        "accuracy drop",
        "label agreement with fp32",
        "probability drift",
        "calibration covers the data",
        "calibrated on training rows",
    ),
}


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_copies_of_fp32_under_int8_names_earn_no_quantization_points(tmp_path, models, grading, assignment07, honest):
    _, (_, _, control) = honest
    for check, names in QUALITY_PARTS.items():
        assert all(_parts(control[check])[n]["passed"] for n in names), f"control: honest {check} lost {names}"
    ws = factory.make_workspace(tmp_path, models, names=("fp32",))
    for name in ("int8_dynamic", "int8_qdq"):
        shutil.copyfile(models["fp32"], ws / "artifacts" / f"{name}.onnx")
    paths = {k: ws / "artifacts" / f"{k}.onnx" for k in ("fp32", "int8_dynamic", "int8_qdq")}
    m, rep, checks = _grade(assignment07, grading, ws, factory.contract_results(paths, rounds=5))
    for name in ("int8_dynamic", "int8_qdq"):
        assert m[name]["quantized"] is False and m[name]["quantized_reason"].startswith(NOT_QUANTIZED)
    for check in ("dynamic_model", "static_model", "size"):
        assert checks[check]["score"] == 0, (check, [p["name"] for p in checks[check]["parts"] if p["passed"]])
    for check, names in QUALITY_PARTS.items():
        for n in names:
            assert _parts(checks[check])[n]["reason"].startswith(NOT_QUANTIZED), (check, n)
    for p in checks["size"]["parts"]:
        assert p["reason"].startswith(NOT_QUANTIZED)
    # the copies' numbers in RESULTS describe no quantized model: not judged, so not honest
    assert rep["honest"] == 5 + 2, rep["problems"]  # fp32's five, and the copies' latencies
    assert not _parts(checks["reported_results"])["every reported number matches the re-measurement"]["passed"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_partly_quantized_file_is_not_judged_either(tmp_path, models, grading, assignment07):
    ws = factory.make_workspace(tmp_path, models, names=("fp32", "int8_qdq"))
    shutil.copyfile(models["partial_dynamic"], ws / "artifacts" / "int8_dynamic.onnx")
    m, _, checks = _grade(assignment07, grading, ws)
    assert m["int8_dynamic"]["quality"]["error"].startswith("not judged: the file is only partly quantized (1 MatMul")
    assert "max_abs_dp" in m["int8_dynamic"]["quality"], "the numbers stay, for the instructor"
    assert not _parts(checks["dynamic_model"])["accuracy drop"]["passed"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_padding_any_file_changes_no_size_measurement(tmp_path, models, grading, assignment07, honest):
    ws0, (m0, _, c0) = honest
    ws = factory.make_workspace(tmp_path, models, names=())
    for name in ("fp32", "int8_dynamic", "int8_qdq"):
        factory.padded(models[name], ws / "artifacts" / f"{name}.onnx")
    m, _, checks = _grade(assignment07, grading, ws)
    assert m["fp32"]["size_bytes"] > m0["fp32"]["size_bytes"] + 500_000, "the padding is there"
    for name in ("fp32", "int8_dynamic", "int8_qdq"):
        assert m[name]["canonical_bytes"] == m0[name]["canonical_bytes"], name
    for name in ("int8_dynamic", "int8_qdq"):
        assert m[name]["size"]["ratio"] == m0[name]["size"]["ratio"]
        assert m[name]["file_size_ratio"] != m0[name]["file_size_ratio"]
    assert [p["passed"] for p in checks["size"]["parts"]] == [p["passed"] for p in c0["size"]["parts"]]
    # padding fp32 alone would shrink the raw ratios 5×: the canonical ones do not move
    only = factory.make_workspace(tmp_path / "only_fp32", models, names=("int8_dynamic", "int8_qdq"))
    factory.padded(models["fp32"], only / "artifacts" / "fp32.onnx")
    m1, _, _ = _grade(assignment07, grading, only)
    assert m1["int8_dynamic"]["file_size_ratio"] < m0["int8_dynamic"]["file_size_ratio"] / 5
    assert m1["int8_dynamic"]["size"]["ratio"] == m0["int8_dynamic"]["size"]["ratio"]


def test_a_padded_model_computes_the_same_and_canonicalises_to_the_same_bytes(tmp_path, models):
    import onnxruntime as ort

    from autograder.measure.canonical import canonical_model

    src = models["int8_qdq"]
    pad = factory.padded(src, tmp_path / "padded.onnx")
    a, b = (canonical_model(onnx.load(str(p))).SerializeToString() for p in (src, pad))
    assert a == b
    x = factory.contract_data()[1]
    for p in (src, pad):
        got = ort.InferenceSession(
            canonical_model(onnx.load(str(p))).SerializeToString(), providers=["CPUExecutionProvider"]
        ).run(None, {"X": x})
        want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"X": x})
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_an_unused_wide_input_quantizer_does_not_widen_the_calibrated_range(tmp_path, models, grading, assignment07):
    X_train = factory.contract_data()[0]
    ws = factory.make_workspace(tmp_path, models, names=("fp32", "int8_dynamic"))
    # the 8 rows nearest the training median: a range far inside the data whatever the hidden rows
    # (the first 8 rows spanned enough to cover 0.906 of one deployment secret's hidden rows)
    central = X_train[np.argsort(np.abs(X_train - np.median(X_train, axis=0)).max(axis=1))[:8]]
    narrow = factory.quantize_static_on(models["fp32"], tmp_path / "narrow.onnx", central)
    shutil.copyfile(narrow, ws / "artifacts" / "int8_qdq.onnx")
    m0, _, _ = _grade(assignment07, grading, ws)
    factory.with_unused_input_quantizer(narrow, ws / "artifacts" / "int8_qdq.onnx", scale=0.05)
    m, _, checks = _grade(assignment07, grading, ws)
    cal0, cal = m0["int8_qdq"]["calibration"], m["int8_qdq"]["calibration"]
    assert cal0["coverage"] < 0.5, "control: 8 central calibration rows do not cover the data"
    assert cal["coverage"] == cal0["coverage"] and cal["input_range"] == cal0["input_range"]
    assert (cal["live_input_quantizers"], cal["unused_input_quantizers"]) == (1, 1)
    assert not _parts(checks["static_model"])["calibration covers the data"]["passed"]
    facts = model_facts(onnx.load(str(ws / "artifacts" / "int8_qdq.onnx")), groups=("graph", "quantization", "size"))
    assert facts["input_quantization"]["unused"] == 1 and len(facts["input_quantization"]["live"]) == 1


def test_a_live_second_input_quantizer_counts_only_where_both_let_values_through(models, tmp_path):
    """Two live quantizers on X: a value must fit both to pass unclipped, so the range is their
    intersection (a wide one added beside the real one widens nothing)."""
    from onnx import helper, numpy_helper

    model = onnx.load(str(models["int8_qdq"]))
    g = model.graph
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array(0.05, np.float32), "w_s"),
            numpy_helper.from_array(np.array(128, np.uint8), "w_z"),
            numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        ]
    )
    g.node.insert(0, helper.make_node("QuantizeLinear", ["X", "w_s", "w_z"], ["Xq_wide"]))
    g.node.insert(1, helper.make_node("DequantizeLinear", ["Xq_wide", "w_s", "w_z"], ["X_wide"]))
    g.node.insert(2, helper.make_node("ReduceSum", ["X_wide"], ["X_wide_sum"], keepdims=0))
    g.node.insert(3, helper.make_node("Mul", ["X_wide_sum", "zero"], ["nothing"]))
    out = next(n for n in g.node if "probabilities" in n.output)
    out.output[list(out.output).index("probabilities")] = "p_before"
    g.node.append(helper.make_node("Add", ["p_before", "nothing"], ["probabilities"]))
    before = model_facts(onnx.load(str(models["int8_qdq"])), groups=("graph", "quantization", "size"))[
        "calibrated_input_range"
    ]
    facts = model_facts(model, groups=("graph", "quantization", "size"))
    assert len(facts["input_quantization"]["live"]) == 2
    assert facts["calibrated_input_range"] == before


def test_a_per_tensor_scale_repeated_per_column_is_not_per_channel(tmp_path, models):
    assert model_facts(onnx.load(str(models["int8_qdq"])), groups=("quantization",))["per_channel"], (
        "control: real per-channel"
    )
    for jitter in (0.0, 1e-3):  # the same scale per column, or made to differ a little
        path = factory.with_repeated_per_tensor_scales(models["int8_qdq_pt"], tmp_path / f"rep{jitter}.onnx", jitter)
        facts = model_facts(onnx.load(str(path)), groups=("graph", "quantization", "size"))
        assert facts["per_channel_shaped_weights"] == 3, "every weight has a per-channel-shaped scale"
        assert facts["per_channel"] is False, jitter
        assert facts["per_channel_weights"] == 1, "only the one-column output layer, which has nothing to differ"


# ── calibration provenance ─────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def provenance(assignment07):
    name = assignment07.grading.__name__
    return importlib.import_module(name + ".provenance"), importlib.import_module(name + ".data").public_split()


def _source(path, provenance):
    prov, split = provenance
    facts = model_facts(onnx.load(str(path)), groups=("quantization",))
    return prov.calibration_source(facts["input_quantization"], split)


@pytest.mark.parametrize(
    "rows, options, expected",
    [
        ("train", {}, "X_train"),
        ("test", {}, "X_test"),
        ("edge", {}, "X_edge"),
        ("train_scaled", {}, "beyond X_train"),
        ("train", {"extra_options": {"ActivationSymmetric": True}}, "X_train"),
        ("train", {"calibrate_method": "Percentile"}, "undetermined"),
        ("train", {"calibrate_method": "Entropy"}, "X_train"),
    ],
)
def test_calibration_rows_are_read_back_from_the_input_quantizer(tmp_path, models, provenance, rows, options, expected):
    from onnxruntime.quantization import CalibrationMethod

    X_train, X_test, _, _, X_edge = factory.contract_data()
    rng = np.random.default_rng(3)
    data = {
        "train": X_train[rng.choice(len(X_train), 300, replace=False)],
        "test": X_test[rng.choice(len(X_test), 300, replace=False)],
        "edge": X_edge[rng.choice(len(X_edge), 300, replace=False)],
        "train_scaled": (1.3 * X_train[rng.choice(len(X_train), 300, replace=False)]).astype(np.float32),
    }[rows]
    if "calibrate_method" in options:
        options = {**options, "calibrate_method": getattr(CalibrationMethod, options["calibrate_method"])}
    path = factory.quantize_static_on(models["fp32"], tmp_path / "q.onnx", data, **options)
    found = _source(path, provenance)
    assert found["source"] == expected, found


def _ort_input_qparams(rows: np.ndarray) -> dict:
    """The input quantizer ONNX Runtime's MinMax calibration writes for ``rows`` (per tensor, uint8)."""
    from onnxruntime.quantization.quant_utils import compute_scale_zp

    rmin, rmax = np.array(min(rows.min(), 0), np.float32), np.array(max(rows.max(), 0), np.float32)
    zp, scale = compute_scale_zp(rmin, rmax, np.array(0, np.uint8), np.array(255, np.uint8))
    return {"live": [{"scale": float(scale), "zero_point": float(zp), "qmin": 0, "qmax": 255, "axis": None}]}


def test_the_emulated_input_quantizer_is_onnx_runtimes(tmp_path, models):
    rows = factory.contract_data()[1][:300]
    path = factory.quantize_static_on(models["fp32"], tmp_path / "q.onnx", rows)
    live = model_facts(onnx.load(str(path)), groups=("quantization",))["input_quantization"]["live"][0]
    want = _ort_input_qparams(rows)["live"][0]
    assert (np.float32(live["scale"]), live["zero_point"]) == (np.float32(want["scale"]), want["zero_point"])


@pytest.mark.parametrize("n_rows", [50, 300, 1500])
def test_provenance_is_right_for_every_seed(provenance, n_rows):
    """Over 20 seeds and three sample sizes: rows of X_train always read back as X_train, rows of
    X_test always as X_test (the ends are exact values of the rows that set them)."""
    prov, split = provenance
    for seed in range(20):
        rng = np.random.default_rng(seed)
        train = split.X_train[rng.choice(len(split.X_train), n_rows, replace=False)]
        assert prov.calibration_source(_ort_input_qparams(train), split)["source"] == "X_train", seed
        test = split.X_test[rng.choice(len(split.X_test), min(n_rows, len(split.X_test)), replace=False)]
        assert prov.calibration_source(_ort_input_qparams(test), split)["source"] == "X_test", seed
