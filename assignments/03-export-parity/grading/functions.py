"""Assignment 03's function checks: ``parity_report`` on the grader's inputs, and the calls of
``sklearn_probabilities`` that collects the student's scikit-learn outputs on X_test.

``parity_report(p_ref, p_onnx) -> (max_abs_diff, label_agreement)`` is the notebook's proof of
parity: the largest absolute difference of any probability, and the share of rows whose most
probable class (argmax, first index on ties) is the same. Its reference is plain NumPy in float64
(this module: an assignment supplies its own reference when no ONNX operator is one), compared
with autograder.measure.compare's tolerances per group of cases:

- inputs that are float64: float64 rounding (``FLOAT64_ROUNDING``). The honest computation (subtract
  in float64, take the max) is exact, and a difference computed after casting to float32 is not: a
  difference of 1e-9 between two probabilities vanishes in float32;
- inputs that are both float32: float32 rounding (the core's default, 4 eps of float32), since
  subtracting in float32 is as honest as in float64 there.

A group that a rubric part names (``three_classes``) tests that property only: every other one is
held at a value all correct solutions and the common mistakes agree on (float64 arrays of
float32-exact values, one most probable class per row), so a precision or tie slip costs the
"every hidden input" part and never "works for three classes". :func:`parity_arithmetic` tells
which arithmetic the notebook's parity_report follows, for judging RESULTS (``parity.py``).

``sklearn_probabilities(X)`` is called on the contract's X_test only (``data.py``): its outputs
are data for ``parity.py``, never compared here. They are the scikit-learn side of the notebook's
own comparison, which ``RESULTS`` reports; parity itself is judged against the contract's pipeline
as the grader fits it, so the notebook's function never sees the hidden rows. Every random input
here is drawn for the submission being graded (``hidden_secret.submission_generator``): one
student's leaked cases are not another's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.lesson import (
    FLOAT32_ROUNDING,
    Arg,
    Expect,
    ProbeCase,
    ProbeResult,
    Tolerance,
    hidden_secret,
    measure_functions as measure_all,
)

from . import data

PROBE_STREAM = "03-export-parity/probe-cases"  # parity_report's random inputs: a submission stream
SKLEARN_FUNCTION = "sklearn_probabilities"
SKLEARN_SETS = ("public_test",)
FLOAT64_ROUNDING = Tolerance(rtol=float(4 * np.finfo(np.float64).eps), atol=float(np.finfo(np.float64).tiny))
FLOAT32_GROUPS = ("float32_inputs",)


def _probs(rng: np.random.Generator, n: int, classes: int = 2) -> np.ndarray:
    """``n`` rows of ``classes`` probabilities, float64, rows summing to 1."""
    logits = rng.normal(0.0, 2.0, (n, classes))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


EXACT_STEP = 2.0**-16  # three-class probabilities are multiples of it: exact in float32 too
CLOSE = 2.0**-20  # a difference like float32 rounding's, still exact in float32


def _exact(p: np.ndarray) -> np.ndarray:
    """``p`` (rows of probabilities) as float64 multiples of :data:`EXACT_STEP` summing to exactly 1,
    with one most probable class per row (no ties). Their differences are exact in float32 as in
    float64, so every parity_report that subtracts and compares correctly, in either precision,
    gives the same answer: a three-class case tests the number of classes and nothing else."""
    q = np.floor(p * (1 / EXACT_STEP)) * EXACT_STEP
    q[:, -1] = 1.0 - q[:, :-1].sum(axis=1)
    rows = np.arange(len(q))
    top = np.argmax(q, axis=1)
    others = q.copy()
    others[rows, top] = -1.0
    tied = others.max(axis=1) == q[rows, top]
    second = np.argmax(others, axis=1)
    q[rows[tied], top[tied]] += EXACT_STEP  # the first of two equal classes wins by one step
    q[rows[tied], second[tied]] -= EXACT_STEP
    return q


def _close(p: np.ndarray) -> np.ndarray:
    """``p`` with :data:`CLOSE` moved from each row's largest to its smallest probability: the
    same classes win (an :func:`_exact` row's winner leads by a whole step), exact in float32."""
    rows = np.arange(len(p))
    q = p.copy()
    q[rows, np.argmax(p, axis=1)] -= CLOSE
    q[rows, np.argmin(p, axis=1)] += CLOSE
    return q


def _moved(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Two-class rows ``p`` with ``shift`` moved from the first class to the second: each row still
    sums to 1, so a row's winner is the same by argmax and by "p[:, 1] > 0.5" (noise drawn per
    class could leave both above 0.5, and a binary-only shortcut would then fail this group
    instead of only the three-class one)."""
    return p + np.hstack([-shift, shift])


def _case(name: str, group: str, p_ref: np.ndarray, p_onnx: np.ndarray) -> ProbeCase:
    return ProbeCase(f"parity_report/{name}", "parity_report", (Arg.array(p_ref), Arg.array(p_onnx)), {}, group)


def parity_report_cases(rng: np.random.Generator) -> list[ProbeCase]:
    two = _probs(rng, 200)
    # three classes: float64 arrays of float32-exact values without ties (_exact), so that these
    # cases vary the number of classes only, never the precision or the rule for ties
    three = _exact(_probs(rng, 120, classes=3))
    swapped = three.copy()
    swapped[:30] = swapped[:30, ::-1]  # reversed rows: most change their class
    moved = np.array([[0.1875, 0.3125, 0.5], [0.125, 0.375, 0.5], [0.625, 0.25, 0.125], [0.3125, 0.25, 0.4375]])
    moved_onnx = np.array(
        [[0.1875, 0.4375, 0.375], [0.125, 0.375, 0.5], [0.3125, 0.25, 0.4375], [0.3125, 0.25, 0.4375]]
    )
    large = _probs(rng, 5000)
    base = _probs(rng, 40)
    flipped = base.copy()
    flipped[:10] = flipped[:10, ::-1]  # a quarter of the rows change their class
    tiny = _probs(rng, 100)
    ties = np.full((6, 2), 0.5)  # the first class wins a tie: 4 of 6 agree
    untied = np.array([[0.75, 0.25]] * 4 + [[0.25, 0.75]] * 2)
    # float64 p_ref beside float32 p_onnx is what scikit-learn and an ONNX model give: that group's
    # name says so, so a precision slip's first disagreement points at precision
    return [
        _case("float32_export", "float64_vs_float32", two, two.astype(np.float32)),
        _case("labels_differ", "float64_vs_float32", base, flipped.astype(np.float32)),
        _case("three_classes_close", "three_classes", three, _close(three)),
        _case("three_classes_labels_differ", "three_classes", three, swapped),
        _case("three_classes_middle_class_wins", "three_classes", moved, moved_onnx),  # p[:, 1] stays <= 0.5
        _case("large_batch", "float64_vs_float32", large, large.astype(np.float32)),
        _case("differences_below_float32", "float64_inputs", tiny, tiny + rng.uniform(-1e-9, 1e-9, tiny.shape)),
        _case("identical", "float64_inputs", two[:50], two[:50].copy()),
        _case(
            "both_float32",
            "float32_inputs",
            two[:80].astype(np.float32),
            _moved(two[:80], rng.normal(0, 1e-4, (80, 1))).astype(np.float32),
        ),
        _case("argmax_ties", "ties", ties, untied),
        _case("one_row", "float64_inputs", np.array([[0.25, 0.75]]), np.array([[0.3, 0.7]])),
    ]


def sklearn_cases() -> list[ProbeCase]:
    """The call that collects the student's scikit-learn probabilities on X_test (public data)."""
    arrays = {"public_test": data.public_split().X_test}
    return [
        ProbeCase(f"{SKLEARN_FUNCTION}/{name}", SKLEARN_FUNCTION, (Arg.array(arrays[name]),), {}, name)
        for name in SKLEARN_SETS
    ]


def probe_cases() -> list[ProbeCase]:
    """Every call the probe makes, in order: parity_report's cases, then sklearn_probabilities on X_test."""
    return parity_report_cases(hidden_secret.submission_generator(PROBE_STREAM)) + sklearn_cases()


# ---------------------------------------------------------------- the reference's answers


def reference_parity(p_ref, p_onnx) -> tuple[float, float]:
    """The contract's numbers: max |p_ref − p_onnx| in float64, and the share of equal argmax."""
    a, b = np.asarray(p_ref, dtype=np.float64), np.asarray(p_onnx, dtype=np.float64)
    return float(np.max(np.abs(a - b))), float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))


