"""summary.html and feedback.html are escaped by construction: whatever text a submission
controls (its name, submitters, errors, reasons, failed parts, the batch's warnings, the
integrity report's names and cells, the tolerance files' paths and keys, the assignment's and
rubric's words), the page has the same elements as with plain words in their place, and shows the
text as text. A property over generated text (markup, quotes, entities, template syntax, any
character), not a list of known attacks; the one environment with autoescape is what makes it
hold (autograder/report/page_templates.py)."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.report.feedback_html import feedback_html
from autograder.report.integrity import IntegrityReport, Pair
from autograder.report.integrity_view import highlight
from autograder.report.summary import summary_html
from autograder.report.summary_style import SORT_SCRIPT
from autograder.student_text import clean

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

MARKUP = list("<>&\"'/=`;:!-[](){}%#\\ \n\t") + [
    "<script>",
    "</td>",
    "-->",
    "<!--",
    "{{",
    "{%",
    "&amp;",
    "&#x3c;",
    "]]>",
    "javascript:",
    "onerror=",
    "<svg",
    "</pre>",
]
# one visible letter first, so that cleaning (bounds, control characters) never leaves it empty
TEXT = st.builds(
    lambda parts: "x" + "".join(parts), st.lists(st.sampled_from(MARKUP) | st.characters(codec="utf-8"), max_size=30)
)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def _parse(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    return parsed


def _summary(out: Path, word: str) -> str:
    """A batch whose every text field a submission or a file controls holds ``word``."""
    names = [f"{c}{word}".replace("\0", "") for c in "abcd"]  # folder names: a file name holds no NUL
    ids = [f"q{word}", f"r{word}"]
    rubric = {
        "checks": [
            {
                "id": ids[0],
                "title": f"title {word}",
                "points": 2,
                "parts": [{"name": f"part {word}", "measure": "m.size", "op": "<=", "value": 5}],
            },
            {"id": ids[1], "title": f"other {word}", "points": 1},
        ]
    }
    for k, n in enumerate(names):  # two marks beyond the size limit (5), two within
        (out / n).mkdir(parents=True)
        (out / n / "feedback.md").write_text("# Feedback\n")
        (out / n / "feedback.html").write_text("<html></html>")
        (out / n / "measurements.json").write_text(json.dumps({"m": {"size": 3 + 2 * k, "drift": 0.5}}))

    def row(name, status, score, *, passed):
        return {
            "name": name,
            "status": status,
            "score": score,
            "max": 3.0,
            "reason": f"reason {word}",
            "checks": {ids[0]: score, ids[1]: 1.0},
            "checks_passed": {ids[0]: passed, ids[1]: True},
            "failures": []
            if passed
            else [{"check": ids[0], "part": f"part {word}", "message": f"msg {word}", "reason": None}],
            "first_error": {"cell": 3, "ename": f"E{word}", "evalue": f"value {word}"},
            "cells_errored": 1,
            "execution_s": 2.5,
            "submitters": f"sub {word}",
            "cached": False,
            "version_drift": [f"drift {word}"],
        }

    rows = [
        row(names[0], "ok", 3.0, passed=True),
        row(names[1], "ok", 1.0, passed=False),
        row(names[2], "timeout", 1.0, passed=False),
        row(names[3], "ok", 2.0, passed=False),
    ]
    code = f"x = 1\ny = '{word}'\nz = 3\n"
    pair = Pair(
        a=names[1],
        b=names[3],
        share=0.9,
        share_a=0.9,
        share_b=0.9,
        cells_a=[f"cell {word}"],
        cells_b=[f"cell {word}"],
        snippet_a=highlight(code, [(0, 5)]),
        snippet_b=highlight(code, [(0, 1)]),
        flagged=True,
    )  # the student's line shown, unmarked
    integrity = IntegrityReport(
        threshold=0.6, compared=4, pairs=[pair], too_little_code=[names[2]], error=f"error {word}"
    )
    assignment = SimpleNamespace(
        title=f"Lesson {word}",
        folder=out,
        config={"summary": {"scatter": {"x": "size", "y": "drift", "series": {f"series {word}": "m"}}}},
    )
    batch = {
        "tolerances_used": {
            "calibrated": {"path": f"tol {word}.toml", "sha256": f"{word}" * 3},
            "override": {
                "path": f"over {word}.toml",
                "sha256": "ab",
                "changed": {f"key {word}": {"calibrated": word, "value": word}},
            },
        }
    }
    return summary_html(
        rows,
        out=out,
        assignment=assignment,
        rubric=rubric,
        tolerances={},
        warnings=[f"warning {word}"],
        batch=batch,
        integrity=integrity,
    )


def _feedback(word: str) -> str:
    # feedback.md's own escaping is test_report_feedback's and test_adv_text's
    md = "# Feedback\n\nScore: 1 / 2\n\n## Checks\n\n- first check\n"
    return feedback_html(md, {"figure": {"error": f"no picture: {word}"}}, title=f"Feedback {word}")


@pytest.fixture
def baseline(tmp_path_factory):
    plain = tmp_path_factory.mktemp("plain")
    return {"summary": _parse(_summary(plain, "plain")), "feedback": _parse(_feedback("plain"))}


@FUZZ
@given(word=TEXT)
def test_student_text_never_changes_the_summary_pages_elements(tmp_path_factory, baseline, word):
    page = _summary(tmp_path_factory.mktemp("hostile"), word)
    parsed = _parse(page)
    assert parsed.tags == baseline["summary"].tags, "text became markup"
    assert parsed.scripts == [SORT_SCRIPT], "the only script is the sorter"
    assert not any(k.startswith("on") for k, _ in parsed.attrs)
    shown = "".join(parsed.text)
    assert clean(f"warning {word}", 300) in shown and clean(f"error {word}", 300) in shown


@FUZZ
@given(word=TEXT)
def test_student_text_never_changes_the_feedback_pages_elements(baseline, word):
    parsed = _parse(_feedback(word))
    assert parsed.tags == baseline["feedback"].tags, "text became markup"
    assert parsed.scripts == [] and not any(k.startswith("on") for k, _ in parsed.attrs)
    assert clean(f"no picture: {word}", 600) in "".join(parsed.text)


def test_a_template_that_names_a_missing_value_fails_loudly():
    from jinja2 import UndefinedError

    from autograder.report.page_templates import render

    with pytest.raises(UndefinedError):
        render("summary_warnings.html", section={"warnings": ["w"]})  # no "more": an error, not ""


def test_the_environment_escapes_and_only_markup_passes():
    from markupsafe import Markup

    from autograder.report.page_templates import environment

    env = environment()
    assert env.autoescape is True and env.trim_blocks and env.lstrip_blocks
    template = env.from_string("{{ a }}|{{ b }}")
    assert template.render(a="<b>&", b=Markup("<b>&amp;</b>")) == "&lt;b&gt;&amp;|<b>&amp;</b>"


def test_every_template_ships_as_package_data():
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    templates = sorted((root / "autograder" / "report" / "templates").iterdir())
    assert templates, "the pages' templates are where page_templates loads them"
    for path in templates:
        rel = path.relative_to(root / "autograder").as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not package data"
