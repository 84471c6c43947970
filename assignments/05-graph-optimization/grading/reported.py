"""``reported``: are the node counts and latencies of ``RESULTS`` what the notebook's own code gives?

``RESULTS = {"node_counts": {level: int}, "latency_ms": {level: float}}`` for the four levels of
:data:`~.model.LEVELS`. For each level the grader runs its own copy of the contract's model in the
model worker at that level (``optimization_level=level``), which reports the graph ONNX Runtime
optimised (the ``session`` facts: its node count). That model is the grader's and the same for
every submission, so :func:`grader_levels` measures it once per process (four model worker jobs)
and keeps the counts for :data:`LEVELS_MAX_AGE_S`, keyed by what they depend on: the model's
bytes, the policy (and, being per process, the ONNX Runtime version). A level that could not be
measured is not kept.

Every number is judged as evidence that the notebook's own code produced it, level by level
(``levels.<level>``: one wrong or misspelled level costs that level only), against the graphs the
notebook saved (:mod:`.saved_levels`):

- ``node_counts``: a level's count is honest when it is the number of nodes of
  ``artifacts/mlp_<level>.onnx`` and that file is the graph ONNX Runtime makes of the contract's
  model at that level (so the count also equals the grader's). Without the file it earns nothing;
- ``latency``: judged against the notebook's own timing function, not the grader's timing in
  another process. The probe opens a session of its own on the level's saved file
  (``Arg.session``: one intra-op thread, that level) and calls the notebook's ``latency_ms(session,
  X_timing)`` and the probe's own timer on it alternately, :data:`PAIRS` times, in the same kernel
  moments apart (:func:`pairings`; ``autograder.lesson.timing_honesty``): load slows both sides of
  a pair alike. Two ratios, each ``max(a / b, b / a)``: ``timer_ratio``, the notebook's
  ``latency_ms`` against the probe's timer (the median over the pairs: does the function time one
  ``session.run`` in milliseconds?), and ``reported_ratio``, ``RESULTS``' latency against the
  notebook's ``latency_ms`` re-run by the probe (the median of its runs: is the number what the
  function gives?). A level's ``ratio`` is the larger, ``within_window`` whether it is at most
  ``timing_honesty.WINDOW``, the factor calibrated on that pairing. A level earns only where the
  notebook saved that level's graph (a session was opened at that level); otherwise it is an
  ``error`` and earns nothing. ``worst_ratio`` over the levels is a summary.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections.abc import Mapping
from statistics import median
from typing import Any

from autograder.lesson import (
    Arg,
    ProbeResult,
    is_number,
    latency_pairing,
    measure_pairing,
    run_model_worker,
    timing_honesty,
)

from . import data
from .model import LEVELS, contract_model_bytes

LATENCY_FUNCTION = "latency_ms"
PAIRS = 3  # student, probe, student, probe, …: the median ratio over the pairs counts
TIMING_RUNS = 100  # the probe's timer: the median of as many warm runs as the contract's latency_ms


LEVELS_MAX_AGE_S = 600.0  # how long a process keeps its measurement of the contract model (see the module)
_levels_lock = threading.Lock()  # one measurement at a time; the others wait and reuse it
_levels: dict[tuple, tuple[float, dict[str, dict[str, Any]]]] = {}  # key → (when, levels)


def pairings() -> dict[str, Any]:
    """Per level, the pairing of the notebook's ``latency_ms`` with the probe's timer on a session
    the probe opens on ``artifacts/mlp_<level>.onnx`` (one intra-op thread, at that level)."""
    x = Arg.array(data.timing_batch())
    return {
        level: latency_pairing(
            f"{LATENCY_FUNCTION}/{level}",
            LATENCY_FUNCTION,
            Arg.session(
                Arg.artifact(f"artifacts/mlp_{level}.onnx"), intra_op_num_threads=1, graph_optimization_level=level
            ),
            x,
            runs=TIMING_RUNS,
            repeats=PAIRS,
            group=f"latency_{level}",
        )
        for level in LEVELS
    }


def timing_cases() -> list:
    """The probe's calls that time each level (after count_ops's)."""
    return [case for pairing in pairings().values() for case in pairing.cases()]


def measure_timing(probe: ProbeResult) -> dict[str, dict[str, Any]]:
    """Per level, :func:`measure_pairing`'s facts of the probe's calls."""
    return {level: measure_pairing(pairing, probe) for level, pairing in pairings().items()}


def grader_levels(policy) -> dict[str, dict[str, Any]]:
    """Per level: the grader's ``node_count`` and ``op_counts`` of the contract model (None where
    the worker could not measure it, with ``why_not``); measured once per process (see the module)."""
    key = (hashlib.sha256(contract_model_bytes()).hexdigest(), policy, LEVELS)
    with _levels_lock:
        when, levels = _levels.get(key, (None, None))
        if levels is None or time.monotonic() - when > LEVELS_MAX_AGE_S:
            levels = measure_levels(policy)
            if all(m["node_count"] is not None for m in levels.values()):
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
            policy=policy,
            optimization_level=level,
        )
        session = run.result["facts"].get("session", {}) if run.ok else {}
        out[level] = {
            "node_count": session.get("node_count"),
            "op_counts": session.get("op_counts"),
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
    level: str, value: Any, timing: Mapping[str, Any] | None, saved: Mapping[str, Any]
) -> dict[str, Any]:
    """One level's latency (see the module): ``ratio`` and ``within_window`` from the pairing's
    facts, only where the notebook saved that level's graph; else ``error``."""
    if saved.get("error") is not None or not saved.get("genuine"):
        why = saved.get("error") or saved.get("why_not")
        return {"error": f"{why}: a latency earns points only for a session the notebook opened at {level}"}
    if not (is_number(value) and value > 0):
        return {"error": f"the latency at {level} is missing or not a positive number of milliseconds"}
    if not timing or timing.get("error") or not timing.get("entries"):
        why = (timing or {}).get("error") or "the probe did not time it"
        return {"error": f"your latency_ms could not be timed at {level} beside the grader's timer: {why}"}
    entry = next(iter(timing["entries"].values()))
    rerun = float(median(entry["student_ms"]))
    timer_ratio, reported_ratio = float(entry["ratio"]), _ratio(value, rerun)
    if reported_ratio is None:
        return {"error": f"your latency_ms did not give a positive number of milliseconds at {level}"}
    ratio = max(timer_ratio, reported_ratio)
    window = float(timing.get("window") or timing_honesty.WINDOW)
    return {
        "ratio": ratio,
        "timer_ratio": timer_ratio,
        "reported_ratio": reported_ratio,
        "rerun_ms": rerun,
        "student_ms": list(entry["student_ms"]),
        "grader_ms": list(entry["grader_ms"]),
        "window": window,
        "within_window": ratio <= window,
    }


def measure_reported(
    reported: Any,
    reported_error: str | None,
    policy,
    saved: Mapping[str, Mapping[str, Any]] | None = None,
    timing: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``reported`` section: ``present``, ``node_counts`` and ``latency`` (see the module).

    ``saved``: :func:`.saved_levels.measure_saved_levels` (None: no file was saved); ``timing``:
    :func:`measure_timing` (None: the probe timed nothing). Each level is judged on its own
    (``levels.<level>``), so one wrong or misspelled level costs that level only.
    """
    levels = grader_levels(policy)
    saved = saved or {}
    timing = timing or {}
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
        level: _latency_level(level, latencies.get(level), timing.get(level), saved.get(level, nothing))
        for level in levels
    }
    ratios = [v.get("ratio") for v in latency_levels.values()]
    latency = {
        "levels": latency_levels,
        "window": timing_honesty.WINDOW,
        "worst_ratio": max(r for r in ratios if r is not None) if None not in ratios else None,
    }
    return {"present": True, "node_counts": nodes, "latency": latency}
