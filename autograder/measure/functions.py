"""The ``functions`` facts: how a student's functions answered the probe's calls, against a reference.

An assignment gives, per contracted function, an *expectation*: a function of a
:class:`~autograder.probe_format.ProbeCase` returning the reference's answer (an ndarray, an
:class:`~autograder.measure.compare.Expect`, or a tuple of them for a returned tuple), computed by
trusted code (ONNX Runtime through :mod:`autograder.measure.reference_ops`, or the assignment's own
NumPy). :func:`measure_functions` then records, per function::

    {"defined": true, "cases": 40, "agree": 40, "agree_share": 1.0, "raised": 0,
     "groups": {"ties": {"cases": 6, "agree": 6}, …},
     "first_mismatch": null | {"case", "group", "call", "expected", "got", "reason"}}

or ``{"defined": false, "error": "…"}`` when the notebook does not define it. Float results are
compared with :mod:`autograder.measure.compare`'s tolerance: float32 rounding unless the
expectation sets one per value, or ``tolerances`` sets one per group of cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..probe_format import CaseOutput, ProbeCase, ProbeResult
from . import compare
from .compare import Tolerance

Expectation = Callable[[ProbeCase], Any]


def measure_function(name: str, cases: list[ProbeCase], probe: ProbeResult, expect: Expectation, *,
                     tolerances: Mapping[str, Tolerance] | None = None) -> dict[str, Any]:
    """One function's facts: counts, per-group counts and the first mismatch (or why it has none).

    ``tolerances``: group name → the tolerance of that group's float results (others: float32 rounding).
    """
    outputs = [probe.cases.get(c.id) for c in cases]
    state = probe.functions.get(name)
    if state == "not callable":
        return {"defined": False,
                "error": f"the notebook defines {name} at its top level, but it is not a function (not callable)"}
    if state == "missing" or all(o is None or o.status == "missing_function" for o in outputs):
        return {"defined": False, "error": f"the notebook does not define {name} at its top level"}
    groups: dict[str, dict[str, int]] = {}
    agree = raised = 0
    first = None
    for case, output in zip(cases, outputs):
        tolerance = (tolerances or {}).get(case.group)
        fact = compare.compare_output(expect(case), output or CaseOutput("not_run"), tolerance=tolerance)
        g = groups.setdefault(case.group or "other", {"cases": 0, "agree": 0})
        g["cases"] += 1
        g["agree"] += int(fact["agree"])
        agree += int(fact["agree"])
        raised += int(fact["reason"] == "raised")
        if not fact["agree"] and first is None:
            first = {"case": case.id, "group": case.group, "call": compare.describe_call(case),
                     "expected": fact["expected"], "got": fact["got"], "reason": fact["reason"]}
    return {"defined": True, "cases": len(cases), "agree": agree, "agree_share": agree / len(cases) if cases else 0.0,
            "raised": raised, "groups": groups, "first_mismatch": first}


def measure_functions(cases: list[ProbeCase], probe: ProbeResult, expectations: Mapping[str, Expectation], *,
                      tolerances: Mapping[str, Mapping[str, Tolerance]] | None = None) -> dict[str, Any]:
    """The ``functions`` section: one entry per function of ``expectations``, in its order.

    Cases of functions without an expectation are left out (an assignment may call a function to
    collect data rather than to check it). ``tolerances``: function → group → tolerance.
    """
    if not probe.ran:
        return {"error": probe.error or "the probe did not run"}
    return {name: measure_function(name, [c for c in cases if c.function == name], probe, expect,
                                   tolerances=(tolerances or {}).get(name))
            for name, expect in expectations.items()}
