"""The ``models`` section of measurements.json for assignment 07.

``measure_models`` loads each artifact of ``[artifacts]`` safely (autograder.measure.onnx_load:
limited child processes, which measure only this submission's models) and records facts: graph facts, the canonical size, the
latency (timed as the contract asks), accuracy on the grader's hidden test set, and, for each
int8 variant, its comparison with the student's own ``fp32.onnx`` on the same batches (the whole
hidden test set in one call, the hidden edge set in one call). The contract's numbers on its
public split are recorded too, under ``public_split``, so that :mod:`.reported` can check the
notebook's ``RESULTS`` without running anything again.

What the rubric judges about an int8 variant sits in subsections that exist only for a file that
is really quantized (every MatMul/Gemm multiplies by integer weights, as measured):

- ``quality``: accuracy drop, label agreement and drift against fp32;
- ``size``: the size ratio of the canonical re-serialisations (autograder.measure.canonical:
  names, doc strings, metadata and dead code cannot pad either file), beside the raw file ratio;
- ``calibration`` (the static variant): the calibrated input range of the *live* input
  quantizers, its coverage of the hidden test inputs, and which rows calibration used
  (:mod:`.provenance`).

For a file that is not quantized each is ``{"error": "not judged: the file is not quantized …"}``
and the judge fails its parts with that reason. A variant that cannot be measured is
``{"error": "<reason for the student>"}``; one that loads but whose outputs are unusable keeps its
graph facts and says why in ``metrics_error``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autograder.lesson import (
    MeasuringChildren,
    ModelInterface,
    ModelPolicy,
    TensorSpec,
    UnsafeFileError,
    WorkerRun,
    measure_jobs,
    metrics,
    probabilities,
    read_model_bytes,
    run_model_worker,
)

from . import data, figure
from . import provenance
from .provenance import activation_source, calibration_source
from .reported import measure_reported as measure_reported  # noqa: F401  (kept importable from here)

# The contract: one input X float32 [N, 2]; outputs label int64 [N] and probabilities float32 [N, 2].
INTERFACE = ModelInterface(
    inputs=(TensorSpec("X", "float32", (None, 2)),),
    outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))),
)
FACTS = ("graph", "quantization", "size", "derived_from", "activation_ranges")  # the worker's fact groups
BASELINE = "fp32"
STATIC_VARIANTS = ("int8_qdq",)  # variants whose input range calibration fixed
LATENCY_INPUT = "public_test"  # the contract's latency: one run on all of X_test
LATENCY_ROUNDS = 50  # as the contract asks of the notebook; fewer is less stable (README)


@dataclass
class _Artifact:
    name: str
    path: str
    data: bytes | None = None
    error: str | None = None
    run: WorkerRun | None = None

    @property
    def outputs_error(self) -> str | None:
        """Why this model's outputs cannot be used for metrics (None when they can)."""
        if self.error:
            return self.error
        r = self.run.result
        if r.get("run_error"):
            return r["run_error"]
        for key in ("hidden_test", "hidden_edge", "public_test", "public_edge"):
            p = self.run.outputs.get(f"{key}__probabilities")
            if p is None:
                return "no probabilities were produced"
            bad = probabilities.probability_problems(p)
            if bad and "NaN" in bad[0]:
                return bad[0]
        return None

    def p(self, key: str) -> np.ndarray:
        return self.run.outputs[f"{key}__probabilities"]


def _inputs(hidden: data.Split, public: data.Split) -> dict[str, np.ndarray]:
    return {
        "hidden_test": hidden.X_test,
        "hidden_edge": hidden.X_edge,
        "public_test": public.X_test,
        "public_edge": public.X_edge,
        provenance.TRAIN_SET: public.X_train,  # every activation's range over X_train (provenance.py)
        figure.GRID_SET: figure.grid_points(public),
    }  # the picture's plane (public ranges), 10k rows


def _load_and_run(
    name: str,
    path: str,
    workspace: Path,
    inputs: dict,
    policy: ModelPolicy,
    baseline: _Artifact | None = None,
    children: MeasuringChildren | None = None,
) -> _Artifact:
    art = _Artifact(name, path)
    try:
        art.data = read_model_bytes(workspace, path, policy.limits)
    except UnsafeFileError as e:
        art.error = str(e)
        return art
    usable_base = baseline is not None and baseline.error is None
    art.run = run_model_worker(
        art.data,
        inputs=inputs,
        interface=INTERFACE,
        facts=FACTS,
        baseline=baseline.data if usable_base else None,
        latency_input=LATENCY_INPUT,
        latency_rounds=LATENCY_ROUNDS,
        latency_baseline=usable_base and baseline.outputs_error is None,
        policy=policy,
        children=children,
    )
    if not art.run.ok:
        art.error = f"invalid model: {art.run.reason}"
    elif art.run.result.get("facts", {}).get("interface_ok") and art.run.result.get("run_error"):
        art.error = f"invalid model: {art.run.result['run_error']}"
    return art


