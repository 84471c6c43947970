"""summary.html in a real headless browser (Debian's chromium): it renders and its images load.

Skipped, with the reason, where chromium is not installed (``apt-get install -y chromium``; the
Makefile's system packages include it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from batchkit import GOOD, write_notebook

from autograder.batch import run_batch
from autograder.report.summary import CSP

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")

PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0);
  const p = document.createElement("div");
  p.id = "probe";
  p.textContent = `images=${imgs.length} loaded=${ok.length} widths=${ok.map(i => i.naturalWidth).join(",")}`;
  document.body.appendChild(p);
});
</script>"""


def chromium(tmp: Path, *args: str) -> str:
    """Run headless chromium once; returns stdout. The whole process group is killed on timeout."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=5000", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "HOME": str(tmp)})
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("chromium did not finish within 90 s")
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}"
    return out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def summary_page(tmp_path_factory):
    from batchkit import ASSIGNMENT_ID, fake_stages, make_assignment_tree

    import autograder.pipeline
    from autograder.assignment import load_assignment

    tmp = tmp_path_factory.mktemp("browser")
    assignment = load_assignment(ASSIGNMENT_ID, make_assignment_tree(tmp / "project"))
    src = tmp / "src"
    for i, (ratio, drift) in enumerate([(0.27, 0.04), (0.3, 0.2), (0.5, 0.05), (0.25, 0.01)]):
        write_notebook(src / f"s{i}.ipynb", **{**GOOD, "qdq": (ratio, drift), "agree": 1.0 - i * 0.2})
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
    if allow_script:
        html = html.replace(CSP, CSP + "; script-src 'unsafe-inline'")
    target.write_text(html.replace("</body>", PROBE + "</body>"))
    return target


def test_images_load_in_chromium(summary_page, tmp_path):
    probed = with_probe(summary_page, tmp_path / "probed.html", allow_script=True)
    dom = chromium(tmp_path, "--dump-dom", probed.as_uri())
    m = re.search(r'<div id="probe">images=(\d+) loaded=(\d+) widths=([\d,]*)</div>', dom)
    assert m, "the probe script did not run: " + dom[-500:]
    images, loaded, widths = int(m[1]), int(m[2]), [int(w) for w in m[3].split(",") if w]
    assert images == 3 and loaded == 3, f"{loaded} of {images} images decoded"
    assert min(widths) > 300, widths
    assert "All submissions" in dom and "late" in dom


def test_the_page_csp_blocks_scripts(summary_page, tmp_path):
    probed = with_probe(summary_page, tmp_path / "blocked.html", allow_script=False)
    dom = chromium(tmp_path, "--dump-dom", probed.as_uri())
    assert "Score distribution" in dom
    assert 'id="probe"' not in dom, "an inline script ran despite the Content-Security-Policy"


def test_screenshot_is_not_blank(summary_page, tmp_path):
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2400", summary_page.as_uri())
    pixels = imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    rgb = pixels[..., :3]
    dark = (rgb.mean(axis=2) < 0.5).mean()
    colored = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).mean()
    assert dark > 0.002, "no text or lines rendered"
    assert colored > 0.002, "no colored plot marks rendered"
