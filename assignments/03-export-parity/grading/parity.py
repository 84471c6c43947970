"""The ``models``, ``parity`` and ``reported`` sections of measurements.json for assignment 03.

``models.pipeline``: the exported file, checked and run in the limited child of
autograder.measure.onnx_load on the grader's parity sets (the hidden ones and the contract's
X_test, each in one call), with the graph facts and the contract's interface. The interface is
declared with ``adapt=True``: a model that computes the right thing behind the wrong interface (a
float64 export, ZipMap left on) still runs, so it loses the interface points and nothing else.

``parity``: the student's ONNX model against the contract's pipeline, which the grader fits
itself on the contract's data with the contract's seed (``data.contract_outputs``): the largest
probability difference and the label agreement on the hidden sets, and the accuracy of the model
on X_test. Nothing the notebook returns is the reference, so a notebook cannot choose what its
export is compared with: a graph without the scaler fails whatever ``sklearn_probabilities`` says.

``reported``: is each number of ``RESULTS`` what the notebook's own functions give on its real
model and X_test? Honesty only: correctness is the parity_report and parity checks' business. So
``max_abs_diff`` and ``label_agreement`` are recomputed on the grader's outputs of the student's
model and the student's ``sklearn_probabilities`` on X_test the way the notebook's own
``parity_report`` computes (``functions.parity_arithmetic``: float64 as the contract says, or
float32, or the mean), so a parity_report mistake costs parity_report's agreement once, not
RESULTS again. They are evidence of parity only when ``sklearn_probabilities`` gives the lesson's
pipeline's probabilities (:func:`notebook_comparison`): an echo of the ONNX model, with or without
noise, compares the export with itself, and those two numbers then earn nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from autograder.lesson import (
    Expected,
    Hint,
    ModelInterface,
    ProbeResult,
    TensorSpec,
    Tolerance,
    UnsafeFileError,
    WorkerRun,
    check_reported,
    exception_name,
    is_number,
    metrics,
    probabilities,
    read_model_bytes,
    run_model_worker,
    shape_words,
)

from . import data
from .functions import ARITHMETICS, SKLEARN_FUNCTION, SKLEARN_SETS

ARTIFACT = "pipeline"
FACTS = ("graph",)  # operators, opsets, parameter count; no quantization facts
INTERFACE = ModelInterface(
    inputs=(TensorSpec("X", "float32", (None, 30)),),
    outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))),
    adapt=True,
)
REPORTED_FIELDS = {
    "max_abs_diff": "notebook_max_abs_diff",
    "label_agreement": "notebook_label_agreement",
    "onnx_accuracy": "onnx_accuracy",
}
CONTRACT_ARITHMETIC = next(iter(ARITHMETICS))
# The notebook and the grader run the same model on the same X_test and get the same outputs, bit
# for bit (measured: multi-threaded and single-threaded sessions agree exactly; predict_proba is
# deterministic), then the same float64 arithmetic. 1e-6 relative leaves room for another order
# of summation in a mean; a wrong definition or unit is off by far more.
REPORT_TOLERANCE = Tolerance(rtol=1e-6, atol=1e-12)
WHERE = " on the contract's X_test"


# ── models ─────────────────────────────────────────────────────────────────────────────────────


def measure_model(assignment, workspace: Path, children=None) -> tuple[dict[str, Any], WorkerRun | None]:
    """``models.pipeline`` and the worker's run (None when the file could not be checked);
    ``children``: the submission's measuring children (``ctx.children``)."""
    path = assignment.artifacts[ARTIFACT]
    policy = assignment.model_policy
    try:
        model = read_model_bytes(workspace, path, policy.limits)
    except UnsafeFileError as e:
        return {"error": str(e)}, None
    hidden, public = data.hidden_sets(), data.public_split()
    run = run_model_worker(
        model,
        inputs={"hidden": hidden.X, "hidden_edge": hidden.X_edge, "public_test": public.X_test},
        interface=INTERFACE,
        facts=FACTS,
        policy=policy,
        children=children,
    )
    if not run.ok:
        return {"error": f"invalid model: {run.reason}"}, None
    facts: dict[str, Any] = {
        "path": path,
        "size_bytes": len(model),
        "valid": True,
        **run.result["facts"],
        "adapted": list(run.result.get("adapted", [])),
    }
    if run.result.get("run_error"):
        facts["run_error"] = run.result["run_error"]
    return facts, run