def retime(assignment, workspace: Path, variant: str) -> float | None:
    """The variant's latency timed again in a fresh worker (None when it cannot be): one more
    independent sample, for a reported latency that disagrees with the first one."""
    try:
        model = read_model_bytes(Path(workspace), assignment.artifacts[variant], assignment.model_policy.limits)
    except (UnsafeFileError, KeyError):
        return None
    run = run_model_worker(
        model,
        inputs={LATENCY_INPUT: data.public_split().X_test},
        interface=INTERFACE,
        facts=(),
        latency_input=LATENCY_INPUT,
        latency_rounds=LATENCY_ROUNDS,
        policy=assignment.model_policy,
    )
    latency = (run.result.get("latency") or {}) if run.ok else {}
    return latency.get("model_ms")


def measure_models(
    assignment,
    workspace: Path,
    *,
    runs: dict[str, _Artifact] | None = None,
    children: MeasuringChildren | None = None,
) -> dict[str, Any]:
    """The ``models`` section: one entry per ``[artifacts]`` key, the baseline ``fp32`` first.
    ``runs``, when given, receives each artifact's worker run (for :mod:`.figure`); ``children``:
    the submission's measuring children (``ctx.children``), else a fresh child per model."""
    hidden = data.hidden_split(assignment)
    public = data.public_split()
    inputs = _inputs(hidden, public)
    artifacts = assignment.artifacts
    workspace = Path(workspace)
    policy = assignment.model_policy
    base = (
        _load_and_run(BASELINE, artifacts[BASELINE], workspace, inputs, policy, children=children)
        if BASELINE in artifacts
        else None
    )
    # the variants only read the baseline: measured side by side where cores allow (warm_pool)
    variants = [(name, path) for name, path in artifacts.items() if name != BASELINE]
    with ThreadPoolExecutor(max_workers=max(1, min(len(variants), measure_jobs()))) as pool:
        measured = dict(
            zip(
                [n for n, _ in variants],
                pool.map(
                    lambda item: _load_and_run(*item, workspace, inputs, policy, baseline=base, children=children),
                    variants,
                ),
            )
        )
    out: dict[str, Any] = {}
    for name in artifacts:
        art = base if name == BASELINE else measured[name]
        out[name] = _facts(art, hidden, public, None if name == BASELINE else base)
        if runs is not None:
            runs[name] = art
    return out


def quantization_gate(facts: dict[str, Any]) -> str | None:
    """None when every MatMul/Gemm of the model multiplies by integer weights (the file is really
    quantized, dynamically or statically), else why its quality is not judged."""
    quantized, floats = facts.get("quantized_weights") or 0, facts.get("float_weights_left") or 0
    if quantized and not floats:
        return None
    if not quantized:
        return (
            f"not judged: the file is not quantized (classified as '{facts.get('classification')}': "
            f"{facts.get('classification_detail')})"
        )
    return (
        f"not judged: the file is only partly quantized ({floats} MatMul/Gemm still multiply by float "
        f"weights, {quantized} by integer ones)"
    )


def _facts(art: _Artifact, hidden: data.Split, public: data.Split, base: _Artifact | None) -> dict[str, Any]:
    if art.error:
        return {"error": art.error}
    result = art.run.result
    facts = dict(result["facts"])
    problems = list(facts.pop("problems"))
    out: dict[str, Any] = {"path": art.path, "size_bytes": len(art.data), "valid": True, "problems": problems}
    out.update(facts)
    gate = quantization_gate(facts)
    out["quantized"] = gate is None
    if gate and base is not None:
        out["quantized_reason"] = gate
    latency = result.get("latency") or {}
    if "model_ms" in latency:
        out["latency_ms"] = latency["model_ms"]
    elif result.get("latency_error"):
        out["latency_error"] = result["latency_error"]

    outputs_error = art.outputs_error
    if outputs_error:
        out["metrics_error"] = outputs_error
    else:
        for key in ("hidden_test", "public_test"):
            for p in probabilities.probability_problems(art.p(key))[:1]:
                if p not in problems:
                    problems.append(p)
        out["accuracy"] = probabilities.accuracy(art.p("hidden_test"), hidden.y_test)
        out["public_split"] = {"accuracy": probabilities.accuracy(art.p("public_test"), public.y_test)}
        if base is None:  # the baseline against itself: 0.0 by definition, computed all the same
            out["public_split"].update(
                max_rel_drift=metrics.max_rel_drift(art.p("public_test"), art.p("public_test")),
                edge_max_rel_drift=metrics.max_rel_drift(art.p("public_edge"), art.p("public_edge")),
            )
    if base is not None:
        out.update(_comparison(art, base, hidden, public, out, latency, gate))
    if art.name in STATIC_VARIANTS:
        out["calibration"] = _calibration(facts, hidden, public, gate, art.run.result.get("derived"))
    return out


