"""The ``models`` and ``reported`` sections of measurements.json for assignment 07.

``measure_models`` loads each artifact of ``[artifacts]`` safely (autograder.measure.onnx_load:
one limited child process per model) and records facts: graph facts, accuracy on the grader's
hidden test set, and, for each quantized variant, its comparison with the student's own
``fp32.onnx`` on the same batches (the whole hidden test set in one call, the hidden edge set in
one call). The contract's numbers on its public split are recorded too, under ``public_split``,
so that ``measure_reported`` can check the notebook's ``RESULTS`` without running anything again.

A variant that cannot be measured is ``{"error": "<reason for the student>"}``. A variant that
loads but whose outputs are unusable keeps its graph facts and says why in ``metrics_error``; a
quantized variant that cannot be compared with fp32 omits the comparison fields and says why in
``comparison_error``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autograder.errors import UnsafeFileError
from autograder.measure import metrics
from autograder.measure.model_interface import ModelInterface, TensorSpec
from autograder.measure.onnx_load import LoadLimits, WorkerRun, read_model_bytes, run_model_worker

from . import data

# The contract: one input X float32 [N, 2]; outputs label int64 [N] and probabilities float32 [N, 2].
INTERFACE = ModelInterface(
    inputs=(TensorSpec("X", "float32", (None, 2)),),
    outputs=(TensorSpec("label", "int64", (None,)), TensorSpec("probabilities", "float32", (None, 2))))
FACTS = ("graph", "quantization")   # the model worker's fact groups this assignment needs
BASELINE = "fp32"
LATENCY_INPUT = "public_test"   # the contract's latency: one run on all of X_test
LATENCY_ROUNDS = 50             # as many calls as the contract asks of the notebook

REPORTED_FIELDS = ("size_bytes", "accuracy", "latency_ms", "max_rel_drift", "edge_max_rel_drift")
# The same model on the same batch gives the same float32 outputs (ONNX Runtime, one thread, same
# machine, identical outputs across optimisation levels), so an honest number differs from ours
# only by how the last reductions were rounded: float32 vs float64 arithmetic, a few eps (1.2e-7)
# relative. 1e-5 relative + 1e-6 absolute covers that 100× over; it is far below the accuracy's
# granularity (1/500 = 0.002 on X_test) and below any drift a different definition would give.
REPORT_ATOL = 1e-6
REPORT_RTOL = 1e-5
# Latency depends on load: the notebook timed while the jail ran other work, the grader in a quiet
# child. Medians moved by up to 15% between runs in research and int8 by 1.4–3× vs fp32; 20× either
# way accepts any honest timing and still rejects seconds or microseconds reported as ms (1000×).
LATENCY_FACTOR = 20.0
ELEMENTWISE_HINT = " (the contract normalises per row: max_j|p−r| / max_j|r|, not element-wise |p−r|/|r|)"


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
            bad = metrics.probability_problems(p)
            if bad and "NaN" in bad[0]:
                return bad[0]
        return None

    def p(self, key: str) -> np.ndarray:
        return self.run.outputs[f"{key}__probabilities"]


def _inputs(hidden: data.Split, public: data.Split) -> dict[str, np.ndarray]:
    return {"hidden_test": hidden.X_test, "hidden_edge": hidden.X_edge,
            "public_test": public.X_test, "public_edge": public.X_edge}


def _load_and_run(name: str, path: str, workspace: Path, inputs: dict, limits: LoadLimits,
                  baseline: _Artifact | None = None) -> _Artifact:
    art = _Artifact(name, path)
    try:
        art.data = read_model_bytes(workspace, path, limits)
    except UnsafeFileError as e:
        art.error = str(e)
        return art
    usable_base = baseline is not None and baseline.error is None
    art.run = run_model_worker(
        art.data, inputs=inputs, interface=INTERFACE, facts=FACTS, baseline=baseline.data if usable_base else None,
        latency_input=LATENCY_INPUT, latency_rounds=LATENCY_ROUNDS,
        latency_baseline=usable_base and baseline.outputs_error is None, limits=limits)
    if not art.run.ok:
        art.error = f"invalid model: {art.run.reason}"
    elif art.run.result.get("facts", {}).get("interface_ok") and art.run.result.get("run_error"):
        art.error = f"invalid model: {art.run.result['run_error']}"
    return art


def measure_models(assignment, workspace: Path, *, hidden_seed: int | None = None,
                   limits: LoadLimits = LoadLimits()) -> dict[str, Any]:
    """The ``models`` section: one entry per ``[artifacts]`` key, the baseline ``fp32`` first."""
    hidden = data.hidden_split(assignment, seed=hidden_seed)
    public = data.public_split()
    inputs = _inputs(hidden, public)
    artifacts = assignment.artifacts
    workspace = Path(workspace)
    base = _load_and_run(BASELINE, artifacts[BASELINE], workspace, inputs, limits) if BASELINE in artifacts else None
    out: dict[str, Any] = {}
    for name, path in artifacts.items():
        art = base if name == BASELINE else _load_and_run(name, path, workspace, inputs, limits, baseline=base)
        out[name] = _facts(art, hidden, public, None if name == BASELINE else base)
    return out


def _facts(art: _Artifact, hidden: data.Split, public: data.Split, base: _Artifact | None) -> dict[str, Any]:
    if art.error:
        return {"error": art.error}
    result = art.run.result
    facts = dict(result["facts"])
    problems = list(facts.pop("problems"))
    out: dict[str, Any] = {"path": art.path, "size_bytes": len(art.data), "valid": True, "problems": problems}
    out.update(facts)
    lo_hi = facts.get("calibrated_input_range")
    if lo_hi is not None:
        out["data_range"] = [float(hidden.X_test.min()), float(hidden.X_test.max())]
        out["calibration_coverage"] = metrics.coverage(hidden.X_test, *lo_hi)
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
            for p in metrics.probability_problems(art.p(key))[:1]:
                if p not in problems:
                    problems.append(p)
        out["accuracy"] = metrics.accuracy(art.p("hidden_test"), hidden.y_test)
        out["public_split"] = {"accuracy": metrics.accuracy(art.p("public_test"), public.y_test)}
        if base is None:  # the baseline against itself: 0.0 by definition, computed all the same
            out["public_split"].update(
                max_rel_drift=metrics.max_rel_drift(art.p("public_test"), art.p("public_test")),
                edge_max_rel_drift=metrics.max_rel_drift(art.p("public_edge"), art.p("public_edge")))
    if base is not None:
        out.update(_comparison(art, base, hidden, public, out, latency))
    return out


def _comparison(art: _Artifact, base: _Artifact, hidden: data.Split, public: data.Split,
                facts: dict, latency: dict) -> dict[str, Any]:
    """Fields relative to the student's own fp32 model (absent when it cannot be compared)."""
    if base.error:
        return {"comparison_error": f"not compared with the fp32 model: {base.error}"}
    out: dict[str, Any] = {"size_ratio": metrics.size_ratio(len(art.data), len(base.data))}
    derived = art.run.result.get("derived") or {}
    if derived:
        out["derived_from_fp32"] = bool(derived["derived"])
        out["derived_residual"] = derived["residual"]
        out["derived_detail"] = (f"{derived['quantized_weights'] - derived['unmatched_weights']} of "
                                 f"{derived['quantized_weights']} quantized weights match an fp32 weight's shape; "
                                 f"{derived['fp32_weights_covered']} of {derived['fp32_weights']} fp32 weights "
                                 "are reproduced within scale/2")
    if "baseline_ms" in latency:
        out["latency_ratio"] = metrics.latency_ratio(latency["model_ms"], latency["baseline_ms"])
    why = None
    if base.outputs_error:
        why = f"the fp32 model's outputs are unusable: {base.outputs_error}"
    elif "metrics_error" in facts:
        why = f"this model's outputs are unusable: {facts['metrics_error']}"
    if why:
        out["comparison_error"] = why
        return out
    p, r = art.p("hidden_test"), base.p("hidden_test")
    pe, re_ = art.p("hidden_edge"), base.p("hidden_edge")
    out.update(
        accuracy_drop=metrics.accuracy(r, hidden.y_test) - facts["accuracy"],
        label_agreement=metrics.label_agreement(p, r),
        max_abs_dp=metrics.max_abs_dp(p, r),
        p99_abs_dp=metrics.p99_abs_dp(p, r),
        max_rel_drift=metrics.max_rel_drift(p, r),
        edge_max_rel_drift=metrics.max_rel_drift(pe, re_),
        edge_max_abs_dp=metrics.max_abs_dp(pe, re_),
        edge_label_agreement=metrics.label_agreement(pe, re_),
    )
    pt, rt, pe_, re_pub = art.p("public_test"), base.p("public_test"), art.p("public_edge"), base.p("public_edge")
    facts["public_split"].update(
        max_rel_drift=metrics.max_rel_drift(pt, rt), edge_max_rel_drift=metrics.max_rel_drift(pe_, re_pub),
        # the usual wrong definition, only to explain a mismatch in ``reported``
        elementwise_max_rel_drift=metrics.elementwise_max_rel_drift(pt, rt),
        edge_elementwise_max_rel_drift=metrics.elementwise_max_rel_drift(pe_, re_pub))
    return out


