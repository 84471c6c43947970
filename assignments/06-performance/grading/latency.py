"""``latency_table(path, batch_sizes, threads)``: re-run by the probe, beside the probe's own timer.

The probe calls the notebook's ``latency_table`` on the model the notebook saved
(``Arg.artifact("artifacts/model.onnx")``) with the contract's batch sizes and thread counts, and
right after it the probe's own table of the same file (``grader:latency_table``: a session per
thread count, the median of :data:`~.model.TIMING_RUNS` warm runs of the same rows, the first
``b`` of ``X_timing``), alternating three times (``timing_honesty.table_pairing``: A B A B, so the
machine's load slows both sides of a pair alike). Never an absolute speed:

- ``shape_ok``: the first call returned a dict keyed by exactly the contract's
  ``(batch_size, threads)`` tuples, every value a positive number (``shape_problem`` says what
  is not);
- ``honest_ratio``: per entry the median over the pairs of ``max(student / grader, grader /
  student)``, the worst entry: judged against a calibrated factor. Seconds for milliseconds are
  1000 times off, the sum of 50 runs 50 times, the whole batch timed for one row about 40 times;
- ``student_ms``: per entry ``"b,t"`` the notebook's own re-runs (three), against which
  ``RESULTS["latency_ms"]`` is judged (:mod:`.reported`).
"""

from __future__ import annotations

import math
from typing import Any

from autograder.lesson import Arg, is_number, measure_pairing, table_pairing

from .model import BATCH_SIZES, THREADS, TIMING_RUNS, timing_batch

FUNCTION = "latency_table"
MODEL = "artifacts/model.onnx"
PAIRING = table_pairing(
    "latency_table/timing",
    FUNCTION,
    Arg.artifact(MODEL),
    BATCH_SIZES,
    THREADS,
    x=Arg.array(timing_batch()),
    runs=TIMING_RUNS,
    repeats=3,
)


def probe_cases() -> list:
    return PAIRING.cases()


def _shape_problem(value: Any) -> str | None:
    want = {(b, t) for b in BATCH_SIZES for t in THREADS}
    if not isinstance(value, dict):
        return "latency_table did not return a dict"
    keys = set(value)
    if keys != want:
        plain = [k for k in keys if not (isinstance(k, tuple) and len(k) == 2)]
        if plain:
            return "latency_table's keys are not (batch_size, threads) tuples of two ints"
        return f"latency_table's keys miss {len(want - keys)} of the {len(want)} (batch_size, threads) pairs asked for and hold {len(keys - want)} other(s)"
    if not all(is_number(v) and math.isfinite(v) and v > 0 for v in value.values()):
        return "not every latency of latency_table's table is a positive number"
    return None


def measure_latency_table(probe) -> dict[str, Any]:
    """The ``latency_table`` section (see the module)."""
    facts = measure_pairing(PAIRING, probe)
    first = probe.cases.get(PAIRING.student_id(0))
    if first is not None and first.status == "ok":
        shape = _shape_problem(first.value)
    else:
        shape = facts["error"] or "latency_table could not be called"
    out: dict[str, Any] = {
        "shape_ok": shape is None,
        "shape_problem": shape or "",
        "pairs": facts["pairs"],
        "entries": facts["entries"],
        "student_ms": {k: [float(v) for v in e["student_ms"]] for k, e in facts["entries"].items()},
    }
    if facts["error"] or facts["worst_ratio"] is None:
        out["honest_ratio"] = {"error": facts["error"] or "latency_table gave no timing"}
    else:
        out["honest_ratio"] = float(facts["worst_ratio"])
    return out
