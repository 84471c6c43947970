"""Running the probe: its setup cell, the snapshot, one cell per case, then its last cell.

The order is what keeps hidden inputs from coming back (see :mod:`.probe` and :mod:`.snapshot`):

1. the setup cell writes which functions exist and ``RESULTS``; if it did not complete, the
   probe failed and no hidden input was ever sent;
2. the grader reads the functions and takes its snapshot of the working directory and of
   ``reported.json``;
3. one cell per case, each sent only after the previous one returned and after the grader read
   that case's record and arrays (``probe_case.json``, ``probe_case.npz``): what the grader keeps
   of call k was fixed before call k+1 handed the kernel anything new. Each cell is bounded by
   the call's alarm plus a margin plus :data:`PAYLOAD_S_PER_MIB` per MiB of its arguments (a
   hidden file travels in its cell), and by the probe's whole budget. A result's encoding is
   checked again here (:func:`~autograder.probe_format.decode_result`) and all results together
   are bounded;
4. the last cell removes the probe's names and files.

Each cell goes straight to the kernel's shell channel, silent; only its reply is awaited, never
its output (a notebook that flooded its output may have cost the iopub connection).
The grader then holds the probe's report and outputs itself (:attr:`ProbeRun.report`,
:attr:`ProbeRun.outputs`); :func:`autograder.sandbox.snapshot.restore` writes them as
``probe_report.json`` and ``probe_outputs.npz`` once the jail is gone. Any step that times out,
kills the kernel or breaks the connection makes the probe "failed".
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from .. import safe_files
from ..limits import ExecutionLimits
from ..errors import AutograderError, UnsafeFileError
from ..probe_format import (
    ARTIFACT_REASONS,
    GRADER_PREFIX,
    LIMIT_WORDS,
    OUTPUTS_MAX_ENTRIES,
    REPORT_FILE,
    RESULT_LIMITS,
    Arg,
    ProbeCase,
    ResultError,
    case_bytes,
    decode_result,
    inline_cases,
)
from ..leak_budget import exception_name, result_type_name
from .probe import case_source, finish_source, setup_source

PROBE_MAX_S = 120.0  # the calls themselves, at most (and at most one cell limit)
PROBE_CASE_MAX_S = 10.0  # one call
PER_CELL_OVERHEAD_S = 0.25  # a round trip per case cell, generous for a slow machine
CELL_MARGIN_S = 5.0  # beyond a call's alarm, before the cell itself times out
PAYLOAD_S_PER_MIB = 1.0  # to send and decode a MiB of a case's arguments (about 0.35 s here)
CASE_FILE, CASE_ARRAYS = "probe_case.json", "probe_case.npz"
MiB = 1024 * 1024
CASE_RECORD_MAX_BYTES = 64 * 1024 + RESULT_LIMITS.encoded_bytes  # a call's record, its result's encoding included
OUTPUTS_MAX_BYTES = 64 * MiB  # all results' arrays together (the probe itself stops at 32 MB)
ENCODINGS_MAX_BYTES = 16 * MiB  # all results' encodings together (probe_report.json stays readable)
# what the student and the staff read of a call that did not return a usable result: fixed words
STATUS_WORDS = {
    "raised": "",
    "unconvertible": "returned a value the probe could not convert",
    "missing_function": "the function is not defined",
    "bad_artifact": "the probe refused a file of the notebook",
}
STATUSES = ("ok", "raised", "unconvertible", "missing_function", "bad_artifact")
# Exceptions out of a cell's execution that are bugs of the harness itself, not something a kernel
# message can cause; every other exception there comes from handling what the kernel sent.
HARNESS_BUGS = (AutograderError, NameError, ImportError, SyntaxError, AssertionError)

Execute = Callable[[str, float], Awaitable["dict | None"]]


def _origin(origin: dict) -> dict[str, Any]:
    """A function's origin as the setup cell saw it (module, qualname, parameter names), bounded."""
    kept: dict[str, Any] = {k: origin[k][:200] for k in ("module", "qualname") if isinstance(origin.get(k), str)}
    params = origin.get("params")
    if isinstance(params, list):
        kept["params"] = [p[:50] for p in params[:20] if isinstance(p, str)]
    return kept


_UNCONVERTIBLE = re.compile(
    r"\(not JSON-like: (a dict key of type|a value of type|an array of dtype|a NumPy value of dtype) (\S+)"
)
_DTYPE_WORDS = (("object", "object"), ("<U", "str"), (">U", "str"), ("U", "str"), ("|S", "bytes"), ("S", "bytes"))


