"""Assignment 03's function checks: ``parity_report`` on the grader's inputs, and the calls of
``sklearn_probabilities`` that collect the student's scikit-learn outputs for the parity check.

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

``sklearn_probabilities(X)`` is called on the grader's hidden parity sets and on the contract's
X_test (``data.py``); its outputs are data for ``parity.py``, never compared here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder import hidden_secret
from autograder.measure.compare import FLOAT32_ROUNDING, Expect, Tolerance
from autograder.measure.functions import measure_functions as measure_all
from autograder.probe_format import Arg, ProbeCase, ProbeResult

from . import data

PROBE_STREAM = "03-export-parity/probe-cases"   # parity_report's random inputs: a stream of the hidden-data secret
SKLEARN_FUNCTION = "sklearn_probabilities"
SKLEARN_SETS = ("hidden", "hidden_edge", "public_test")
FLOAT64_ROUNDING = Tolerance(rtol=float(4 * np.finfo(np.float64).eps), atol=float(np.finfo(np.float64).tiny))
FLOAT32_GROUPS = ("float32_inputs",)


def _probs(rng: np.random.Generator, n: int, classes: int = 2) -> np.ndarray:
    """``n`` rows of ``classes`` probabilities, float64, rows summing to 1."""
    logits = rng.normal(0.0, 2.0, (n, classes))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _case(name: str, group: str, p_ref: np.ndarray, p_onnx: np.ndarray) -> ProbeCase:
    return ProbeCase(f"parity_report/{name}", "parity_report", (Arg.array(p_ref), Arg.array(p_onnx)), {}, group)


def parity_report_cases(rng: np.random.Generator) -> list[ProbeCase]:
    two = _probs(rng, 200)
    three = _probs(rng, 120, classes=3)
    swapped = three.copy()
    swapped[:30] = swapped[:30, ::-1]                      # reversed rows: most change their class
    moved = np.array([[0.2, 0.3, 0.5], [0.1, 0.45, 0.45], [0.6, 0.3, 0.1], [0.3, 0.3, 0.4]])
    moved_onnx = np.array([[0.2, 0.45, 0.35], [0.1, 0.45, 0.45], [0.3, 0.3, 0.4], [0.3, 0.3, 0.4]])
    large = _probs(rng, 5000)
    base = _probs(rng, 40)
    flipped = base.copy()
    flipped[:10] = flipped[:10, ::-1]                      # a quarter of the rows change their class
    tiny = _probs(rng, 100)
    ties = np.full((6, 2), 0.5)
    return [
        _case("float32_export", "two_classes", two, two.astype(np.float32)),
        _case("labels_differ", "two_classes", base, flipped.astype(np.float32)),
        _case("three_classes_float32", "three_classes", three, three.astype(np.float32)),
        _case("three_classes_labels_differ", "three_classes", three, swapped.astype(np.float32)),
        _case("three_classes_middle_class_wins", "three_classes", moved, moved_onnx),   # p[:, 1] stays <= 0.5
        _case("large_batch", "two_classes", large, large.astype(np.float32)),
        _case("differences_below_float32", "float64_inputs", tiny, tiny + rng.uniform(-1e-9, 1e-9, tiny.shape)),
        _case("identical", "float64_inputs", two[:50], two[:50].copy()),
        _case("both_float32", "float32_inputs", two[:80].astype(np.float32),
              (two[:80] + rng.normal(0, 1e-4, (80, 2))).astype(np.float32)),
        _case("argmax_ties", "ties", ties, ties.copy()),
        _case("one_row", "float64_inputs", np.array([[0.25, 0.75]]), np.array([[0.3, 0.7]])),
    ]


def sklearn_cases() -> list[ProbeCase]:
    """The calls that collect the student's scikit-learn probabilities on the parity sets."""
    hidden, public = data.hidden_sets(), data.public_split()
    arrays = {"hidden": hidden.X, "hidden_edge": hidden.X_edge, "public_test": public.X_test}
    return [ProbeCase(f"{SKLEARN_FUNCTION}/{name}", SKLEARN_FUNCTION, (Arg.array(arrays[name]),), {}, name)
            for name in SKLEARN_SETS]


def probe_cases() -> list[ProbeCase]:
    """Every call the probe makes, in order: parity_report's cases, then the parity sets."""
    return parity_report_cases(hidden_secret.generator(PROBE_STREAM)) + sklearn_cases()


# ---------------------------------------------------------------- the reference's answers

def reference_parity(p_ref, p_onnx) -> tuple[float, float]:
    """The contract's numbers: max |p_ref − p_onnx| in float64, and the share of equal argmax."""
    a, b = np.asarray(p_ref, dtype=np.float64), np.asarray(p_onnx, dtype=np.float64)
    return float(np.max(np.abs(a - b))), float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))


def expect_parity_report(case: ProbeCase) -> tuple[Expect, Expect]:
    max_abs_diff, agreement = reference_parity(case.raw(0), case.raw(1))
    return (Expect(np.array(max_abs_diff), dtype_kinds="f", label="max_abs_diff"),
            Expect(np.array(agreement), dtype_kinds="f", label="label_agreement"))


EXPECTATIONS = {"parity_report": expect_parity_report}


def tolerances(cases: list[ProbeCase]) -> dict[str, dict[str, Tolerance]]:
    """parity_report's tolerance per group: float32 rounding where both inputs are float32."""
    groups = {c.group for c in cases if c.function == "parity_report"}
    return {"parity_report": {g: FLOAT32_ROUNDING if g in FLOAT32_GROUPS else FLOAT64_ROUNDING for g in groups}}


def measure_functions(cases: list[ProbeCase], probe: ProbeResult) -> dict[str, Any]:
    """The ``functions`` section: parity_report's agreement with the reference."""
    return measure_all(cases, probe, EXPECTATIONS, tolerances=tolerances(cases))
