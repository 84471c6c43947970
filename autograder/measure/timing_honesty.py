"""Timing honesty: the student's own timing function against the probe's timer, in the same kernel.

A latency a notebook reports is judged against the grader's timing of the same thing; timed in
another process, minutes apart, the two drift with the machine's load (windows calibrated that way
came out at 47×). Here both run in the student's kernel, moments apart, on the same model file with
the same session options: the probe calls the student's timing function (lesson 05's
``latency_ms(session, x)``, a ``latency_table(path, batch_sizes, threads)``) and, right after it,
the probe's own timer (``grader:latency_ms`` / ``grader:latency_table``,
autograder/sandbox/probe_kernel.py: the median of ``runs`` warm ``session.run`` calls through ONNX
Runtime's binding), alternating over ``repeats`` pairs (A B A B). Load slows both sides of a pair
alike.

:func:`latency_pairing` and :func:`table_pairing` build a :class:`TimingPairing`, whose
:meth:`~TimingPairing.cases` a lesson adds to its ``probe_cases()``; :func:`measure_pairing` turns
the probe's results into facts::

    {"entries": {"8,2": {"ratio": 1.04, "ratios": [...], "student_ms": [...], "grader_ms": [...]}, …},
     "worst_ratio": 1.04, "pairs": 3, "window": 3.0, "error": null}

per entry (one latency: key ``"latency"``; a table: its key's parts joined by ``,``) the ratio
``max(student / grader, grader / student)`` of each pair and their median, the figure a rubric
judges against :data:`WINDOW` (``worst_ratio`` over the entries). :data:`WINDOW` was calibrated on
honest pairings on a loaded 2-core machine (bench/RESULTS.md, "Timing honesty"): an honest timer
stays near 1, a timer that returns a constant, times the wrong thing or slips a unit (×1000) lands
far outside.

Each call runs under the probe's per-call limit (10 s, autograder/sandbox/probe_run.py): keep
``runs`` × entries × one run's time well under it, for the student's timer too.

What is guaranteed: the probe's timer is not a name the notebook can define (the ``grader:``
prefix calls the probe's own table, defined after the notebook's cells), it opens its own sessions
from the file's bytes (cached for the kernel's life, keyed by content and options), and a
notebook's patch of ``InferenceSession.run`` or of a session object does not reach it. What is
not: a notebook may patch ONNX Runtime's binding, the clock or the probe itself once it runs in
the kernel (SECURITY.md, "The probe's data is the student's word"); such a notebook makes both
timings what it likes, which gains what an honest timer gains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

from ..probe_format import ARTIFACT_REASONS, Arg, CaseOutput, ProbeCase, ProbeResult

GRADER_LATENCY = "grader:latency_ms"
GRADER_TABLE = "grader:latency_table"
WINDOW = 3.0  # twice the worst honest median ratio measured under load (bench/RESULTS.md, "Timing honesty")
LATENCY_KEY = "latency"


@dataclass(frozen=True)
class TimingPairing:
    """The student's timing call and the probe's, ``repeats`` times, alternating (A B A B)."""

    id: str
    student: str  # the notebook's function
    student_args: tuple
    grader: str  # GRADER_LATENCY or GRADER_TABLE
    grader_args: tuple
    grader_kwargs: dict = field(default_factory=dict)
    repeats: int = 3
    group: str = "timing"

    def student_id(self, r: int) -> str:
        return f"{self.id}/student/{r}"

    def grader_id(self, r: int) -> str:
        return f"{self.id}/grader/{r}"

    def cases(self) -> list[ProbeCase]:
        out = []
        for r in range(self.repeats):
            out.append(ProbeCase(self.student_id(r), self.student, self.student_args, group=self.group))
            out.append(
                ProbeCase(self.grader_id(r), self.grader, self.grader_args, dict(self.grader_kwargs), group=self.group)
            )
        return out


def latency_pairing(
    id: str, function: str, session: Arg, x: Arg, *, runs: int = 100, repeats: int = 3, group: str = "timing"
) -> TimingPairing:
    """``function(session, x)`` (ms) against the probe's median of ``runs`` warm runs of a session
    opened on the same file with the same options (``session``: an :meth:`Arg.session`)."""
    if not isinstance(session, Arg) or session.kind != "session":
        raise TypeError("latency_pairing times an Arg.session")
    return TimingPairing(id, function, (session, x), GRADER_LATENCY, (session, x), {"runs": runs}, repeats, group)


def table_pairing(
    id: str,
    function: str,
    path: Arg,
    batch_sizes: Sequence[int],
    threads: Sequence[int],
    *,
    x: Arg | None = None,
    runs: int = 50,
    repeats: int = 3,
    group: str = "timing",
) -> TimingPairing:
    """``function(path, batch_sizes, threads)`` returning ``{(batch, threads): ms}`` against the
    probe's table of the same model file (``path``: an :meth:`Arg.artifact` or :meth:`Arg.file`),
    a session per thread count (``intra_op_num_threads``), ``batch`` rows of ``x`` (repeated) or
    of a fixed ramp of the input's type."""
    if not isinstance(path, Arg) or path.kind not in ("artifact", "file"):
        raise TypeError("table_pairing times the file of an Arg.artifact or an Arg.file")
    sizes, counts = Arg.list([int(b) for b in batch_sizes]), Arg.list([int(t) for t in threads])
    kwargs: dict[str, Any] = {"runs": runs}
    if x is not None:
        kwargs["x"] = x
    return TimingPairing(
        id, function, (path, sizes, counts), GRADER_TABLE, (path, sizes, counts), kwargs, repeats, group
    )


