"""Assignment 03 without running notebooks: the plain (no otter) build, the examples, the rubric and
its grading code on known inputs. The real-jail runs are in test_assignment03_graded.py; what every
lesson must satisfy (built files up to date, the table, the tolerances, the zip, the grades) is the
conformance suite's (tests/conformance/)."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.assignment import load_assignment
from autograder.authoring.build import build_assignment, build_notebooks
from autograder.probe_format import CaseOutput, ProbeResult

ROOT = Path(__file__).resolve().parents[2]
ID = "03-export-parity"
EXAMPLES = ROOT / "assignments" / ID / "examples"
EXPECTED = tomllib.loads((ROOT / "reference" / ID / "expected_examples.toml").read_text())
STUBS = ("sklearn_probabilities", "onnx_probabilities", "parity_report")


@pytest.fixture(scope="module")
def a03():
    return load_assignment(ID, ROOT)


@pytest.fixture(scope="module")
def make_examples():
    path = ROOT / "reference" / ID / "make_examples.py"
    spec = importlib.util.spec_from_file_location("make_examples_03_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


# ── the plain build ──────────────────────────────────────────────────────────────────────────


def test_there_is_no_otter_master(a03):
    assert not (a03.reference_folder / "master.ipynb").exists(), "assignment 03 proves the build without otter"


def test_the_build_is_deterministic_and_marks_the_assignment(a03, tmp_path):
    first = build_notebooks(a03)
    assert first == build_notebooks(a03)
    for rel, text in first.items():
        assert _read_text(text).metadata["autograder"] == {"assignment": ID}, rel
    written = build_assignment(a03, out_root=tmp_path)
    assert len(written.written) == len(first) and build_assignment(a03, out_root=tmp_path).changed == []


def _read_text(text: str) -> nbformat.NotebookNode:
    return nbformat.reads(text, as_version=4)


def test_student_notebook_has_stubs_and_the_solution_fills_them(a03):
    student, solution = _read(a03.notebook), _read(a03.reference_folder / "solution.ipynb")
    assert [c.cell_type for c in student.cells] == [c.cell_type for c in solution.cells]
    assert [c.source for c in student.cells if c.cell_type == "markdown"] == [
        c.source for c in solution.cells if c.cell_type == "markdown"
    ]
    for name in STUBS:
        assert f'raise NotImplementedError("{name}")' in _code(student)
    assert "NotImplementedError" not in _code(solution) and "TODO" not in _code(solution)
    for snippet in (
        'options={"zipmap": False}',
        "np.argmax(a, axis=1) == np.argmax(b, axis=1)",
        "pipe.predict_proba(X)",
    ):
        assert snippet in _code(solution) and snippet not in _code(student)
    # the seed is the contract's: the grader fits the lesson's pipeline with it, calibration does not vary it
    assert not [c for c in student.cells if "parameters" in c.metadata.get("tags", [])]
    assert [c.source.split("  #")[0] for c in student.cells if c.source.startswith("MODEL_SEED")] == ["MODEL_SEED = 0"]
    assert a03.grading.data.CONTRACT_SEED == 0  # the seed the grader fits the lesson's pipeline with


def test_self_checks_print_instead_of_raising(a03):
    """A failing self-check must never cost the execution check: they go through self_check()."""
    checks = [c.source for c in _read(a03.notebook).cells if c.cell_type == "code" and "self_check(" in c.source]
    assert len(checks) >= 4
    assert not any(re.search(r"^\s*assert\b", src, re.M) for src in checks)


def test_plain_build_needs_both_notebooks(tmp_path):
    from autograder.errors import AssignmentError

    folder = tmp_path / "assignments" / "plain-01"
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text('id = "plain-01"\nnotebook = "plain.ipynb"\n')
    (tmp_path / "reference" / "plain-01").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), folder / "plain.ipynb")
    a = load_assignment("plain-01", tmp_path)
    with pytest.raises(AssignmentError, match="solution.ipynb"):
        build_notebooks(a)
    solution = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 2", execution_count=3)])
    nbformat.write(solution, tmp_path / "reference" / "plain-01" / "solution.ipynb")
    built = build_notebooks(a)
    assert sorted(built) == ["assignments/plain-01/plain.ipynb", "reference/plain-01/solution.ipynb"]
    sol = _read_text(built["reference/plain-01/solution.ipynb"])
    assert sol.cells[0].execution_count is None and sol.metadata["autograder"] == {"assignment": "plain-01"}


# ── the examples ─────────────────────────────────────────────────────────────────────────────


def test_the_table_states_every_checks_points_and_each_mistake_costs_one_check(a03):
    checks = {c["id"]: c["points"] for c in a03.rubric()["checks"]}
    assert EXPECTED["reference.ipynb"]["scores"] == checks
    mistakes = {k: v for k, v in EXPECTED.items() if "loses" in v}
    assert len(mistakes) >= 3 and {"float64_export.ipynb", "zipmap_left_on.ipynb", "scaler_left_out.ipynb"} <= set(
        mistakes
    )
    for name, v in mistakes.items():
        lost = {c for c, points in checks.items() if v["scores"][c] < points}
        assert lost == {v["loses"]}, f"{name}: the expected scores lose points at {lost}, not only at {v['loses']}"


def test_the_script_and_the_expectations_agree(make_examples):
    assert {m.file: m.check for m in make_examples.MISTAKES} == {
        k: v["loses"] for k, v in EXPECTED.items() if "loses" in v
    }


@pytest.mark.parametrize("name", sorted(k for k, v in EXPECTED.items() if "loses" in v))
def test_each_mistake_states_its_check_and_is_the_solution_with_one_cell_edited(name):
    reference, example = _read(EXAMPLES / "reference.ipynb"), _read(EXAMPLES / name)
    assert example.cells[0].cell_type == "markdown" and f"`{EXPECTED[name]['loses']}`" in example.cells[0].source
    changed = [i for i, (a, b) in enumerate(zip(reference.cells, example.cells[1:])) if a.source != b.source]
    assert len(example.cells) == len(reference.cells) + 1 and len(changed) == 1, f"{name}: edited cells {changed}"


# ── rubric and tolerances ────────────────────────────────────────────────────────────────────


def test_rubric_totals_100_and_the_calibration_varied_the_secret_not_the_seed(a03):
    """(That every tolerance is calibrated, current and follows from its worst case is the
    conformance suite's, for every lesson.) Parity compares the export with the lesson's pipeline
    fitted with the contract's seed, so a run with another seed would be another pipeline: the runs
    vary the hidden-data secret only."""
    tolerances = a03.tolerances()
    assert sum(c["points"] for c in a03.rubric()["checks"]) == 100
    prov = tolerances["provenance"]
    assert prov["runs"] >= 10 and not prov.get("parameters")
    assert len(set(prov["hidden_secrets"])) == prov["runs"], "every run draws its own hidden rows"
    assert prov["versions"]["skl2onnx"] != "missing" and prov["versions"]["scikit-learn"] != "missing"


# ── the grading code on known inputs ─────────────────────────────────────────────────────────


def test_parity_report_reference_and_its_per_group_tolerances(a03):
    fn = a03.grading.functions
    cases = [c for c in fn.probe_cases() if c.function == "parity_report"]
    honest = {
        c.id: CaseOutput("ok", [np.array(v) for v in fn.reference_parity(c.raw(0), c.raw(1))], is_tuple=True)
        for c in cases
    }

    def float32_version(c):  # subtract in float32: honest for float32 inputs only
        a, b = np.asarray(c.raw(0), np.float32), np.asarray(c.raw(1), np.float32)
        return CaseOutput(
            "ok", [np.array(float(np.max(np.abs(a - b)))), np.array(fn.reference_parity(a, b)[1])], is_tuple=True
        )

    functions = {"parity_report": "defined"}
    ok = fn.measure_functions(cases, ProbeResult(True, None, honest, functions, None, None))["parity_report"]
    assert ok["agree"] == ok["cases"] == len(cases)
    f32 = fn.measure_functions(
        cases, ProbeResult(True, None, {c.id: float32_version(c) for c in cases}, functions, None, None)
    )["parity_report"]
    assert f32["groups"]["float32_inputs"]["agree"] == f32["groups"]["float32_inputs"]["cases"]
    assert f32["groups"]["float64_inputs"]["agree"] < f32["groups"]["float64_inputs"]["cases"]


def test_reported_numbers_are_checked_against_the_graders(a03):
    parity = a03.grading.parity
    measured = {"notebook_max_abs_diff": 4.4e-07, "notebook_label_agreement": 1.0, "onnx_accuracy": 0.958041958041958}
    honest = parity.measure_reported(
        {"max_abs_diff": 4.4e-07, "label_agreement": 1.0, "onnx_accuracy": 0.958041958041958}, None, measured
    )
    assert honest["honest_share"] == 1.0 and honest["problems"] == []
    percent = parity.measure_reported(
        {"max_abs_diff": 4.4e-07, "label_agreement": 1.0, "onnx_accuracy": 95.8041958041958}, None, measured
    )
    assert percent["honest"] == 2 and "a percentage?" in percent["fields"]["onnx_accuracy"]["reason"]
    mean = parity.measure_reported(
        {"max_abs_diff": 4.0e-08, "label_agreement": 1.0, "onnx_accuracy": 0.958041958041958}, None, measured
    )
    assert not mean["fields"]["max_abs_diff"]["ok"], "a mean difference is not the largest one"
    missing = parity.measure_reported(None, "RESULTS is not defined", measured)
    assert missing["present"] is False and missing["problems"] == ["RESULTS is not defined"]
    cannot = parity.measure_reported({"max_abs_diff": 0.0}, None, {"error": "no model"})
    assert "cannot be re-measured: no model" in cannot["fields"]["max_abs_diff"]["reason"]


def test_hidden_parity_sets_are_new_points_of_the_data(a03):
    data = a03.grading.data
    hidden, public = data.hidden_sets(), data.public_split()
    assert hidden.X.shape == (1000, 30) and hidden.X_edge.shape == (500, 30) and hidden.X.dtype == np.float32
    assert not hidden.X.flags.writeable and data.hidden_sets() is hidden
    train = {tuple(r) for r in public.X_train.tolist()}
    assert not any(tuple(r) in train for r in hidden.X.tolist()), "hidden rows are not copies of training rows"
    lo, hi = public.X_train.min(axis=0), public.X_train.max(axis=0)
    assert np.mean((hidden.X_edge < lo) | (hidden.X_edge > hi)) > 0.05, "the edge set leaves the training range"