def float32_parity(p_ref, p_onnx) -> tuple[float, float]:
    """The same numbers with the subtraction in float32 (a common slip, honest for float32 inputs)."""
    a, b = np.asarray(p_ref, dtype=np.float32), np.asarray(p_onnx, dtype=np.float32)
    return float(np.max(np.abs(a - b))), float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))


def mean_parity(p_ref, p_onnx) -> tuple[float, float]:
    """The mean |p_ref − p_onnx| instead of the largest (a wrong definition, honest in RESULTS)."""
    a, b = np.asarray(p_ref, dtype=np.float64), np.asarray(p_onnx, dtype=np.float64)
    return float(np.mean(np.abs(a - b))), float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))


# How a notebook's parity_report may compute: the contract's first (the one assumed when none
# fits). RESULTS is honest when it reports what the notebook's own parity_report gives, so a wrong
# definition the grader can recognise from parity_report's answers costs parity_report only.
ARITHMETICS = {"float64": reference_parity, "float32": float32_parity, "float64 mean": mean_parity}


def parity_arithmetic(cases: list[ProbeCase], probe: ProbeResult) -> str | None:
    """Which of :data:`ARITHMETICS` the notebook's own parity_report follows: the first that gives
    its ``max_abs_diff`` (to float64 rounding) on every grader input where it returned a number.
    None when it returned none, or none fits (it computes something else: the parity_report check
    says so). ``RESULTS`` is then judged against what that arithmetic gives on the real outputs
    (parity.py), so a precision slip costs parity_report's agreement and nothing else."""
    seen: list[tuple[float, ProbeCase]] = []
    for case in cases:
        got = probe.cases.get(case.id) if case.function == "parity_report" and probe.ran else None
        if (
            got is None
            or got.status != "ok"
            or not got.values
            or got.values[0].size != 1
            or got.values[0].dtype.kind not in "fiu"
        ):
            continue
        value = float(got.values[0].reshape(()))
        if np.isfinite(value):
            seen.append((value, case))
    tol = FLOAT64_ROUNDING
    for name, parity in ARITHMETICS.items():
        if seen and all(
            abs(v - (want := parity(c.raw(0), c.raw(1))[0])) <= tol.atol + tol.rtol * abs(want) for v, c in seen
        ):
            return name
    return None


def expect_parity_report(case: ProbeCase) -> tuple[Expect, Expect]:
    max_abs_diff, agreement = reference_parity(case.raw(0), case.raw(1))
    return (
        Expect(np.array(max_abs_diff), dtype_kinds="f", label="max_abs_diff"),
        Expect(np.array(agreement), dtype_kinds="f", label="label_agreement"),
    )


EXPECTATIONS = {"parity_report": expect_parity_report}


def tolerances(cases: list[ProbeCase]) -> dict[str, dict[str, Tolerance]]:
    """parity_report's tolerance per group: float32 rounding where both inputs are float32."""
    groups = {c.group for c in cases if c.function == "parity_report"}
    return {"parity_report": {g: FLOAT32_ROUNDING if g in FLOAT32_GROUPS else FLOAT64_ROUNDING for g in groups}}


def measure_functions(cases: list[ProbeCase], probe: ProbeResult) -> dict[str, Any]:
    """The ``functions`` section: parity_report's agreement with the reference."""
    return measure_all(cases, probe, EXPECTATIONS, tolerances=tolerances(cases))
