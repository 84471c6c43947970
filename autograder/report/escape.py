"""Student-controlled text, made safe to show: one function for Markdown, one for plain text.

Everything a notebook controls (exception messages, values it reported, file names, what its
kernel said) can carry what the notebook read, and Markdown renderers turn text into links,
images, emphasis, code, headings, tables and raw HTML. So every such string on its way into
``results.json``, ``feedback.md`` or a message goes through :func:`markdown` (or, for a terminal
or a log, :func:`plain`), which first :func:`clean`\\ s it:

- lone surrogates (``"\\ud800"`` from a JSON escape) become U+FFFD, so the text can be written as
  UTF-8 at all;
- ANSI escapes and control characters are dropped, runs of whitespace (newlines included) become
  one space: the text stays on its line and cannot start a block (heading, list, table row);
- the grader's own paths (its checkout, its interpreter, its temporary folders) are replaced by
  ``<grader>`` (:mod:`autograder.redact`), so a path a notebook found (``/proc/self/mountinfo``)
  is not echoed back;
- the length is bounded (``…`` marks a cut).

:func:`markdown` then escapes, by construction, every character that means something to
CommonMark, GitHub Markdown or HTML: each ASCII punctuation character with a meaning there gets a
backslash (links, images, emphasis, code spans, headings, lists, tables, autolinks, bare URLs and
math all need one), and ``<``, ``>``, ``&`` and ``"`` become HTML entities. The reader sees the
text as it was, literally.
"""

from __future__ import annotations

import re

from ..redact import redact

ELLIPSIS = "…"
DEFAULT_LIMIT = 300
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;"}
_ALWAYS = frozenset("\\`*[]|~$")
_BLOCK_START = re.compile(r"[#+=-]|\d{1,9}[.)]")

def scrub_surrogates(s: str) -> str:
    """``s`` with every lone surrogate (not encodable as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s


def clean(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` as one line of at most ``limit`` characters: no lone surrogates, ANSI escapes,
    control characters or grader paths, whitespace collapsed."""
    s = value if isinstance(value, str) else _str(value)
    if len(s) > 16 * limit + 4096:        # bound the work on huge input; only the start is shown
        s = s[: 16 * limit + 4096]
    s = scrub_surrogates(s)
    s = _ANSI.sub("", s)
    s = _CONTROL.sub(" ", s)
    s = " ".join(s.split())
    s = redact(s)
    if len(s) > limit:
        s = s[: max(0, limit - 1)] + ELLIPSIS
    return s


def _str(value: object) -> str:
    try:
        return str(value)
    except Exception as e:  # noqa: BLE001 - a hostile __str__ is still shown as something
        return f"<unprintable {type(value).__name__}: {type(e).__name__}>"


def markdown(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` cleaned (see :func:`clean`) and escaped so that Markdown and HTML show it literally.

    By the rules of CommonMark and GitHub Markdown, not by a list of known attacks:

    - ``<``, ``>``, ``&``, ``"`` become entities: no HTML, no ``<autolink>``, no entity reference;
    - ``\\``, a backtick, ``*``, ``[``, ``]``, ``|``, ``~``, ``$`` get a backslash: no code span,
      emphasis, link or image (``(`` and ``!`` mean nothing without ``[``), table cell,
      strikethrough or math;
    - ``_`` gets one unless it sits between two letters or digits (an intraword ``_`` never
      opens emphasis);
    - bare URLs and e-mail addresses (GitHub's autolinks) are broken at ``://``, ``www.`` and ``@``;
    - a character that could open a block at the start of a line (``#``, ``-``, ``+``, ``=``, a
      number followed by ``.`` or ``)``) is escaped there; the text never spans lines.
    """
    s = clean(value, limit)
    out = []
    n = len(s)
    for i, ch in enumerate(s):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _ALWAYS:
            out.append("\\" + ch)
        elif ch == "_":
            intraword = 0 < i < n - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
            out.append(ch if intraword else "\\_")
        elif ch == ":" and s.startswith("//", i + 1):
            out.append("\\:")
        elif ch == "." and i >= 3 and s[i - 3:i].lower() == "www":
            out.append("\\.")
        elif ch == "@":
            out.append("\\@")
        else:
            out.append(ch)
    text = "".join(out)
    lead = _BLOCK_START.match(text)
    if lead:   # "# x", "- x", "1. x", "1) x", "=== ": escape the marker's last character
        k = lead.end() - 1
        text = text[:k] + "\\" + text[k:]
    return text


def plain(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` cleaned for a terminal or a log (no markup language involved)."""
    return clean(value, limit)


def code_span(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` cleaned and quoted as an inline code span: its fence is longer than any run of
    backticks inside, so nothing inside can close it, and nothing in a code span renders."""
    s = clean(value, limit)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"
