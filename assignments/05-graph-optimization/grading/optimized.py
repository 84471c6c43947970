"""``models.optimized``: the model the notebook saved at ``ORT_ENABLE_EXTENDED``.

Read safely and checked and run in the model worker (autograder/measure/onnx_load.py) under the
lesson's ``[model_worker]`` policy, which admits the ONNX Runtime contrib operators the optimizer
emits for this model (assignment.toml). Facts: its node count and domain-qualified op counts
(``graph`` facts), the nodes removed from the contract's model, how many contrib operators
(``com.microsoft``) it holds, and the largest difference between its outputs and the contract
model's (the grader's own model, run unoptimised) on the grader's hidden rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from autograder.lesson import ModelInterface, TensorSpec, UnsafeFileError, ort_model, read_model_bytes, run_model_worker

from . import data
from .model import INPUT, N_CLASSES, N_FEATURES, OUTPUT, contract_model_bytes

ARTIFACT = "optimized"
CONTRIB_DOMAIN = "com.microsoft"
INTERFACE = ModelInterface(
    inputs=(TensorSpec(INPUT, "float32", (None, N_FEATURES)),),
    outputs=(TensorSpec(OUTPUT, "float32", (None, N_CLASSES)),),
)


def contract_outputs(x: np.ndarray) -> np.ndarray:
    """The contract model's probabilities on ``x`` (ONNX Runtime, no graph optimisation)."""
    return ort_model(onnx.load_from_string(contract_model_bytes()), {INPUT: x})[0]


def contract_node_count() -> int:
    return len(onnx.load_from_string(contract_model_bytes()).graph.node)


def measure_optimized(assignment, workspace, children=None) -> dict[str, Any]:
    """``models.optimized`` (``children``: the submission's measuring children, ``ctx.children``)."""
    path = assignment.artifacts[ARTIFACT]
    try:
        model = read_model_bytes(workspace, path, assignment.model_policy.limits)
    except UnsafeFileError as e:
        return {"error": str(e)}
    hidden = data.hidden_rows()
    run = run_model_worker(
        model,
        inputs={"hidden": hidden},
        interface=INTERFACE,
        facts=("graph",),
        policy=assignment.model_policy,
        children=children,
    )
    if not run.ok:
        return {"error": f"invalid model: {run.reason}"}
    facts = run.result["facts"]
    original = contract_node_count()
    out: dict[str, Any] = {
        "path": path,
        "valid": True,
        "interface_ok": facts.get("interface_ok"),
        "problems": facts.get("problems", []),
        "node_count": facts["node_count"],
        "op_counts": facts["op_counts"],
        "original_node_count": original,
        "nodes_removed": original - facts["node_count"],
        "fewer_nodes": facts["node_count"] < original,
        "contrib_ops": sum(n for op, n in facts["op_counts"].items() if op.startswith(CONTRIB_DOMAIN + ".")),
    }
    if run.result.get("run_error"):
        return {**out, "run_error": run.result["run_error"], "max_abs_diff": None}
    got = run.outputs.get(f"hidden__{OUTPUT}")
    want = contract_outputs(hidden)
    if got is None or got.shape != want.shape or not np.all(np.isfinite(got)):
        return {
            **out,
            "max_abs_diff": None,
            "run_error": "its probabilities are missing, of another shape, or not finite",
        }
    out["max_abs_diff"] = float(np.max(np.abs(got.astype(np.float64) - want)))
    return out
