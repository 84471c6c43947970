"""The picture of the student's own model as a Gradescope test (``output_format: "html"``).

Gradescope renders a test's ``output`` as HTML when its ``output_format`` is ``"html"`` (one of
text, html, simple_format, md, ansi in its results.json specification). The picture
(:mod:`.figure`) goes in as an ``<img>`` whose source is a PNG ``data:`` URI: no file to host, and
a PNG survives HTML sanitizers that drop inline SVG. The test carries no points (0 of 0) and is
always visible: it is drawn from the public data only. Without a ``figure`` section in the
measurements there is no test; a section that gives no picture gives a test with its sentence why.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..student_text import clean
from ..statuses import TestStatus, Visibility
from .figure import figure_problem, figure_section, png_data_uri

TAG = "figure"
NAME = "A picture of your model (not graded)"
PNG_DPI = 80  # ~740 × 510 px, ~120 KB of PNG


def figure_tests(
    measurements: Mapping[str, Any] | None, number: int, cache: Path | None = None
) -> list[dict[str, Any]]:
    """``[test]`` for results.json's ``tests`` (numbered ``number``), or ``[]`` without a figure section;
    ``cache``: the folder that keeps the drawn picture (:func:`.figure.cached_render`)."""
    section = figure_section(measurements)
    if section is None:
        return []
    problem = figure_problem(section)
    output = ""
    if problem is None:
        try:
            caption = _text(section.get("caption", ""), 1000)
            output = (
                f'<p><img src="{png_data_uri(section, PNG_DPI, cache)}" alt="{_text(section.get("title", ""), 200)}" '
                f'style="max-width:100%;height:auto"></p><p>{caption}</p>'
            )
        except Exception as e:  # noqa: BLE001 - a picture that cannot be drawn must not fail grading
            problem = f"no picture: drawing it failed ({type(e).__name__})"
    if problem is not None:
        output = f"<p>{_text(problem, 600)}</p>"
    return [
        {
            "name": NAME,
            "name_format": "text",
            "number": str(number),
            "tags": [TAG],
            "score": 0.0,
            "max_score": 0.0,
            "status": TestStatus.PASSED,
            "visibility": Visibility.VISIBLE,
            "output": output,
            "output_format": "html",
        }
    ]


def _text(value: Any, limit: int) -> str:
    return html.escape(clean(value, limit), quote=True)
