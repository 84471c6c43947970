"""``reported``: is every number of ``RESULTS`` the notebook's own measurement?

``RESULTS = {"latency_ms": {"<batch size>,<threads>": ms}, "batch_speedup": float,
"thread_speedup": float, "top_ops": [[op_type, total_us], ...]}``. Every number earns points only
as evidence that the notebook's own code produced it, on its own artifacts:

- ``backed``: the notebook saved the contract's model (``artifacts/model.onnx``, byte for byte
  the given cell's) and a genuine profile of it (:mod:`.saved_profile`): it opened sessions on
  the model. Without both, no number of ``RESULTS`` earns anything (a constant, or the README's
  table typed in, scores 0);
- ``latency``: the table's keys are exactly the contract's (every batch size with every thread
  count); each latency is judged by its ratio to what the notebook's own ``latency_table`` gives
  when the probe runs it again on the notebook's own model, moments later in the same kernel
  (:mod:`.latency`: three re-runs), ``max(reported / re-run, re-run / reported)`` to the closest
  re-run (a timing that is not a median, a sum of runs, moves with one slow run), the worst entry
  within a calibrated factor. The honesty rule: a ``latency_table`` that times
  the wrong thing, honestly reported, keeps these points (it loses at ``latency_table``); a table
  typed in, or one from another run of other code, does not;
- ``comparisons``: ``batch_speedup`` (rows per second at the largest batch over one row at a
  time, one thread) and ``thread_speedup`` (the largest batch, one thread over the most threads)
  are what the notebook's own table gives (to :data:`SAME`): a comparison typed in, or the ideal
  one (the thread count itself), is not the measured one;
- ``top_ops``: exactly what the notebook's own ``top_ops`` returns on its own
  ``artifacts/profile.json`` (the probe calls it on that file, ``Arg.artifact``), beside a genuine
  profile: the numbers come from the profile saved, read by the notebook's code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autograder.lesson import UnsafeFileError, is_number, read_model_bytes

from .model import BATCH_SIZES, THREADS, contract_model_bytes, table_key

MODEL_PATH = "artifacts/model.onnx"
SAME = 1e-6  # a comparison computed from the table's numbers, as floats: rounding only


def _ratio(reported: Any, measured: Any) -> float | None:
    if not (is_number(reported) and is_number(measured)) or not (reported > 0 and measured > 0):
        return None
    if not (math.isfinite(reported) and math.isfinite(measured)):
        return None
    return float(max(reported / measured, measured / reported))


def model_is_contract(workspace) -> dict[str, Any]:
    """Whether ``artifacts/model.onnx`` is the contract's model, byte for byte."""
    try:
        data = read_model_bytes(workspace, MODEL_PATH)
    except UnsafeFileError as e:
        return {"contract": False, "why_not": f"{e}: run the given cell that saves the model"}
    same = data == contract_model_bytes()
    return {"contract": same, "why_not": None if same else f"{MODEL_PATH} is not the model the given cell saves"}


def _latency(table: Mapping[str, Any] | None, rerun: Mapping[str, Any]) -> dict[str, Any]:
    """RESULTS' table against the notebook's own ``latency_table`` run again by the probe."""
    want = [table_key(b, t) for b in BATCH_SIZES for t in THREADS]
    if table is None:
        return {"error": "RESULTS has no latency_ms dict"}
    missing, extra = [k for k in want if k not in table], [k for k in table if k not in want]
    out: dict[str, Any] = {"keys_ok": not missing and not extra, "missing": len(missing), "extra": len(extra)}
    again = rerun.get("student_ms") or {}
    ratios, problems = {}, []
    for key in want:
        if key not in table:
            continue
        found = [r for r in (_ratio(table[key], ms) for ms in again.get(key) or []) if r is not None]
        ratio = min(found) if found else None
        if ratio is None:
            problems.append(
                f"the latency {key} is not a positive number of milliseconds"
                if not (is_number(table[key]) and table[key] > 0)
                else "your latency_table gave no timing of that entry when the grader ran it again"
            )
            continue
        ratios[key] = ratio
    out["ratios"] = ratios
    out["problems"] = problems
    if isinstance(rerun.get("honest_ratio"), dict) and not again:
        out["worst_ratio"] = {"error": f"your latency_table could not be run again: {rerun['honest_ratio']['error']}"}
    elif problems or not ratios:
        out["worst_ratio"] = {
            "error": problems[0] if problems else "RESULTS['latency_ms'] holds none of the table's keys"
        }
    else:
        out["worst_ratio"] = max(ratios.values())
    return out


