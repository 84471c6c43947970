"""The leak budget: every student-visible field that depends on hidden data, and its bits.

Hidden data (lesson 07's hidden split, lesson 03's hidden and edge rows, lesson 05's hidden rows,
every lesson's probe cases and lesson 05's hidden model files) stays hidden *by budget*: a
submission can make what the grader shows depend on it, so each field shown is declared here with
how it is shown and the bits it can carry per submission, and the sum per lesson is at most
:data:`MAX_BITS`. SECURITY.md ("The leak budget") mirrors :data:`BUDGET`; a test keeps the two in
sync and grades every lesson's examples to find any hidden-derived text not declared here.

How each kind of field is shown (enforced in one place each):

- :data:`VERDICT`: a number measured on hidden data (an accuracy, a drift, a share of probe calls
  that agree, a count of calls that raised) is shown only as its relation to the threshold:
  ``≥ 85.0%`` when the part passed, ``not ≥ 85.0%`` when it failed: the part's pass/fail bit and
  nothing more (:func:`verdict_text`, used by :mod:`autograder.grade_text` for ``{measured}`` and
  for any placeholder of a declared path);
- :data:`FIXED`: a value that is hidden data itself or a count over it (the hidden test set's
  extremes, how many calls of a group agree) is replaced by fixed words (:data:`FIXED_TEXT`);
- :data:`FIRST_FAILURE`: a probe group's description of its first failing call is shown for the
  first failing group of the submission only (:func:`first_failure_path`); every other failing
  group reads :data:`OTHER_FAILURE`;
- :data:`CLOSED`: text from a closed set of sentences: an exception's type from
  :data:`EXCEPTION_TYPES` (:func:`exception_name`; the probe keeps nothing else of an exception,
  ``sandbox/probe_run.py``), a returned value's type from :data:`RESULT_TYPES`, a model's failure
  on the grader's rows as its category (:func:`run_failure_words`), the fixed sentences of
  ``measure/probabilities.py``.

Bits are upper bounds, worst case: a hostile notebook can make every declared field take any of
its values as a function of the hidden data. A pass/fail bit counts once per rubric part; a closed
set of ``n`` sentences counts ``log2(n)``.
"""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_BITS = 64.0  # per submission, per lesson

VERDICT, FIXED, FIRST_FAILURE, CLOSED = "verdict", "fixed", "first failure", "closed"

# ── closed sets of words ──────────────────────────────────────────────────────────────────────

_BUILTIN_EXCEPTIONS = frozenset(
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
)
# numpy (linalg, ufunc casting), onnx (checker, shape inference), protobuf, onnxruntime's status
# exceptions (onnxruntime.capi.onnxruntime_pybind11_state), scikit-learn's NotFittedError, and the
# grader's own probe errors (ProbeError, ProbeTimeout: written by the probe around the call)
_LIBRARY_EXCEPTIONS = frozenset(
    {
        "AxisError",
        "LinAlgError",
        "DTypePromotionError",
        "UFuncTypeError",
        "ComplexWarning",
        "TooHardError",
        "ValidationError",
        "InferenceError",
        "DecodeError",
        "EncodeError",
        "Fail",
        "InvalidArgument",
        "NoSuchFile",
        "NoModel",
        "EngineError",
        "RuntimeException",
        "InvalidProtobuf",
        "ModelLoaded",
        "NotImplemented",
        "InvalidGraph",
        "EPFail",
        "NotFittedError",
        "ProbeError",
        "ProbeTimeout",
    }
)
EXCEPTION_TYPES = _BUILTIN_EXCEPTIONS | _LIBRARY_EXCEPTIONS
OTHER_EXCEPTION = "an exception of a type defined in the notebook or a library"
RESULT_TYPES = frozenset(
    {
        "NoneType",
        "bool",
        "int",
        "float",
        "complex",
        "str",
        "bytes",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "ndarray",
        "generic",
        "bool_",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "longdouble",
        "complex64",
        "complex128",
        "str_",
        "bytes_",
        "void",
        "object_",
        "matrix",
        "MaskedArray",
    }
)
OTHER_RESULT_TYPE = "an object of a type defined in the notebook or a library"