def _calibration(
    facts: dict[str, Any], hidden: data.Split, public: data.Split, gate: str | None, derived: dict | None = None
) -> dict[str, Any]:
    """The range the live input quantizers fix, how much of the hidden test set it covers, and
    which rows of the contract's data set it (``provenance``): the input's range, then every
    activation's (``derived["activation_ranges"]``), so calibration rows from X_test show at any
    tensor whose extreme they hold."""
    if gate:
        return {"error": gate}
    iq = facts.get("input_quantization") or {}
    live = iq.get("live") or []
    if not live:
        unused = iq.get("unused") or 0
        return {
            "error": "no QuantizeLinear with a fixed scale reads the input X and feeds the outputs, so no "
            "calibrated input range was found" + (f" ({unused} unused one(s) ignored)" if unused else "")
        }
    n = hidden.X_test.shape[1]
    lo = np.max([np.broadcast_to(np.asarray(q["low"], dtype=np.float64), (n,)) for q in live], axis=0)
    hi = np.min([np.broadcast_to(np.asarray(q["high"], dtype=np.float64), (n,)) for q in live], axis=0)
    source = calibration_source(iq, public)
    activations = activation_source((derived or {}).get("activation_ranges"))
    if source["source"] in provenance.NOT_A_FINDING and activations["source"] not in provenance.NOT_A_FINDING:
        source = {"source": activations["source"], "detail": activations["detail"], "ends": []}
    return {
        "input_range": facts["calibrated_input_range"],
        "data_range": [float(hidden.X_test.min()), float(hidden.X_test.max())],
        "coverage": metrics.coverage(hidden.X_test, lo, hi),
        "live_input_quantizers": len(live),
        "unused_input_quantizers": int(iq.get("unused") or 0),
        "source": source["source"],
        "source_detail": source["detail"],
        "source_ends": source["ends"],
        "activations_checked": activations["checked"],
        "activations_source": activations["source"],
    }


def _comparison(
    art: _Artifact,
    base: _Artifact,
    hidden: data.Split,
    public: data.Split,
    facts: dict,
    latency: dict,
    gate: str | None,
) -> dict[str, Any]:
    """Fields relative to the student's own fp32 model; ``quality`` and ``size`` only for a
    quantized file (else their ``error`` says why they are not judged)."""
    if base.error:
        why = {"error": f"not compared with the fp32 model: {base.error}"}
        return {"comparison_error": why["error"], "quality": why, "size": why}
    base_facts = base.run.result["facts"]
    out: dict[str, Any] = {"file_size_ratio": metrics.size_ratio(len(art.data), len(base.data))}
    size = {
        "ratio": metrics.size_ratio(facts["canonical_bytes"], base_facts["canonical_bytes"]),
        "canonical_bytes": facts["canonical_bytes"],
        "fp32_canonical_bytes": base_facts["canonical_bytes"],
        "file_ratio": out["file_size_ratio"],
    }
    out["size"] = {"error": gate, **size} if gate else size
    derived = art.run.result.get("derived") or {}
    if derived:
        out["derived_from_fp32"] = bool(derived["derived"])
        out["derived_residual"] = derived["residual"]
        out["derived_detail"] = (
            f"{derived['quantized_weights'] - derived['unmatched_weights']} of "
            f"{derived['quantized_weights']} quantized weights match an fp32 weight's shape; "
            f"{derived['fp32_weights_covered']} of {derived['fp32_weights']} fp32 weights "
            "are reproduced within scale/2"
        )
    if "baseline_ms" in latency:
        out["latency_ratio"] = metrics.latency_ratio(latency["model_paired_ms"], latency["baseline_ms"])
    why = None
    if base.outputs_error:
        why = f"the fp32 model's outputs are unusable: {base.outputs_error}"
    elif "metrics_error" in facts:
        why = f"this model's outputs are unusable: {facts['metrics_error']}"
    if why:
        out["comparison_error"] = why
        out["quality"] = {"error": gate or why}
        return out
    p, r = art.p("hidden_test"), base.p("hidden_test")
    pe, re_ = art.p("hidden_edge"), base.p("hidden_edge")
    quality = dict(
        accuracy_drop=probabilities.accuracy(r, hidden.y_test) - facts["accuracy"],
        label_agreement=probabilities.label_agreement(p, r),
        max_abs_dp=metrics.max_abs_dp(p, r),
        p99_abs_dp=metrics.p99_abs_dp(p, r),
        max_rel_drift=metrics.max_rel_drift(p, r),
        edge_max_rel_drift=metrics.max_rel_drift(pe, re_),
        edge_max_abs_dp=metrics.max_abs_dp(pe, re_),
        edge_label_agreement=probabilities.label_agreement(pe, re_),
    )
    out["quality"] = {"error": gate, **quality} if gate else quality
    pt, rt, pe_, re_pub = art.p("public_test"), base.p("public_test"), art.p("public_edge"), base.p("public_edge")
    facts["public_split"].update(
        max_rel_drift=metrics.max_rel_drift(pt, rt),
        edge_max_rel_drift=metrics.max_rel_drift(pe_, re_pub),
        # the usual wrong definition, only to explain a mismatch in ``reported``
        elementwise_max_rel_drift=metrics.elementwise_max_rel_drift(pt, rt),
        edge_elementwise_max_rel_drift=metrics.elementwise_max_rel_drift(pe_, re_pub),
    )
    return out
