"""``reported``: are the node counts and latencies of ``RESULTS`` what the grader measures?

``RESULTS = {"node_counts": {level: int}, "latency_ms": {level: float}}`` for the four levels of
:data:`~.model.LEVELS`. The grader optimises the contract's model itself at each level (ONNX
Runtime in the grader: it is the grader's own model) and counts the saved graph's nodes: a node
count must be exact. It times the contract's model at each level in the model worker, as the
contract times it (the median of 100 runs on the timing batch, warm), and a latency is plausible
when it is within a calibrated factor of the grader's (``latency.worst_ratio``: the largest
``max(reported / measured, measured / reported)`` over the levels). Both go through
:func:`autograder.measure.reported.check_reported`, which words every problem the same way for
every lesson.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort

from autograder.measure.graph_facts import node_count
from autograder.measure.onnx_load import run_model_worker
from autograder.measure.reported import check_reported

from . import data
from .model import LEVELS, contract_model_bytes

TIMING_RUNS = 100


@lru_cache(maxsize=1)
def node_counts() -> dict[str, int]:
    """The contract model's node count after ONNX Runtime optimised it at each level."""
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for level in LEVELS:
            so = ort.SessionOptions()
            so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            so.optimized_model_filepath = str(Path(tmp) / f"{level}.onnx")
            so.log_severity_level = 3
            ort.InferenceSession(contract_model_bytes(), so, providers=["CPUExecutionProvider"])
            counts[level] = node_count(onnx.load(so.optimized_model_filepath))
    return counts


def latencies_ms() -> dict[str, float | None]:
    """The grader's latency of the contract model at each level (None where it could not time it)."""
    out: dict[str, float | None] = {}
    for level in LEVELS:
        run = run_model_worker(contract_model_bytes(), inputs={"timing": data.timing_batch()}, facts=(),
                               latency_input="timing", latency_rounds=TIMING_RUNS, optimization_level=level)
        latency = run.result.get("latency") if run.ok else None
        out[level] = latency["model_ms"] if latency else None
    return out


def _ratio(reported: Any, measured: float | None) -> float | None:
    if measured is None or isinstance(reported, bool) or not isinstance(reported, (int, float)) or not reported > 0:
        return None
    return max(reported / measured, measured / reported)


def measure_reported(reported: Any, reported_error: str | None) -> dict[str, Any]:
    results = reported if isinstance(reported, dict) else {}
    counts, latencies = node_counts(), latencies_ms()
    nodes = check_reported(results.get("node_counts"), {level: (counts[level], 0) for level in LEVELS})
    timing = check_reported(results.get("latency_ms"), {level: (latencies[level], None) for level in LEVELS})
    ratios = [_ratio((results.get("latency_ms") or {}).get(level) if isinstance(results.get("latency_ms"), dict)
                     else None, latencies[level]) for level in LEVELS]
    timing["worst_ratio"] = None if None in ratios else max(ratios)
    return {"present": reported is not None, "node_counts": nodes, "latency": timing,
            "problems": [reported_error] if reported is None else []}