def exception_name(name: Any) -> str:
    """An exception's type as the student reads it: its name when it is one of
    :data:`EXCEPTION_TYPES`, else :data:`OTHER_EXCEPTION` (a class the notebook named)."""
    return name if isinstance(name, str) and name in EXCEPTION_TYPES else OTHER_EXCEPTION


def result_type_name(name: Any) -> str:
    """A returned value's type name, from :data:`RESULT_TYPES`, else :data:`OTHER_RESULT_TYPE`."""
    return name if isinstance(name, str) and name in RESULT_TYPES else OTHER_RESULT_TYPE


# a model that ONNX Runtime could not run on the grader's rows (measure/onnx_errors.py): the student
# reads the category only, never the operator or the status code (about 4 bits, not 14)
RUN_PREFIX = "ONNX Runtime could not run it on the grader's rows"
RUN_CATEGORIES = (
    "index out of range",
    "division by zero",
    "memory allocation failure",
    "type mismatch",
    "shape mismatch",
    "unsupported case",
    "error",
)
_RUN_FAILURE = re.compile(
    re.escape(RUN_PREFIX)
    + r": an? (?:`\w+` )?(?P<what>"
    + "|".join(map(re.escape, RUN_CATEGORIES))
    + r"|Python \w+)(?: \([A-Z_]+\))?"
)


def run_failure_words(text: str) -> str:
    """``text`` with every run-failure sentence cut to its category: ``… on the grader's rows: a
    `Gather` index out of range (INVALID_ARGUMENT)`` → ``… on the grader's rows (index out of range)``."""

    def cut(m: re.Match[str]) -> str:
        what = m.group("what")
        return f"{RUN_PREFIX} ({what if what in RUN_CATEGORIES else 'error'})"

    return _RUN_FAILURE.sub(cut, text) if RUN_PREFIX in text else text


# ── the budget ────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Field:
    """One student-visible field that depends on hidden data.

    ``paths``: measurement paths (dotted; ``*`` is one segment), empty for a channel that is not a
    measurement (a probe that did not complete). ``count``: how many such fields a graded
    submission shows; ``bits``: per field, worst case. ``text``: what :data:`FIXED` shows."""

    lesson: str
    name: str
    shown: str
    paths: tuple[str, ...]
    count: int
    bits: float
    why: str
    text: str = ""

    @property
    def total(self) -> float:
        return self.count * self.bits


L03, L05, L07 = "03-export-parity", "05-graph-optimization", "07-quantization"
_EXCEPTION_BITS = round(math.log2(len(EXCEPTION_TYPES) + 1), 1)
# per model: a run failure's category, or NaN, a range or row sums off (probabilities.py), or none
_RUN_FAILURE_BITS = round(math.log2(len(RUN_CATEGORIES) + 4), 1)
# the first failing group's call: which case of its group (at most 8) and what went wrong: an
# exception type, or a returned kind (a tuple's count, one dtype, a bounded number of dimensions),
# or which elements differ (one, some, all) by how much (six buckets)
_FIRST_FAILURE_BITS = 3 + max(_EXCEPTION_BITS, 10.0)
FIXED_TEXT = {"agree": "not all", "data_range": "the hidden test inputs' own range"}
OTHER_FAILURE = "told for the first failing group of this submission only"
PROBE_FAILED_BITS = 1.0  # a probe that did not complete reads one fixed sentence (probe_format)


def _common(lesson: str, groups: int) -> list[Field]:
    return [
        Field(
            lesson,
            "pass/fail of each probe group",
            VERDICT,
            ("functions.*.groups.*.agree_share", "functions.*.agree_share"),
            groups,
            1.0,
            "whether every call of the group agrees: the part's score",
        ),
        Field(
            lesson,
            "calls that agree, per group",
            FIXED,
            ("functions.*.groups.*.agree", "functions.*.agree"),
            groups,
            0.0,
            "shown as fixed words ('not all')",
            FIXED_TEXT["agree"],
        ),
        Field(
            lesson,
            "the first failing call",
            FIRST_FAILURE,
            ("functions.*.groups.*.failure",),
            1,
            _FIRST_FAILURE_BITS,
            "the first failing group's call only: the case's argument types, the exception's type from "
            "a closed list or the returned kind, or which elements differ by a bucketed amount",
        ),
        Field(
            lesson,
            "the probe does not complete",
            CLOSED,
            (),
            1,
            PROBE_FAILED_BITS,
            "a kernel that exits or hangs during the probe: one fixed sentence, no exit code",
        ),
    ]


