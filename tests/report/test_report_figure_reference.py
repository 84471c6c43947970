"""The picture of the reference solution's own models, end to end: the real jail runs the
notebook, the model worker evaluates its fp32.onnx and int8_qdq.onnx on the plane, and the report
draws feedback.html and the Gradescope test. Only the contract's public points are in it.

The screenshot is kept at ``$TMPDIR/autograder-feedback-figure-reference.png`` for a human to look at.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import figurekit as kit
from browserkit import SKIP_REASON, chromium, chromium_binary
import numpy as np
import pytest

from autograder.pipeline import grade_notebook
from autograder.report.gradescope_figure import TAG
from needs import needs

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
@needs("kernel")
def graded(assignment07, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference_figure")
    grade = grade_notebook(REFERENCE, assignment07, out)
    return grade, out


def test_the_page_draws_both_boundaries_and_the_1000_public_points(graded):
    grade, out = graded
    assert grade["score"] == grade["max_score"]
    page = (out / "feedback.html").read_text()
    svg = page[page.index("<svg") : page.index("</svg>") + 6]
    drawn = kit.parts(svg)
    assert drawn.get("boundary-0", 0) >= 1 and drawn.get("boundary-1", 0) >= 1, drawn
    assert drawn["points-0"] == 500 and drawn["points-1"] == 500, drawn
    assert sum(1 for k in drawn if k.startswith("worst-") and not k.startswith("worst-label-")) == 5
    assert sum(1 for k in drawn if k.startswith("worst-label-")) == 5, "each ring numbered"
    words = kit.texts(svg)
    assert "fp32 boundary (fp32.onnx)" in words and "int8 QDQ boundary (int8_qdq.onnx)" in words
    assert "Your fp32 and int8 QDQ models on the two-moons plane" in words


def test_only_public_rows_are_in_the_measured_picture(graded, assignment07):
    _, out = graded
    data = __import__(assignment07.grading.__name__ + ".data", fromlist=["data"])
    section = json.loads((out / "measurements.json").read_text())["figure"]
    public, hidden = data.public_split(), data.hidden_split(assignment07)
    xy = np.concatenate([np.asarray(s["xy"]) for s in section["points"]])
    assert np.allclose(xy, np.concatenate([public.X_test, public.X_edge]), atol=1e-4)
    rows = lambda a: {(round(float(x), 4), round(float(y), 4)) for x, y in np.asarray(a, dtype=np.float64)}  # noqa: E731
    hidden_rows = rows(hidden.X_test) | rows(hidden.X_edge)
    assert not rows(xy) & hidden_rows and not rows([w["xy"] for w in section["worst"]]) & hidden_rows
    assert section["data"] == "public"


def test_gradescope_gets_the_picture_as_an_html_test(graded, results_validator):
    _, out = graded
    results = json.loads((out / "results.json").read_text())
    results_validator(results)
    [test] = [t for t in results["tests"] if t["tags"] == [TAG]]
    assert test["output_format"] == "html" and test["max_score"] == 0 and test["visibility"] == "visible"
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', test["output"])[1])
    assert png[:4] == b"\x89PNG"
    assert sorted(p.suffix for p in out.glob("figure-*")) == [".png", ".svg"], "kept for a rescore"


@pytest.mark.skipif(chromium_binary() is None, reason=SKIP_REASON)
def test_screenshot_of_the_reference_page(graded, tmp_path):
    _, out = graded
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1100", (out / "feedback.html").as_uri())
    shutil.copyfile(
        shot, Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "autograder-feedback-figure-reference.png"
    )
    seen = kit.screenshot_checks(shot)
    assert seen["dark"] > 0.003 and seen["red"] > 0.0003 and seen["purple"] > 0.001, seen