# ── reported ───────────────────────────────────────────────────────────────────────────────────

def _is_number(v: Any) -> bool:
    """A real number a float can hold (a JSON integer of 400 digits is not)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _plain(v: Any) -> Any:
    """What the notebook reported, as the grader repeats it: a number as it is (bounded by being a
    float), anything else only by its kind and size. RESULTS is the notebook's text channel back
    to the student, so its strings, keys and containers are never copied into a message."""
    if _is_number(v):
        return v if math.isfinite(v) else str(v)
    return _kind(v)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({'true' if v else 'false'})"
    if isinstance(v, int):
        return f"an integer of {len(str(abs(v))) if abs(v) < 10 ** 4000 else 'over 4,000'} digits"
    if isinstance(v, str):
        return f"a string of {len(v):,} characters"
    if isinstance(v, (list, dict)):
        return f"a {'list' if isinstance(v, list) else 'dict'} of {len(v):,} items"
    return f"a {type(v).__name__}"


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REPORT_ATOL + REPORT_RTOL * abs(b)


def _measured(variant: str, field: str, models: dict, workspace: Path, assignment) -> tuple[Any, str | None]:
    """The grader's value of ``variant.field`` on the public split, or (None, why not)."""
    facts = models.get(variant)
    if field == "size_bytes":
        if isinstance(facts, dict) and "size_bytes" in facts:
            return facts["size_bytes"], None
        try:
            return len(read_model_bytes(workspace, assignment.artifacts[variant])), None
        except (UnsafeFileError, KeyError) as e:
            return None, str(e)
    if not isinstance(facts, dict):
        return None, "not measured"
    if "error" in facts:
        return None, facts["error"]
    if field == "latency_ms":
        return facts.get("latency_ms"), facts.get("latency_error") or facts.get("metrics_error")
    value = facts.get("public_split", {}).get(field)
    return value, None if value is not None else (facts.get("metrics_error") or facts.get("comparison_error"))