BUDGET: tuple[Field, ...] = (
    *_common(L03, 3),
    Field(
        L03,
        "parity_report's first disagreement",
        CLOSED,
        ("functions.parity_report.first_mismatch.group", "functions.parity_report.first_mismatch.reason"),
        1,
        4.0,
        "the kind of input (one of its groups) and the reason (missing, raised, type, value)",
    ),
    Field(L03, "calls of parity_report that raised", VERDICT, ("functions.parity_report.raised",), 1, 1.0, "pass/fail"),
    Field(
        L03,
        "parity on the hidden rows",
        VERDICT,
        ("parity.max_abs_diff", "parity.label_agreement", "parity.edge_max_abs_diff"),
        3,
        1.0,
        "pass/fail of each",
    ),
    Field(
        L03,
        "sklearn_probabilities on the hidden rows",
        CLOSED,
        ("parity.error",),
        1,
        _EXCEPTION_BITS + 2,
        "why there is no parity: the exception's type from a closed list, or a fixed sentence",
    ),
    Field(
        L03,
        "the model on the hidden rows",
        CLOSED,
        ("models.pipeline.problems",),
        1,
        _RUN_FAILURE_BITS,
        "a run failure's category or a fixed sentence about its probabilities",
    ),
    *_common(L05, 3),
    Field(L05, "calls of count_ops that raised", VERDICT, ("functions.count_ops.raised",), 1, 1.0, "pass/fail"),
    Field(
        L05,
        "the optimized model on the hidden rows",
        VERDICT,
        ("models.optimized.max_abs_diff",),
        1,
        1.0,
        "pass/fail",
    ),
    Field(
        L05,
        "the optimized model's run failure",
        CLOSED,
        ("models.optimized.error",),
        1,
        _RUN_FAILURE_BITS,
        "a run failure's category",
    ),
    *_common(L07, 29),
    Field(
        L07,
        "accuracy, drifts, agreement and coverage on the hidden rows",
        VERDICT,
        (
            "models.fp32.accuracy",
            "models.*.quality.accuracy_drop",
            "models.*.quality.label_agreement",
            "models.*.quality.max_abs_dp",
            "models.int8_qdq.calibration.coverage",
        ),
        8,
        1.0,
        "pass/fail of each (fp32 accuracy; 3 per quantized model; the calibration's coverage)",
    ),
    Field(
        L07,
        "the hidden test set's range",
        FIXED,
        ("models.int8_qdq.calibration.data_range",),
        1,
        0.0,
        "fixed words",
        FIXED_TEXT["data_range"],
    ),
    Field(
        L07,
        "each model on the hidden rows",
        CLOSED,
        ("models.*.problems", "models.*.error", "models.*.metrics_error", "models.fp32.interface_ok"),
        3,
        _RUN_FAILURE_BITS,
        "a run failure's category, or which fixed sentence of measure/probabilities.py (no range, no count)",
    ),
)


# Where each lesson's measurements hold numbers computed from hidden data (a path and everything
# under it; ``*`` is one segment): what the budget's test perturbs, to prove that no student-visible
# text shows more of them than the declared fields allow. A measurement computed from hidden data
# that a message may name belongs here and in BUDGET.
_FUNCTIONS = (
    "functions.*.groups.*.agree",
    "functions.*.groups.*.agree_share",
    "functions.*.groups.*.raised",
    "functions.*.agree",
    "functions.*.agree_share",
    "functions.*.raised",
)
HIDDEN_MEASUREMENTS: dict[str, tuple[str, ...]] = {
    L03: (
        *_FUNCTIONS,
        "parity.max_abs_diff",
        "parity.label_agreement",
        "parity.edge_max_abs_diff",
        "parity.edge_label_agreement",
        "parity.notebook_max_abs_diff",
        "parity.notebook_label_agreement",
    ),
    L05: (*_FUNCTIONS, "models.optimized.max_abs_diff"),
    L07: (
        *_FUNCTIONS,
        "models.*.accuracy",
        "models.*.quality",
        "models.int8_qdq.calibration.coverage",
        "models.int8_qdq.calibration.data_range",
    ),
}