# ── parity ─────────────────────────────────────────────────────────────────────────────────────


def sklearn_outputs(cases, probe: ProbeResult) -> dict[str, np.ndarray] | str:
    """The student's scikit-learn probabilities per set it was called on (X_test), or why there are none."""
    if not probe.ran:
        return probe.error or "the probe did not run"
    state = probe.functions.get(SKLEARN_FUNCTION)
    if state != "defined":
        what = "is not a function" if state == "not callable" else "is not defined at the notebook's top level"
        return f"{SKLEARN_FUNCTION} {what}"
    out: dict[str, np.ndarray] = {}
    for case in (c for c in cases if c.function == SKLEARN_FUNCTION):
        got = probe.cases.get(case.id)
        n = len(case.raw(0))
        if got is None or got.status != "ok":
            err = (got.error or {}) if got else {}
            what = exception_name(err.get("type")) if got and got.status == "raised" else "no usable result"
            return f"{SKLEARN_FUNCTION} failed on the {n} rows of X_test: {what}"  # no message: leak_budget
        if got.is_tuple or len(got.values) != 1:
            return f"{SKLEARN_FUNCTION} returned a tuple, expected one [N, 2] array of probabilities"
        p = got.values[0]
        if p.dtype.kind != "f" or p.shape != (n, 2):
            return (
                f"{SKLEARN_FUNCTION} returned {p.dtype} of {shape_words(p.shape)} for {n} rows, "
                f"expected floats of shape ({n}, 2)"
            )
        if not np.all(np.isfinite(p)):
            return f"{SKLEARN_FUNCTION} returned NaN or infinite probabilities"
        out[case.group] = p
    missing = [s for s in SKLEARN_SETS if s not in out]
    return out if not missing else f"{SKLEARN_FUNCTION} was not called on {missing}"


PARITY_SETS = ("hidden", "hidden_edge", "public_test")
# The grader's fit of the contract's pipeline and the kernel's give the same probabilities but for
# a few values of X_test that differ by ~1e-9 (measured: scikit-learn's float32 dot products in
# another BLAS kernel, the jail's OpenBLAS choosing SkylakeX where the grader's chose Haswell; one
# or two float32 steps of a row's decision function). A function returning the pipeline's
# probabilities rounded to float32 is within 6e-8. The exported graph computes everything in
# float32 and is 4.4e-7 off on X_test (skl2onnx's export of the contract's pipeline; fixed, since
# the pipeline and X_test are), so an echo of the ONNX model, with noise or without, is outside.
SAME_PIPELINE_ATOL = 1e-7
NOT_THE_PIPELINE = (
    f"{SKLEARN_FUNCTION} does not return the probabilities of the lesson's pipeline on X_test "
    "(make_pipeline(StandardScaler(), SGDClassifier(loss='log_loss', random_state=0)) fitted on "
    "X_train, as the grader fits it): a comparison with anything else is no evidence of parity"
)


def same_pipeline(sk: np.ndarray, contract: np.ndarray) -> bool:
    """Whether ``sk`` is the contract pipeline's ``contract``, to :data:`SAME_PIPELINE_ATOL`."""
    return sk.shape == contract.shape and bool(np.all(np.abs(sk.astype(np.float64) - contract) <= SAME_PIPELINE_ATOL))


def notebook_comparison(
    cases, probe: ProbeResult, onnx_test: np.ndarray, contract_test: np.ndarray, arithmetic: str | None
) -> dict[str, Any]:
    """What the notebook's own comparison gives on X_test, the numbers ``RESULTS`` reports:
    ``parity_report`` (in the arithmetic the grader recognised from its answers) of the notebook's
    ``sklearn_probabilities`` and the ONNX model's probabilities. It is evidence of parity only
    when ``sklearn_probabilities`` is the lesson's pipeline (:func:`same_pipeline`): an echo of the
    ONNX model, with noise or without, or another pipeline compares the export with something the
    notebook chose. Else ``notebook_error`` says why there is nothing to judge RESULTS against."""
    sk = sklearn_outputs(cases, probe)
    if isinstance(sk, str):
        return {"notebook_error": f"no scikit-learn outputs to compare with: {sk}"}
    test = sk["public_test"]
    facts: dict[str, Any] = {
        "sklearn_max_abs_diff_from_contract": metrics.max_abs_dp(test.astype(np.float64), contract_test),
        "sklearn_is_contract": same_pipeline(test, contract_test),
    }
    if not facts["sklearn_is_contract"]:
        return {**facts, "notebook_error": NOT_THE_PIPELINE}
    own = arithmetic if arithmetic in ARITHMETICS else CONTRACT_ARITHMETIC
    own_max_abs_diff, own_label_agreement = ARITHMETICS[own](test, onnx_test)
    return {
        **facts,
        "notebook_arithmetic": own,
        "notebook_max_abs_diff": own_max_abs_diff,
        "notebook_label_agreement": own_label_agreement,
    }