def _ms(v: Any) -> float | None:
    """A positive, finite number of milliseconds (an int, float or NumPy number; not a bool or str)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return None
    f = float(v)
    return f if math.isfinite(f) and f > 0 else None


def _entries(value: Any) -> dict[str, float | None]:
    """A timing result as ``{entry: ms}`` (None: not a positive number): one number, or a dict of
    numbers (a tuple key's parts joined by ``,``)."""
    if isinstance(value, dict):
        return {",".join(map(str, k)) if isinstance(k, tuple) else str(k): _ms(v) for k, v in value.items()}
    return {LATENCY_KEY: _ms(value)}


def _why_not(output: CaseOutput | None, function: str) -> str | None:
    if output is None or output.status == "not_run":
        return f"{function} was not called (the probe did not reach it)"
    if output.status == "missing_function":
        return f"the notebook does not define {function}"
    if output.status == "bad_artifact":
        reason = (output.error or {}).get("reason")
        return f"the probe refused the file {function} times: {ARTIFACT_REASONS.get(str(reason), 'unusable')}"
    if output.status == "raised":
        return f"{function} raised {(output.error or {}).get('type', 'an exception')}"
    if output.status != "ok":
        return f"{function} returned a value the probe could not read"
    return None


def measure_pairing(pairing: TimingPairing, probe: ProbeResult, window: float = WINDOW) -> dict[str, Any]:
    """The pairing's facts (see the module): per entry the ratio of each pair and their median."""
    facts: dict[str, Any] = {"entries": {}, "worst_ratio": None, "pairs": 0, "window": window, "error": None}
    ratios: dict[str, list[float]] = {}
    student_ms: dict[str, list[float]] = {}
    grader_ms: dict[str, list[float]] = {}
    for r in range(pairing.repeats):
        student, grader = probe.cases.get(pairing.student_id(r)), probe.cases.get(pairing.grader_id(r))
        why = _why_not(student, pairing.student)
        if why:
            facts["error"] = why
            return facts
        gwhy = _why_not(grader, "the grader's timer")
        if gwhy or grader is None or student is None:
            facts["error"] = gwhy or "the grader's timer gave nothing"
            return facts
        mine, theirs = _entries(student.result()), _entries(grader.result())
        if not theirs or any(v is None for v in theirs.values()):
            facts["error"] = "the grader's timer gave no timing"
            return facts
        missing = sorted(set(theirs) - set(mine))
        if missing:
            facts["error"] = f"{pairing.student} gave no timing for {', '.join(missing[:4])}"
            return facts
        for key, g in theirs.items():
            s = mine[key]
            if s is None or g is None:
                facts["error"] = f"{pairing.student}'s timing of {key} is not a positive number of milliseconds"
                return facts
            ratios.setdefault(key, []).append(max(s / g, g / s))
            student_ms.setdefault(key, []).append(s)
            grader_ms.setdefault(key, []).append(g)
        facts["pairs"] += 1
    for key in ratios:
        facts["entries"][key] = {
            "ratio": float(median(ratios[key])),
            "ratios": ratios[key],
            "student_ms": student_ms[key],
            "grader_ms": grader_ms[key],
        }
    facts["worst_ratio"] = max((e["ratio"] for e in facts["entries"].values()), default=None)
    return facts


def within_window(facts: dict[str, Any], window: float | None = None) -> bool:
    """Whether a pairing's facts are honest: every entry's median ratio within the window."""
    worst = facts.get("worst_ratio")
    return worst is not None and worst <= (window if window is not None else facts.get("window", WINDOW))
