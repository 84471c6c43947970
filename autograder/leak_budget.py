"""The leak budget: every student-visible field that depends on hidden data, and its bits.

Hidden data (a lesson's hidden rows, every probe case, hidden files handed to a student's function)
stays hidden *by budget*: a submission can make what the grader shows depend on it, so each field
shown is declared with how it is shown and the bits it can carry per submission, and the sum per
lesson is at most :data:`MAX_BITS`. How a measurement path is shown is the same for every lesson
(:data:`SHOWN`, here); what a lesson shows, how many times and at how many bits is its own
``leak_budget.toml`` (:func:`lesson_budget`), which SECURITY.md ("The leak budget") mirrors; a test
keeps the two in sync and grades every lesson's examples to find any hidden-derived text not
declared.

How each kind of field is shown (enforced in one place each):

- :data:`VERDICT`: a number measured on hidden data (an accuracy, a drift, a share of probe calls
  that agree, a count of calls that raised) is shown only as its relation to the threshold:
  ``≥ 85.0%`` when the part passed, ``not ≥ 85.0%`` when it failed: the part's pass/fail bit and
  nothing more (:func:`verdict_text`, used by :mod:`autograder.grade_text` for ``{measured}``;
  any other placeholder of such a path reads "a value measured on hidden data");
- :data:`FIXED`: a value that is hidden data itself or a count over it (the hidden test set's
  extremes, how many calls of a group agree) is replaced by fixed words (its row of :data:`SHOWN`);
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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_BITS = 64.0  # per submission, per lesson (each lesson's leak_budget.toml)

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
        "object",
        "bytearray",
        "memoryview",
        "range",
        "generator",
        "function",
        "builtin_function_or_method",
        "module",
        "type",
        "datetime",
        "date",
        "timedelta",
        "Decimal",
        "Fraction",
        "datetime64",
        "timedelta64",
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

BUDGET_FILE = "leak_budget.toml"  # in each lesson's folder: its fields, counts and bits
EXCEPTION_BITS = round(math.log2(len(EXCEPTION_TYPES) + 1), 1)
# per model: a run failure's category, or NaN, a range or row sums off (probabilities.py), or none
RUN_FAILURE_BITS = round(math.log2(len(RUN_CATEGORIES) + 4), 1)
# the first failing group's call: which case of its group (at most 8) and what went wrong: an
# exception type, or a returned kind (a tuple's count, one dtype, a bounded number of dimensions),
# or which elements differ (one, some, all) by how much (six buckets)
FIRST_FAILURE_BITS = 3 + max(EXCEPTION_BITS, 10.0)
OTHER_FAILURE = "told for the first failing group of this submission only"
KINDS = (VERDICT, FIXED, FIRST_FAILURE, CLOSED)

# How each measurement path a message may name is shown, for every lesson (``*`` is one segment).
# A lesson's leak_budget.toml counts how many of them it shows and their bits; a path computed
# from hidden data that is not here would be shown as it is (tests/report/test_leak_budget.py
# fails for it).
SHOWN: tuple[tuple[str, str, str], ...] = (
    *(
        (p, VERDICT, "")
        for p in (
            "functions.*.groups.*.agree_share",
            "functions.*.groups.*.raised",
            "functions.*.agree_share",
            "functions.*.raised",
            "models.*.accuracy",
            "models.*.max_abs_diff",
            "models.*.quality.accuracy_drop",
            "models.*.quality.label_agreement",
            "models.*.quality.max_abs_dp",
            "models.*.calibration.coverage",
            "parity.max_abs_diff",
            "parity.label_agreement",
            "parity.edge_max_abs_diff",
            "parity.edge_label_agreement",
            "parity.notebook_max_abs_diff",
            "parity.notebook_label_agreement",
        )
    ),
    ("functions.*.groups.*.agree", FIXED, "not all"),
    ("functions.*.agree", FIXED, "not all"),
    ("models.*.calibration.data_range", FIXED, "the hidden test inputs' own range"),
    ("functions.*.groups.*.failure", FIRST_FAILURE, ""),
    *(
        (p, CLOSED, "")
        for p in (
            "functions.*.first_mismatch.group",
            "functions.*.first_mismatch.reason",
            "parity.error",
            "models.*.problems",
            "models.*.error",
            "models.*.metrics_error",
            "models.*.interface_ok",
        )
    ),
)


@dataclass(frozen=True)
class Field:
    """One student-visible field of a lesson that depends on hidden data (its leak_budget.toml).

    ``paths``: measurement paths (dotted; ``*`` is one segment), empty for a channel that is not a
    measurement (a probe that did not complete). ``count``: how many such fields a graded
    submission shows; ``bits``: per field, worst case."""

    name: str
    shown: str
    paths: tuple[str, ...]
    count: int
    bits: float
    why: str

    @property
    def total(self) -> float:
        return self.count * self.bits


@dataclass(frozen=True)
class Budget:
    """A lesson's budget: its declared fields and where its measurements hold hidden-derived numbers."""

    fields: tuple[Field, ...]
    hidden_measurements: tuple[str, ...]

    @property
    def total_bits(self) -> float:
        return round(sum(f.total for f in self.fields), 1)

    def hidden(self, path: str) -> bool:
        """Whether ``path`` (a leaf's dotted path) holds a number computed from hidden data."""
        q = path.split(".")
        return any(
            len(q) >= len(p) and all(a == "*" or a == b for a, b in zip(p, q))
            for p in (pattern.split(".") for pattern in self.hidden_measurements)
        )


def lesson_budget(folder: Path) -> Budget:
    """The budget a lesson declares in ``<folder>/leak_budget.toml``."""
    data = tomllib.loads((Path(folder) / BUDGET_FILE).read_text(encoding="utf-8"))
    fields = tuple(
        Field(
            str(f["name"]),
            str(f["shown"]),
            tuple(f.get("paths", ())),
            int(f["count"]),
            float(f["bits"]),
            str(f.get("why", "")),
        )
        for f in data.get("fields", ())
    )
    return Budget(fields, tuple(data.get("hidden_measurements", ())))


def _matches(pattern: str, path: str) -> bool:
    p, q = pattern.split("."), path.split(".")
    return len(p) == len(q) and all(a == "*" or a == b for a, b in zip(p, q))


def shown_as(path: str) -> tuple[str, str] | None:
    """How a measurement path is shown, ``(kind, fixed words)``, or None: shown as it is."""
    return next(((kind, text) for pattern, kind, text in SHOWN if _matches(pattern, path)), None)


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
    """(replaced, what to show) for a placeholder ``path`` of a message: a fixed field's words,
    another group's failure as :data:`OTHER_FAILURE`, a text with its run failures cut to their
    category; ``(False, value)`` when nothing applies."""
    shown = shown_as(path)
    if shown is not None and shown[0] == FIXED:
        return True, shown[1]
    if shown is not None and shown[0] == FIRST_FAILURE and value and path != first_failure_path(measurements):
        replaced = _replaced(measurements, path)  # told before any hidden input: kept for every group
        return True, f"{replaced}; {OTHER_FAILURE}" if replaced else OTHER_FAILURE
    if isinstance(value, str) and RUN_PREFIX in value:
        return True, run_failure_words(value)
    return False, value
