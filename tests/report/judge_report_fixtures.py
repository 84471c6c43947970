"""Small, realistic inputs for the judge and report tests.

``MEASUREMENTS`` follows the measurements.json example of docs/ARCHITECTURE.md (a submission that
passes everything); ``RUBRIC`` and ``TOLERANCES`` are a cut-down assignment-07 rubric with one
check of each visibility. Tests never edit these: they take a copy through ``with_values``.
"""

from __future__ import annotations

import copy
from typing import Any

MEASUREMENTS: dict[str, Any] = {
    "schema": 1,
    "assignment": {"id": "07-quantization", "version": "1", "fingerprint": "0123456789abcdef"},
    "environment": {
        "python": "3.11.7",
        "onnxruntime": "1.32.0",
        "onnx": "1.23.2",
        "numpy": "2.4.6",
        "scikit-learn": "1.9.1",
        "skl2onnx": "1.20.0",
        "autograder": "0.1.0",
    },
    "execution": {
        "status": "completed",
        "reason": None,
        "cells_total": 23,
        "cells_run": 23,
        "cells_errored": 0,
        "first_error": None,
        "probe": "completed",
        "duration_s": 14.2,
        "output_truncated": False,
        "isolation": {
            "mode": "bwrap",
            "layers": ["uid:autograder-sb0", "bwrap", "netns", "pidns", "rlimits"],
            "warnings": [],
        },
        "completed": True,
    },
    "functions": {
        "quantize": {
            "defined": True,
            "cases": 40,
            "agree": 40,
            "agree_share": 1.0,
            "raised": 0,
            "groups": {"ties": {"cases": 6, "agree": 6}, "saturation": {"cases": 8, "agree": 8}},
            "first_mismatch": None,
        },
    },
    "models": {
        "fp32": {
            "path": "artifacts/fp32.onnx",
            "size_bytes": 268674,
            "valid": True,
            "problems": [],
            "interface_ok": True,
            "classification": "fp32",
            "op_histogram": {"MatMul": 3, "Add": 3},
            "param_count": 66817,
            "accuracy": 0.962,
        },
        "int8_dynamic": {
            "path": "artifacts/int8_dynamic.onnx",
            "size_bytes": 72541,
            "valid": True,
            "problems": [],
            "interface_ok": True,
            "classification": "dynamic",
            "op_histogram": {"DynamicQuantizeLinear": 3, "MatMulInteger": 3},
            "weight_dtypes": ["int8"],
            "float_weights_left": 0,
            "per_channel": False,
            "derived_from_fp32": True,
            "derived_residual": 0.98,
            "accuracy": 0.960,
            "accuracy_drop": 0.002,
            "label_agreement": 0.998,
            "max_abs_dp": 0.044,
            "p99_abs_dp": 0.028,
            "max_rel_drift": 0.09,
            "edge_max_rel_drift": 0.2,
            "size_ratio": 0.27,
            "latency_ratio": 0.6,
        },
        "int8_qdq": {
            "path": "artifacts/int8_qdq.onnx",
            "size_bytes": 80610,
            "valid": True,
            "problems": [],
            "interface_ok": True,
            "classification": "static_qdq",
            "weight_dtypes": ["int8"],
            "activation_dtypes": ["uint8"],
            "per_channel": True,
            "accuracy": 0.958,
            "accuracy_drop": 0.004,
            "calibrated_input_range": [-1.6, 2.5],
            "data_range": [-1.2, 2.2],
            "calibration_coverage": 1.0,
            "size_ratio": 0.3,
        },
    },
    "reported": {
        "present": True,
        "problems": [],
        "checked": 15,
        "honest": 15,
        "honest_share": 1.0,
        "fields": {"fp32.size_bytes": {"reported": 268674, "measured": 268674, "ok": True}},
    },
}

TOLERANCES: dict[str, Any] = {
    "meta": {"onnxruntime": "1.32.0", "seeds": 20},
    "functions": {"agree_share_min": 1.0},
    "dynamic_model": {"accuracy_drop_max": 0.012},
    "static_model": {"calibration_coverage_min": {"value": 0.95, "derived": "min over 20 seeds, minus 0.05"}},
    "size": {"int8_ratio_max": 0.35},
}

SECRET_HINT = "the hidden set is seeded with 2718"  # must never reach a student

