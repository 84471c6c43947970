"""Student-controlled text in Markdown: escaped so that it shows literally, never renders.

Everything a notebook controls (exception messages, values it reported, file names, what its
kernel said) can carry what the notebook read, and Markdown renderers turn text into links,
images, emphasis, code, headings, tables and raw HTML. So every such string on its way into
``results.json`` or ``feedback.md`` goes through :func:`markdown` or :func:`code_span` (for a
terminal or a log, :func:`plain`), which first clean it with :func:`autograder.student_text.clean`
(the one module for student-visible text: one line, bounded, no lone surrogates, ANSI escapes,
control or bidi characters, the grader's paths replaced by ``<grader>``).

:func:`markdown` then escapes, by construction, every character that means something to
CommonMark, GitHub Markdown or HTML: each ASCII punctuation character with a meaning there gets a
backslash (links, images, emphasis, code spans, headings, lists, tables, autolinks, bare URLs and
math all need one), and ``<``, ``>``, ``&`` and ``"`` become HTML entities. The reader sees the
text as it was, literally.
"""

from __future__ import annotations

import re

from ..student_text import LINE_LIMIT as DEFAULT_LIMIT
from ..student_text import clean

_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;"}
_ALWAYS = frozenset("\\`*[]|~$")
_BLOCK_START = re.compile(r"[#+=-]|\d{1,9}[.)]")


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
        elif ch == "." and i >= 3 and s[i - 3 : i].lower() == "www":
            out.append("\\.")
        elif ch == "@":
            out.append("\\@")
        else:
            out.append(ch)
    text = "".join(out)
    lead = _BLOCK_START.match(text)
    if lead:  # "# x", "- x", "1. x", "1) x", "=== ": escape the marker's last character
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
