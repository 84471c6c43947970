"""tolerances.toml carries its provenance and every value follows from its recorded worst case;
the derivation rules of autograder.authoring.calibrate on small, known samples."""

from __future__ import annotations

import math
import re
import tomllib

import nbformat
import pytest

from autograder.authoring.calibrate import (
    Spec,
    derive,
    inject_parameters,
    render_tolerances,
    round_outward,
    step_of,
    tolerance_specs,
)
from autograder.dotted import lookup
from autograder.errors import AssignmentError


@pytest.fixture(scope="module")
def tolerances(assignment07):
    return assignment07.tolerances()


def _entries(table, prefix=""):
    for key, value in table.items():
        if key == "provenance" and not prefix:
            continue
        if isinstance(value, dict) and "value" in value:
            yield prefix + key, value
        elif isinstance(value, dict):
            yield from _entries(value, prefix + key + ".")


def test_tolerances_carry_their_provenance(tolerances):
    prov = tolerances["provenance"]
    assert prov["command"].startswith("autograder calibrate 07-quantization --runs ")
    assert prov["runs"] >= 5 and len(prov["parameters"]["MODEL_SEED"]) == prov["runs"]
    assert len(set(prov["parameters"]["MODEL_SEED"])) == prov["runs"], "every run needs its own seed"
    # the hidden test sets: fingerprints of fresh secrets (two per run), or, in a file calibrated
    # before hidden data came from a secret, the seeds it used (such files keep working)
    hidden = prov["hidden_secrets"] if "hidden_secrets" in prov else prov["hidden_seeds"]
    assert len(set(hidden)) == len(hidden) >= prov["runs"] + 1, "every hidden test set needs its own secret"
    if "hidden_secrets" in prov:
        assert len(hidden) == 2 * prov["runs"] and all(re.fullmatch(r"[0-9a-f]{12}", s) for s in hidden)
    for package in ("python", "onnxruntime", "onnx", "numpy", "scikit-learn", "skl2onnx"):
        assert prov["versions"].get(package), f"provenance lacks the {package} version"
    assert re.match(r"\d{4}-\d\d-\d\dT", prov["date"]) and prov["margin"] > 1
    assert prov["reference_scores"] == [100.0] * prov["runs"], "every reference run must keep full marks"


def test_specs_come_from_the_rubric_and_calibration_toml(assignment07):
    config = tomllib.loads((assignment07.reference_folder / "calibration.toml").read_text())
    specs = {s.key: s for s in tolerance_specs(assignment07.rubric(), config)}
    assert specs["dynamic_model.accuracy_drop_max"] == Spec(
        "dynamic_model.accuracy_drop_max",
        "models.int8_dynamic.quality.accuracy_drop",
        "upper",
        2.0,
        "models.fp32.accuracy",
    )
    assert specs["size.static_ratio_max"].margin == 1.25
    assert specs["fp32_model.accuracy_min"].direction == "lower"


def test_tolerance_specs_reject_a_calibration_for_an_unused_tolerance():
    from autograder.errors import AssignmentError

    rubric = {"checks": [{"id": "c", "parts": [{"name": "p", "measure": "a.b", "op": "<=", "tolerance": "c.x_max"}]}]}
    with pytest.raises(AssignmentError, match="c.y_max"):
        tolerance_specs(rubric, {"margins": {"c.y_max": 1.5}})


def test_derive_upper_lower_and_count():
    upper = derive(Spec("k", "m", "upper", 2.0), [0.01, 0.03, 0.02], step=0.0)
    assert upper["value"] == 0.06 and upper["worst"] == 0.03
    zero = derive(Spec("k", "m", "upper", 2.0), [0.0, -0.002, 0.0], step=0.002)
    assert zero["value"] == 0.004, "a bound whose samples all hit 0 must not collapse to 0"
    lower = derive(Spec("k", "m", "lower", 2.0), [0.99, 0.996, 1.0], step=0.002)
    assert lower["value"] == pytest.approx(1 - (0.01 + 0.002) * 2) and lower["worst"] == 0.99
    count = derive(Spec("k", "m", "lower", 2.0), [4, 4, 4], step=0.0)
    assert count["value"] == 4
    with pytest.raises(AssignmentError):
        derive(Spec("k", "m", "lower", 2.0), [True, 1.0], step=0.0)


def test_step_and_rounding():
    assert step_of([0.974, 0.95, 1.0, 0.998]) == 0.002
    assert step_of([0.0, 0.0]) == 0.0
    assert round_outward(0.085418, "upper") == 0.08542 and round_outward(0.085411, "upper") == 0.08542
    assert round_outward(0.98417, "lower") == 0.9841 and round_outward(1.0, "lower") == 1.0
    assert round_outward(0.3367, "upper") == 0.3367, "an exact value is not widened"
    assert not math.isnan(round_outward(0.0, "upper"))


def test_inject_parameters_follows_the_tagged_cell():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import numpy"),
            nbformat.v4.new_code_cell("MODEL_SEED = 0\nCALIBRATION_SEED = 0", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("train(MODEL_SEED)"),
        ]
    )
    out = inject_parameters(nb, {"MODEL_SEED": 3, "CALIBRATION_SEED": 4})
    assert [c.source for c in out.cells][2].endswith("MODEL_SEED = 3\nCALIBRATION_SEED = 4")
    assert len(nb.cells) == 3, "the original notebook is not modified"


def test_render_tolerances_is_valid_toml_the_judge_can_read():
    text = render_tolerances(
        {
            "size.dynamic_ratio_max": {"value": 0.3367, "worst": 0.27, "rule": "r"},
            "quantize.group_agree_min.ties": {"value": 4, "worst": 4, "rule": "worst count"},
        },
        {"command": "autograder calibrate x --runs 1", "margins": {"a.b": 1.25}},
    )
    data = tomllib.loads(text)
    assert lookup(data, "size.dynamic_ratio_max")[0]["value"] == 0.3367
    assert lookup(data, "quantize.group_agree_min.ties")[0]["value"] == 4
    assert data["provenance"]["margins"] == {"a.b": 1.25}


@pytest.mark.kernel
@pytest.mark.slow
def test_calibrate_one_run_end_to_end(assignment07, tmp_path, monkeypatch):
    """The real command on one seed: the jail, the probe, two hidden secrets of its own (the
    deployment's secret file does not even exist), a complete file."""
    from autograder import hidden_secret
    from autograder.authoring.calibrate import calibrate

    monkeypatch.setenv(hidden_secret.SECRET_ENV, str(tmp_path / "no-such.secret"))
    messages: list[str] = []
    path = calibrate(assignment07, runs=1, output=tmp_path / "tolerances.toml", progress=messages.append)
    data = tomllib.loads(path.read_text())
    assert data["provenance"]["runs"] == 1 and data["provenance"]["reference_scores"] == [100.0]
    assert len(set(data["provenance"]["hidden_secrets"])) == 2
    committed = {k for k, _ in _entries(assignment07.tolerances())}
    assert {k for k, _ in _entries(data)} == committed
    assert data["dynamic_model"]["accuracy_drop_max"]["samples"] == 2, "models.* tolerances see two hidden sets per run"
    assert messages and messages[0].startswith("run 1/1")