def unconvertible_words(message: Any) -> str | None:
    """Why the probe could not convert a result, in the grader's own words with a closed type name
    (``a value of type set``, ``an array of dtype object``), or None when the record says none of
    them: the kernel wrote the record, so its type names are the notebook's (leak_budget)."""
    m = _UNCONVERTIBLE.search(message) if isinstance(message, str) else None
    if m is None:
        return None
    what, name = m.group(1), m.group(2).rstrip(")")
    if "dtype" in what:
        kind = next((w for prefix, w in _DTYPE_WORDS if name.startswith(prefix)), None)
        kind = kind or next((k for k in ("datetime64", "timedelta64") if name.startswith(k)), None)
        return f"{what} {kind}" if kind else f"{what.removesuffix(' of dtype')} of another dtype"
    named = result_type_name(name)
    return (
        f"{what} {named}"
        if named == name
        else f"{what.removesuffix(' of type')} of {named.removeprefix('an object of ')}"
    )


def closed_error(status: str, error: Any, artifacts: tuple[str, ...] = ()) -> dict[str, str]:
    """A call's error as the grader keeps it: the exception's type from a closed list
    (:func:`~autograder.leak_budget.exception_name`), the grader's sentence for ``status``, which
    bound a result broke (:data:`~autograder.probe_format.LIMIT_WORDS`), and why an artifact was
    refused (``reason``, :data:`~autograder.probe_format.ARTIFACT_REASONS`, and ``path`` when it is
    one of ``artifacts``, the case's own paths); never the message or the traceback, which the call
    wrote while it held the hidden inputs."""
    error = error if isinstance(error, dict) else {}
    message = STATUS_WORDS.get(status, "")
    if status == "unconvertible":
        message = unconvertible_words(error.get("message")) or message
    kept = {"type": exception_name(error.get("type")), "message": message, "traceback": ""}
    if status == "bad_artifact" and error.get("reason") in ARTIFACT_REASONS:
        kept["reason"] = error["reason"]
        kept["message"] = f"{message}: {ARTIFACT_REASONS[error['reason']]}"
        if error.get("path") in artifacts:
            kept["path"] = error["path"]
            kept["message"] = f"{error['path']}: {ARTIFACT_REASONS[error['reason']]}"
    if error.get("limit") in LIMIT_WORDS:  # which bound: the grader words it (compare)
        kept["limit"] = error["limit"]
    return kept


def artifact_paths(case: ProbeCase) -> tuple[str, ...]:
    """The notebook's files a case names (its Arg.artifact paths, in sessions too)."""
    args = [
        a.value[0] if isinstance(a, Arg) and a.kind == "session" else a for a in (*case.args, *case.kwargs.values())
    ]
    return tuple(a.value for a in args if isinstance(a, Arg) and a.kind == "artifact")


def probe_budget_s(limits: ExecutionLimits, n_cases: int, payload_bytes: int = 0) -> float:
    """How long the whole probe may take: the calls' budget plus a round trip per cell, plus the
    time to send and decode ``payload_bytes`` of arguments (:func:`~autograder.probe_format.case_bytes`)."""
    return (
        min(PROBE_MAX_S, float(limits.cell_timeout_s))
        + PER_CELL_OVERHEAD_S * (n_cases + 2)
        + CELL_MARGIN_S
        + PAYLOAD_S_PER_MIB * payload_bytes / MiB
    )


