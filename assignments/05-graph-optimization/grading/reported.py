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
one minute to the next, against a calibrated window of about 11.8× per level (the largest honest ratio 1.49×):
a timing kept for minutes judges as fairly as a fresh one, and a unit slip (1000×) or a sum of
the runs instead of their median (100×) stays far outside.

Every number is judged as evidence that the notebook's own code produced it, level by level
(``levels.<level>``: one wrong or misspelled level costs that level only), against the graphs the
notebook saved (:mod:`.saved_levels`):

- ``node_counts``: a level's count is honest when it is the number of nodes of
  ``artifacts/mlp_<level>.onnx`` and that file is the graph ONNX Runtime makes of the contract's
  model at that level (so the count also equals the grader's). Without the file it earns nothing;
- ``latency``: a level's ``ratio``, ``max(reported / measured, measured / reported)`` to the
  grader's timing, judged by the rubric against a calibrated factor (two timings taken at
  different moments on a shared machine agree only in their order of magnitude), exists only
  where the notebook saved that level's graph (it opened a session at that level); otherwise the
  level is an ``error`` and earns nothing. A ratio above :data:`RETIME_ABOVE` is timed again,
  up to :data:`RETIMES` times, and the closest of the grader's timings counts (a judgement that
  does not flip with the load of the minute the kept timing came from). Each level has its own calibrated factor
  (``reported_latency.ratio_max_<level>``); ``worst_ratio`` over the levels is a summary.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from autograder.lesson import is_number, run_model_worker

from . import data
from .model import LEVELS, contract_model_bytes

TIMING_RUNS = 100
RETIME_ABOVE = 2.0  # a level's ratio beyond this is timed again (honest ratios: at most 1.5 measured)
RETIMES = 2


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


def _run_level(policy, level: str):
    return run_model_worker(
        contract_model_bytes(),
        inputs={"timing": data.timing_batch()},
        facts=("session",),
        latency_input="timing",
        latency_rounds=TIMING_RUNS,
        policy=policy,
        optimization_level=level,
    )


def retime_level(policy, level: str) -> float | None:
    """The grader's model timed again at ``level`` in a fresh worker, now (None when it cannot be)."""
    run = _run_level(policy, level)
    latency = run.result.get("latency") if run.ok else None
    return latency["model_ms"] if latency else None


def measure_levels(policy) -> dict[str, dict[str, Any]]:
    """:func:`grader_levels`, measured now: one model worker job per level."""
    out = {}
    for level in LEVELS:
        run = _run_level(policy, level)
        session = run.result["facts"].get("session", {}) if run.ok else {}
        latency = run.result.get("latency") if run.ok else None
        out[level] = {
            "node_count": session.get("node_count"),
            "op_counts": session.get("op_counts"),
            "latency_ms": latency["model_ms"] if latency else None,
            "why_not": None if run.ok else run.reason,
        }
    return out


def _ratio(reported: Any, measured: Any) -> float | None:
    if not (is_number(reported) and is_number(measured)) or not (reported > 0 and measured > 0):
        return None
    return float(max(reported / measured, measured / reported))


def _section(reported: Any, key: str) -> Mapping[str, Any] | None:
    section = reported.get(key) if isinstance(reported, Mapping) else None
    return section if isinstance(section, Mapping) else None


def _count_level(level: str, value: Any, grader: Mapping[str, Any], saved: Mapping[str, Any]) -> dict[str, Any]:
    """One level's node count: honest when it is the node count of the file the notebook saved at
    that level and that file is the graph of that level (so it equals the grader's count)."""
    out: dict[str, Any] = {"reported": value if is_number(value) else None, "measured": grader.get("node_count")}
    if saved.get("error") is not None:
        problem = f"{saved['error']}: a count earns points only as the count of the graph your session saved"
    elif not (is_number(value) and not isinstance(value, bool) and float(value).is_integer()):
        problem = f"the node count at {level} is missing or not a whole number"
    elif int(value) != saved["node_count"]:
        problem = f"the node count at {level} is not the number of nodes of {saved['path']}"
    elif not saved["genuine"]:
        problem = saved["why_not"]
    elif grader.get("node_count") is not None and int(value) != grader["node_count"]:
        problem = f"the node count at {level} is not the grader's count of that level's graph"
    else:
        problem = None
    return {**out, "honest": problem is None, "problem": problem or ""}


def _latency_level(
    level: str, value: Any, grader: Mapping[str, Any], saved: Mapping[str, Any], policy
) -> dict[str, Any]:
    """One level's latency: ``ratio`` to the grader's timing, only where the notebook saved that
    level's graph (a session was opened at that level); else ``error``. A ratio above
    :data:`RETIME_ABOVE` is timed again now, up to :data:`RETIMES` times, and the grader's timing
    closest to the reported one counts: the kept timing may come from a quieter or busier minute
    than the notebook's, and a judgement should not flip with the host's load."""
    if saved.get("error") is not None or not saved.get("genuine"):
        why = saved.get("error") or saved.get("why_not")
        return {"error": f"{why}: a latency earns points only for a session the notebook opened at {level}"}
    timings = [grader.get("latency_ms")]
    ratio = _ratio(value, timings[0])
    if ratio is None:
        return {"error": f"the latency at {level} is missing or not a positive number of milliseconds"}
    for _ in range(RETIMES):
        if ratio <= RETIME_ABOVE:
            break
        again = retime_level(policy, level)
        if again is not None:
            timings.append(again)
            ratio = min(ratio, _ratio(value, again) or ratio)
    return {"ratio": ratio, "timings_ms": timings}


def measure_reported(
    reported: Any, reported_error: str | None, policy, saved: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``reported`` section: ``present``, ``node_counts`` and ``latency`` (see the module).

    ``saved``: :func:`.saved_levels.measure_saved_levels` (None: no file was saved). Each level is
    judged on its own (``levels.<level>``), so one wrong or misspelled level costs that level only.
    """
    levels = grader_levels(policy)
    saved = saved or {}
    nothing = {"error": "no graph saved at this level"}
    if reported_error is not None or not isinstance(reported, Mapping):
        why = reported_error or "RESULTS is not a dict"
        return {"present": reported is not None, "node_counts": {"error": why}, "latency": {"error": why}}
    counts, latencies = _section(reported, "node_counts"), _section(reported, "latency_ms")
    node_levels = {
        level: _count_level(level, counts.get(level) if counts else None, m, saved.get(level, nothing))
        for level, m in levels.items()
    }
    honest = sum(v["honest"] for v in node_levels.values())
    nodes = {
        "levels": node_levels,
        "checked": len(node_levels),
        "honest": honest,
        "honest_share": honest / len(node_levels),
        "problems": [v["problem"] for v in node_levels.values() if v["problem"]],
    }
    if counts is None:
        nodes = {"error": "RESULTS has no node_counts dict"}
    if latencies is None:
        return {"present": True, "node_counts": nodes, "latency": {"error": "RESULTS has no latency_ms dict"}}
    latency_levels = {
        level: _latency_level(level, latencies.get(level), m, saved.get(level, nothing), policy)
        for level, m in levels.items()
    }
    # the worst ratio over the levels, evidence aside (a summary; each level has its own window)
    ratios = [_ratio(latencies.get(level), m["latency_ms"]) for level, m in levels.items()]
    latency = {
        "levels": latency_levels,
        "measured_ms": {level: m["latency_ms"] for level, m in levels.items()},
        "worst_ratio": max(ratios) if None not in ratios else None,
    }
    return {"present": True, "node_counts": nodes, "latency": latency}