def _comparisons(reported: Mapping[str, Any], table: Mapping[str, Any] | None) -> dict[str, Any]:
    big, few, many = max(BATCH_SIZES), min(THREADS), max(THREADS)
    found = table or {}
    one, wide, fast = (found.get(table_key(1, few)), found.get(table_key(big, few)), found.get(table_key(big, many)))
    if not all(is_number(v) and v > 0 for v in (one, wide, fast)):
        return {"consistent": False, "problems": ["the table lacks the latencies the comparisons are computed from"]}
    expected = {"batch_speedup": big * one / wide, "thread_speedup": wide / fast}
    problems = []
    for name, value in expected.items():
        got = reported.get(name)
        if not is_number(got):
            problems.append(f"{name} is missing or not a number")
        elif not abs(got - value) <= SAME * abs(value):
            problems.append(f"{name} is not what your latency table gives")
    return {"consistent": not problems, "problems": problems, "expected": expected}


def _own_answer(output: Any) -> tuple[list | None, str | None]:
    """The notebook's ``top_ops`` on its own profile (rows as lists), or why there is none."""
    if output is None or output.status != "ok":
        status = "not called" if output is None else output.status
        return None, f"top_ops could not be read on artifacts/profile.json (the probe's call: {status})"
    value = output.value
    if not isinstance(value, (list, tuple)):
        return None, "top_ops on artifacts/profile.json did not return a list"
    return [list(r) if isinstance(r, (list, tuple)) else r for r in value], None


def _same_rows(got: Any, want: list) -> bool:
    rows = [list(r) if isinstance(r, (list, tuple)) else r for r in got] if isinstance(got, list) else None
    return (
        rows is not None
        and len(rows) == len(want)
        and all(
            isinstance(r, list)
            and isinstance(w, list)
            and len(r) == len(w) == 2
            and r[0] == w[0]
            and is_number(r[1])
            and is_number(w[1])
            and float(r[1]) == float(w[1])
            for r, w in zip(rows, want)
        )
    )


def _top_ops(reported: Mapping[str, Any], own: Any) -> dict[str, Any]:
    """``RESULTS["top_ops"]`` against the notebook's own ``top_ops`` on its own profile, called by
    the probe (honesty: a wrong ``top_ops`` honestly reported keeps these points)."""
    want, why = _own_answer(own)
    if why is not None:
        return {"honest": False, "problem": why}
    same = _same_rows(reported.get("top_ops"), want or [])
    return {
        "honest": same,
        "problem": ""
        if same
        else "RESULTS['top_ops'] is not what your top_ops gives on artifacts/profile.json with k = 3",
    }


def measure_reported(
    reported: Any,
    reported_error: str | None,
    workspace,
    profile: Mapping[str, Any],
    rerun: Mapping[str, Any],
    own_top_ops: Any = None,
) -> dict[str, Any]:
    """The ``reported`` section (see the module). ``rerun``: :func:`.latency.measure_latency_table`."""
    model = model_is_contract(workspace)
    genuine = "error" not in profile and profile.get("valid") and profile.get("contract_model")
    why_not = model["why_not"] or (
        None if genuine else "artifacts/profile.json is not a profile of the contract's model"
    )
    if reported_error is not None or not isinstance(reported, Mapping):
        why = reported_error or "RESULTS is not a dict"
        return {
            "present": False,
            "backed": False,
            "latency": {"error": why},
            "comparisons": {"error": why},
            "top_ops": {"error": why},
        }
    if why_not is not None:
        why = f"nothing of your notebook backs RESULTS ({why_not}): a number earns points only as your own measurement"
        return {
            "present": True,
            "backed": False,
            "latency": {"error": why},
            "comparisons": {"error": why},
            "top_ops": {"error": why},
        }
    table = reported.get("latency_ms") if isinstance(reported.get("latency_ms"), Mapping) else None
    return {
        "present": True,
        "backed": True,
        "latency": _latency(table, rerun),
        "comparisons": _comparisons(reported, table),
        "top_ops": _top_ops(reported, own_top_ops),
    }
