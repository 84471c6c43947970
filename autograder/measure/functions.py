"""The ``functions`` facts: how a student's functions answered the probe's calls, against a reference.

An assignment gives, per contracted function, an *expectation*: a function of a
:class:`~autograder.probe_format.ProbeCase` returning the reference's answer (an ndarray, an
:class:`~autograder.measure.compare.Expect`, a tuple of them for a returned tuple, or a JSON-like
value such as ``{"Conv": 3, "com.microsoft.Gelu": 2}`` whose items may be either), computed by
trusted code (ONNX Runtime through :mod:`autograder.measure.reference_ops`, or the assignment's own
NumPy). :func:`measure_functions` then records, per function::

    {"defined": true, "cases": 40, "agree": 40, "agree_share": 1.0, "raised": 0, "replaced": null,
     "groups": {"ties": {"cases": 6, "agree": 6, "agree_share": 1.0, "raised": 0, "failure": null}, …},
     "first_mismatch": null | {"case", "group", "call", "expected", "got", "reason", "account"}}

or ``{"defined": false, "error": "…"}`` when the notebook does not define it. Float results are
compared with :mod:`autograder.measure.compare`'s tolerance: float32 rounding unless the
expectation sets one per value, or ``tolerances`` sets one per group of cases.

What the student may read is kept apart from what only the course staff read:

- ``first_mismatch`` (staff): the first failing call with its hidden values rendered;
- ``groups.<g>.failure`` (student): the first failing call of the group told without any hidden
  value (:mod:`.failure`): the masked exception of the student's own code, or the returned kind,
  dtype, shape, key path and how far off (in steps or the Expect's unit), then the argument
  *types* of that call, e.g. ``raised
  OverflowError: Python integer <n> out of bounds for uint8 (the call: x a float32 array of shape
  (6,), scale a numpy.float32 scalar, zero_point a numpy.uint8 scalar, dtype np.uint8)``;
- ``replaced`` (student): set when the function the probe called is not the notebook's own (its
  module is not ``__main__``, e.g. ``from onnxruntime.quantization import quantize`` after the
  definition); every group's failure then starts with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from collections.abc import Sequence

from ..probe_format import CaseOutput, ProbeCase, ProbeResult
from . import compare, failure
from .compare import Tolerance

Expectation = Callable[[ProbeCase], Any]


def measure_function(
    name: str,
    cases: list[ProbeCase],
    probe: ProbeResult,
    expect: Expectation,
    *,
    tolerances: Mapping[str, Tolerance] | None = None,
    params: Sequence[str] = (),
) -> dict[str, Any]:
    """One function's facts: counts, per-group counts and failures, the first mismatch (or why it has none).

    ``tolerances``: group name → the tolerance of that group's float results (others: float32 rounding).
    ``params``: the contract's parameter names, to name the arguments in a failure.
    """
    outputs = [probe.cases.get(c.id) for c in cases]
    state = probe.functions.get(name)
    if state == "not callable":
        return {
            "defined": False,
            "error": f"the notebook defines {name} at its top level, but it is not a function (not callable)",
        }
    if state == "missing" or all(o is None or o.status == "missing_function" for o in outputs):
        return {"defined": False, "error": f"the notebook does not define {name} at its top level"}
    replaced = failure.replaced(name, probe.origins.get(name))
    groups: dict[str, dict[str, Any]] = {}
    agree = raised = 0
    first = None
    for case, output in zip(cases, outputs):
        tolerance = (tolerances or {}).get(case.group)
        fact = compare.compare_output(expect(case), output or CaseOutput("not_run"), tolerance=tolerance)
        g = groups.setdefault(case.group or "other", {"cases": 0, "agree": 0, "raised": 0, "failure": None})
        g["cases"] += 1
        g["agree"] += int(fact["agree"])
        g["raised"] += int(fact["reason"] == "raised")
        agree += int(fact["agree"])
        raised += int(fact["reason"] == "raised")
        if fact["agree"]:
            continue
        if g["failure"] is None:
            told = f"{fact['account']} (the call: {failure.describe_arguments(case, params)})"
            g["failure"] = f"{replaced}; {told}" if replaced else told
        if first is None:
            first = {
                "case": case.id,
                "group": case.group,
                "call": compare.describe_call(case),
                "expected": fact["expected"],
                "got": fact["got"],
                "reason": fact["reason"],
                "account": fact["account"],
            }
    for g in groups.values():
        g["agree_share"] = g["agree"] / g["cases"]
    return {
        "defined": True,
        "cases": len(cases),
        "agree": agree,
        "agree_share": agree / len(cases) if cases else 0.0,
        "raised": raised,
        "replaced": replaced,
        "groups": groups,
        "first_mismatch": first,
    }


def measure_functions(
    cases: list[ProbeCase],
    probe: ProbeResult,
    expectations: Mapping[str, Expectation],
    *,
    tolerances: Mapping[str, Mapping[str, Tolerance]] | None = None,
    parameters: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The ``functions`` section: one entry per function of ``expectations``, in its order.

    Cases of functions without an expectation are left out (an assignment may call a function to
    collect data rather than to check it). ``tolerances``: function → group → tolerance.
    ``parameters``: function → the contract's parameter names.
    """
    if not probe.ran:
        return {"error": probe.error or "the probe did not run"}
    return {
        name: measure_function(
            name,
            [c for c in cases if c.function == name],
            probe,
            expect,
            tolerances=(tolerances or {}).get(name),
            params=(parameters or {}).get(name, ()),
        )
        for name, expect in expectations.items()
    }
