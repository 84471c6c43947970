"""Assignment 03 end to end, through the real jail, kernels and ONNX Runtime (slow). That every
example gets the scores ``reference/03-export-parity/expected_examples.toml`` states is the
conformance suite's (tests/conformance/); the examples are graded once per session, as one batch
(``lessons``, tests/conftest.py), and read here for what is particular to lesson 03:

- the deviating exports say what the grader adapted, the float32 report is judged by its own
  arithmetic, the summary draws the lesson's own scatter;
- the Gradescope zip of 03 grades its reference solution on a simulated ``/autograder`` and
  refuses lesson 07's notebook with a one-line reason, running nothing;
- ``calibrate`` works for 03 (one run).
"""

from __future__ import annotations

import json
import tomllib
import zipfile
from pathlib import Path

import pytest

from autograder.assignment import load_assignment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ID = "03-export-parity"
EXAMPLES = ROOT / "assignments" / ID / "examples"


@pytest.fixture(scope="module")
def a03():
    return load_assignment(ID, ROOT)


@pytest.fixture(scope="module")
def graded(lessons):
    """The batch's folder, as the session's one grading of 03's examples wrote it."""
    lesson = lessons(ROOT, ID)
    assert lesson.graded
    return lesson.workdir / "batch"


@pytest.mark.kernel
def test_the_deviating_exports_say_what_the_grader_adapted(graded):
    out = graded
    f64 = json.loads((out / "float64_export" / "measurements.json").read_text())["models"]["pipeline"]
    assert f64["adapted"] == ["input X fed as float64, the type the model declares"]
    assert "input X is float64, expected float32" in f64["problems"]
    named = json.loads((out / "float_input_name" / "measurements.json").read_text())["models"]["pipeline"]
    assert named["adapted"] == ["input X fed to the model's input float_input (by position)"]
    assert "inputs are ['float_input'], expected exactly ['X']" in named["problems"]
    batch = json.loads((out / "fixed_batch_of_one" / "measurements.json").read_text())["models"]["pipeline"]
    assert batch["adapted"] == ["inputs fed 1 row(s) per call, the fixed batch size the model declares"]
    assert any("fixed batch size 1" in p for p in batch["problems"])
    zipmap = json.loads((out / "zipmap_left_on" / "measurements.json").read_text())["models"]["pipeline"]
    assert any("ZipMap is on" in p for p in zipmap["problems"])
    scaler = json.loads((out / "scaler_left_out" / "measurements.json").read_text())["parity"]
    assert scaler["max_abs_diff"] > 0.5 and scaler["onnx_accuracy"] < 0.8 < scaler["contract_accuracy"]
    assert scaler["sklearn_is_contract"], "its sklearn_probabilities is the lesson's pipeline: RESULTS is evidence"


@pytest.mark.kernel
@pytest.mark.parametrize("example", ["gamed_echo", "gamed_echo_without_scaler", "gamed_noisy_echo_without_scaler"])
def test_an_echo_in_sklearn_probabilities_is_no_evidence_in_the_real_kernel(graded, example):
    """Through the jail: the kernel's scikit-learn is the lesson's pipeline to within 1e-7 (another
    BLAS moves a few values ~1e-9), an echo of the exported graph is not, bit for bit or noisy."""
    m = json.loads((graded / example / "measurements.json").read_text())
    assert m["parity"]["sklearn_is_contract"] is False
    assert m["parity"]["sklearn_max_abs_diff_from_contract"] > 2 * 1e-7
    for field in ("max_abs_diff", "label_agreement"):
        assert m["reported"]["fields"][field]["measured"] is None and not m["reported"]["fields"][field]["ok"]
    ref = json.loads((graded / "reference" / "measurements.json").read_text())["parity"]
    assert ref["sklearn_is_contract"] and ref["sklearn_max_abs_diff_from_contract"] <= 1e-7