def hidden_measurement(lesson: str, path: str) -> bool:
    """Whether ``path`` (a leaf's dotted path) holds a number computed from hidden data in ``lesson``."""
    q = path.split(".")
    return any(
        len(q) >= len(p) and all(a == "*" or a == b for a, b in zip(p, q))
        for p in (pattern.split(".") for pattern in HIDDEN_MEASUREMENTS.get(lesson, ()))
    )


def fields(lesson: str) -> list[Field]:
    return [f for f in BUDGET if f.lesson == lesson]


def total_bits(lesson: str) -> float:
    return round(sum(f.total for f in fields(lesson)), 1)


def _matches(pattern: str, path: str) -> bool:
    p, q = pattern.split("."), path.split(".")
    return len(p) == len(q) and all(a == "*" or a == b for a, b in zip(p, q))


def field_of(lesson: Any, path: str) -> Field | None:
    """The declared field a measurement path belongs to in ``lesson`` (None: not hidden-derived);
    a lesson the budget does not know (measurements without ``assignment.id``) gets every lesson's
    declarations, so nothing declared anywhere is shown because the id was missing."""
    known = any(f.lesson == lesson for f in BUDGET)
    return next(
        (f for f in BUDGET if (f.lesson == lesson or not known) and any(_matches(p, path) for p in f.paths)), None
    )


def lesson_of(measurements: Mapping[str, Any]) -> str | None:
    a = measurements.get("assignment") if isinstance(measurements, Mapping) else None
    if isinstance(a, Mapping) and isinstance(a.get("id"), str):
        return a["id"]
    return a if isinstance(a, str) else None


def verdict_text(passed: bool, op_text: str, threshold_text: str) -> str:
    """A hidden-derived number as its relation to the threshold: the part's pass/fail bit only."""
    return f"{op_text} {threshold_text}" if passed else f"not {op_text} {threshold_text}"


def first_failure_path(measurements: Mapping[str, Any]) -> str | None:
    """``functions.<f>.groups.<g>.failure`` of the submission's first failing group (in the order
    the grader measured them: the rubric's), or None when no group failed."""
    functions = measurements.get("functions") if isinstance(measurements, Mapping) else None
    for name, facts in (functions or {}).items() if isinstance(functions, Mapping) else ():
        groups = facts.get("groups") if isinstance(facts, Mapping) else None
        for group, g in (groups or {}).items() if isinstance(groups, Mapping) else ():
            if isinstance(g, Mapping) and g.get("failure"):
                return f"functions.{name}.groups.{group}.failure"
    return None


def _replaced(measurements: Mapping[str, Any], path: str) -> str | None:
    """The function's ``replaced`` sentence (an import replaced it: read from the setup cell, before
    any hidden input), for a ``functions.<f>.groups.<g>.failure`` path."""
    functions = measurements.get("functions")
    facts = functions.get(path.split(".")[1]) if isinstance(functions, Mapping) else None
    replaced = facts.get("replaced") if isinstance(facts, Mapping) else None
    return replaced if isinstance(replaced, str) and replaced else None


def shown_value(measurements: Mapping[str, Any], path: str, value: Any) -> tuple[bool, Any]:
    """(replaced, what to show) for a placeholder ``path`` of a message: the declared field's
    fixed words, another group's failure as :data:`OTHER_FAILURE`, a text with its run failures
    cut to their category; ``(False, value)`` when nothing is declared."""
    field = field_of(lesson_of(measurements), path)
    if field is not None and field.shown == FIXED:
        return True, field.text
    if field is not None and field.shown == FIRST_FAILURE and value and path != first_failure_path(measurements):
        replaced = _replaced(measurements, path)  # told before any hidden input: kept for every group
        return True, f"{replaced}; {OTHER_FAILURE}" if replaced else OTHER_FAILURE
    if isinstance(value, str) and RUN_PREFIX in value:
        return True, run_failure_words(value)
    return False, value
