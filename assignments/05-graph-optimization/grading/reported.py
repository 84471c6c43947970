"""``reported``: are the node counts and latencies of ``RESULTS`` what the grader measures?

``RESULTS = {"node_counts": {level: int}, "latency_ms": {level: float}}`` for the four levels of
:data:`~.model.LEVELS`. For each level the grader runs its own copy of the contract's model in the
model worker at that level (``optimization_level=level``), which reports the graph ONNX Runtime
optimised (the ``session`` facts: its node count) and times it as the contract times it (the
median of 100 warm runs on the timing batch).

That model is the grader's and the same for every submission, so :func:`grader_levels` measures
it once per process (four model worker jobs, ~1.3 s of CPU) and keeps the result for
:data:`LEVELS_MAX_AGE_S`, keyed by what it depends on: the model's bytes, the policy, the timing's
rounds (and, being per process, the machine and the ONNX Runtime version). A node count is a fact
of that model and cannot change; a timing can, with the machine's load, so a process that lives
longer (a Dask worker) times it again. A level that could not be measured is not kept. Measured on
a busy 2-core machine (load 5 to 6), the grader's timing of a level varied by up to 1.43× from
one minute to the next, against a calibrated window of 11.77× (the largest honest ratio 1.47×):
a timing kept for minutes judges as fairly as a fresh one, and a unit slip (1000×) or a sum of
the runs instead of their median (100×) stays far outside.

Both sections come from :func:`autograder.measure.reported.check_reported`:

- ``node_counts``: each count must equal the grader's exactly;
- ``latency``: each latency must be a positive, finite number (form only: the tolerance is None),
  and ``worst_ratio``, the largest ``max(reported / measured, measured / reported)`` over the
  levels, is judged by the rubric against a calibrated factor: two timings taken at different
  moments on a shared machine agree only in their order of magnitude.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from autograder.measure.onnx_load import run_model_worker
from autograder.measure.reported import Expected, Hint, check_reported, is_number

from . import data
from .model import LEVELS, contract_model_bytes

TIMING_RUNS = 100
COUNT_HINT = Hint(
    "node counts",
    "count the graph ONNX Runtime saved for that level (optimized_model_filepath), not the model the session loaded",
)


LEVELS_MAX_AGE_S = 600.0  # how long a process keeps its timings of the contract model (see the module)
_levels_lock = threading.Lock()  # one measurement at a time; the others wait and reuse it
_levels: dict[tuple, tuple[float, dict[str, dict[str, Any]]]] = {}  # key → (when, levels)


def grader_levels(policy) -> dict[str, dict[str, Any]]:
    """Per level: the grader's ``node_count`` and ``latency_ms`` of the contract model (None where
    the worker could not measure it, with ``why_not``); measured once per process (see the module)."""
    key = (hashlib.sha256(contract_model_bytes()).hexdigest(), policy, LEVELS, TIMING_RUNS)
    with _levels_lock:
        when, levels = _levels.get(key, (None, None))
        if levels is None or time.monotonic() - when > LEVELS_MAX_AGE_S:
            levels = measure_levels(policy)
            if all(m["node_count"] is not None and m["latency_ms"] is not None for m in levels.values()):
                _levels[key] = (time.monotonic(), levels)
        return copy.deepcopy(levels)


def measure_levels(policy) -> dict[str, dict[str, Any]]:
    """:func:`grader_levels`, measured now: one model worker job per level."""
    out = {}
    for level in LEVELS:
        run = run_model_worker(
            contract_model_bytes(),
            inputs={"timing": data.timing_batch()},
            facts=("session",),
            latency_input="timing",
            latency_rounds=TIMING_RUNS,
            policy=policy,
            optimization_level=level,
        )
        session = run.result["facts"].get("session", {}) if run.ok else {}
        latency = run.result.get("latency") if run.ok else None
        out[level] = {
            "node_count": session.get("node_count"),
            "latency_ms": latency["model_ms"] if latency else None,
            "why_not": None if run.ok else run.reason,
        }
    return out


def _ratio(reported: Any, measured: Any) -> float | None:
    if not (is_number(reported) and is_number(measured)) or not (reported > 0 and measured > 0):
        return None
    return float(max(reported / measured, measured / reported))


def _only(reported: Any, key: str) -> Any:
    """``RESULTS`` as one section's check sees it: only its own key (the other section judges the
    other key, so neither calls it unexpected)."""
    if not isinstance(reported, Mapping):
        return reported
    return {key: reported[key]} if key in reported else {}


def measure_reported(reported: Any, reported_error: str | None, policy) -> dict[str, Any]:
    """The ``reported`` section: ``present``, ``node_counts`` and ``latency`` (see the module)."""
    levels = grader_levels(policy)
    nodes = check_reported(
        _only(reported, "node_counts"),
        {
            f"node_counts.{level}": Expected(
                m["node_count"], 0, why_not=m["why_not"], unit="nodes", where=f" at {level}", hint=COUNT_HINT
            )
            for level, m in levels.items()
        },
        missing_reason=reported_error,
    )
    latency = check_reported(
        _only(reported, "latency_ms"),
        {
            f"latency_ms.{level}": Expected(m["latency_ms"], None, why_not=m["why_not"], positive=True, unit="ms")
            for level, m in levels.items()
        },
        missing_reason=reported_error,
    )
    values = reported.get("latency_ms") if isinstance(reported, Mapping) else None
    ratios = [
        _ratio(values.get(level) if isinstance(values, Mapping) else None, m["latency_ms"])
        for level, m in levels.items()
    ]
    if None in ratios:  # a latency missing or not a positive number: the first problem says which
        problems = latency["problems"] or ["a latency could not be compared with the grader's"]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        latency = {"error": problems[0] + more}
    else:
        latency.update(measured_ms={level: m["latency_ms"] for level, m in levels.items()}, worst_ratio=max(ratios))
    return {"present": reported is not None, "node_counts": nodes, "latency": latency}
