"""Assignment 07's ``figure`` section, measured on real models in the model worker.

The picture must show the student's own two models on the plane and the contract's public points
only: nothing of the grader's hidden test set can be identified in it.
"""

from __future__ import annotations

import base64
import importlib

import numpy as np
import onnxruntime as ort
import pytest
import quant_model_factory as factory

from autograder import ort_platform
from autograder.report.figure import figure_problem, svg_inline


@pytest.fixture(scope="module")
def plugin(assignment07):
    name = assignment07.grading.__name__
    return (
        importlib.import_module(name + ".models"),
        importlib.import_module(name + ".figure"),
        importlib.import_module(name + ".data"),
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return factory.model_set(tmp_path_factory.getbasetemp() / "quant_models")


def measure(plugin, assignment07, ws):
    models_mod, figure_mod, data = plugin
    runs: dict = {}
    facts = models_mod.measure_models(assignment07, ws, runs=runs)
    return facts, figure_mod.figure_section(runs, facts, data.public_split())


@pytest.fixture(scope="module")
def good(tmp_path_factory, models, plugin, assignment07):
    return measure(plugin, assignment07, factory.make_workspace(tmp_path_factory.mktemp("fig_ws"), models))


def _rows(a) -> set[tuple[float, float]]:
    return {(round(float(x), 4), round(float(y), 4)) for x, y in np.asarray(a, dtype=np.float64)}


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_only_the_public_points_are_in_the_picture(good, plugin, assignment07):
    _, section = good
    data = plugin[2]
    public, hidden = data.public_split(), data.hidden_split(assignment07)
    assert section["data"] == "public" and figure_problem(section) is None
    by_name = {s["name"]: s for s in section["points"]}
    assert set(by_name) == {"X_test", "X_edge"}
    assert np.allclose(by_name["X_test"]["xy"], public.X_test, atol=1e-4)
    assert np.allclose(by_name["X_edge"]["xy"], public.X_edge, atol=1e-4)
    drawn = set().union(*(_rows(s["xy"]) for s in section["points"]), _rows([w["xy"] for w in section["worst"]]))
    secret = _rows(hidden.X_test) | _rows(hidden.X_edge) | _rows(hidden.X_train)
    assert not drawn & secret, "a hidden row is drawn"
    assert len(drawn) == len(public.X_test) * 2 - len(_rows(public.X_test) & _rows(public.X_edge))
    grid = section["grid"]
    lo = np.concatenate([public.X_test, public.X_edge]).min(axis=0)
    hi = np.concatenate([public.X_test, public.X_edge]).max(axis=0)
    assert grid["x"][0] < lo[0] and grid["x"][1] > hi[0] and grid["y"][0] < lo[1] and grid["y"][1] > hi[1]
    assert grid["shape"] == [100, 100]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_drift_per_row_matches_the_contracts_max_rel_drift(good):
    facts, section = good
    by_name = {s["name"]: s for s in section["points"]}
    public = facts["int8_qdq"]["public_split"]
    assert max(by_name["X_test"]["value"]) == pytest.approx(public["max_rel_drift"], rel=1e-3)
    assert max(by_name["X_edge"]["value"]) == pytest.approx(public["edge_max_rel_drift"], rel=1e-3)
    values = sorted((v for s in section["points"] for v in s["value"]), reverse=True)
    assert [w["value"] for w in section["worst"]] == pytest.approx(values[:5], rel=1e-3)
    for w in section["worst"]:
        assert by_name[w["set"]]["xy"][w["row"]] == w["xy"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_the_boundaries_are_the_student_models_on_the_grid(good, plugin, models):
    _, section = good
    grid = plugin[1].grid_points(plugin[2].public_split())
    for boundary, name in zip(section["boundaries"], ("fp32", "int8_qdq")):
        assert boundary["name"] == name
        drawn = np.frombuffer(base64.b64decode(boundary["p1"]), dtype=np.uint8) / 255.0
        options = ort_platform.session_options("ORT_ENABLE_ALL")  # as the grader's model worker runs it
        session = ort.InferenceSession(str(models[name]), options, providers=["CPUExecutionProvider"])
        p1 = session.run(["probabilities"], {"X": grid})[0][:, 1]
        assert np.max(np.abs(drawn - p1)) <= 0.5 / 255 + 1e-6, name
    svg = svg_inline(section)
    assert 'id="boundary-0"' in svg and 'id="boundary-1"' in svg


@pytest.mark.parametrize(
    "names, replace, says",
    [
        (
            ("fp32", "int8_dynamic"),
            None,
            "no picture: int8_qdq.onnx could not be measured (artifacts/int8_qdq.onnx is missing)",
        ),
        (
            ("int8_dynamic", "int8_qdq"),
            None,
            "no picture: fp32.onnx could not be measured (artifacts/fp32.onnx is missing)",
        ),
        (("fp32", "int8_dynamic"), "fp32", "no picture: int8_qdq.onnx is not quantized"),
        (("fp32", "int8_dynamic"), b"not a model", "no picture: int8_qdq.onnx could not be measured (invalid model"),
    ],
)
@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_no_picture_without_two_usable_models_only_a_sentence(
    tmp_path, models, plugin, assignment07, names, replace, says
):
    ws = factory.make_workspace(tmp_path, models, names=names)
    if replace is not None:
        target = ws / "artifacts" / "int8_qdq.onnx"
        target.write_bytes(replace if isinstance(replace, bytes) else models[replace].read_bytes())
    _, section = measure(plugin, assignment07, ws)
    assert set(section) == {"error"} and section["error"].startswith(says), section
