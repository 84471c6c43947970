"""What went wrong in one probe call, told without the hidden input.

The facts of :mod:`.compare` hold the grader's own renderings of the expected and returned values
(for ``measurements.json``, which only the course staff read). What the student reads about a
failed call comes from here instead, and carries nothing of the hidden case's values:

- **an exception**: its type only, from a closed list of builtin and library exception classes
  (:func:`autograder.leak_budget.exception_name`; a class the notebook defined reads "an exception
  of a type defined in the notebook or a library"): ``OverflowError``. The probe keeps no message
  or traceback of a call (``sandbox/probe_run.py``);
- **the argument types** of that call, from the case itself (:func:`describe_arguments`):
  ``x a float32 array of shape (6,), scale a numpy.float32 scalar, zero_point a numpy.uint8 scalar``;
- **a wrong result**: its kind, dtype and shape against the expected ones (a returned shape or
  count without its numbers, which the function may make from the hidden input: :func:`shape_words`,
  :func:`count_words`, :func:`kind_words`: ``a 2-d shape``), and for wrong values
  how many elements differ and by how much, in coarse buckets (:func:`value_account`): in
  the Expect's unit when it names one (``the value differs, by 3 nodes``; :data:`STEP`, quantization
  steps, also for float values with a step: ``3 of 6 elements differ, by 1 step``), bare numbers
  for other integers (``by 3``), else relative to the expected value;
- **a wrong dict** (:func:`keys_words`): the expected keys it misses (the grader's words) or how
  many keys it has that are not expected, named masked (the student's words);
- **a replaced function** (:func:`replaced`): the function the probe called is not the
  notebook's own (``from onnxruntime.quantization import quantize`` after the definition).

Exception text is student-controlled and the function held the hidden input when it raised
(``raise ValueError(repr(x))``, or anything computed from it, or from the inputs of earlier calls),
so none of it is shown: SECURITY.md ("The leak budget") counts the bits each field above can carry
(:mod:`autograder.leak_budget`). A wrong dict's unexpected keys are counted, never named; which
elements differ is one of three words (one, some, all); a returned tuple is told by its count and
its first value's kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..leak_budget import exception_name
from ..probe_format import Arg, CaseOutput, ProbeCase
from ..student_text import mask

MAX_MESSAGE = 160  # characters of a masked message (student_text.mask), where one is still shown
MAX_TYPE = 60  # characters of an exception type's words (leak_budget.OTHER_EXCEPTION fits)
STEP_BUCKETS = (1, 2, 10, 100)
REL_BUCKETS = ((1e-6, "1e-6"), (1e-3, "0.1%"), (1e-2, "1%"), (0.1, "10%"), (1.0, "100%"))


def _array_kind(a: np.ndarray, kind: str) -> str:
    a = np.asarray(a)
    if kind == "list":
        if a.size == 0:
            return "an empty list" if a.ndim <= 1 else f"an empty nested list of shape {a.shape}"
        return f"a list of {a.size} floats" if a.ndim == 1 else f"a nested list of shape {a.shape}"
    article = "an" if str(a.dtype).startswith("i") else "a"
    if kind == "scalar":
        return f"a numpy.{a.dtype} scalar"
    if a.ndim == 0:
        return f"a 0-d {a.dtype} array"
    return f"{article} {a.dtype} array of shape {a.shape}"


MAX_COUNT_SHOWN = 4  # how many values a returned tuple is said to hold, at most
MAX_NDIM_SHOWN = 4  # dimensions of a returned shape, told exactly up to this many


def shape_words(shape: Sequence[int]) -> str:
    """A shape a student's code returned, without its numbers (they may be made from the hidden
    input: ``np.empty((0, int(x[0] * 1e6)))`` holds no element and any dimension): how many
    dimensions, and whether it holds no element. ``a 2-d shape``, ``a 0-d shape``."""
    shape = tuple(shape)
    empty = " with no element" if any(int(d) == 0 for d in shape) else ""
    if len(shape) > MAX_NDIM_SHOWN:
        return f"a shape of more than {MAX_NDIM_SHOWN} dimensions{empty}"
    return f"a {len(shape)}-d shape{empty}"


def count_words(n: int) -> str:
    """How many values a student's code returned, exact up to :data:`MAX_COUNT_SHOWN`."""
    return str(n) if n <= MAX_COUNT_SHOWN else f"more than {MAX_COUNT_SHOWN}"


