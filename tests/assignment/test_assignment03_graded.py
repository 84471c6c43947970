"""Assignment 03 end to end, through the real jail, kernels and ONNX Runtime (slow).

- every bundled example, graded as one batch with -j 2, gets exactly the scores
  ``expected_examples_03.toml`` states, check by check (batch works for a second lesson);
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
from autograder.batch import run_batch
from needs import needs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ID = "03-export-parity"
EXAMPLES = ROOT / "assignments" / ID / "examples"
EXPECTED = tomllib.loads((ROOT / "tests" / "assignment" / "expected_examples_03.toml").read_text())


@pytest.fixture(scope="module")
def a03():
    return load_assignment(ID, ROOT)


@pytest.fixture(scope="module")
@needs("kernel")
def graded(a03, tmp_path_factory):
    out = tmp_path_factory.mktemp("examples03")
    summary = run_batch(EXAMPLES, out, assignment=a03, jobs=2, progress=False)
    return summary, out


def test_every_example_gets_its_expected_scores(graded, results_validator):
    summary, out = graded
    rows = {r["name"]: r for r in summary.rows}
    assert sorted(rows) == sorted(Path(n).stem for n in EXPECTED)
    for name, expected in EXPECTED.items():
        row = rows[Path(name).stem]
        assert row["status"] == "ok", f"{name}: {row['status']} {row['reason']}"
        assert row["checks"] == expected["scores"], f"{name}: {row['failures']}"
        results_validator(json.loads((out / Path(name).stem / "results.json").read_text()))


def test_the_deviating_exports_say_what_the_grader_adapted(graded):
    _, out = graded
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
    assert scaler["max_abs_diff"] > 0.5 and scaler["onnx_accuracy"] < 0.8 < scaler["sklearn_accuracy"]


def test_a_float32_parity_report_is_judged_by_its_own_arithmetic_in_results(graded):
    _, out = graded
    m = json.loads((out / "float32_subtraction" / "measurements.json").read_text())
    assert m["parity"]["notebook_arithmetic"] == "float32"
    assert m["parity"]["notebook_max_abs_diff"] != m["parity"]["public_max_abs_diff"], "a float32 number"
    assert m["reported"]["fields"]["max_abs_diff"]["ok"] and m["reported"]["honest_share"] == 1.0
    ref = json.loads((out / "reference" / "measurements.json").read_text())
    assert ref["parity"]["notebook_arithmetic"] == "float64"


def test_the_summary_draws_the_assignments_own_scatter(graded):
    _, out = graded
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


def test_gradescope_refuses_a_notebook_of_another_lesson_without_running_it(gradescope_root, monkeypatch,
                                                                            results_validator):
    from autograder import pipeline

    monkeypatch.setattr(pipeline, "grade_notebook", lambda *a, **k: pytest.fail("nothing may run"))
    other = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"
    results = _run(gradescope_root, other, monkeypatch)
    results_validator(results)
    assert results["score"] == 0.0
    assert ("Your notebook was made for assignment '07-quantization' (its autograder metadata), "
            f"not '{ID}'") in results["output"]


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
