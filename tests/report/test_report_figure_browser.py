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


def _probe(page: Path, probe: str, tmp_path: Path) -> dict:
    """What ``probe`` (a script writing JSON into ``<pre id="probe">``) reports of ``page`` in the
    browser, the page's policy opened to that one inline script."""
    probed = tmp_path / "probed.html"
    probed.write_text(
        page.read_text()
        .replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
        .replace("</body>", probe + "</body>")
    )
    dom = chromium(tmp_path, "--window-size=1280,900", "--dump-dom", probed.as_uri())
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert m, "the probe did not run: " + dom[-300:]
    return json.loads(html.unescape(m[1]))


def test_the_picture_renders_wide_and_the_page_fits_1280_px(page, tmp_path):
    got = _probe(page, PROBE, tmp_path)
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


CROWDED_PROBE = """<script>
window.addEventListener("load", () => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const labels = [...document.querySelectorAll("[id^=worst-label-]")].map((g) => box(g.querySelector("text") || g));
  const p = document.createElement("pre"); p.id = "probe";
  p.textContent = JSON.stringify({labels});
  document.body.appendChild(p);
});
</script>"""


def test_numbered_drifts_on_one_spot_stay_readable(tmp_path):
    """Five of the largest drifts a hair apart (a real static model's worst rows bunch up on the
    boundary): in the browser, no number's box overlaps another's."""
    spot = [[0.61, 0.02], [0.63, 0.03], [0.62, 0.01], [0.64, 0.02], [0.60, 0.03]]
    worst = [{"set": "X_test", "row": i, "xy": xy, "value": 1.0 - 0.1 * i} for i, xy in enumerate(spot)]
    measurements = {"figure": kit.section(worst=worst)}
    page = write_feedback_html(tmp_path, feedback_markdown(GRADE, measurements), measurements)
    labels = _probe(page, CROWDED_PROBE, tmp_path)["labels"]
    assert len(labels) == 5, labels
    for i, a in enumerate(labels):
        for b in labels[:i]:
            overlap = min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5
            assert not overlap, ("two drift numbers overlap", a, b, labels)