def kind_words(values: Sequence[np.ndarray], is_tuple: bool) -> str:
    """What came back, by kind, dtype and :func:`shape_words` only: ``one int64 array of a 1-d shape``."""
    if not is_tuple and len(values) == 1:
        return f"one {values[0].dtype} array of {shape_words(values[0].shape)}"
    if not values:
        return f"a tuple of {count_words(0)}"
    more = ", …" if len(values) > 1 else ""  # the first only: each one more is bits (leak_budget)
    return f"a tuple of {count_words(len(values))} ({values[0].dtype} of {shape_words(values[0].shape)}{more})"


def describe_type(a: Any) -> str:
    """The type of one argument, never its value: ``a numpy.uint8 scalar``, ``a Python float``."""
    if isinstance(a, Arg):
        if a.kind == "dtype":
            return f"np.{a.value}"
        if a.kind in ("array", "list", "scalar"):
            return _array_kind(a.value, a.kind)
        if a.kind == "strings":
            return f"a list of {len(a.value)} str"
        if a.kind == "file":
            return "a str (the path of a file)"
        if a.kind == "artifact":  # the notebook's own file, named by the lesson's contract
            return f"a str (the path of {a.value})"
        if a.kind == "session":
            return "an onnxruntime.InferenceSession"
        a = a.value
    if isinstance(a, bool):
        return "True" if a else "False"  # a flag is part of the contract, not data
    return {int: "a Python int", float: "a Python float", str: "a str"}.get(type(a), f"a {type(a).__name__}")


def describe_arguments(case: ProbeCase, params: Sequence[str] = ()) -> str:
    """Each argument of the call by name (``params``: the contract's parameter names) and type."""
    named = [(params[i] if i < len(params) else f"argument {i + 1}", a) for i, a in enumerate(case.args)]
    named += list(case.kwargs.items())
    return ", ".join(f"{name} {describe_type(a)}" for name, a in named)


STEP = "step"  # the unit of quantization: an Expect with a step, or unit=STEP (lesson 07's integer arrays)
UNIT_BUCKETS = (10, 100)


def _plural(unit: str) -> str:
    return unit if unit.endswith("s") else unit + "s"


def _bucket_steps(steps: float) -> str:
    if not np.isfinite(steps):
        return "by an infinite or undefined amount"
    for b in STEP_BUCKETS:
        if steps <= b + 1e-9:
            return "by 1 step" if b == 1 else f"by up to {b} steps"
    return f"by more than {STEP_BUCKETS[-1]} steps"


def amount_words(amount: float, unit: str | None) -> str:
    """How far off, in units: ``by 1 node``, ``by 3 nodes``, ``by up to 10 nodes`` (exact up to
    :data:`MAX_COUNT_SHOWN` when whole, then coarse buckets); ``unit`` None: bare numbers
    (``by 3``); :data:`STEP`: quantization steps, in :data:`STEP_BUCKETS`."""
    if unit == STEP:
        return _bucket_steps(amount)
    if not np.isfinite(amount):
        return "by an infinite or undefined amount"

    def named(n: int | float, text: str) -> str:
        return f"by {text}" + ("" if unit is None else f" {unit if n == 1 else _plural(unit)}")

    if float(amount).is_integer() and amount <= MAX_COUNT_SHOWN:
        return named(int(amount), str(int(amount)))
    for b in UNIT_BUCKETS:
        if amount <= b:
            return named(b, f"up to {b}")
    return named(UNIT_BUCKETS[-1], f"more than {UNIT_BUCKETS[-1]}")