@dataclass
class ProbeRun:
    cases: list[ProbeCase]
    functions: list[str]
    results_variable: str
    limits: ExecutionLimits
    out_dir: str  # the working directory as the kernel sees it
    workspace: Path  # ... and as the grader does
    report: dict[str, Any] = field(default_factory=lambda: {"cases": {}, "functions": {}, "origins": {}})
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    _bytes: int = 0
    _encoded: int = 0

    async def run(self, execute: Execute, take_snapshot: Callable[[], bool]) -> str:
        """ "completed" or "failed"; ``execute(source, budget_s)`` runs one cell, returning its reply;
        ``take_snapshot()`` False stops the probe before any hidden input is sent."""
        deadline = time.monotonic() + probe_budget_s(
            self.limits, len(self.cases), sum(case_bytes(c) for c in self.cases)
        )
        case_s = min(PROBE_CASE_MAX_S, PROBE_MAX_S, float(self.limits.cell_timeout_s))
        names = list(dict.fromkeys([*self.functions, *(c.function for c in self.cases)]))
        names = [n for n in names if not n.startswith(GRADER_PREFIX)]  # the probe's own, not the notebook's

        async def cell(source: str, payload_bytes: int = 0) -> bool:
            budget = min(case_s + CELL_MARGIN_S + PAYLOAD_S_PER_MIB * payload_bytes / MiB, deadline - time.monotonic())
            return budget > 0 and await self._ok(execute, source, budget)

        if not await cell(setup_source(self.out_dir, names, self.results_variable, case_timeout_s=case_s)):
            return "failed"
        self._read_functions(names)
        if not take_snapshot():  # before the first hidden input enters the kernel
            return "failed"
        for index, (case, inline) in enumerate(zip(self.cases, inline_cases(self.cases))):
            if not await cell(case_source(inline), case_bytes(case)):
                return "failed"
            self._read_case(index, case)
        await cell(finish_source())
        return "completed"

    def _read_functions(self, names: list[str]) -> None:
        try:
            data = safe_files.load_json(self.workspace, REPORT_FILE, CASE_RECORD_MAX_BYTES)
            found = data.get("functions") if isinstance(data, dict) else None
            origins = data.get("origins") if isinstance(data, dict) else None
        except UnsafeFileError:
            found = origins = None
        found = found if isinstance(found, dict) else {}
        origins = origins if isinstance(origins, dict) else {}
        for name in names:
            state = found.get(name)
            self.report["functions"][name] = state if state in ("defined", "missing", "not callable") else "missing"
            origin = origins.get(name)
            if state == "defined" and isinstance(origin, dict):
                self.report["origins"][name] = _origin(origin)

    def _read_case(self, index: int, case: ProbeCase) -> None:
        """Keep case ``index``'s record and arrays, as the kernel left them right after its call."""
        try:
            rec = safe_files.load_json(self.workspace, CASE_FILE, CASE_RECORD_MAX_BYTES)
            arrays = safe_files.load_npz(self.workspace, CASE_ARRAYS, max(1, OUTPUTS_MAX_BYTES - self._bytes))
        except UnsafeFileError:
            self.report["cases"][case.id] = {
                "status": "unconvertible",
                "error": {"type": "ProbeError", "message": "the probe's record of this call is unusable"},
            }
            return
        if not isinstance(rec, dict) or rec.get("id") != case.id or rec.get("status") not in STATUSES:
            self.report["cases"][case.id] = {
                "status": "unconvertible",
                "error": {"type": "ProbeError", "message": "the probe's record of this call is not the probe's"},
            }
            return
        kept: dict[str, Any] = {"status": rec["status"]}
        # made while the call held hidden inputs: no text of it is kept, only closed words
        # (autograder.leak_budget): the exception's type from a closed list, the grader's own
        # sentence for the status, which bound a result broke
        if isinstance(rec.get("error"), dict) or rec["status"] != "ok":
            kept["error"] = closed_error(rec["status"], rec.get("error"), artifact_paths(case))
        if isinstance(rec.get("parts"), int) and not isinstance(rec.get("parts"), bool):
            kept["parts"] = rec["parts"]
        if isinstance(rec.get("python_type"), str):
            kept["python_type"] = result_type_name(rec["python_type"])
        own = f"c{index}"
        mine = {
            k: a
            for k, a in arrays.items()  # only this case's keys: a call cannot fill in another's
            if k == own or k.startswith(own + "_") and k[len(own) + 1 :].isdigit()
        }
        if rec["status"] == "ok":
            why = self._unusable_result(rec.get("value"), mine, index)
            if why:
                error = {"type": "ProbeError", "message": "the result is not usable"}
                if why == LIMIT_WORDS["total"]:
                    error["limit"] = "total"
                self.report["cases"][case.id] = {"status": "unconvertible", "error": error}
                return
            kept["value"] = rec["value"]
        self.report["cases"][case.id] = kept
        if rec["status"] == "ok":
            for key, arr in mine.items():
                self.outputs[key] = arr
                self._bytes += arr.nbytes

    def _unusable_result(self, node: Any, arrays: dict[str, np.ndarray], index: int) -> str | None:
        """Why a call's result cannot be kept (its encoding checked again, the total bound), or None."""
        if len(arrays) + len(self.outputs) > OUTPUTS_MAX_ENTRIES:
            return LIMIT_WORDS["total"]
        try:
            decode_result(node, arrays, index)
        except (ResultError, RecursionError) as e:
            return str(e)
        size = len(json.dumps(node))
        if self._encoded + size > ENCODINGS_MAX_BYTES:
            return LIMIT_WORDS["total"]
        self._encoded += size
        return None

    @staticmethod
    async def _ok(execute: Execute, source: str, budget: float) -> bool:
        try:
            content = await execute(source, budget)
        except (TimeoutError, CellTimeoutError, DeadKernelError):
            return False
        except HARNESS_BUGS:
            raise
        except Exception:  # noqa: BLE001 - a malformed kernel message: the probe did not complete
            return False
        return bool(content) and content.get("status") == "ok"
