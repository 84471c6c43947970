"""Student-visible text: the one way out for every string a notebook or its model controls.

Everything a submission controls (its exception messages, the errors ONNX Runtime and onnx give
on its models, file names, ``RESULTS`` values, what its kernel said) reaches ``results.json``,
``feedback.md``, ``feedback.html``, the console or a batch page only through this module. Two
levels, one for each kind of text:

- :func:`clean` for text made **without the grader's hidden data** (a cell's exception, a file
  name, a model's load error, a reason): one line, bounded, no lone surrogates, no ANSI escapes,
  no control, format or bidi characters, the grader's paths replaced by ``<grader>``
  (:mod:`autograder.redact`). :func:`clean_lines` is the same for a multi-line record
  (execution.json's tracebacks), keeping the end.
- :func:`mask` for text made **while hidden data was in reach** (the probe's calls with hidden
  inputs, the measuring child after it ran a model on the grader's rows): :func:`clean`, then
  everything that can carry data is masked, in every script. It does not try to recognise the
  hidden values (they can be encoded any way); it bounds what any text can carry:

  - a word holding a number in any script (``str.isnumeric``: ASCII and Arabic-Indic digits,
    fullwidth and superscript digits, Roman numerals, CJK numerals, …) becomes ``<n>``, except
    NumPy's dtype names (``uint8``);
  - a run of a base64 or hex alphabet longer than a bounded word, and a word longer than one (:data:`MAX_WORD` units: an ASCII letter is one unit, any
    other character :data:`WIDE` units, as it can take one of far more values) becomes ``<…>``;
  - a run of symbols or punctuation longer than :data:`MAX_SYMBOLS` units, and every private-use
    or unassigned character, becomes ``<…>``;
  - neighbouring masks (``<n>.<n>e-<n>``, ``<n>, <n>, <n>``) become one;
  - the whole is bounded in units too, so no script carries more than ASCII does.

  The text is NFKC-normalised first (fullwidth letters and digits, ligatures and compatibility
  forms become their plain equivalents), so a lookalike cannot escape a rule.

What :func:`mask` leaves is words of at most :data:`MAX_WORD` units and short punctuation: the
error's type, the operator's name, the student's own words. SECURITY.md ("Text that carries
hidden data") states the capacity that leaves per message.
"""

from __future__ import annotations

import re
import unicodedata

from .redact import redact

ELLIPSIS = "…"
MASK = "<n>"                 # a number, in any script
CUT = "<…>"                  # a run that may encode data
LINE_LIMIT = 300             # characters of one cleaned line, unless the caller says otherwise
MASK_LIMIT = 160             # units of one masked message
MAX_WORD = 24                # units of a word kept by mask() (QLinearGlobalAveragePool)
MAX_SYMBOLS = 11             # units of a run of symbols kept by mask()
WIDE = 3                     # units of a non-ASCII character (one of ~10^5 values, not ~10^2)
DTYPE_NAMES = frozenset({
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "intp", "uintp",
    "float16", "float32", "float64", "float128", "bfloat16", "complex64", "complex128", "complex256",
    "float8e4m3fn", "float8e5m2", "int4", "uint4",
})

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})   # controls, format/bidi, separators
_HOSTILE_CATEGORIES = frozenset({"Co", "Cn"})                     # private use, unassigned
_TOKEN = re.compile(r"(\w+)|(\s+)|([^\w\s]+)")
_ENCODED = re.compile(r"[A-Za-z0-9+/=_\-]{%d,}" % (MAX_WORD + 1))   # base64, hex: one long run of their alphabet
_MARK = "(?:" + re.escape(MASK) + "|" + re.escape(CUT) + ")"
_MARK_RUN = re.compile(_MARK + r"(?:[^\w<>]{0,4}" + _MARK + ")+")   # masks a few separators apart


# ── cleaning: every string ────────────────────────────────────────────────────────────────────

def scrub_surrogates(s: str) -> str:
    """``s`` with every lone surrogate (not encodable as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s


def as_text(value: object) -> str:
    """``str(value)``, or a description when its ``__str__`` fails (a hostile object is still shown)."""
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception as e:  # noqa: BLE001 - a hostile __str__ is still shown as something
        return f"<unprintable {type(value).__name__}: {type(e).__name__}>"


def _strip_controls(s: str, keep: str = "") -> str:
    """ANSI escapes dropped; control, format and separator characters (except ``keep``) → space."""
    s = _ANSI.sub("", s)
    if s.isascii() and s.isprintable():
        return s
    return "".join(" " if ch not in keep and unicodedata.category(ch) in _CONTROL_CATEGORIES else ch for ch in s)


def clean(value: object, limit: int = LINE_LIMIT) -> str:
    """``value`` as one line of at most ``limit`` characters: no lone surrogates, ANSI escapes,
    control, format or bidi characters, or grader paths; whitespace collapsed; ``…`` marks a cut."""
    s = as_text(value)
    if len(s) > 16 * limit + 4096:        # bound the work on huge input; only the start is shown
        s = s[: 16 * limit + 4096]
    s = _strip_controls(scrub_surrogates(s))
    s = redact(" ".join(s.split()))
    return s if len(s) <= limit else s[: max(0, limit - 1)] + ELLIPSIS


def clean_lines(value: object, limit: int) -> str:
    """Like :func:`clean` but keeping line breaks and tabs (a traceback), and the *end* of the text
    (where the error is) when it is longer than ``limit``."""
    s = as_text(value)
    if len(s) > 4 * limit + 4096:         # bound the work on a huge message: only its end is kept
        s = s[-(4 * limit + 4096):]
    s = redact(_strip_controls(scrub_surrogates(s), keep="\n\t"))
    return s if len(s) <= limit else ELLIPSIS + s[-(limit - 1):]


# ── masking: text made while hidden data was in reach ─────────────────────────────────────────

def units(s: str) -> int:
    """The size of ``s`` in units: one per ASCII character, :data:`WIDE` per other character."""
    return sum(1 if ch.isascii() else WIDE for ch in s)


def _mask_word(word: str) -> str:
    if any(ch.isnumeric() for ch in word):
        return word if word.lower() in DTYPE_NAMES else MASK
    return word if units(word) <= MAX_WORD else CUT


def _mask_symbols(run: str) -> str:
    if units(run) > MAX_SYMBOLS or any(unicodedata.category(ch) in _HOSTILE_CATEGORIES for ch in run):
        return CUT
    return run


def _bounded(s: str, limit: int) -> str:
    if units(s) <= limit:
        return s
    used, end = 0, 0
    for end, ch in enumerate(s):
        used += 1 if ch.isascii() else WIDE
        if used > limit - 1:
            break
    return s[:end] + ELLIPSIS


def mask(value: object, limit: int = MASK_LIMIT) -> str:
    """``value`` cleaned, with every number (any script), long word, long symbol run and
    private-use or unassigned character masked, bounded to ``limit`` units (see the module)."""
    s = unicodedata.normalize("NFKC", clean(value, 8 * limit + 64))
    s = clean(s, 8 * limit + 64)          # NFKC can make new controls or spaces: clean again
    s = _ENCODED.sub(CUT, s)
    out = []
    for m in _TOKEN.finditer(s):
        word, space, symbols = m.groups()
        out.append(_mask_word(word) if word else " " if space else _mask_symbols(symbols))
    s = _MARK_RUN.sub(lambda r: CUT if CUT in r.group(0) else MASK, "".join(out))
    return _bounded(s, limit)