@pytest.mark.kernel
def test_a_float32_parity_report_is_judged_by_its_own_arithmetic_in_results(graded):
    out = graded
    m = json.loads((out / "float32_subtraction" / "measurements.json").read_text())
    assert m["parity"]["notebook_arithmetic"] == "float32"
    assert m["parity"]["notebook_max_abs_diff"] != m["parity"]["public_max_abs_diff"], "a float32 number"
    assert m["reported"]["fields"]["max_abs_diff"]["ok"] and m["reported"]["honest_share"] == 1.0
    ref = json.loads((out / "reference" / "measurements.json").read_text())
    assert ref["parity"]["notebook_arithmetic"] == "float64"


@pytest.mark.kernel
def test_the_summary_draws_the_assignments_own_scatter(graded):
    out = graded
    page = (out / "summary.html").read_text()
    assert "<h2>Parity of the exported pipelines</h2>" in page
    assert "Size vs drift" not in page, "no lesson-07 plot in another lesson's summary"


# ── Gradescope ───────────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def gradescope_root(tmp_path_factory):
    from autograder.gradescope.build import build_zip

    tmp = tmp_path_factory.mktemp("gs03")
    report = build_zip(ID, tmp / "autograder.zip")
    assert f"assignments/{ID}/grading/parity.py" in report.entries
    assert f"reference/{ID}/tolerances.toml" in report.entries
    assert not any("/examples/" in e or e.endswith("solution.ipynb") for e in report.entries)
    root = tmp / "autograder"
    with zipfile.ZipFile(report.zip_path) as zf:
        zf.extractall(root / "source")
    return root


def _run(root: Path, notebook: Path, monkeypatch) -> dict:
    from autograder.gradescope import run as gradescope

    for sub in ("submission", "results"):
        if (root / sub).exists():
            for f in (root / sub).iterdir():
                f.unlink()
        (root / sub).mkdir(exist_ok=True)
    (root / "submission" / notebook.name).write_bytes(notebook.read_bytes())
    monkeypatch.setenv("AUTOGRADER_ROOT", str(root / "source"))
    return gradescope.run(root)


@pytest.mark.kernel
def test_gradescope_grades_the_reference_solution(gradescope_root, monkeypatch, results_validator):
    results = _run(gradescope_root, EXAMPLES / "reference.ipynb", monkeypatch)
    results_validator(results)
    assert results["score"] == 100.0
    assert results["extra_data"]["gradescope"]["assignment"] == ID
    assert "leaderboard" not in results, "lesson 03 defines no leaderboard"


def test_gradescope_refuses_a_notebook_of_another_lesson_without_running_it(
    gradescope_root, monkeypatch, results_validator
):
    from autograder import pipeline

    monkeypatch.setattr(pipeline, "grade_notebook", lambda *a, **k: pytest.fail("nothing may run"))
    other = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"
    results = _run(gradescope_root, other, monkeypatch)
    results_validator(results)
    assert results["score"] == 0.0
    assert (
        f"Your notebook was made for assignment '07-quantization' (its autograder metadata), not '{ID}'"
    ) in results["output"]


# ── calibrate ────────────────────────────────────────────────────────────────────────────────


@pytest.mark.kernel
def test_calibrate_one_run_end_to_end(a03, tmp_path):
    from autograder.authoring.calibrate import calibrate

    messages: list[str] = []
    path = calibrate(a03, runs=1, output=tmp_path / "tolerances.toml", progress=messages.append)
    data = tomllib.loads(path.read_text())
    assert data["provenance"]["reference_scores"] == [100.0]
    assert len(data["provenance"]["hidden_secrets"]) == 1, "03 has no calibration_samples hook: one secret per run"
    assert data["parity"]["label_agreement_min"]["step"] == 0.001
    assert data["parity"]["max_abs_diff_max"]["samples"] == 1
    committed = a03.tolerances()
    assert {k for k in data if k != "provenance"} == {k for k in committed if k != "provenance"}
    assert messages and messages[0].startswith("run 1/1")
