"""``feedback.html``: feedback.md as a page, with the picture of the student's own model inline.

The text is feedback.md itself (:mod:`.feedback`), rendered by markdown-it (CommonMark, raw HTML
off: a ``<`` that escaping let through would still show as text; and :mod:`.escape` has already
escaped every student-controlled string in it). The picture, when the assignment's measurements
hold a ``figure`` section (:mod:`.figure`), is an inline ``<svg>`` that matplotlib drew from the
grader's own numbers, placed after the score. Without a section the page is the text alone; a
section that gives no picture gives its sentence why instead.

The page loads nothing and runs nothing: its Content-Security-Policy allows no script at all,
inline styles, and ``data:`` images only.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..student_text import clean
from .figure import clear_cache, figure_problem, figure_section, svg_inline

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
FIGURE_HEADING = "A picture of your model"
CSS = """
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,sans-serif;margin:1.5rem auto;max-width:980px;color:#222;padding:0 1rem}
h1{font-size:1.55rem;margin-bottom:.3rem} h2{font-size:1.2rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
h3{font-size:1.02rem;margin:1rem 0 .3rem}
code{background:#f4f4f4;border-radius:3px;padding:0 .2rem;font-size:.92em;overflow-wrap:anywhere}
table{border-collapse:collapse} th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
figure{margin:.6rem 0} figure svg{width:100%;height:auto;display:block}
figcaption,.note{color:#555;font-size:.92rem} .note{background:#fff8e1;padding:.4rem .8rem;border-radius:6px}
"""


def render_markdown(text: str) -> str:
    """CommonMark (+ tables) to HTML, raw HTML shown as text."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def figure_html(measurements: Mapping[str, Any] | None, cache: Path | None = None) -> str:
    """The picture's ``<section>`` ("" when the assignment has no figure section); ``cache``: the
    folder that keeps the drawn picture (:func:`.figure.cached_render`)."""
    section = figure_section(measurements)
    if section is None:
        return ""
    problem = figure_problem(section)
    body = ""
    if problem is None:
        try:
            body = (f'<figure>{svg_inline(section, cache)}<figcaption>{_text(section.get("caption", ""), 1000)}'
                    "</figcaption></figure>")
        except Exception as e:  # noqa: BLE001 - a picture that cannot be drawn must not fail grading
            problem = f"no picture: drawing it failed ({type(e).__name__})"
    if problem is not None:
        body = f'<p class="note">{_text(problem, 600)}</p>'
    return f'<section class="figure"><h2>{FIGURE_HEADING}</h2>{body}</section>'


def feedback_html(feedback_md: str, measurements: Mapping[str, Any] | None = None, *, title: str = "Feedback",
                  cache: Path | None = None) -> str:
    """The whole page: feedback.md's text with the picture after its first block (title and score)."""
    head, sep, rest = feedback_md.partition("\n## ")
    parts = [render_markdown(head), figure_html(measurements, cache),
             render_markdown(sep.lstrip("\n") + rest) if sep else ""]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(title, 200)}</title>", f"<style>{CSS}</style></head><body><main>",
        *[p for p in parts if p], "</main></body></html>", ""])


def write_feedback_html(out_dir: Path, feedback_md: str, measurements: Mapping[str, Any] | None,
                        name: str = "feedback.html") -> Path:
    """Write the page into ``out_dir``, keeping its picture there for a rescore; a grade without a
    picture leaves no picture of an earlier grade behind."""
    if figure_section(measurements) is None or figure_problem(figure_section(measurements)) is not None:
        clear_cache(out_dir)
    path = Path(out_dir) / name
    first = feedback_md.split("\n", 1)[0]
    # feedback.md's own title, its Markdown escapes undone (the page escapes it again for HTML)
    title = html.unescape(re.sub(r"\\(.)", r"\1", first[2:])) if first.startswith("# ") else "Feedback"
    path.write_text(feedback_html(feedback_md, measurements, title=title, cache=Path(out_dir)), encoding="utf-8")
    return path


def _text(value: Any, limit: int) -> str:
    """Text for the page: cleaned and bounded (:func:`autograder.student_text.clean`), then HTML-escaped."""
    return html.escape(clean(value, limit), quote=True)
