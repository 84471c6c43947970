"""A batch worker pays the grader's own warm-ups once, not once per submission; each report still
gets its picture.

Through the real worker path (``worker.grade_job``, what a local pool's worker and a Dask worker
run for each job), the real jail, kernel and ONNX Runtime: lesson 07's reference notebook graded
twice, one submission after the other, by one process that has warmed nothing yet. Calls are
counted, never timed: the assignment's ``prepare`` and matplotlib's warm-up run for the first
submission only, each picture is drawn once per submission in the two formats its reports show
(SVG inline in feedback.html, PNG in results.json's picture test), and the second submission's
picture is the one this process draws for its measurements.
"""

from __future__ import annotations

import base64
import json
import re
import weakref
from pathlib import Path

import pytest

from autograder import pipeline, warm_ups
from autograder.batch.worker import Job, grade_job
from autograder.environment import environment_versions
from autograder.report import figure
from autograder.report.gradescope_figure import PNG_DPI, TAG

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"

pytestmark = [pytest.mark.slow, pytest.mark.kernel]


def test_a_worker_s_second_submission_pays_no_warm_up_and_both_get_their_pictures(assignment07, monkeypatch):
    monkeypatch.setattr(warm_ups, "_prepared", weakref.WeakKeyDictionary())  # a worker that warmed nothing yet
    monkeypatch.setattr(warm_ups, "_pictures", set())
    calls: dict[str, list] = {"prepare": [], "figure": [], "drawn": []}
    prepare, warm_up_figure, render_formats = assignment07.grading.prepare, figure.warm_up, figure.render_formats

    def counted_prepare(a):
        calls["prepare"].append(a.id)
        return prepare(a)

    def counted_warm_up(formats=("svg", "png")):
        calls["figure"].append(list(formats))
        return warm_up_figure(formats)

    def counted_render(section, formats):
        if section.get("title") != "x":  # the warm-up's tiny picture is counted above
            calls["drawn"].append([fmt for fmt, _ in formats])
        return render_formats(section, formats)

    monkeypatch.setattr(assignment07.grading, "prepare", counted_prepare)
    monkeypatch.setattr(figure, "warm_up", counted_warm_up)
    monkeypatch.setattr(figure, "render_formats", counted_render)

    replies = []
    for name in ("first", "second"):
        job = Job(
            name=name,
            notebook=REFERENCE.read_bytes(),
            assignment=assignment07.id,
            fingerprint=assignment07.fingerprint(),
            versions=dict(environment_versions()),
        )
        replies.append(grade_job(job, assignment07))
        counts = {k: len(v) for k, v in calls.items()}
        assert counts == {"prepare": 1, "figure": 1, "drawn": len(replies)}, (name, calls)

    assert calls["figure"] == [["svg", "png"]]
    assert calls["drawn"] == [["svg", "png"], ["svg", "png"]], "each picture drawn once, in the two formats"
    for reply in replies:
        assert reply.error is None and reply.fatal is None, reply
        measurements = json.loads(reply.files[pipeline.MEASUREMENTS_FILE])
        section = measurements["figure"]
        assert figure.figure_problem(section) is None, section
        page = reply.files[pipeline.FEEDBACK_HTML_FILE].decode()
        svg = figure.render(section, "svg").decode()
        assert svg[svg.index("<svg") :] in page, "feedback.html shows this submission's picture inline"
        results = json.loads(reply.files[pipeline.RESULTS_FILE])
        (test,) = [t for t in results["tests"] if TAG in t.get("tags", [])]
        uri = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', test["output"])
        assert uri and base64.b64decode(uri[1]) == figure.render(section, "png", dpi=PNG_DPI)
        assert "<img" not in reply.files[pipeline.FEEDBACK_FILE].decode(), "feedback.md holds no picture"