def measure_parity(
    cases, probe: ProbeResult, model: dict[str, Any], run: WorkerRun | None, arithmetic: str | None = None
) -> dict[str, Any]:
    """The ``parity`` section (see the module's docstring). ``arithmetic``: how the notebook's own
    parity_report computes (``functions.parity_arithmetic``; None: the contract's float64), for
    the ``notebook_*`` numbers that RESULTS is judged against."""
    if "error" in model:
        return {"error": f"the ONNX model cannot be compared: {model['error']}"}
    if model.get("run_error") or run is None:
        return {"error": f"the ONNX model could not be run on the grader's data: {model.get('run_error')}"}
    onnx = {s: run.outputs[f"{s}__probabilities"] for s in PARITY_SETS}
    bad = next((p for s in PARITY_SETS for p in probabilities.probability_problems(onnx[s])[:1] if "NaN" in p), None)
    if bad:
        return {"error": f"the ONNX model's probabilities are unusable: {bad}"}
    contract = data.contract_outputs()
    ref = {"hidden": contract.hidden, "hidden_edge": contract.hidden_edge, "public_test": contract.public_test}
    y_test = data.public_split().y_test
    return {
        "rows": len(onnx["hidden"]),
        "edge_rows": len(onnx["hidden_edge"]),
        "max_abs_diff": metrics.max_abs_dp(onnx["hidden"], ref["hidden"]),
        "label_agreement": probabilities.label_agreement(onnx["hidden"], ref["hidden"]),
        "edge_max_abs_diff": metrics.max_abs_dp(onnx["hidden_edge"], ref["hidden_edge"]),
        "edge_label_agreement": probabilities.label_agreement(onnx["hidden_edge"], ref["hidden_edge"]),
        "public_max_abs_diff": metrics.max_abs_dp(onnx["public_test"], ref["public_test"]),
        "public_label_agreement": probabilities.label_agreement(onnx["public_test"], ref["public_test"]),
        "onnx_accuracy": probabilities.accuracy(onnx["public_test"], y_test),
        "contract_accuracy": probabilities.accuracy(ref["public_test"], y_test),
        **notebook_comparison(cases, probe, onnx["public_test"], ref["public_test"], arithmetic),
    }


# ── reported ───────────────────────────────────────────────────────────────────────────────────

PERCENT = Hint("a percentage?", "a percentage? the contract asks for a share in [0, 1]")


def _max_abs_diff_hint(arithmetic: str) -> Hint:
    return Hint(
        "see parity_report",
        f"the number your parity_report gives ({arithmetic}, as the grader reads it from its "
        "answers), on all of X_test: report what parity_report returns",
    )


def measure_reported(reported: Any, reported_error: str | None, parity: dict[str, Any]) -> dict[str, Any]:
    """The ``reported`` section: is each number of RESULTS what the notebook's own functions give
    (autograder.measure.reported.check_reported; the honesty rule is there)? ``max_abs_diff`` and
    ``label_agreement`` are the notebook's comparison, judged only when it is evidence of parity
    (``parity.notebook_*``, :func:`notebook_comparison`); ``onnx_accuracy`` is the grader's own
    measurement of the model."""
    arithmetic = parity.get("notebook_arithmetic", CONTRACT_ARITHMETIC)
    expected = {}
    for field, source in REPORTED_FIELDS.items():
        measured = parity.get(source) if "error" not in parity else None
        why = parity.get("error") or (parity.get("notebook_error") if source.startswith("notebook_") else None)
        percent = ((100 * measured, PERCENT),) if is_number(measured) and measured else ()
        expected[field] = Expected(
            measured,
            REPORT_TOLERANCE,
            why_not=why or "not measured",
            where=WHERE,
            alternatives=percent,
            hint=_max_abs_diff_hint(arithmetic) if field == "max_abs_diff" else None,
        )
    return check_reported(reported, expected, missing_reason=reported_error)
