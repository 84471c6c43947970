"""The one Jinja2 environment the HTML pages (summary.html, feedback.html) are rendered with.

Autoescape is on for every template: a value the Python side hands a template is text, and is
escaped where it is placed, so no student text can become markup by a forgotten call. Markup
that is already safe passes only as :class:`markupsafe.Markup`, made in one named place per kind
(:func:`own_markup` for the grader's own constants; :mod:`.feedback_html` for markdown-it's
output and matplotlib's picture). ``StrictUndefined`` makes a missing key an error, not an
empty string. The templates live in ``templates/`` beside this module (package data).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup


@lru_cache(maxsize=1)
def environment() -> Environment:
    return Environment(
        loader=PackageLoader("autograder.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **data: Any) -> str:
    """``template`` (a file in ``templates/``) laid out with ``data`` (plain strings, numbers, lists, dicts)."""
    return environment().get_template(template).render(**data)


def own_markup(text: str) -> Markup:
    """The grader's own literal (a Content-Security-Policy, the table sorter's script), placed as it
    is: it is a constant of this package, holds no student text, and escaping would break it (a
    script, and a policy's quotes, must stay byte for byte what their hash and the tests name)."""
    return Markup(text)
