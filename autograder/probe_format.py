"""The data contract between the grader and the probe that runs in the student's kernel.

The grader describes each call it wants as a :class:`ProbeCase`. The probe
(autograder/sandbox/probe.py) gets them one at a time, never from a file: each case is a cell
of its own whose source carries that case's arguments inline (:func:`inline_cases`), run only
after the previous call returned. So while the student's code runs, the kernel holds the
inputs of the calls made so far and nothing of the cases to come, and no path in the jail
holds hidden data. The probe decodes the arguments, calls ``function(*args, **kwargs)``,
coerces each result to plain ndarrays and finally writes, into the working directory:

- ``probe_outputs.npz``: key ``c{i}`` for case i's result, or ``c{i}_{j}`` for element j when the
  result is a tuple or list (``choose_qparams`` returns ``(scale, zero_point)``);
- ``probe_report.json``: ``{"cases": {case_id: {"status": ..., "parts": n, "python_type": ...,
  "error": {"type", "message", "traceback"}}}, "functions": {name: "defined"|"missing"|"not callable"}}``
  with status one of ``ok``, ``raised``, ``unconvertible``, ``missing_function``, and
  ``"origins": {name: {"module", "qualname", "params"}}`` for each defined function, read before
  the first call (``"module": "__main__"`` for a function of the notebook; another module means an
  import replaced it);
- ``reported.json``: the JSON of the notebook's results variable (``RESULTS``), or
  ``{"__probe_error__": "..."}`` when it is missing or not JSON-serialisable. It is written
  before the first call, and the grader takes its copy then (a function called with hidden
  inputs cannot change what the grader reads as RESULTS).

Argument encoding (JSON): ``{"array": A}`` an ndarray, ``{"list": A}`` its ``.tolist()``,
``{"scalar": A}`` a NumPy scalar from a 0-d array (keeps its dtype, e.g. ``np.float32``), where
``A = {"dtype": "<f4", "shape": [4], "data": base64 of the C-order bytes}``; ``{"float": v}``,
``{"int": v}``, ``{"bool": v}``, ``{"str": v}``, ``{"dtype": "int8"}`` the NumPy type object
(``np.int8``).

The grader trusts none of it beyond "this is what the student's function returned".
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import safe_files
from .errors import UnsafeFileError

OUTPUTS_FILE = "probe_outputs.npz"
REPORT_FILE = "probe_report.json"
REPORTED_FILE = "reported.json"


@dataclass(frozen=True)
class Arg:
    """One argument: a value (float/int/bool/str), an array (as array, list or scalar) or a dtype."""

    kind: str  # array | list | scalar | float | int | bool | str | dtype
    value: Any

    @staticmethod
    def array(a) -> "Arg":
        return Arg("array", np.asarray(a))

    @staticmethod
    def list(a) -> "Arg":
        return Arg("list", np.asarray(a))

    @staticmethod
    def scalar(a) -> "Arg":
        return Arg("scalar", np.asarray(a))

    @staticmethod
    def dtype(name: str) -> "Arg":
        return Arg("dtype", str(np.dtype(name)))


@dataclass(frozen=True)
class ProbeCase:
    """One call of a student function: ``function(*args, **kwargs)``.

    ``group`` names the property the case tests ("ties", "saturation", ...) for feedback.
    """

    id: str
    function: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    group: str = ""

    def raw(self, name_or_index):
        """The plain Python/NumPy value of an argument (for computing the reference answer)."""
        a = self.kwargs[name_or_index] if isinstance(name_or_index, str) else self.args[name_or_index]
        return decode_value(a)


def decode_value(a: Any) -> Any:
    if not isinstance(a, Arg):
        return a
    if a.kind == "array":
        return a.value
    if a.kind == "list":
        return a.value.tolist()
    if a.kind == "scalar":
        return a.value[()]
    if a.kind == "dtype":
        return np.dtype(a.value).type
    return a.value


def _plain(a: Any, arrays: dict[str, np.ndarray]) -> dict:
    if not isinstance(a, Arg):
        if isinstance(a, bool):
            a = Arg("bool", a)
        elif isinstance(a, int):
            a = Arg("int", a)
        elif isinstance(a, float):
            a = Arg("float", a)
        elif isinstance(a, str):
            a = Arg("str", a)
        else:
            raise TypeError(f"cannot encode probe argument {a!r}")
    if a.kind in ("array", "list", "scalar"):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(a.value)
        return {a.kind: key}
    if a.kind == "float":
        return {"float": float(a.value)}
    if a.kind == "int":
        return {"int": int(a.value)}
    if a.kind == "bool":
        return {"bool": bool(a.value)}
    if a.kind == "str":
        return {"str": str(a.value)}
    if a.kind == "dtype":
        return {"dtype": str(a.value)}
    raise TypeError(f"unknown probe argument kind {a.kind!r}")


def encode_cases(cases: list[ProbeCase]) -> tuple[list[dict], dict[str, np.ndarray]]:
    """``(plain cases, arrays)``: each case as JSON-able data whose arrays are keys into ``arrays``."""
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError("probe case ids must be unique")
    arrays: dict[str, np.ndarray] = {}
    plain = []
    for i, c in enumerate(cases):
        plain.append({
            "index": i,
            "id": c.id,
            "function": c.function,
            "args": [_plain(a, arrays) for a in c.args],
            "kwargs": {k: _plain(v, arrays) for k, v in c.kwargs.items()},
        })
    return plain, arrays


def _inline(value: dict, arrays: dict[str, np.ndarray]) -> dict:
    (kind, v), = value.items()
    if kind not in ("array", "list", "scalar"):
        return value
    a = np.asarray(arrays[v])            # not ascontiguousarray: that makes a 0-d array 1-d
    if a.dtype.kind not in "biufc":
        raise TypeError(f"probe arrays must be numeric, not {a.dtype}")
    return {kind: {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}}


def inline_cases(cases: list[ProbeCase]) -> list[dict]:
    """Each case as one self-contained JSON-able dict, its arrays inline (see the module docstring)."""
    plain, arrays = encode_cases(cases)
    for case in plain:
        case["args"] = [_inline(a, arrays) for a in case["args"]]
        case["kwargs"] = {k: _inline(v, arrays) for k, v in case["kwargs"].items()}
    return plain


@dataclass
class CaseOutput:
    """What the probe recorded for one case: its result arrays, or why there are none."""

    status: str  # ok | raised | unconvertible | missing_function | not_run
    values: list[np.ndarray] = field(default_factory=list)
    is_tuple: bool = False
    error: dict | None = None


@dataclass
class ProbeResult:
    """The probe's data, read safely after the kernel is gone."""

    ran: bool
    error: str | None
    cases: dict[str, CaseOutput]
    functions: dict[str, str]
    reported: Any | None
    reported_error: str | None
    origins: dict[str, dict] = field(default_factory=dict)   # function → {"module", "qualname", "params"}


