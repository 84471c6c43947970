"""Student-controlled text: nothing in it may crash the grader or render as anything but text.

Round 2: a lone surrogate in an exception message or a ``RESULTS`` value made ``write_json_atomic``
raise (no grade); ``kernel.session.sign = lambda m: b"[/]x"`` put rich markup in a reason and
``batch``/``rescore`` exited with ``MarkupError``; an exception message with ``![x](http://…)`` or
``[Request a regrade](…)`` rendered as an image or a link in results.json and feedback.md; a file
name with a backtick broke out of its code span in ``gradescope run``'s message.

Everything a student reads is rendered here with a real CommonMark renderer (markdown-it, with
GitHub's tables and strikethrough) and must come out as plain text.
"""

from __future__ import annotations

import html
import io
import json
import re

import pytest
from markdown_it import MarkdownIt

from advkit import require_mode
from autograder.report import escape
from autograder.report.console import print_scores_table

pytestmark = pytest.mark.slow

RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
ACTIVE = re.compile(
    r"<(a|img|em|strong|code|h[1-6]|table|td|th|s|del|script|iframe|style|blockquote|ul|ol|li|hr|pre)\b", re.I
)

# What a notebook puts in a message to get markup into the grader's pages.
PAYLOADS = [
    "![x](http://evil.example/pixel.png)",
    "[Request a regrade](https://evil.example/phish)",
    "<https://evil.example/autolink>",
    "http://evil.example/bare and www.evil.example and mail@evil.example",
    "<script>alert(1)</script><img src=x onerror=alert(1)>",
    "**bold** __bold__ *em* _em_ ~~gone~~",
    "`code` ``code with ` inside``",
    "# Heading",
    "- a list item",
    "1. ordered",
    "> a quote",
    "| a | b |\n|---|---|\n| c | d |",
    "line one\n\n# heading on a new block\n---\n",
    "[ref]: http://evil.example/ref\n[ref]",
    "&lt;entity&gt; &amp; &#x3C;script&#x3E;",
    "\\`escaped backtick\\` and \\\\ backslashes",
    "\x1b[31mred\x1b[0m\x00nul\u202eRTL",
    "$x^2$ math",
    "a\ud800lone surrogate",
    "[/]x [bold]rich markup[/bold]",
]


def _rendered_text(markdown: str) -> str:
    out = RENDER.render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", out)).strip()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_escaped_text_renders_as_the_text_itself(payload):
    shown = escape.markdown(payload, limit=1000)
    rendered = RENDER.render(shown)
    assert not ACTIVE.search(rendered), f"{payload!r} rendered as markup: {rendered!r}"
    assert _rendered_text(shown) == escape.clean(payload, 1000), (payload, shown, rendered)
    for autolink in (r"(?<!\\)://", r"www\.", r"(?<!\\)@"):
        assert not re.search(autolink, shown), f"{shown!r} keeps a bare {autolink} a linkifier would turn into a link"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_code_spans_cannot_be_closed_from_inside(payload):
    shown = escape.code_span(payload, limit=1000)
    rendered = RENDER.render(shown)
    assert rendered.count("<code>") == 1 and not re.search(r"<(a|img|em|strong|script)\b", rendered), rendered


def test_a_file_name_with_a_backtick_is_shown_literally(tmp_path):
    """The choice's message is plain text; Gradescope's output escapes it (report/markdown.text)."""
    from autograder.gradescope.run import find_notebook
    from autograder.report import markdown as md

    sub = tmp_path / "submission"
    sub.mkdir()
    for name in ("a.ipynb", "x`](javascript:alert(1))`.ipynb", "**b**.ipynb"):
        (sub / name).write_text("{}")
    choice = find_notebook(sub, "solution.ipynb")
    rendered = RENDER.render(md.text(choice.message, 2000))
    assert choice.chosen is None and "<a" not in rendered and "<strong>" not in rendered, rendered
    assert "<code>" not in rendered and "x`](javascript:alert(1))`.ipynb" in rendered, rendered


# ----------------------------------------------------------------------------- graded notebooks
INJECTIONS = [
    "raise ValueError('![x](http://evil.example/pixel.png) [Request a regrade](https://evil.example/phish) "
    "<img src=x onerror=alert(1)> # heading | a | b |')",
]
SURROGATES = [
    "RESULTS = {'fp32': {'accuracy': 'a\\ud800b', 'size_bytes': '\\udfff'}, 'k\\ud800': 1}",
    # the kernel holds the session: it packs messages as ASCII JSON, where "\\ud800" is a valid escape
    "import json, ipykernel.kernelapp\nfrom jupyter_client.session import json_default\n"
    "k = ipykernel.kernelapp.IPKernelApp.instance().kernel\n"
    "k.session.pack = lambda o: json.dumps(o, default=json_default, ensure_ascii=True).encode()",
    "raise ValueError('lone \\ud800 surrogate')",
]
SIGN = "import ipykernel.kernelapp\nk = ipykernel.kernelapp.IPKernelApp.instance().kernel\nk.session.sign = lambda m: b'[/]x'"


def test_markdown_in_exception_messages_renders_as_text(grade_cells, jail_check, jail_mode):
    g = grade_cells(INJECTIONS, name=f"markdown-injection-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    assert g.execution["first_error"]["ename"] == "ValueError", g.execution_brief()
    pages = [g.feedback, g.results.get("output", "")] + [t.get("output", "") for t in g.results.get("tests", [])]
    for page in pages:
        rendered = RENDER.render(page)
        assert not re.search(r"<(a|img|script)\b", rendered), f"a link or an image in a student page: {rendered[:2000]}"
    page = g.out / "feedback.html"
    if page.is_file():  # another stage renders it; no live link or image to the payload's host
        assert not re.search(r"""(href|src)\s*=\s*["']?[^"'>]*evil\.example""", page.read_text()), "feedback.html"
    assert "Request a regrade" in g.feedback, "the message itself should still be shown, as text"


def test_lone_surrogates_in_results_and_messages_are_a_graded_outcome(grade_cells, jail_check, jail_mode):
    g = grade_cells(SURROGATES, name=f"surrogates-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g, gains_allowed=("reported_results",))  # it has a RESULTS
    assert g.execution["first_error"]["ename"] == "ValueError", g.execution_brief()
    for name in ("execution.json", "measurements.json", "results.json"):
        (g.out / name).read_text(encoding="utf-8")  # valid UTF-8: written at all
    assert "\ufffd" in g.execution["first_error"]["evalue"], g.execution["first_error"]


def test_a_signature_that_is_rich_markup_is_a_graded_outcome(grade_cells, jail_check, jail_mode):
    """The kernel signs its messages with b"[/]x": the grader rejects them, and the reason (which
    quotes the signature) prints in the instructor's table without being parsed as markup."""
    g = grade_cells([SIGN, "x = 1"], name=f"markup-signature-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g, grade_required=False)
    assert g.execution["status"] in ("kernel_died", "timeout", "completed"), g.execution_brief()
    reason = g.execution.get("reason") or "[/]x"
    from rich.console import Console

    out = io.StringIO()
    print_scores_table(
        [{"name": "[/]x.ipynb", "score": 0, "max": 100, "checks": {}, "reason": reason}],
        console=Console(file=out, width=200),
    )
    assert "[/]x" in out.getvalue()
    assert json.loads((g.out / "results.json").read_text())["score"] == g.results["score"]
