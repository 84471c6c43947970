"""How a grade reads: ops as symbols, values in the part's format, and message templates.

The judge (``judge.py``) fills a part's ``message`` and ``hint`` here; the reports show ops with
``OP_TEXT``; the rubric's check of a template (``template_problem``) uses the same placeholder
syntax the renderer reads, so the two cannot drift.

Templates take placeholders in braces; ``{{`` and ``}}`` are literal braces and a lone ``{`` or
``}`` is refused (it was a literal brace eaten by its neighbour):

- ``{measured}``, ``{threshold}``: formatted with the part's ``format``; ``{op}`` (``≤``), ``{name}``;
- ``{models.fp32.param_count}``: any other measurement, by dotted path;
- ``{tolerances.dynamic_model.accuracy_drop_max}``: a tolerance;
- ``{path:fmt}``: the same with an explicit format (``{models.fp32.param_count:int}``).
Without ``:fmt`` other values are formatted ``auto`` (ints with thousands separators, floats to
four significant digits). A measurement the leak budget declares (:mod:`autograder.leak_budget`)
is shown only as it allows, whatever the template asks: a number measured on hidden data as its
relation to the threshold (``not ≥ 85.0%``), a fixed field as its fixed words. A sentence whose placeholder has no value (missing or errored) is left
out, so no ``?`` stands in for a number; a message left empty falls back to the default.

Formats: ``text``, ``int`` (66,817), ``float3`` (0.031), ``percent`` (3.1%), ``pp`` (a
difference of two shares in percentage points: 1.2 pp), ``bytes``
(262.4 KiB (268,674 bytes)), ``ratio`` (0.27×), ``auto`` (four significant digits: 5.907e-07 for
values too small for float3). A value of the wrong kind falls back to text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from . import leak_budget
from .dotted import is_number, lookup

FORMATS = ("text", "int", "float3", "percent", "pp", "bytes", "ratio", "auto")
OP_TEXT = {
    "==": "=",
    "!=": "≠",
    "<=": "≤",
    "<": "<",
    ">=": "≥",
    ">": ">",
    "in": "one of",
    "is_true": "=",
    "is_false": "=",
}
UNKNOWN = "?"
DEFAULT_MESSAGE = "measured {measured}, expected {op} {threshold}"
TEMPLATE_FIELDS = ("measured", "threshold", "op", "name")

PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][\w.\-]*)(?::([a-z0-9]+))?\}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def placeholders(template: str) -> list[str]:
    """The names a template refers to (``measured``, ``models.fp32.param_count``, …), in order."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1)]


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be rendered (an unknown ``:fmt``, a lone brace), or None."""
    for m in PLACEHOLDER.finditer(template):
        if m.group(2) and m.group(2) not in FORMATS:
            return f"unknown format ':{m.group(2)}' in {m.group(0)} (known: {', '.join(FORMATS)})"
    rest = PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        at = template[max(0, template.find("{" if "{" in rest else "}") - 20) :][:60]
        return f"a lone brace near {at!r}; write {{{{ and }}}} for literal braces and {{dotted.path}} for a value"
    return None


def render(
    template: str,
    fields: Mapping[str, str],
    raw: Mapping[str, Any],
    measurements: Mapping[str, Any],
    tolerances: Mapping[str, Any],
) -> str:
    """The template filled in, sentence by sentence: a sentence with a value missing is left out.

    ``fields`` are the part's own texts (``TEMPLATE_FIELDS``), ``raw`` their values before
    formatting (for an explicit ``{measured:fmt}``)."""
    missing = False

    def substitute(m: re.Match[str]) -> str:
        nonlocal missing
        token, name, fmt = m.group(0), m.group(1), m.group(2)
        if token in ("{{", "}}"):
            return token[0]
        if name in fields:
            return fields[name] if fmt is None else format_value(raw.get(name, fields[name]), fmt)
        source, path = (
            (tolerances, name[len("tolerances.") :]) if name.startswith("tolerances.") else (measurements, name)
        )
        value, reason = lookup(source, path)
        if reason is not None:
            missing = True
            return UNKNOWN
        if source is measurements:
            return shown_placeholder(measurements, path, value, fmt or "auto")
        if isinstance(value, Mapping) and "value" in value:  # a calibrated entry: the judge reads its value
            value = value["value"]
        return format_value(value, fmt or "auto")

    kept = []
    for sentence in _SENTENCE_END.split(template):
        missing = False
        filled = PLACEHOLDER.sub(substitute, sentence)
        if not missing:
            kept.append(filled)
    return " ".join(kept)


HIDDEN_NUMBER = "a value measured on hidden data"


def shown_measured(
    measurements: Mapping[str, Any], path: str, measured: Any, fmt: str, passed: bool, op: str, limit: Any
) -> tuple[str, Any]:
    """A part's ``{measured}`` as the student reads it, and the value an explicit
    ``{measured:fmt}`` formats: a number measured on hidden data is its relation to the threshold
    only (:func:`autograder.leak_budget.verdict_text`); other declared fields as
    :func:`shown_placeholder`; anything else formatted as it is."""
    if leak_budget.shown_as(path) == (leak_budget.VERDICT, "") and is_number(measured):
        text = leak_budget.verdict_text(passed, OP_TEXT[op], threshold_text(op, limit, fmt))
        return text, text
    replaced, value = leak_budget.shown_value(measurements, path, measured)
    return (format_value(value, fmt), value) if replaced else (format_value(measured, fmt), measured)


def shown_placeholder(measurements: Mapping[str, Any], path: str, value: Any, fmt: str) -> str:
    """A measurement a template names, as the leak budget lets the student read it
    (:mod:`autograder.leak_budget`): a number measured on hidden data is not shown, a fixed or
    closed field reads its words; anything else is formatted with ``fmt``."""
    if leak_budget.shown_as(path) == (leak_budget.VERDICT, "") and is_number(value):
        return HIDDEN_NUMBER
    _, value = leak_budget.shown_value(measurements, path, value)
    return format_value(value, fmt)


def shown_reason(reason: str | None) -> str | None:
    """Why a part was not measured, as the student reads it: a model's failure on the grader's
    rows cut to its category (:func:`autograder.leak_budget.run_failure_words`)."""
    return leak_budget.run_failure_words(reason) if isinstance(reason, str) else reason


def threshold_text(op: str, threshold: Any, fmt: str) -> str:
    if op == "in" and isinstance(threshold, list):
        return ", ".join(format_value(t, fmt) for t in threshold) or "nothing"
    return format_value(threshold, fmt)


def format_value(value: Any, fmt: str = "text") -> str:
    """A measurement or threshold as the student reads it; see the module docstring for formats."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):  # a list in a message stays a sentence: a few items, each short
        shown = [_cut(format_value(v, fmt), LIST_ITEM_CHARS) for v in value[:LIST_ITEMS]]
        more = len(value) - LIST_ITEMS
        return "[" + ", ".join(shown) + (f", and {more} more" if more > 0 else "") + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {format_value(v, fmt)}" for k, v in value.items()) + "}"
    if not is_number(value):
        return str(value)
    if not math.isfinite(value):
        return str(float(value))  # nan, inf, -inf
    if fmt == "auto":
        fmt = "int" if isinstance(value, int) else "auto_float"
    if fmt == "int":
        return f"{round(value):,}"
    if fmt == "float3":
        return _fixed(value, 3)
    if fmt == "percent":
        return _fixed(value * 100, 1) + "%"
    if fmt == "pp":
        return _fixed(value * 100, 1) + " pp"
    if fmt == "ratio":
        return _fixed(value, 2) + "×"
    if fmt == "bytes":
        return _bytes(value)
    if fmt == "auto_float":
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"
    return str(value)


LIST_ITEMS, LIST_ITEM_CHARS = 4, 130  # of a list shown in a message (e.g. RESULTS' problems): one paragraph


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fixed(x: float, decimals: int) -> str:
    """``x`` to ``decimals`` places, but a small non-zero value keeps two significant digits."""
    text = f"{x:.{decimals}f}"
    if x != 0 and float(text) == 0:
        return f"{x:.2g}"
    return text


def _bytes(n: float) -> str:
    if abs(n) < 1024:
        return f"{round(n):,} bytes"
    unit, size = ("KiB", n / 1024) if abs(n) < 1024**2 else ("MiB", n / 1024**2)
    return f"{size:.1f} {unit} ({round(n):,} bytes)"
