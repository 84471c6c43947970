"""Compare one probe result with the reference's answer and return facts, never a verdict.

``compare_output(expected, output)`` validates in a fixed order and stops at the first failure:

    missing → raised → type (kind) → shape → dtype → values

and returns ``{"agree": bool, "reason": None | "missing" | "raised" | "type" | "shape" | "dtype" |
"values", "expected": short str, "got": short str, "account": str}``. ``expected`` and ``got``
render values (for the course staff); ``account`` says what went wrong without any value of the
hidden case (for the student, see :mod:`.failure`): the masked exception, the returned kind,
dtype and shape, or how many elements are off and by how many steps.

Values
------
- Integer results are compared exactly, bit for bit.
- Float results are compared with a :class:`Tolerance`:
  ``|got - expected| <= atol + rtol * |expected|``. The default, :data:`FLOAT32_ROUNDING`, is
  float32 rounding: ``rtol = FLOAT_RTOL = 4 * eps`` and ``atol = FLOAT_ATOL = tiny`` of
  ``np.finfo(np.float32)``. An honest float32 result differs from ONNX Runtime's by at most a few
  float32 roundings (the scale stored as float32, the product or quotient, a float64 path rounded
  once more at the end), each at most eps/2 relative; 4·eps covers them with margin and is still
  ~10^4 times smaller than one quantization step of a real bug.
- Another tolerance is set per returned value (``Expect(..., tolerance=Tolerance(...))``), per call
  (``compare_output(..., tolerance=...)``), or per group of cases
  (:func:`autograder.measure.functions.measure_function`'s ``tolerances``): e.g. a result computed
  in float64 from float64 inputs may be held to float64 rounding, and an exact softmax rounded to
  float32 needs more than 4 eps against ONNX Runtime's.

Fairness at near-ties
---------------------
``round_half_to_even(x / scale)`` has one right answer only where the quotient is computed
exactly. ONNX Runtime divides in float32; a student dividing in float64 (or multiplying by
``1 / scale``) gets a quotient a few float32 ulps away, which rounds to the other neighbour when it
lies that close to a ``k + 0.5`` tie (about 8% of values placed at ``np.float32((k + 0.5) * scale)``
for an arbitrary scale). Both are honest, so there the grader accepts either neighbour:

- :func:`near_tie` marks an element when any of the given quotient computations (the caller passes
  float64 and float32 variants of the same division) lies within ``NEAR_TIE_ULPS`` float32 ulps of a
  half-integer, or when their ``rint`` results disagree; minus the elements the caller marks
  ``exact`` (input, scale and quotient all exactly representable, e.g. 1.25 / 0.5 = 2.5 with a
  power-of-two scale), where every honest implementation gets the same tie and must round it to even.
- :func:`tie_offsets` turns the mark into the signed offset from the expected value to the other
  neighbour, after adding the zero point and saturating (0 where both neighbours saturate to the
  same value, so saturation is never loosened).
- ``compare_output(..., ambiguous=offsets)`` then accepts ``expected`` or ``expected + offset``
  at those elements, and only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..probe_format import Arg, CaseOutput, ProbeCase
from ..student_text import mask
from . import failure

FLOAT32 = np.finfo(np.float32)
FLOAT_RTOL = float(4 * FLOAT32.eps)   # a few float32 roundings, each <= eps/2 relative
FLOAT_ATOL = float(FLOAT32.tiny)      # below the smallest normal float32 the rounding error is absolute
NEAR_TIE_ULPS = 4                     # "within a few float32 ulps of a .5 tie"
MAX_TEXT = 240                        # characters of an expected/got rendering
SHOWN_ELEMENTS = 6                    # elements of an array shown in a rendering

REASONS = ("missing", "raised", "type", "shape", "dtype", "values")
_NUMERIC_KINDS = "biufc"


@dataclass(frozen=True)
class Tolerance:
    """How far a float result may be from the reference: ``|got - expected| <= atol + rtol·|expected|``."""

    rtol: float = FLOAT_RTOL
    atol: float = FLOAT_ATOL

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rtol) and np.isfinite(self.atol) and self.rtol >= 0 and self.atol >= 0):
            raise ValueError(f"a tolerance needs finite rtol, atol >= 0, got {self}")

    def text(self) -> str:
        rel = f"{self.rtol:.2g}·|expected|"
        return rel if self == FLOAT32_ROUNDING else f"{self.atol:.2g} + {rel}"


FLOAT32_ROUNDING = Tolerance()


@dataclass(frozen=True)
class Expect:
    """The reference's answer for one returned value.

    ``dtype_kinds``: None when the dtype must equal ``value.dtype``; else the NumPy kinds accepted
    (``"f"`` any float, ``"iu"`` any integer). ``ambiguous``: per element 0, or the offset (+1/-1)
    to the other neighbour accepted at a near-tie (see :func:`tie_offsets`). ``label`` names the
    value inside a tuple ("scale", "zero_point"). ``tolerance``: for a float value, how close it
    must be (None: the call's, else float32 rounding).
    """

    value: np.ndarray
    dtype_kinds: str | None = None
    ambiguous: np.ndarray | None = None
    label: str = ""
    tolerance: Tolerance | None = None
    step: float | None = None     # one quantization step of a float value (how far off is told in steps)


def near_tie(quotients: Sequence, exact=None) -> np.ndarray:
    """Where a rounding of these quotient variants is ambiguous (the fairness rule above).

    ``quotients``: the same division computed in different precisions, broadcastable arrays.
    ``exact``: where the division is known to be exact (never ambiguous).
    """
    qs = [np.asarray(q, dtype=np.float64) for q in quotients]
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.zeros(np.broadcast_shapes(*(q.shape for q in qs)), dtype=bool)
        for q in qs:
            ulp = np.spacing(np.abs(q).astype(np.float32)).astype(np.float64)
            near |= np.abs(q - (np.floor(q) + 0.5)) <= NEAR_TIE_ULPS * ulp
        for q in qs[1:]:
            near |= np.rint(q) != np.rint(qs[0])
    if exact is not None:
        near &= ~np.asarray(exact, dtype=bool)
    return near


def tie_offsets(quotients: Sequence, expected, *, add=0, lo: int, hi: int, exact=None) -> np.ndarray:
    """Per element, the offset from ``expected`` to the other accepted neighbour (0: none).

    ``expected`` is the reference's ``saturate(round(q) + add)`` into ``[lo, hi]``; ``quotients[0]``
    is the reference's own quotient, the rest are the other honest ways to compute it.
    """
    e = np.asarray(expected).astype(np.int64)
    ref = np.asarray(quotients[0], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        below = np.floor(np.nan_to_num(ref, posinf=2.0**62, neginf=-2.0**62))
        below = np.clip(below, -2.0**62, 2.0**62).astype(np.int64)
    add = np.asarray(add, dtype=np.int64)
    n0 = np.clip(below + add, lo, hi)
    n1 = np.clip(below + 1 + add, lo, hi)
    offset = np.where(e == n0, n1 - n0, np.where(e == n1, n0 - n1, 0))
    return np.where(near_tie(quotients, exact), offset, 0).astype(np.int8)


def _clip_text(s: str) -> str:
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def format_number(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.9g}"
    if isinstance(v, (bytes, str, np.str_, np.bytes_)):
        return repr(v)[:40]
    return str(v)


def describe(a: np.ndarray) -> str:
    """A short rendering: ``[2 4 -2 …] int8 shape (6,)`` or ``2 int8 shape ()``."""
    a = np.asarray(a)
    if a.ndim == 0:
        return _clip_text(f"{format_number(a.item())} {a.dtype} shape ()")
    flat = a.reshape(-1)
    shown = " ".join(format_number(v) for v in flat[:SHOWN_ELEMENTS].tolist())
    more = " …" if flat.size > SHOWN_ELEMENTS else ""
    return _clip_text(f"[{shown}{more}] {a.dtype} shape {a.shape}")


def _describe_arg(a) -> str:
    if not isinstance(a, Arg):
        return repr(a)
    if a.kind == "dtype":
        return f"np.{a.value}"
    if a.kind == "scalar":
        return f"np.{a.value.dtype}({format_number(a.value.item())})"
    if a.kind in ("array", "list"):
        v = np.asarray(a.value)
        flat = ", ".join(format_number(e) for e in v.reshape(-1)[:SHOWN_ELEMENTS].tolist())
        flat += ", …" if v.size > SHOWN_ELEMENTS else ""
        if a.kind == "list":
            return f"[{flat}]" if v.ndim <= 1 else f"[[{flat}]] (nested list {v.shape})"
        return f"np.array([{flat}], dtype={v.dtype}" + (f", shape {v.shape})" if v.ndim != 1 or v.size > SHOWN_ELEMENTS else ")")
    return repr(a.value)


def describe_call(case: ProbeCase) -> str:
    """A readable one-line rendering of the call, truncated: ``quantize(np.array([1.25, …]), 0.5, 0, dtype=np.int8)``."""
    args = [_describe_arg(a) for a in case.args] + [f"{k}={_describe_arg(v)}" for k, v in case.kwargs.items()]
    return _clip_text(f"{case.function}({', '.join(args)})")


_KIND_NAMES = {"f": "float", "i": "int", "u": "unsigned int", "iu": "int"}


def _describe_part(p: Expect) -> str:
    text = describe(p.value)
    if p.dtype_kinds is not None:   # any dtype of these kinds will do: name the kind, not our dtype
        text = text.replace(f" {p.value.dtype} ", f" {_KIND_NAMES.get(p.dtype_kinds, p.dtype_kinds)} ", 1)
    return text


def _describe_parts(parts: Sequence[Expect]) -> str:
    if len(parts) == 1 and not parts[0].label:
        return _describe_part(parts[0])
    shown = (f"{p.label + ' ' if p.label else ''}{_describe_part(p).replace(' shape ()', '')}" for p in parts)
    return _clip_text("(" + ", ".join(shown) + ")")


def _describe_got(values: list[np.ndarray], is_tuple: bool) -> str:
    if not is_tuple and len(values) == 1:
        return describe(values[0])
    return _clip_text(f"a tuple of {len(values)}: (" + ", ".join(describe(v) for v in values) + ")")


def _fact(agree: bool, reason: str | None, expected: str, got: str, account: str = "") -> dict:
    return {"agree": agree, "reason": reason, "expected": _clip_text(expected), "got": _clip_text(got),
            "account": account}


def _as_parts(expected, ambiguous) -> tuple[list[Expect], bool]:
    if isinstance(expected, tuple):
        return [e if isinstance(e, Expect) else Expect(np.asarray(e)) for e in expected], True
    if isinstance(expected, Expect):
        return [expected], False
    return [Expect(np.asarray(expected), ambiguous=ambiguous)], False


def _kind_problem(parts: list[Expect], is_tuple: bool, output: CaseOutput) -> tuple[str, str] | None:
    """``(got, account)`` when the result is not of the expected kind, else None."""
    got = output.values
    if is_tuple and not (output.is_tuple and len(got) == len(parts)):
        return (f"expected a tuple of {len(parts)} values, got " + _describe_got(got, output.is_tuple),
                f"returned {failure.kind_words(got, output.is_tuple)}, expected a tuple of {len(parts)} values")
    if not is_tuple and (output.is_tuple or len(got) != 1):
        return (f"expected one array, got a tuple or list of {len(got)} values",
                f"returned a tuple or list of {failure.count_words(len(got))} values, expected one array")
    for p, g in zip(parts, got):
        if g.dtype.kind not in _NUMERIC_KINDS:
            label = p.label + ": " if p.label else ""
            return f"{label}a non-numeric value, {describe(g)}", f"{label}returned a non-numeric value (dtype {g.dtype})"
    return None


def _dtype_ok(p: Expect, g: np.ndarray) -> bool:
    if p.dtype_kinds is None:
        return g.dtype == p.value.dtype
    return g.dtype.kind in p.dtype_kinds


def _dtype_wanted(p: Expect) -> str:
    names = {"f": "a float", "i": "a signed integer", "u": "an unsigned integer", "iu": "an integer"}
    return str(p.value.dtype) if p.dtype_kinds is None else names.get(p.dtype_kinds, p.dtype_kinds) + " dtype"


def _value_mismatch(p: Expect, g: np.ndarray, tolerance: Tolerance) -> tuple[str, str] | None:
    """None when the values agree, else ``(got, account)``: where and by how much they differ, with
    values (for the staff) and without (:func:`failure.value_account`)."""
    e = p.value
    tol = p.tolerance or tolerance
    with np.errstate(invalid="ignore", over="ignore"):
        if e.dtype.kind in "iub":
            diff = g.astype(np.int64) - e.astype(np.int64)
            amb = np.zeros(e.shape, np.int64) if p.ambiguous is None else np.broadcast_to(p.ambiguous, e.shape)
            ok = (diff == 0) | ((amb != 0) & (diff == amb))
            allowed = "0" if not np.any(amb) else "0, or 1 toward the other neighbour at near-ties"
        else:
            g64, e64 = g.astype(np.float64), e.astype(np.float64)
            diff = g64 - e64
            ok = (g64 == e64) | (np.abs(diff) <= tol.atol + tol.rtol * np.abs(e64))
            allowed = tol.text()
    if bool(np.all(ok)):
        return None
    bad = np.flatnonzero(~ok.reshape(-1))
    i = int(bad[0])
    bad_diff = np.abs(diff.reshape(-1)[bad])
    max_diff = format_number(np.nanmax(bad_diff)) if np.any(~np.isnan(bad_diff)) else "nan"
    g_i, e_i = format_number(g.reshape(-1)[i]), format_number(e.reshape(-1)[i])
    account = failure.value_account(e, g, ok, p.step)
    if e.ndim == 0:
        return f"|diff| {max_diff}, allowed {allowed}", account
    where = tuple(int(k) for k in np.unravel_index(i, e.shape))
    return (f"{bad.size}/{e.size} elements differ, first at {where}: {g_i} instead of {e_i} "
            f"(max |diff| {max_diff}, allowed {allowed})", account)


def compare_output(expected, output: CaseOutput, *, ambiguous=None,
                   tolerance: Tolerance | None = None) -> dict:
    """Compare the reference's ``expected`` with one probe ``output``; facts as described above.

    ``expected``: an ndarray (one returned array), an :class:`Expect`, or a tuple of them (a
    returned tuple). ``ambiguous`` (only with a plain ndarray): the near-tie offsets.
    ``tolerance``: for float values whose Expect sets none (default: float32 rounding).
    """
    parts, is_tuple = _as_parts(expected, ambiguous)
    want = _describe_parts(parts)
    if output.status in ("missing_function", "not_run"):
        what = "the function is not defined" if output.status == "missing_function" else "no result (not run)"
        return _fact(False, "missing", want, what, what)
    if output.status == "raised":
        err = output.error or {}
        return _fact(False, "raised", want, f"raised {err.get('type', 'an exception')}: {err.get('message', '')}",
                     "raised " + failure.error_account(output))
    if output.status != "ok":
        err = (output.error or {}).get("message", "")
        return _fact(False, "type", want, f"a result the probe could not turn into arrays ({err})",
                     f"returned a result the grader could not turn into arrays ({mask(err)})")
    problem = _kind_problem(parts, is_tuple, output)
    if problem:
        return _fact(False, "type", want, *problem)
    got = output.values
    for p, g in zip(parts, got):
        if g.shape != p.value.shape:
            label = f"{p.label}: " if p.label else ""
            return _fact(False, "shape", want, f"{label}{describe(g)}, expected shape {p.value.shape}",
                         f"{label}returned {failure.shape_words(g.shape)} (dtype {g.dtype}), expected shape {p.value.shape}")
    for p, g in zip(parts, got):
        if not _dtype_ok(p, g):
            label = f"{p.label}: " if p.label else ""
            return _fact(False, "dtype", want, f"{label}{describe(g)}, expected {_dtype_wanted(p)}",
                         f"{label}returned dtype {g.dtype}, expected {_dtype_wanted(p)} (the shape {g.shape} is right)")
    for p, g in zip(parts, got):
        mismatch = _value_mismatch(p, g, tolerance or FLOAT32_ROUNDING)
        if mismatch:
            label = f"{p.label}: " if p.label else ""
            return _fact(False, "values", want, f"{label}{describe(g)}; {mismatch[0]}",
                         f"{label}dtype {g.dtype} and shape {g.shape} are right, but {mismatch[1]}")
    return _fact(True, None, want, _describe_got(got, output.is_tuple))
