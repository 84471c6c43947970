"""Compare one probe result with the reference's answer and return facts, never a verdict.

``compare_output(expected, output)`` validates in a fixed order and stops at the first failure:

    missing → raised → type (kind) → shape → dtype → values

for an array or a tuple of arrays, and for a JSON-like result (a dict, list, str, bool, None, int,
float, with arrays inside) node by node, depth first: the kind, then a dict's missing keys and
extra keys (``keys``), a list's length (``length``), then each item in the expected order (an
array inside as above). It returns ``{"agree": bool, "reason": None | "missing" | "raised" |
"type" | "keys" | "length" | "shape" | "dtype" | "values", "expected": short str, "got": short
str, "account": str}``. ``expected`` and ``got`` render values (for the course staff);
``account`` says what went wrong without any value of the hidden case (for the student, see
:mod:`.failure`): the masked exception, the returned kind, dtype and shape, the key or index path
(``at ['com.microsoft.Gelu']``), or how many elements are off and by how many steps or units.

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

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ..probe_format import UNSET as UNSET_VALUE
from ..probe_format import LIMIT_WORDS, Arg, CaseOutput, ProbeCase, array_view
from ..student_text import mask
from . import failure

FLOAT32 = np.finfo(np.float32)
FLOAT_RTOL = float(4 * FLOAT32.eps)  # a few float32 roundings, each <= eps/2 relative
FLOAT_ATOL = float(FLOAT32.tiny)  # below the smallest normal float32 the rounding error is absolute
NEAR_TIE_ULPS = 4  # "within a few float32 ulps of a .5 tie"
MAX_TEXT = 240  # characters of an expected/got rendering
SHOWN_ELEMENTS = 6  # elements of an array shown in a rendering

REASONS = ("missing", "raised", "type", "keys", "length", "shape", "dtype", "values")
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
    """The reference's answer for one returned value, and how to compare it.

    ``value``: an ndarray or NumPy scalar (compared as an array: kind, shape, dtype, values), or a
    JSON-like Python value (dict, list, tuple, str, bool, None, int, float), whose items may be
    ndarrays or Expects themselves. The settings below hold for the whole value unless an inner
    Expect sets its own.

    ``dtype_kinds``: for an array, None when the dtype must equal ``value.dtype``; else the NumPy
    kinds accepted (``"f"`` any float, ``"iu"`` any integer). ``ambiguous``: per element 0, or the
    offset (+1/-1) to the other neighbour accepted at a near-tie (see :func:`tie_offsets`).
    ``label`` names the value inside a tuple ("scale", "zero_point"). ``tolerance``: for float
    values, how close they must be (None: the call's, else float32 rounding). ``step``: one
    quantization step of a float value (how far off is told in steps). ``unit``: what one integer
    counts, so a difference reads "by 1 node", "by 3 nodes" (None: integer arrays are told in
    quantization steps, as lesson 07's are; plain ints as bare numbers).
    """

    value: Any
    dtype_kinds: str | None = None
    ambiguous: np.ndarray | None = None
    label: str = ""
    tolerance: Tolerance | None = None
    step: float | None = None  # one quantization step of a float value (how far off is told in steps)
    unit: str | None = None  # what one integer counts ("node"): "by 3 nodes"


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
        below = np.floor(np.nan_to_num(ref, posinf=2.0**62, neginf=-(2.0**62)))
        below = np.clip(below, -(2.0**62), 2.0**62).astype(np.int64)
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
        return f"np.array([{flat}], dtype={v.dtype}" + (
            f", shape {v.shape})" if v.ndim != 1 or v.size > SHOWN_ELEMENTS else ")"
        )
    if a.kind == "strings":
        shown = ", ".join(repr(x)[:40] for x in a.value[:SHOWN_ELEMENTS])
        return f"[{shown}{', …' if len(a.value) > SHOWN_ELEMENTS else ''}]"
    if a.kind == "file":
        return f"<path of file {a.value[0]!r}, {len(a.value[1])} bytes>"
    if a.kind == "session":
        options = "".join(f", {k}={v!r}" for k, v in a.value[1].items())
        return f"<session on {_describe_arg(a.value[0])}{options}>"
    return repr(a.value)


def describe_call(case: ProbeCase) -> str:
    """A readable one-line rendering of the call, truncated: ``quantize(np.array([1.25, …]), 0.5, 0, dtype=np.int8)``."""
    args = [_describe_arg(a) for a in case.args] + [f"{k}={_describe_arg(v)}" for k, v in case.kwargs.items()]
    return _clip_text(f"{case.function}({', '.join(args)})")


_KIND_NAMES = {"f": "float", "i": "int", "u": "unsigned int", "iu": "int"}


def _describe_part(p: Expect) -> str:
    text = describe(p.value)
    if p.dtype_kinds is not None:  # any dtype of these kinds will do: name the kind, not our dtype
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
    return {
        "agree": agree,
        "reason": reason,
        "expected": _clip_text(expected),
        "got": _clip_text(got),
        "account": account,
    }


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
        return (
            f"expected a tuple of {len(parts)} values, got " + _describe_got(got, output.is_tuple),
            f"returned {failure.kind_words(got, output.is_tuple)}, expected a tuple of {len(parts)} values",
        )
    if not is_tuple and (output.is_tuple or len(got) != 1):
        return (
            f"expected one array, got a tuple or list of {len(got)} values",
            f"returned a tuple or list of {failure.count_words(len(got))} values, expected one array",
        )
    for p, g in zip(parts, got):
        if g.dtype.kind not in _NUMERIC_KINDS:
            label = p.label + ": " if p.label else ""
            return (
                f"{label}a non-numeric value, {describe(g)}",
                f"{label}returned a non-numeric value (dtype {g.dtype})",
            )
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
    # quantization steps only where the Expect says so (a step, or unit="step"); else its unit or bare numbers
    account = failure.value_account(e, g, ok, p.step, unit=p.unit or (failure.STEP if p.step else None))
    if e.ndim == 0:
        return f"|diff| {max_diff}, allowed {allowed}", account
    where = tuple(int(k) for k in np.unravel_index(i, e.shape))
    return (
        f"{bad.size}/{e.size} elements differ, first at {where}: {g_i} instead of {e_i} "
        f"(max |diff| {max_diff}, allowed {allowed})",
        account,
    )


def _array_problem(p: Expect, g: np.ndarray, tolerance: Tolerance, stage: str) -> tuple[str, str, str] | None:
    """One stage (shape, dtype or values) of comparing an array: None, or ``(reason, got, account)``."""
    label = f"{p.label}: " if p.label else ""
    if stage == "shape" and g.shape != p.value.shape:
        return (
            "shape",
            f"{label}{describe(g)}, expected shape {p.value.shape}",
            f"{label}returned {failure.shape_words(g.shape)} (dtype {g.dtype}), expected shape {p.value.shape}",
        )
    if stage == "dtype" and not _dtype_ok(p, g):
        return (
            "dtype",
            f"{label}{describe(g)}, expected {_dtype_wanted(p)}",
            f"{label}returned dtype {g.dtype}, expected {_dtype_wanted(p)} (the shape {g.shape} is right)",
        )
    if stage == "values":
        mismatch = _value_mismatch(p, g, tolerance)
        if mismatch:
            return (
                "values",
                f"{label}{describe(g)}; {mismatch[0]}",
                f"{label}dtype {g.dtype} and shape {g.shape} are right, but {mismatch[1]}",
            )
    return None


def _is_array_expect(e) -> bool:
    v = e.value if isinstance(e, Expect) else e
    return isinstance(v, (np.ndarray, np.generic))


def _as_array_expect(e) -> Expect:
    """``e`` (an ndarray, a NumPy scalar or an Expect of one) as an Expect of an ndarray."""
    p = e if isinstance(e, Expect) else Expect(e)
    return replace(p, value=np.asarray(p.value))


def _compare_arrays(parts: list[Expect], is_tuple: bool, want: str, output: CaseOutput, tolerance: Tolerance) -> dict:
    """Lessons 03's and 07's comparison: one array or a tuple of them, kind → shape → dtype → values."""
    view = array_view(output.result()) if output.value is not UNSET_VALUE else (output.values, output.is_tuple)
    if view is None:
        got = output.result()
        wanted = f"a tuple of {len(parts)} values" if is_tuple else "one array"
        return _fact(
            False, "type", want, f"{_render(got)}, expected {wanted}", f"returned {_kind_words(got)}, expected {wanted}"
        )
    values, got_tuple = view
    view_output = CaseOutput("ok", values, got_tuple)
    problem = _kind_problem(parts, is_tuple, view_output)
    if problem:
        return _fact(False, "type", want, *problem)
    for stage in ("shape", "dtype", "values"):
        for p, g in zip(parts, values):
            found = _array_problem(p, g, p.tolerance or tolerance, stage)
            if found:
                return _fact(False, found[0], want, found[1], found[2])
    return _fact(True, None, want, _describe_got(values, got_tuple))


# ---------------------------------------------------------------- JSON-like results

MAX_KEYS_SHOWN = 3  # keys named in one account
KEY_TEXT = 40  # characters of one key's rendering


def _key_text(k: str) -> str:
    r = repr(k)
    return r if len(r) <= KEY_TEXT else r[: KEY_TEXT - 2] + "…'"


def _path_text(path: tuple) -> str:
    return "".join(f"[{_key_text(k)}]" if isinstance(k, str) else f"[{k}]" for k in path)


def _render(v: Any, budget: int = MAX_TEXT) -> str:
    """A short rendering of a JSON-like value with arrays (for the staff)."""
    if isinstance(v, Expect):
        return _render(v.value, budget)
    if isinstance(v, (np.ndarray, np.generic)):
        return describe(np.asarray(v))
    if isinstance(v, dict):
        items = []
        for k, x in v.items():
            items.append(f"{_key_text(k)}: {_render(x, budget // 2)}")
            if sum(len(t) for t in items) > budget:
                items.append("…")
                break
        return _clip_text("{" + ", ".join(items) + "}")
    if isinstance(v, (list, tuple)):
        items = []
        for x in v:
            items.append(_render(x, budget // 2))
            if sum(len(t) for t in items) > budget:
                items.append("…")
                break
        text = ", ".join(items)
        return _clip_text(f"({text}{',' if len(v) == 1 else ''})" if isinstance(v, tuple) else f"[{text}]")
    if isinstance(v, str):
        return _clip_text(repr(v))
    return _clip_text(format_number(v) if isinstance(v, float) else repr(v))


def _kind_words(v: Any) -> str:
    """What a value is, by kind only (never its content): ``a dict``, ``an int64 array of a 1-d shape``."""
    if v is None:
        return "None"
    if isinstance(v, np.ndarray):
        return f"{'an' if str(v.dtype)[0] in 'iu' else 'a'} {v.dtype} array of {failure.shape_words(v.shape)}"
    if isinstance(v, np.generic):
        return f"a numpy.{v.dtype} scalar"
    names = {
        bool: "a bool",
        int: "an int",
        float: "a float",
        complex: "a complex",
        str: "a str",
        dict: "a dict",
        list: "a list",
        tuple: "a tuple",
    }
    return names.get(type(v), f"a {type(v).__name__}")


def _is_int(v: Any) -> bool:
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "iu"
    return (isinstance(v, (int, np.integer))) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "iuf"
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _wanted_words(spec: Any) -> str:
    if _is_array_expect(spec):
        return "an array"
    return _kind_words(spec)


def _tree_problem(spec: Any, got: Any, path: tuple, ctx: Expect) -> tuple[str, str, str] | None:
    """Compare one node: None, or ``(reason, got for the staff, account for the student)``."""
    if isinstance(spec, Expect):
        ctx = replace(
            ctx,
            tolerance=spec.tolerance or ctx.tolerance,
            step=spec.step if spec.step is not None else ctx.step,
            unit=spec.unit or ctx.unit,
            dtype_kinds=spec.dtype_kinds,
            label=spec.label,
            ambiguous=spec.ambiguous if _is_array_expect(spec) else None,
        )
        spec = spec.value
    at = f"at {_path_text(path)}: " if path else ""

    def kind_problem() -> tuple[str, str, str]:
        return (
            "type",
            f"{at}{_render(got)}, expected {_wanted_words(spec)}",
            f"{at}returned {_kind_words(got)}, expected {_wanted_words(spec)}",
        )

    if isinstance(spec, (np.ndarray, np.generic)):
        if not (isinstance(got, (np.ndarray, np.generic)) or _is_real(got) or isinstance(got, (bool, complex))):
            return kind_problem()
        p = _as_array_expect(replace(ctx, value=spec))
        g = np.asarray(got)
        if g.dtype.kind not in _NUMERIC_KINDS:
            return kind_problem()
        for stage in ("shape", "dtype", "values"):
            found = _array_problem(p, g, p.tolerance or FLOAT32_ROUNDING, stage)
            if found:
                return found[0], at + found[1], at + found[2]
        return None
    if isinstance(spec, dict):
        if not isinstance(got, dict):
            return kind_problem()
        missing = [k for k in spec if k not in got]
        if missing:
            return (
                "keys",
                f"{at}{_render(got)}, missing {', '.join(map(_key_text, missing[:MAX_KEYS_SHOWN]))}",
                f"{at}{failure.keys_words('missing', missing, MAX_KEYS_SHOWN, KEY_TEXT)}",
            )
        extra = [k for k in got if k not in spec]
        if extra:
            return (
                "keys",
                f"{at}{_render(got)}, not expected {', '.join(map(_key_text, extra[:MAX_KEYS_SHOWN]))}",
                f"{at}{failure.keys_words('extra', extra, MAX_KEYS_SHOWN, KEY_TEXT)}",
            )
        for k, sub in spec.items():
            found = _tree_problem(sub, got[k], (*path, k), ctx)
            if found:
                return found
        return None
    if isinstance(spec, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return kind_problem()
        if len(got) != len(spec):
            kind = "a tuple" if isinstance(got, tuple) else "a list"
            return (
                "length",
                f"{at}{_render(got)}, expected {len(spec)} items",
                f"{at}returned {kind} of {failure.count_words(len(got))} items, expected {len(spec)}",
            )
        for i, (sub, g) in enumerate(zip(spec, got)):
            found = _tree_problem(sub, g, (*path, i), ctx)
            if found:
                return found
        return None
    if spec is None:
        return None if got is None else kind_problem()
    if isinstance(spec, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)):
            return kind_problem()
        return None if bool(got) == bool(spec) else ("values", f"{at}{got!r}", f"{at}the bool differs")
    if isinstance(spec, str):
        if not isinstance(got, str):
            return kind_problem()
        return None if got == spec else ("values", f"{at}{_render(got)}", f"{at}the str differs")
    if isinstance(spec, int):
        if not _is_int(got):
            return kind_problem()
        if int(got) == spec:
            return None
        account = failure.value_account(np.array(spec), np.array(int(got)), np.array(False), None, unit=ctx.unit)
        return "values", f"{at}{int(got)}, expected {spec}", f"{at}{account}"
    if isinstance(spec, float):
        if not _is_real(got):
            return kind_problem()
        tol = ctx.tolerance or FLOAT32_ROUNDING
        value, want = float(got), spec
        if value == want or abs(value - want) <= tol.atol + tol.rtol * abs(want):
            return None
        account = failure.value_account(
            np.array(want),
            np.array(value),
            np.array(False),
            ctx.step,
            unit=ctx.unit or (failure.STEP if ctx.step else None),
        )
        return (
            "values",
            f"{at}{format_number(value)}, expected {format_number(want)} (allowed {tol.text()})",
            f"{at}{account}",
        )
    raise TypeError(f"an expectation cannot hold {type(spec).__name__}")


def compare_output(expected, output: CaseOutput, *, ambiguous=None, tolerance: Tolerance | None = None) -> dict:
    """Compare the reference's ``expected`` with one probe ``output``; facts as described above.

    ``expected``: an ndarray (one returned array), an :class:`Expect`, a tuple of them (a
    returned tuple), or any JSON-like value (dict, list, str, bool, None, int, float) whose items
    may be ndarrays or Expects. ``ambiguous`` (only with a plain ndarray): the near-tie offsets.
    ``tolerance``: for float values whose Expect sets none (default: float32 rounding).
    """
    legacy = all(_is_array_expect(e) for e in expected) if isinstance(expected, tuple) else _is_array_expect(expected)
    if legacy:
        parts, is_tuple = _as_parts(expected, ambiguous)
        want = _describe_parts(parts)
    else:
        want = _render(expected)
    if output.status in ("missing_function", "not_run"):
        what = "the function is not defined" if output.status == "missing_function" else "no result (not run)"
        return _fact(False, "missing", want, what, what)
    if output.status == "bad_artifact":  # the probe refused the notebook's file: the grader's words
        what = f"not called: {mask((output.error or {}).get('message', ''))}"
        return _fact(False, "missing", want, what, what)
    if output.status == "raised":
        err = output.error or {}
        return _fact(
            False,
            "raised",
            want,
            f"raised {err.get('type', 'an exception')}: {err.get('message', '')}",
            "raised " + failure.error_account(output),
        )
    if output.status != "ok":
        err = output.error or {}
        why = LIMIT_WORDS.get(str(err.get("limit"))) or mask(err.get("message", ""))
        return _fact(
            False,
            "type",
            want,
            f"a result the probe could not read ({err.get('message', '')})",
            f"returned a result the grader does not accept ({why})",
        )
    if legacy:
        parts = [_as_array_expect(p) for p in parts]
        return _compare_arrays(parts, is_tuple, want, output, tolerance or FLOAT32_ROUNDING)
    found = _tree_problem(expected, output.result(), (), Expect(None, tolerance=tolerance))
    if found:
        return _fact(False, found[0], want, found[1], found[2])
    return _fact(True, None, want, _render(output.result()))