RUBRIC: dict[str, Any] = {
    "checks": [
        {
            "id": "quantize",
            "title": "quantize agrees with QuantizeLinear",
            "points": 10,
            "visibility": "visible",
            "parts": [
                {
                    "name": "defined",
                    "measure": "functions.quantize.defined",
                    "op": "is_true",
                    "points": 2,
                    "message": "quantize is defined: {measured}",
                    "hint": "define quantize at the notebook's top level",
                },
                {
                    "name": "agrees",
                    "measure": "functions.quantize.agree_share",
                    "op": ">=",
                    "tolerance": "functions.agree_share_min",
                    "points": 8,
                    "format": "percent",
                    "message": "{functions.quantize.agree} of {functions.quantize.cases} cases agree ({measured}), "
                    "expected {threshold}",
                    "hint": "round half to even with np.rint, then saturate with np.clip",
                },
            ],
        },
        {
            "id": "dynamic_model",
            "title": "Dynamic int8 model",
            "points": 15,
            "visibility": "visible",
            "requires": "models.int8_dynamic",
            "parts": [
                {
                    "name": "really dynamically quantized",
                    "measure": "models.int8_dynamic.classification",
                    "op": "==",
                    "value": "dynamic",
                    "points": 5,
                    "format": "text",
                    "message": "the graph is classified as {measured}, expected {threshold}",
                    "hint": "quantize_dynamic rewrites each MatMul into DynamicQuantizeLinear → MatMulInteger",
                },
                {
                    "name": "accuracy drop",
                    "measure": "models.int8_dynamic.accuracy_drop",
                    "op": "<=",
                    "tolerance": "dynamic_model.accuracy_drop_max",
                    "points": 5,
                    "format": "percent",
                    "message": "accuracy drop {measured}, allowed {threshold}",
                    "hint": "quantize the fp32 model you trained, with int8 weights",
                },
                {
                    "name": "int8 weights",
                    "measure": "models.int8_dynamic.weight_dtypes",
                    "op": "in",
                    "value": ["int8"],
                    "points": 5,
                    "message": "weights are {measured}",
                    "hint": "weight_type=QuantType.QInt8",
                },
            ],
        },
        {
            "id": "static_model",
            "title": "Static QDQ model",
            "points": 15,
            "visibility": "hidden",
            "requires": "models.int8_qdq",
            "parts": [
                {
                    "name": "static QDQ",
                    "measure": "models.int8_qdq.classification",
                    "op": "==",
                    "value": "static_qdq",
                    "points": 5,
                    "hint": SECRET_HINT,
                },
                {
                    "name": "per channel",
                    "measure": "models.int8_qdq.per_channel",
                    "op": "is_true",
                    "points": 5,
                    "hint": SECRET_HINT,
                },
                {
                    "name": "calibration coverage",
                    "measure": "models.int8_qdq.calibration_coverage",
                    "op": ">=",
                    "tolerance": "static_model.calibration_coverage_min",
                    "points": 5,
                    "format": "percent",
                    "hint": SECRET_HINT,
                },
            ],
        },
        {
            "id": "size",
            "title": "int8 files are smaller",
            "points": 10,
            "visibility": "visible",
            "parts": [
                {
                    "name": "dynamic size",
                    "measure": "models.int8_dynamic.size_ratio",
                    "op": "<=",
                    "tolerance": "size.int8_ratio_max",
                    "points": 5,
                    "format": "ratio",
                    "message": "int8_dynamic.onnx is {measured} the fp32 file, allowed {threshold}",
                    "hint": "your model has {models.fp32.param_count:int} parameters; below about 40k the graph's own "
                    "bytes dominate",
                },
                {
                    "name": "static size",
                    "measure": "models.int8_qdq.size_ratio",
                    "op": "<=",
                    "tolerance": "size.int8_ratio_max",
                    "points": 5,
                    "format": "ratio",
                },
            ],
        },
        {
            "id": "reported_results",
            "title": "RESULTS is honest",
            "points": 5,
            "visibility": "after_due_date",
            "parts": [
                {
                    "name": "fp32 size",
                    "measure": "reported.fields.fp32.size_bytes.ok",
                    "op": "is_true",
                    "points": 2,
                    "hint": SECRET_HINT,
                },
                {
                    "name": "honest share",
                    "measure": "reported.honest_share",
                    "op": ">=",
                    "value": 1.0,
                    "points": 3,
                    "format": "percent",
                    "hint": SECRET_HINT,
                },
            ],
        },
        {
            "id": "execution",
            "title": "The notebook runs to the end",
            "points": 5,
            "visibility": "visible",
            "parts": [
                {"name": "completed", "measure": "execution.completed", "op": "is_true", "points": 3},
                {
                    "name": "no errors",
                    "measure": "execution.cells_errored",
                    "op": "==",
                    "value": 0,
                    "points": 2,
                    "format": "int",
                    "message": "{measured} cells raised errors",
                },
            ],
        },
    ],
    "manual": [{"id": "reflection", "title": "Reflection on edge drift", "points": 0}],
}

HIDDEN_IDS = ("static_model", "reported_results")
HIDDEN_TITLES = ("Static QDQ model", "RESULTS is honest")


def with_values(base: dict[str, Any], **paths: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with dotted paths (``__`` for ``.``) replaced: ``models__fp32={...}``."""
    data = copy.deepcopy(base)
    for dotted, value in paths.items():
        *parents, leaf = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        node[leaf] = value
    return data


def all_visible(rubric: dict[str, Any]) -> dict[str, Any]:
    """``rubric`` with every check visible."""
    data = copy.deepcopy(rubric)
    for c in data["checks"]:
        c["visibility"] = "visible"
    return data


def part(grade: dict[str, Any], check_id: str, name: str) -> dict[str, Any]:
    check = next(c for c in grade["checks"] if c["id"] == check_id)
    return next(p for p in check["parts"] if p["name"] == name)


def check(grade: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in grade["checks"] if c["id"] == check_id)


def failing_measurements() -> dict[str, Any]:
    """A realistic poor submission: quantize truncates, the QDQ model is missing, a cell raised."""
    data = with_values(
        MEASUREMENTS,
        models__int8_qdq={"error": "artifacts/int8_qdq.onnx is missing: the notebook did not write it"},
    )
    data["functions"]["quantize"].update(
        agree=34,
        agree_share=0.85,
        first_mismatch={
            "case": "quantize/ties_int8",
            "group": "ties",
            "call": "quantize([1.25], 0.5, 0, dtype=int8)",
            "expected": "[2] int8 shape (1,)",
            "got": "[3] int8 shape (1,)",
            "reason": "values",
        },
    )
    data["models"]["int8_dynamic"].update(accuracy_drop=0.031)
    data["execution"].update(
        cells_errored=1,
        cells_in_notebook=40,
        first_error={
            "cell": 11,
            "code_cell": 6,
            "where": "code cell 6 (cell 12 of the notebook)",
            "ename": "ValueError",
            "evalue": "operands could not be broadcast <b>together</b>",
        },
    )
    return data
