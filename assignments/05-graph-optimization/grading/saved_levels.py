"""The graphs the notebook saved at each level: the evidence behind ``RESULTS``.

A number of ``RESULTS`` earns points only as evidence that the student's own code produced it on
the student's own artifacts. For lesson 05 that artifact is ``artifacts/mlp_<level>.onnx``, the
graph ONNX Runtime wrote when the notebook opened its session at that level
(``optimized_model_filepath``). Each file is read safely and checked and run in the model worker
(as the model to deploy is, :mod:`.optimized`), which counts its nodes; it is **the graph of that
level** when its operator counts (by domain) are the ones the grader's own session at that level
made of the contract's model and its probabilities on the public timing batch are the contract
model's (to :data:`SAME_MODEL_ABS`: the graph of this model, not another with the same operators).
Only public rows are fed: the verdict carries nothing of the grader's hidden data.

:func:`measure_saved_levels` gives, per level, ``{"node_count": int, "genuine": bool}`` or
``{"error": why}`` (a missing file, an invalid model, another model's graph). A reported node
count is judged against the count of that file; a reported latency earns points only at a level
whose file is genuine (the notebook opened a session at that level). Without the files a
constant, or the README's table copied, earns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from autograder.lesson import UnsafeFileError, read_model_bytes, run_model_worker

from . import data
from .model import LEVELS, OUTPUT
from .optimized import INTERFACE, contract_outputs

SAME_MODEL_ABS = 1e-3  # probabilities: float32 rounding is ~1e-6; another model's weights differ by far more


def level_path(level: str) -> str:
    """Where the contract saves the graph of ``level`` (inside the workspace)."""
    return f"artifacts/mlp_{level}.onnx"


def measure_saved_levels(assignment, workspace, grader: Mapping[str, Mapping[str, Any]], children=None) -> dict:
    """Per level of :data:`~.model.LEVELS`: the saved graph's ``node_count`` and ``genuine``, or
    ``error`` (see the module). ``grader``: :func:`.reported.grader_levels` (its ``op_counts``)."""
    rows = data.timing_batch()  # public (X_timing): no hidden row is fed to these files
    want = contract_outputs(rows)
    out: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        path = level_path(level)
        try:
            model = read_model_bytes(workspace, path, assignment.model_policy.limits)
        except UnsafeFileError:
            out[level] = {"error": f"{path} is missing or unreadable: the notebook saved no graph at {level}"}
            continue
        run = run_model_worker(
            model,
            inputs={"public": rows},
            interface=INTERFACE,
            facts=("graph",),
            policy=assignment.model_policy,
            children=children,
        )
        if not run.ok:
            out[level] = {"error": f"{path} is not a model ONNX Runtime runs"}
            continue
        facts = run.result["facts"]
        got = run.outputs.get(f"public__{OUTPUT}")
        same_outputs = (
            not run.result.get("run_error")
            and got is not None
            and got.shape == want.shape
            and bool(np.all(np.isfinite(got)))
            and float(np.max(np.abs(got.astype(np.float64) - want))) <= SAME_MODEL_ABS
        )
        expected_ops = grader.get(level, {}).get("op_counts")
        same_ops = expected_ops is None or facts.get("op_counts") == expected_ops
        out[level] = {
            "path": path,
            "node_count": facts["node_count"],
            "genuine": bool(same_outputs and same_ops),
            "why_not": None
            if same_outputs and same_ops
            else (
                f"{path} does not compute the contract model's probabilities"
                if not same_outputs
                else f"{path} is not the graph ONNX Runtime makes of the model at {level}"
            ),
        }
    return out
