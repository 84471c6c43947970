"""summary.html in a real headless browser (Debian's chromium, local files only): the charts render,
the page fits 1280 px without sideways scrolling, every link is clickable and leads somewhere,
tables sort, injected scripts stay blocked, and a screenshot shows text and coloured marks.

Skipped, with the reason, where chromium is not installed (``apt-get install -y chromium``; the
Makefile's system packages include it).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from batchkit import GOOD, write_notebook
from browserkit import SKIP_REASON, chromium, chromium_binary

from autograder.batch import run_batch
from autograder.report.summary_style import CSP, SCRIPT_HASH

pytestmark = pytest.mark.skipif(chromium_binary() is None, reason=SKIP_REASON)

COPIED = (
    "def quantize(x, s, z):\n    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(s)) + z\n"
    "    return np.clip(q, -128, 127).astype(np.int8)\n\nfor k in range(10):\n"
    "    total = sum(v * v for v in range(k)) + k  # running total\n    print(k, total, quantize(total, 0.5, 0))\n"
)

# Opens every <details>, then reports: the charts' widths, whether the page scrolls sideways, each
# link (href, clickable = the element at its centre is the link or inside it), and the order of
# the "All submissions" table before and after a click on its "score" header.
PROBE = """<script>
window.addEventListener("load", () => {
 let out;
 try {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const charts = Array.from(document.querySelectorAll("svg.chart")).map(s => Math.round(s.getBoundingClientRect().width));
  const links = Array.from(document.querySelectorAll("a[href]")).map(a => {
    a.scrollIntoView({block: "center", inline: "center"});
    const r = a.getClientRects()[0] || a.getBoundingClientRect();  // a wrapped link: its first line
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    const target = a.getAttribute("href");
    return {href: new URL(target, document.baseURI).href, raw: target, clickable: !!hit && (hit === a || a.contains(hit) || hit.closest("a") === a),
            anchor: target.startsWith("#") ? !!document.getElementById(target.slice(1)) : null,
            at: hit ? hit.outerHTML.slice(0, 120) : null, where: a.closest("section") ? (a.closest("section").querySelector("h2") || {}).textContent : ""};
  });
  window.scrollTo(0, 0);
  const table = Array.from(document.querySelectorAll("section")).find(s => (s.querySelector("h2") || {}).textContent === "All submissions").querySelector("table");
  const order = () => Array.from(table.tBodies[0].rows).map(r => r.cells[0].textContent.trim().split(" ")[0]);
  const before = order();
  Array.from(table.tHead.rows[0].cells).find(th => th.textContent.trim() === "score").click();
  const after = order();
  const overflowing = Array.from(document.querySelectorAll("td, th")).filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.trim().slice(0, 60));
  out = {charts, links, before, after, overflowing,
         scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
         sortable: document.querySelectorAll("th[tabindex]").length};
 } catch (e) { out = {error: String(e)}; }
  const p = document.createElement("pre");
  p.id = "probe";
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
</script>"""


@pytest.fixture(scope="module")
def summary_page(tmp_path_factory):
    from batchkit import ASSIGNMENT_ID, fake_stages, make_assignment_tree

    import autograder.pipeline
    from autograder.assignment import load_assignment

    tmp = tmp_path_factory.mktemp("browser")
    assignment = load_assignment(ASSIGNMENT_ID, make_assignment_tree(tmp / "project"))
    src = tmp / "src"
    for i, (ratio, drift) in enumerate([(0.27, 0.04), (0.3, 0.2), (0.5, 0.05), (0.25, 0.01), (0.27, 0.04)]):
        write_notebook(
            src / f"student_with_a_long_name_{i}.ipynb", **{**GOOD, "qdq": (ratio, drift), "agree": 1.0 - i * 0.2}
        )
    for name, code in (("alice", COPIED), ("bob", COPIED.replace("total", "acc").replace("# running total", ""))):
        nb_path = write_notebook(src / f"{name}.ipynb", **GOOD)
        nb = json.loads(nb_path.read_text())
        nb["cells"][0]["source"] = code
        nb_path.write_text(json.dumps(nb))
    write_notebook(src / "late.ipynb", status="timeout", reason="stopped after 10 s")
    original = autograder.pipeline.execute_and_measure
    autograder.pipeline.execute_and_measure = fake_stages(tmp / "log")
    try:
        run_batch(src, tmp / "out", assignment=assignment, jobs=2, progress=False)
    finally:
        autograder.pipeline.execute_and_measure = original
    return tmp / "out" / "summary.html"


def with_probe(page: Path, target: Path, *, allow_script: bool) -> Path:
    html = page.read_text()
    if allow_script:  # the page allows its own script by hash; the probe needs inline scripts too
        html = html.replace(f"script-src 'sha256-{SCRIPT_HASH}'", "script-src 'unsafe-inline'")
    target.write_text(html.replace("</body>", PROBE + "</body>"))
    return target


@pytest.fixture(scope="module")
def probed(summary_page, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    page = with_probe(summary_page, summary_page.with_name("probed.html"), allow_script=True)
    dom = chromium(tmp, "--window-size=1280,900", "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert m, "the probe script did not run: " + dom[-500:]
    result = json.loads(html.unescape(m[1]))
    assert "error" not in result, result
    return result


def test_charts_render_and_the_page_fits_1280_px(probed):
    assert len(probed["charts"]) == 3 and min(probed["charts"]) > 600, probed["charts"]
    assert probed["scrollWidth"] <= probed["clientWidth"], (
        f"the page scrolls sideways at 1280 px: {probed['scrollWidth']} > {probed['clientWidth']}"
    )
    assert probed["overflowing"] == [], "text runs out of its table cell"


def test_every_link_is_clickable_and_leads_to_a_file_or_a_section(probed, summary_page):
    links = probed["links"]
    feedback = [link for link in links if link["raw"].endswith(("/feedback.md", "/feedback.html"))]
    assert len({link["raw"] for link in feedback}) == 8, "each submission links to its feedback"
    assert all(link["raw"].endswith("/feedback.html") for link in feedback), (
        "the page, where it sits beside feedback.md"
    )
    assert any(link["raw"].startswith("#check-") for link in links), "pass-rate bars link to their check"
    for link in links:
        assert link["clickable"], f"{link['raw']} in {link['where']} is covered or off the page: {link['at']}"
        if link["anchor"] is not None:
            assert link["anchor"], f"{link['raw']} points at no section"
        else:
            url = urlparse(link["href"])
            assert url.scheme == "file" and Path(unquote(url.path)).is_file(), link["href"]


def test_tables_sort_on_a_click(probed):
    assert probed["sortable"] >= 20
    assert sorted(probed["before"], key=str.lower) == probed["before"], "by name at first"
    assert probed["after"][0] == "late" and probed["after"] != probed["before"], "lowest score first after a click"


def test_the_page_csp_blocks_injected_scripts_but_runs_its_own(summary_page, tmp_path):
    blocked = with_probe(summary_page, tmp_path / "blocked.html", allow_script=False)
    dom = chromium(tmp_path, "--dump-dom", blocked.as_uri())
    assert "Score distribution" in dom
    assert 'id="probe"' not in dom, "an inline script ran despite the Content-Security-Policy"
    assert 'tabindex="0"' in dom, "the page's own (hashed) sort script did not run"
    assert "'unsafe-inline'" not in CSP.split("script-src")[1]


def test_screenshot_at_1280_shows_text_and_coloured_marks(summary_page, tmp_path):
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", summary_page.as_uri())
    pixels = imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1280
    rgb = pixels[..., :3]
    dark = (rgb.mean(axis=2) < 0.5).mean()
    colored = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()
    red = ((rgb[..., 0] > 0.6) & (rgb[..., 1] < 0.35) & (rgb[..., 2] < 0.35)).mean()
    green = ((rgb[..., 1] > 0.4) & (rgb[..., 0] < 0.35) & (rgb[..., 2] < 0.35)).mean()
    assert dark > 0.002, "no text or lines rendered"
    assert colored > 0.01, "no coloured chart marks rendered"
    assert red > 0.0005 and green > 0.0005, "bars coloured by rate: both a red and a green one"