def _bucket_relative(rel: float) -> str:
    if not np.isfinite(rel):
        return "by an infinite or undefined amount"
    for b, text in REL_BUCKETS:
        if rel <= b:
            return f"by up to {text} of the expected value"
    return "by more than the expected value itself"


def _differ_words(n_bad: int, size: int) -> str:
    """How many elements differ, in three words (one, some, all): the count itself is the
    student's function's choice on the hidden input (autograder.leak_budget)."""
    if size <= 1:
        return "the value differs"
    if n_bad >= size:
        return f"all {size} elements differ"
    return f"1 of {size} elements differ" if n_bad == 1 else f"some of {size} elements differ"


def value_account(
    expected: np.ndarray, got: np.ndarray, ok: np.ndarray, step: float | None, unit: str | None = None
) -> str:
    """How far the wrong elements are: a count and a size, in units (:func:`amount_words`) when the
    values are integers or ``step`` is known, else relative to the expected value."""
    bad = ~np.asarray(ok, dtype=bool).reshape(-1)
    integer = np.asarray(expected).dtype.kind in "iub"  # one integer is one unit
    e = np.asarray(expected, dtype=np.float64).reshape(-1)[bad]
    g = np.asarray(got).astype(np.float64).reshape(-1)[bad]
    count = _differ_words(int(bad.sum()), bad.size)
    with np.errstate(all="ignore"):
        diff = np.abs(g - e)
        if np.any(np.isnan(g)):
            return f"{count}, NaN among them"
        if integer or (step is not None and step > 0):
            size = amount_words(float(np.max(diff / (step or 1.0))), unit)
        else:
            size = _bucket_relative(float(np.max(diff / np.maximum(np.abs(e), np.finfo(np.float32).tiny))))
    return f"{count}, {size}"


def keys_words(which: str, keys: Sequence[str], shown: int, width: int) -> str:
    """A dict's wrong keys: ``missing the key 'Conv'`` (the expected keys, the grader's own words)
    or ``has 2 keys not expected: '<…>', 'Gelu'`` (the student's keys, made while the hidden
    input was in reach: masked, :func:`autograder.student_text.mask`)."""
    n = count_words(len(keys))
    if which != "missing":  # the student's keys, made while the hidden input was in reach: not named
        return "has a key not expected" if len(keys) == 1 else f"has {n} keys not expected"
    names = [repr(k) if len(repr(k)) <= width else repr(k)[: width - 2] + "…'" for k in keys[:shown]]
    listed = ", ".join(names) + (", …" if len(keys) > shown else "")
    return f"missing the key {listed}" if len(keys) == 1 else f"missing {n} keys: {listed}"


def replaced(name: str, origin: Mapping[str, Any] | None) -> str | None:
    """Why the function the probe called is not the notebook's own, or None when it is."""
    if not isinstance(origin, Mapping):
        return None
    module, qualname = origin.get("module"), origin.get("qualname")
    if not isinstance(module, str) or module in ("__main__", "None"):
        return None
    if not isinstance(qualname, str) or qualname == "None":
        return None  # an object, not a function (np.vectorize, functools.partial of the notebook's own)
    params = origin.get("params") if isinstance(origin.get("params"), list) else None
    signature = f"({', '.join(str(p) for p in params)})" if params is not None else ""
    return mask(
        f"{name} is not the function defined in the notebook: it is {qualname}{signature} "
        f"from module {module} (an import after your definition replaced it)",
        300,
    )


def error_account(output: CaseOutput) -> str:
    """``OverflowError``: the exception's type from a closed list
    (:func:`autograder.leak_budget.exception_name`), never its message (the call wrote it while it
    held the hidden inputs)."""
    err = output.error if isinstance(output.error, dict) else {}
    return exception_name(err.get("type"))