def read_probe_result(workspace: Path, cases: list[ProbeCase], probe_completed: bool) -> ProbeResult:
    """Read the probe's files from ``workspace``; anything missing or malformed becomes a reason."""
    not_run = {c.id: CaseOutput("not_run") for c in cases}
    if not probe_completed:
        return ProbeResult(False, "the probe did not run to completion (the notebook did not finish)",
                           not_run, {}, None, "the probe did not run")
    try:
        report = safe_files.load_json(workspace, REPORT_FILE)
        arrays = safe_files.load_npz(workspace, OUTPUTS_FILE)
        if not isinstance(report, dict) or not isinstance(report.get("cases"), dict):
            raise UnsafeFileError(f"{REPORT_FILE} does not have the probe's shape")
    except UnsafeFileError as e:
        return ProbeResult(False, str(e), not_run, {}, None, str(e))
    out: dict[str, CaseOutput] = {}
    for i, c in enumerate(cases):
        rec = report["cases"].get(c.id)
        if not isinstance(rec, dict):
            out[c.id] = CaseOutput("not_run")
            continue
        status = str(rec.get("status", "not_run"))
        err = rec.get("error") if isinstance(rec.get("error"), dict) else None
        if status != "ok":
            out[c.id] = CaseOutput(status, error=err)
            continue
        if f"c{i}" in arrays:
            out[c.id] = CaseOutput("ok", [arrays[f"c{i}"]])
        else:
            vals, j = [], 0
            while f"c{i}_{j}" in arrays:
                vals.append(arrays[f"c{i}_{j}"])
                j += 1
            out[c.id] = CaseOutput("ok", vals, is_tuple=True) if vals or rec.get("parts") == 0 \
                else CaseOutput("unconvertible", error={"type": "ProbeError", "message": "result missing"})
    functions = report.get("functions") if isinstance(report.get("functions"), dict) else {}
    reported, reported_error = None, None
    try:
        reported = safe_files.load_json(workspace, REPORTED_FILE)
        if isinstance(reported, dict) and "__probe_error__" in reported:
            reported_error, reported = str(reported["__probe_error__"])[:500], None
    except UnsafeFileError as e:
        reported_error = str(e)
    origins = report.get("origins") if isinstance(report.get("origins"), dict) else {}
    return ProbeResult(True, None, out, {str(k): str(v) for k, v in functions.items()}, reported, reported_error,
                       {str(k): v for k, v in origins.items() if isinstance(v, dict)})
