"""feedback.html in a real headless browser (Debian's chromium, local files only): the inline SVG
picture renders at a readable size, the page fits 1280 px, no script runs, and a screenshot
shows text, the red int8 boundary and the coloured points.

Skipped, with the reason, where chromium is not installed (``apt-get install -y chromium``).
The screenshot is kept at ``$TMPDIR/autograder-feedback-figure.png`` for a human to look at.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import figurekit as kit
from browserkit import SKIP_REASON, chromium, chromium_binary
import pytest

from autograder.report.feedback import feedback_markdown
from autograder.report.feedback_html import write_feedback_html

pytestmark = pytest.mark.skipif(chromium_binary() is None, reason=SKIP_REASON)

GRADE = {
    "assignment": "demo",
    "score": 7.0,
    "max_score": 10.0,
    "checks": [
        {
            "id": "one",
            "title": "First check",
            "visibility": "visible",
            "score": 7.0,
            "max_score": 10.0,
            "passed": False,
            "parts": [
                {
                    "name": "accuracy",
                    "passed": True,
                    "points": 7,
                    "score": 7,
                    "measured": 0.9,
                    "threshold": 0.8,
                    "op": ">=",
                    "message": "accuracy 0.9",
                    "hint": "",
                    "reason": None,
                },
                {
                    "name": "size",
                    "passed": False,
                    "points": 3,
                    "score": 0,
                    "measured": 0.5,
                    "threshold": 0.3,
                    "op": "<=",
                    "message": "ratio 0.5",
                    "hint": "make it smaller",
                    "reason": None,
                },
            ],
        }
    ],
}
PROBE = """<script>
window.addEventListener("load", () => {
  const svg = document.querySelector("figure svg"), r = svg.getBoundingClientRect();
  const p = document.createElement("pre"); p.id = "probe";
  p.textContent = JSON.stringify({width: Math.round(r.width), height: Math.round(r.height),
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    boundaries: svg.querySelectorAll("[id^=boundary-]").length});
  document.body.appendChild(p);
});
</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("feedback_html")
    measurements = {"figure": kit.section()}
    return write_feedback_html(out, feedback_markdown(GRADE, measurements), measurements)


def test_the_picture_renders_wide_and_the_page_fits_1280_px(page, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(
        page.read_text()
        .replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
        .replace("</body>", PROBE + "</body>")
    )
    dom = chromium(tmp_path, "--window-size=1280,900", "--dump-dom", probed.as_uri())
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert m, "the probe did not run: " + dom[-300:]
    got = json.loads(html.unescape(m[1]))
    assert got["width"] >= 800 and got["height"] >= 500, got
    assert got["scrollWidth"] <= got["clientWidth"], got
    assert got["boundaries"] == 2


def test_no_script_runs_on_the_page(page, tmp_path):
    injected = tmp_path / "injected.html"
    injected.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium(tmp_path, "--dump-dom", injected.as_uri())
    assert "First check" in dom and 'id="probe"' not in dom, "an inline script ran despite the CSP"


def test_screenshot_shows_text_the_red_boundary_and_coloured_points(page, tmp_path):
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1300", page.as_uri())
    keep = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "autograder-feedback-figure.png"
    shutil.copyfile(shot, keep)
    seen = kit.screenshot_checks(shot)
    assert seen["shape"][:2] == (1300, 1280)
    assert seen["dark"] > 0.003, "no text or lines rendered"
    assert seen["red"] > 0.0005, "the dashed red boundary and the red rings are not visible"
    assert seen["coloured"] > 0.005, "no coloured marks rendered"
