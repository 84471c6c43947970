"""Assignment 03, one mistake costs one check, on the grading code alone (fast; the real-jail runs of
the example mistakes are graded by the conformance suite, tests/conformance/):

- parity_report's case groups: a table of common mistakes, each with the groups it may fail; it
  must fail one of them and agree everywhere else, for any seed of the hidden cases (hypothesis),
  so "works for three classes" tests the number of classes and nothing else;
- RESULTS is judged for honesty: recomputed the way the notebook's own parity_report computes
  (its arithmetic, learnt from its answers on the grader's inputs), not for correctness again;
- parity is judged against the lesson's pipeline as the grader fits it, whatever
  sklearn_probabilities returns, and RESULTS' comparison is evidence only when
  sklearn_probabilities is that pipeline (a table of styles and echoes, on real exports).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.assignment import load_assignment
from autograder.measure.onnx_load import WorkerRun
from autograder.probe_format import CaseOutput, ProbeResult

ROOT = Path(__file__).resolve().parents[2]
ID = "03-export-parity"


@pytest.fixture(scope="module")
def grading():
    return load_assignment(ID, ROOT).grading


# ── parity_report: the mistakes and the only groups each may fail ───────────────────────────────


def honest(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b))), float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))


def float32_subtraction(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.max(np.abs(a - b))), float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))


def binary_only_agreement(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b))), float(np.mean((a[:, 1] > 0.5) == (b[:, 1] > 0.5)))


def last_index_on_ties(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    last = lambda p: p.shape[1] - 1 - p[:, ::-1].argmax(axis=1)  # noqa: E731
    return float(np.max(np.abs(a - b))), float(np.mean(last(a) == last(b)))


def mean_not_max(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.mean(np.abs(a - b))), float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))


# mistake → the groups whose cases it may fail (it must fail at least one of them)
MISTAKES = {
    float32_subtraction: {"float64_vs_float32", "float64_inputs"},
    binary_only_agreement: {"three_classes"},
    last_index_on_ties: {"ties"},
    mean_not_max: {"float64_vs_float32", "three_classes", "float64_inputs", "float32_inputs"},
}


def _outputs(cases, fn) -> ProbeResult:
    out = {c.id: CaseOutput("ok", [np.array(v) for v in fn(c.raw(0), c.raw(1))], is_tuple=True) for c in cases}
    return ProbeResult(True, None, out, {"parity_report": "defined"}, None, None)


def _failing_groups(grading, cases, fn) -> set[str]:
    measured = grading.functions.measure_functions(cases, _outputs(cases, fn))["parity_report"]
    return {g for g, r in measured["groups"].items() if r["agree"] < r["cases"]}


def _cases(grading, seed: int):
    return grading.functions.parity_report_cases(np.random.default_rng(seed))


@pytest.mark.parametrize("mistake", list(MISTAKES), ids=lambda f: f.__name__)
def test_each_mistake_fails_only_the_groups_that_name_it(grading, mistake):
    cases = [c for c in grading.functions.probe_cases() if c.function == "parity_report"]
    assert _failing_groups(grading, cases, honest) == set()
    failing = _failing_groups(grading, cases, mistake)
    assert failing and failing <= MISTAKES[mistake], f"{mistake.__name__} fails {failing}"


@pytest.mark.parametrize(
    "mistake, first",
    [
        (float32_subtraction, {"float64_vs_float32", "float64_inputs"}),
        (binary_only_agreement, {"three_classes"}),
        (last_index_on_ties, {"ties"}),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_the_first_disagreement_the_student_reads_names_the_mistakes_kind(grading, mistake, first):
    cases = [c for c in grading.functions.probe_cases() if c.function == "parity_report"]
    measured = grading.functions.measure_functions(cases, _outputs(cases, mistake))["parity_report"]
    assert measured["first_mismatch"]["group"] in first


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**63 - 1))
def test_for_any_seed_a_precision_or_tie_slip_never_fails_three_classes(grading, seed):
    cases = _cases(grading, seed)
    assert _failing_groups(grading, cases, honest) == set()
    for mistake, allowed in MISTAKES.items():
        failing = _failing_groups(grading, cases, mistake)
        assert failing and failing <= allowed, f"seed {seed}: {mistake.__name__} fails {failing}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**63 - 1))
def test_three_class_inputs_hold_precision_and_ties_fixed(grading, seed):
    """float64 arrays of float32-exact values, one most probable class per row, rows summing to 1."""
    three = [c for c in _cases(grading, seed) if c.group == "three_classes"]
    assert len(three) == 3
    for case in three:
        for p in (case.raw(0), case.raw(1)):
            assert p.dtype == np.float64 and p.shape[1] == 3
            assert np.array_equal(p.astype(np.float32).astype(np.float64), p), f"{case.id}: not float32-exact"
            top = np.sort(p, axis=1)
            assert np.all(top[:, -1] > top[:, -2]), f"{case.id}: a tie for the most probable class"
            assert np.all(p >= 0) and np.all(np.abs(p.sum(axis=1) - 1) <= 1e-12)
        assert float32_subtraction(case.raw(0), case.raw(1)) == honest(case.raw(0), case.raw(1))


# ── RESULTS: honesty, judged the way the notebook's parity_report computes ──────────────────────


@pytest.mark.parametrize(
    "fn, arithmetic",
    [
        (honest, "float64"),
        (float32_subtraction, "float32"),
        (binary_only_agreement, "float64"),
        (mean_not_max, "float64 mean"),
    ],
)
def test_the_notebooks_arithmetic_is_learnt_from_its_answers(grading, fn, arithmetic):
    cases = grading.functions.probe_cases()
    assert (
        grading.functions.parity_arithmetic(cases, _outputs([c for c in cases if c.function == "parity_report"], fn))
        == arithmetic
    )


def test_no_answers_means_no_arithmetic(grading):
    cases = grading.functions.probe_cases()
    raised = ProbeResult(
        True,
        None,
        {c.id: CaseOutput("raised", error={"type": "NotImplementedError"}) for c in cases},
        {"parity_report": "defined"},
        None,
        None,
    )
    assert grading.functions.parity_arithmetic(cases, raised) is None
    assert grading.functions.parity_arithmetic(cases, ProbeResult(False, "no probe", {}, {}, None, None)) is None


def _parity_and_results(grading, fn, arithmetic, seed: int = 0):
    """The parity section of a student whose sklearn_probabilities is the lesson's pipeline and whose
    ONNX model differs from it by noise (1e-5, drawn from ``seed``),
    and the RESULTS that notebook computes with ``fn`` as its parity_report."""
    rng = np.random.default_rng(seed)
    ref = _contract(grading)
    # noise where a probability is not saturated: there a float32 subtraction rounds the difference
    onnx = {s: (p + rng.normal(0.0, 1e-5, p.shape) * p * (1 - p)).astype(np.float32) for s, p in ref.items()}
    cases = grading.functions.sklearn_cases()
    probe = _sklearn_probe(cases, ref["public_test"].copy())
    run = WorkerRun(True, outputs={f"{s}__probabilities": onnx[s] for s in onnx})
    parity = grading.parity.measure_parity(cases, probe, {"valid": True}, run, arithmetic)
    max_abs_diff, agreement = fn(ref["public_test"], onnx["public_test"])
    results = {
        "max_abs_diff": max_abs_diff,
        "label_agreement": agreement,
        "onnx_accuracy": float(np.mean(onnx["public_test"].argmax(axis=1) == grading.data.public_split().y_test)),
    }
    return parity, results


def _contract(grading) -> dict[str, np.ndarray]:
    c = grading.data.contract_outputs()
    return {"hidden": c.hidden, "hidden_edge": c.hidden_edge, "public_test": c.public_test}


def _sklearn_probe(cases, p_test) -> ProbeResult:
    """What the probe records when sklearn_probabilities returns ``p_test`` on X_test."""
    values = {c.id: CaseOutput("ok", [np.asarray(p_test)]) for c in cases}
    return ProbeResult(True, None, values, {"sklearn_probabilities": "defined"}, None, None)


@pytest.mark.parametrize("seed", range(5))
def test_a_float32_parity_report_reports_honestly(grading, seed):
    parity, results = _parity_and_results(grading, float32_subtraction, "float32", seed)
    assert parity["notebook_arithmetic"] == "float32"
    assert parity["notebook_max_abs_diff"] == results["max_abs_diff"], "what the notebook's own arithmetic gives"
    reported = grading.parity.measure_reported(results, None, parity)
    assert reported["honest_share"] == 1.0, reported["problems"]
    contract, _ = _parity_and_results(grading, float32_subtraction, None, seed)
    assert contract["notebook_arithmetic"] == "float64", "no arithmetic learnt: the contract's"
    assert grading.parity.measure_reported(results, None, contract)["honest"] == 2


def test_a_report_that_is_not_what_parity_report_gives_is_still_caught(grading):
    parity, results = _parity_and_results(grading, honest, "float64")
    assert grading.parity.measure_reported(results, None, parity)["honest_share"] == 1.0
    for field, wrong in [
        ("max_abs_diff", results["max_abs_diff"] / 10),
        ("label_agreement", 0.5),
        ("onnx_accuracy", 100 * results["onnx_accuracy"]),
    ]:
        reported = grading.parity.measure_reported({**results, field: wrong}, None, parity)
        assert reported["honest"] == 2 and not reported["fields"][field]["ok"], field
    # a float32 number from a notebook whose parity_report computes in float64 is not what it gives
    f32, _ = _parity_and_results(grading, float32_subtraction, "float32")
    assert f32["notebook_max_abs_diff"] != parity["notebook_max_abs_diff"]
    reported = grading.parity.measure_reported({**results, "max_abs_diff": f32["notebook_max_abs_diff"]}, None, parity)
    assert "your parity_report gives (float64" in reported["fields"]["max_abs_diff"]["reason"]


def test_a_re_measurement_that_is_not_finite_proves_nothing(grading):
    parity, results = _parity_and_results(grading, float32_subtraction, "float32")
    reported = grading.parity.measure_reported(results, None, {**parity, "notebook_max_abs_diff": float("inf")})
    assert not reported["fields"]["max_abs_diff"]["ok"] and "not a finite number" in reported["problems"][0]


# ── parity is anchored to the lesson's pipeline, as the grader fits it ────────────────────────


@pytest.fixture(scope="module")
def exports(grading):
    """The real ONNX exports (skl2onnx, run by ONNX Runtime) of the lesson's pipeline and of its
    classifier alone, on each parity set."""
    import onnxruntime as ort
    from skl2onnx import to_onnx

    pipe = grading.data._fitted()
    hidden, public = grading.data.hidden_sets(), grading.data.public_split()
    sets = {"hidden": hidden.X, "hidden_edge": hidden.X_edge, "public_test": public.X_test}
    out = {}
    for name, model in (("pipeline", pipe), ("classifier_alone", pipe[-1])):
        onx = to_onnx(model, public.X_train[:1], options={"zipmap": False})
        session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
        out[name] = {s: session.run(["probabilities"], {"X": x})[0] for s, x in sets.items()}
    return out


def _another_blas(p: np.ndarray) -> np.ndarray:
    q = p.copy()  # a few values off by what another BLAS kernel gives (measured: 1.2e-9)
    q[:3] += np.array([1.2e-9, -1.2e-9])
    return q


# sklearn_probabilities on X_test → whether it is the lesson's pipeline (evidence for RESULTS)
SKLEARN_STYLES = [
    ("the pipeline's predict_proba", lambda ref, onnx: ref, True),
    ("rounded to float32", lambda ref, onnx: ref.astype(np.float32), True),
    ("the kernel's BLAS", lambda ref, onnx: _another_blas(ref), True),
    ("an echo of the ONNX model", lambda ref, onnx: onnx, False),
    ("an echo cast to float64", lambda ref, onnx: onnx.astype(np.float64), False),
    (
        "an echo with noise",
        lambda ref, onnx: onnx + np.random.default_rng(0).normal(0.0, 1e-7, onnx.shape),
        False,
    ),
    ("another pipeline", lambda ref, onnx: ref[:, ::-1], False),
    ("one row short", lambda ref, onnx: ref[1:], False),
]


@pytest.mark.parametrize("style, make, is_contract", SKLEARN_STYLES, ids=[s[0] for s in SKLEARN_STYLES])
@pytest.mark.parametrize("export", ["pipeline", "classifier_alone"])
def test_parity_is_judged_against_the_lessons_pipeline_whatever_sklearn_probabilities_returns(
    grading, exports, style, make, is_contract, export
):
    ref, onnx = _contract(grading), exports[export]
    cases = grading.functions.sklearn_cases()
    probe = _sklearn_probe(cases, make(ref["public_test"], onnx["public_test"]))
    run = WorkerRun(True, outputs={f"{s}__probabilities": onnx[s] for s in onnx})
    parity = grading.parity.measure_parity(cases, probe, {"valid": True}, run, "float64")
    tolerances = load_assignment(ID, ROOT).tolerances()["parity"]
    faithful = parity["max_abs_diff"] <= tolerances["max_abs_diff_max"]["value"]
    assert faithful == (export == "pipeline"), f"{export}: max |Δp| {parity['max_abs_diff']}, whatever {style}"
    assert (parity["edge_max_abs_diff"] <= tolerances["edge_max_abs_diff_max"]["value"]) == faithful
    assert parity.get("sklearn_is_contract", False) is is_contract
    results = {"max_abs_diff": 0.0, "label_agreement": 1.0, "onnx_accuracy": parity["onnx_accuracy"]}
    reported = grading.parity.measure_reported(results, None, parity)
    assert reported["fields"]["onnx_accuracy"]["ok"], "the grader's own accuracy is judged either way"
    if is_contract:
        assert "notebook_error" not in parity and parity["notebook_arithmetic"] == "float64"
    else:
        wrong_shape = style == "one row short"  # refused before any comparison, with its own reason
        assert (parity["notebook_error"] == grading.parity.NOT_THE_PIPELINE) is not wrong_shape
        for field in ("max_abs_diff", "label_agreement"):
            assert reported["fields"][field]["measured"] is None and not reported["fields"][field]["ok"]
        assert reported["honest_share"] < 1 and reported["present"], "no evidence: those two earn nothing"


def test_the_echo_of_the_real_export_is_outside_the_window_and_the_pipeline_inside(grading, exports):
    """The window between an honest sklearn_probabilities and an echo: the real export is 4.4e-7 off
    the pipeline on X_test, float32 rounding of the pipeline at most 6e-8."""
    ref = _contract(grading)["public_test"]
    echo = np.max(np.abs(exports["pipeline"]["public_test"] - ref))
    rounded = np.max(np.abs(ref.astype(np.float32) - ref))
    assert rounded <= grading.parity.SAME_PIPELINE_ATOL < echo
    assert echo > 2 * grading.parity.SAME_PIPELINE_ATOL, "an echo must stay well outside, not at the edge"


def test_the_contract_pipeline_is_fitted_once_and_read_only(grading):
    a, b = grading.data.contract_outputs(), grading.data.contract_outputs()
    assert a is b and not a.hidden.flags.writeable and not a.public_test.flags.writeable
    assert a.public_test.shape == (len(grading.data.public_split().X_test), 2) and a.public_test.dtype == np.float64
    accuracy = np.mean(a.public_test.argmax(axis=1) == grading.data.public_split().y_test)
    assert accuracy > 0.9, "the contract's pipeline classifies X_test"
