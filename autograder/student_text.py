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

  - the text is NFKC-normalised first (fullwidth letters and digits, ligatures, superscripts and
    other compatibility forms become their plain equivalents), so a lookalike escapes no rule;
  - a word holding a number in any script (``str.isnumeric``: ASCII, Arabic-Indic, Devanagari
    digits, Roman and CJK numerals, …) becomes ``<n>``, except NumPy's dtype names (``uint8``);
  - a word or a run of symbols holding any character outside printable ASCII (another script's
    letters, CJK, emoji, private-use, unassigned or combining characters) becomes ``<…>``: one
    such character can stand for a whole byte, and no script but ASCII is needed to read an error;
  - a run of a base64 or hex alphabet, or a word, longer than :data:`MAX_WORD` characters, and a
    run of symbols longer than :data:`MAX_SYMBOLS`, becomes ``<…>``;
  - neighbouring masks (``<n>.<n>e-<n>``, ``<n>, <n>, <n>``) become one, and the whole is bounded.

What :func:`mask` leaves is printable ASCII: words of at most :data:`MAX_WORD` letters and short
punctuation (the error's type, the operator's name, the student's own English words). Those can
still spell data in words: SECURITY.md ("Text that carries hidden data") states that capacity.
"""

from __future__ import annotations

import re
import unicodedata

from .redact import redact

ELLIPSIS = "…"
MASK = "<n>"  # a number, in any script
CUT = "<…>"  # a run that may encode data
TRUNCATED = "..."  # the end of a masked text that was cut (ASCII: masking it again keeps it)
LINE_LIMIT = 300  # characters of one cleaned line, unless the caller says otherwise
MASK_LIMIT = 160  # characters of one masked message
MAX_WORD = 26  # letters of a word kept by mask() (MODEL_REQUIRES_COMPILATION)
MAX_SYMBOLS = 11  # characters of a run of symbols kept by mask()
DTYPE_NAMES = frozenset(
    {
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "intp",
        "uintp",
        "float16",
        "float32",
        "float64",
        "float128",
        "bfloat16",
        "complex64",
        "complex128",
        "complex256",
        "float8e4m3fn",
        "float8e5m2",
        "int4",
        "uint4",
    }
)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})  # controls, format/bidi, separators
_TOKEN = re.compile(r"(<n>|<…>)|(\w+)|(\s+)|((?:(?!<n>|<…>)[^\w\s])+)")  # a mark is one token
_ENCODED = re.compile(r"[A-Za-z0-9+/=_\-]{%d,}" % (MAX_WORD + 1))  # base64, hex: one long run of their alphabet
_MARK = "(?:" + re.escape(MASK) + "|" + re.escape(CUT) + ")"
_MARK_RUN = re.compile(_MARK + r"(?:[^\w<>]{0,4}" + _MARK + ")+")  # masks a few separators apart


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
    if len(s) > 16 * limit + 4096:  # bound the work on huge input; only the start is shown
        s = s[: 16 * limit + 4096]
    s = _strip_controls(scrub_surrogates(s))
    s = redact(" ".join(s.split()))
    return s if len(s) <= limit else s[: max(0, limit - 1)] + ELLIPSIS


def clean_lines(value: object, limit: int) -> str:
    """Like :func:`clean` but keeping line breaks and tabs (a traceback), and the *end* of the text
    (where the error is) when it is longer than ``limit``."""
    s = as_text(value)
    if len(s) > 4 * limit + 4096:  # bound the work on a huge message: only its end is kept
        s = s[-(4 * limit + 4096) :]
    s = redact(_strip_controls(scrub_surrogates(s), keep="\n\t"))
    return s if len(s) <= limit else (ELLIPSIS + s[len(s) - limit + 1 :])[: max(0, limit)]


# ── masking: text made while hidden data was in reach ─────────────────────────────────────────


def _printable_ascii(s: str) -> bool:
    return s.isascii() and s.isprintable()


def _mask_word(word: str) -> str:
    if any(ch.isnumeric() for ch in word):
        return word if word.lower() in DTYPE_NAMES else MASK
    return word if _printable_ascii(word) and len(word) <= MAX_WORD else CUT


def _mask_symbols(run: str) -> str:
    return run if _printable_ascii(run) and len(run) <= MAX_SYMBOLS else CUT


def mask(value: object, limit: int = MASK_LIMIT) -> str:
    """``value`` cleaned, with every number (any script), every character outside printable ASCII
    and every long word or symbol run masked, bounded to ``limit`` characters (see the module)."""
    s = unicodedata.normalize("NFKC", clean(value, 8 * limit + 64))
    s = clean(s, 8 * limit + 64).replace("<...>", CUT)  # NFKC may make controls or spaces; "…" is "..."
    s = _ENCODED.sub(CUT, s)
    out = []
    for m in _TOKEN.finditer(s):
        mark, word, space, symbols = m.groups()
        out.append(mark or (_mask_word(word) if word else " " if space else _mask_symbols(symbols)))
    s = _MARK_RUN.sub(lambda r: CUT if CUT in r.group(0) else MASK, "".join(out))
    if len(s) <= limit:
        return s
    head = re.sub(r"<[n…]?$", "", s[: max(0, limit - len(TRUNCATED))])  # never half a mask
    return head + TRUNCATED
