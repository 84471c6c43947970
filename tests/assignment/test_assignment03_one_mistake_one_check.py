"""Assignment 03, one mistake costs one check, on the grading code alone (fast; the real-jail runs of
the example mistakes are graded by the conformance suite, tests/conformance/):

- parity_report's case groups: a table of common mistakes, each with the groups it may fail; it
  must fail one of them and agree everywhere else, for any seed of the hidden cases (hypothesis),
  so "works for three classes" tests the number of classes and nothing else;
- RESULTS is judged for honesty: recomputed the way the notebook's own parity_report computes
  (its arithmetic, learnt from its answers on the grader's inputs), not for correctness again.
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
    """The parity section of a student whose ONNX model differs from scikit-learn by float32
    rounding, and the RESULTS that notebook computes with ``fn`` as its parity_report."""
    rng = np.random.default_rng(seed)
    cases = grading.functions.sklearn_cases()
    y_test = grading.data.public_split().y_test
    sk, onnx, values = {}, {}, {}
    for c in cases:
        n = len(c.raw(0))
        p1 = rng.uniform(0, 1, n)
        if c.group == "public_test":  # a model that classifies X_test well
            p1 = np.where(y_test == 1, 0.5 + p1 / 2, p1 / 2)
        sk[c.group] = np.stack([1 - p1, p1], axis=1)
        onnx[c.group] = sk[c.group].astype(np.float32)
        values[c.id] = CaseOutput("ok", [sk[c.group]])
    probe = ProbeResult(True, None, values, {"sklearn_probabilities": "defined"}, None, None)
    run = WorkerRun(True, outputs={f"{s}__probabilities": onnx[s] for s in onnx})
    parity = grading.parity.measure_parity(cases, probe, {"valid": True}, run, arithmetic)
    max_abs_diff, agreement = fn(sk["public_test"], onnx["public_test"])
    results = {
        "max_abs_diff": max_abs_diff,
        "label_agreement": agreement,
        "onnx_accuracy": float(np.mean(onnx["public_test"].argmax(axis=1) == y_test)),
    }
    return parity, results


@pytest.mark.parametrize("seed", range(5))
def test_a_float32_parity_report_reports_honestly(grading, seed):
    parity, results = _parity_and_results(grading, float32_subtraction, "float32", seed)
    assert parity["notebook_arithmetic"] == "float32"
    assert parity["notebook_max_abs_diff"] != parity["public_max_abs_diff"], "the grader's own number stays float64"
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


def test_an_echo_of_the_onnx_model_is_no_comparison(grading):
    rng = np.random.default_rng(0)
    onnx = {s: rng.random((20, 2)).astype(np.float32) for s in grading.functions.SKLEARN_SETS}
    echoed = {s: p.astype(np.float64) for s, p in onnx.items()}  # cast back to float64: still the same numbers
    assert grading.parity.echo(echoed, onnx)
    honest_sk = {s: p.astype(np.float64) + 1e-9 for s, p in onnx.items()}  # float64 numbers near the graph's
    assert not grading.parity.echo(honest_sk, onnx)
    honest_sk = {s: p.astype(np.float64) for s, p in onnx.items()}
    honest_sk[next(iter(honest_sk))][0, 0] = 0.123456789  # one element of one set differs: a comparison
    assert not grading.parity.echo(honest_sk, onnx)
    one_set_differs = {**echoed, next(iter(echoed)): echoed[next(iter(echoed))] * 0.5}
    assert not grading.parity.echo(one_set_differs, onnx)
