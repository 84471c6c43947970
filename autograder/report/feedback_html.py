"""``feedback.html``: feedback.md as a page, with the picture of the student's own model inline.

The text is feedback.md itself (:mod:`.feedback`), rendered by markdown-it (CommonMark, raw HTML
off: a ``<`` that escaping let through would still show as text; and :mod:`.escape` has already
escaped every student-controlled string in it). The picture, when the assignment's measurements
hold a ``figure`` section (:mod:`.figure`), is an inline ``<svg>`` that matplotlib drew from the
grader's own numbers, placed after the score and "Fix this first"; each passed check's parts
are shown on demand (``<details>``, no script). Without a section the page is the text alone; a
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

from markupsafe import Markup

from ..safe_files import write_atomic
from ..student_text import clean
from .figure import clear_cache, figure_problem, figure_section, svg_inline
from . import markdown as md
from .feedback import PASSED, passed_line
from .page_templates import own_markup, render

CSP = own_markup("default-src 'none'; img-src data:; style-src 'unsafe-inline'")
FIGURE_HEADING = "A picture of your model"


def render_markdown(text: str) -> Markup:
    """CommonMark (+ tables) to HTML, raw HTML shown as text.

    The one place markdown-it's output is marked safe for the page's template: with ``html``
    off, markdown-it escapes every ``<``, ``&`` and quote of the source itself, so its output holds
    only the tags it made (and :mod:`.escape` has escaped the student's text in it already)."""
    from markdown_it import MarkdownIt

    return Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


def _picture(section: Mapping[str, Any], cache: Path | None) -> Markup:
    """The one place matplotlib's picture is marked safe: an ``<svg>`` drawn from the grader's own
    numbers, with every label and title escaped by matplotlib's SVG writer (:mod:`.figure`)."""
    return Markup(svg_inline(section, cache))


def figure_html(measurements: Mapping[str, Any] | None, cache: Path | None = None) -> str:
    """The picture's ``<section>`` ("" when the assignment has no figure section); ``cache``: the
    folder that keeps the drawn picture (:func:`.figure.cached_render`)."""
    figure = _figure(measurements, cache)
    return "" if figure is None else render("feedback_figure.html", figure=figure)


def _figure(measurements: Mapping[str, Any] | None, cache: Path | None) -> dict[str, Any] | None:
    """What the picture's section shows: the picture and its caption, or the sentence why there is none."""
    section = figure_section(measurements)
    if section is None:
        return None
    problem = figure_problem(section)
    svg, caption = "", ""
    if problem is None:
        try:
            svg, caption = _picture(section, cache), clean(section.get("caption", ""), 1000)
        except Exception as e:  # noqa: BLE001 - a picture that cannot be drawn must not fail grading
            problem = f"no picture: drawing it failed ({type(e).__name__})"
    return {
        "heading": FIGURE_HEADING,
        "svg": svg,
        "caption": caption,
        "problem": None if problem is None else clean(problem, 600),
    }


def feedback_html(
    feedback_md: str,
    measurements: Mapping[str, Any] | None = None,
    *,
    title: str = "Feedback",
    cache: Path | None = None,
    grade: Mapping[str, Any] | None = None,
) -> str:
    """The whole page: feedback.md's text with the picture after the score and "Fix this first"
    (what to do comes before what it looks like); with ``grade``, each passed check's parts on
    demand (a ``<details>`` under its one line)."""
    sections = feedback_md.split("\n## ")
    head = sections[0]
    rest = sections[1:]
    if rest and rest[0].startswith(FIX_HEADING):
        head += "\n\n## " + rest.pop(0)
    return render(
        "feedback.html",
        csp=CSP,
        title=clean(title, 200),
        head=render_markdown(head),
        figure=_figure(measurements, cache),
        rest=Markup("").join(_section_html(section, grade) for section in rest),
    )


FIX_HEADING = "Fix this first"


def _section_html(section: str, grade: Mapping[str, Any] | None) -> Markup:
    """One ``## `` section of feedback.md as HTML; the passed checks, given the grade, each as a
    ``<details>`` whose summary is the check's line and whose body is its parts."""
    if grade is None or not section.startswith(PASSED + "\n"):
        return render_markdown("## " + section)
    passed = [c for c in md.visible_checks(grade) if c.get("passed")]
    items = [
        Markup("<details><summary>{}</summary>{}</details>\n").format(
            render_markdown(passed_line(c)[2:]).replace("<p>", "").replace("</p>", "").strip(),
            render_markdown(md.check_markdown(c)),
        )
        for c in passed
    ]
    return render_markdown("## " + PASSED) + Markup("").join(items)


def write_feedback_html(
    out_dir: Path,
    feedback_md: str,
    measurements: Mapping[str, Any] | None,
    name: str = "feedback.html",
    grade: Mapping[str, Any] | None = None,
) -> Path:
    """Write the page into ``out_dir``, keeping its picture there for a rescore; a grade without a
    picture leaves no picture of an earlier grade behind."""
    section = figure_section(measurements)
    if section is None or figure_problem(section) is not None:
        clear_cache(out_dir)
    path = Path(out_dir) / name
    first = feedback_md.split("\n", 1)[0]
    # feedback.md's own title, its Markdown escapes undone (the page escapes it again for HTML)
    title = html.unescape(re.sub(r"\\(.)", r"\1", first[2:])) if first.startswith("# ") else "Feedback"
    return write_atomic(path, feedback_html(feedback_md, measurements, title=title, cache=Path(out_dir), grade=grade))