def _elementwise(models: dict, variant: str, field: str) -> float | None:
    facts = models.get(variant)
    if "drift" not in field or not isinstance(facts, dict):
        return None
    return facts.get("public_split", {}).get(field.replace("max_rel", "elementwise_max_rel"))


def _check(field: str, reported: Any, measured: Any, elementwise: float | None = None) -> str | None:
    """None when ``reported`` is an honest report of ``measured``, else what is wrong.

    ``elementwise``: the element-wise drift of the same outputs, to recognise that mistake.
    """
    if not _is_number(reported) or not math.isfinite(reported):
        hint = ELEMENTWISE_HINT if "drift" in field and _is_number(reported) else ""
        return f"reported {_plain(reported)}, not a finite number{hint}"
    if field == "size_bytes":
        return None if reported == measured else f"reported {reported:,}, the file has {measured:,} bytes"
    if field == "latency_ms":
        if reported <= 0:
            return f"reported {reported:g} ms, latency must be positive"
        lo, hi = measured / LATENCY_FACTOR, measured * LATENCY_FACTOR
        return None if lo <= reported <= hi else (
            f"reported {reported:.4g} ms, the grader measured {measured:.4g} ms (plausible: "
            f"{lo:.3g}–{hi:.3g} ms; is it in milliseconds, one session.run on all of X_test?)")
    if _close(reported, measured):
        return None
    data_name = "X_edge" if "edge" in field else "X_test"
    msg = f"reported {reported:.6g}, measured {measured:.6g} on the contract's {data_name}"
    if field == "accuracy":
        return msg + " (argmax of probabilities on all of X_test in one call vs y_test)"
    if elementwise is not None and _close(reported, elementwise):
        return msg + ELEMENTWISE_HINT
    return msg + " (difference beyond float rounding; one call on the whole array?)"


def measure_reported(assignment, workspace: Path, reported: Any, reported_error: str | None,
                     models: dict) -> dict[str, Any]:
    """The ``reported`` section: is each of RESULTS' 15 numbers what the grader measures?"""
    variants = list(assignment.artifacts)
    if reported is None:
        return {"present": False, "problems": [reported_error or "RESULTS was not found"],
                "checked": 0, "honest": 0, "honest_share": 0.0, "fields": {}}
    problems: list[str] = []
    if not isinstance(reported, dict):
        problems.append(f"RESULTS is a {type(reported).__name__}, expected a dict keyed by {', '.join(variants)}")
        reported = {}
    extra = [k for k in reported if k not in variants]
    if extra:   # not named: a key is text the notebook chose, and it is shown to the student
        problems.append(f"RESULTS has {len(extra):,} key(s) besides the contract's "
                        f"{', '.join(variants)}; they are ignored")
    fields: dict[str, Any] = {}
    for variant in variants:
        entry = reported.get(variant)
        if not isinstance(entry, dict):
            problems.append(f"RESULTS['{variant}'] is {'missing' if entry is None else 'not a dict'}")
            entry = {}
        for field in REPORTED_FIELDS:
            key = f"{variant}.{field}"
            value = entry.get(field)
            measured, why = _measured(variant, field, models, Path(workspace), assignment)
            record: dict[str, Any] = {"reported": _plain(value), "measured": measured}
            if field not in entry:
                reason = "missing from RESULTS"
            elif measured is None:
                reason = f"cannot be re-measured: {why or 'not measured'}"
            else:
                reason = _check(field, value, measured, _elementwise(models, variant, field))
            record["ok"] = reason is None
            if reason:
                record["reason"] = reason
                problems.append(f"{key}: {reason}")
            fields[key] = record
    checked = len(fields)
    honest = sum(1 for r in fields.values() if r["ok"])
    return {"present": True, "problems": problems, "checked": checked, "honest": honest,
            "honest_share": honest / checked if checked else 0.0, "fields": fields}
