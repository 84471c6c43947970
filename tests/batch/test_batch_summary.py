"""summary.html and gradebook.csv content: escaping, sections, thresholds (rendering: the browser test)."""

from __future__ import annotations

import base64
import re

import pytest
from batchkit import GOOD, make_export_zip, notebook_json

from autograder.batch import run_batch
from autograder.report.gradebook import gradebook_csv, text_cell
from autograder.report.summary import CSP, rubric_threshold

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


@pytest.fixture
def hostile_batch(tmp_path, fake_assignment, exec_log):
    meta = (f"submission_1:\n  :submitters:\n  - :name: '{HOSTILE}'\n    :email: a@x.edu\n"
            "submission_2:\n  :submitters:\n  - :name: Plain Name\n")
    src = make_export_zip(tmp_path / "export.zip", {
        "submission_1": {"hw.ipynb": notebook_json(**GOOD, duration=42.5,
                                                   first_error={"cell": 2, "ename": "ValueError", "evalue": HOSTILE})},
        "submission_2": {"hw.ipynb": notebook_json(status="timeout", reason=f"timeout in {HOSTILE}")},
        "submission_3": {"a.ipynb": "{}", "b.ipynb": "{}"},
    }, meta, extra=[("../../evil.ipynb", b"{}")])
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    return out


def test_summary_escapes_student_text_and_forbids_scripts(hostile_batch):
    page = (hostile_batch / "summary.html").read_text()
    assert HOSTILE not in page and "<img src=x" not in page and "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert not re.search(r'(src|href)="(https?:|//)', page), "nothing is loaded from elsewhere"


def test_summary_sections_and_embedded_images(hostile_batch):
    page = (hostile_batch / "summary.html").read_text()
    for heading in ["Score distribution", "Pass rate per check", "Size vs drift of the int8 models",
                    "Failed submissions", "Slowest submissions", "Most common failures",
                    "Most common errors in cells", "All submissions", "Warnings about the source"]:
        assert f"<h2>{heading}</h2>" in page, heading
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 3
    assert all(base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n") for data in images)
    failed = page.split("<h2>Failed submissions</h2>")[1].split("</section>")[0]
    assert "submission_2" in failed and "timeout" in failed and "2 notebooks" in failed
    slowest = page.split("<h2>Slowest submissions</h2>")[1].split("</section>")[0]
    assert slowest.index("submission_1") < slowest.index("submission_2") and "42.5" in slowest
    errors = page.split("<h2>Most common errors in cells</h2>")[1].split("</section>")[0]
    assert "ValueError: &lt;script&gt;" in errors
    assert "rejected" in page and "evil.ipynb" in page


def test_rubric_threshold_reads_values_and_tolerance_tables():
    rubric = {"checks": [{"id": "size", "parts": [
        {"measure": "models.a.size_ratio", "op": "<=", "tolerance": "size.ratio_max"},
        {"measure": "models.b.size_ratio", "op": "<=", "tolerance": "size.table"},
        {"measure": "models.c.size_ratio", "op": "<=", "value": 0.5},
        {"measure": "models.d.classification", "op": "==", "value": "dynamic"}]}]}
    tolerances = {"size": {"ratio_max": 0.3, "table": {"value": 0.4, "derived": "p99 + 50%"}}}
    assert [rubric_threshold(rubric, tolerances, f"models.{m}") for m in
            ["a.size_ratio", "b.size_ratio", "c.size_ratio", "d.classification", "e.size_ratio"]] == [
        0.3, 0.4, 0.5, None, None]


def test_gradebook_neutralises_spreadsheet_formulas():
    assert [text_cell(v) for v in ["=1+1", "+1", "-x", "@SUM(A1)", "ok", "a=b", None]] == [
        "'=1+1", "'+1", "'-x", "'@SUM(A1)", "ok", "a=b", ""]
    rows = [{"name": "a", "submitters": "=HYPERLINK(1)", "sids": "", "emails": "", "score": 12.5, "max": 35.0,
             "status": "ok", "checks": {"q": 2.5}, "cells_errored": 0, "execution_s": 3.14159, "cached": True,
             "reason": "line1\nline2"}]
    assert gradebook_csv(rows, ["q"]).splitlines() == [
        "name,submitters,sids,emails,score,max_score,status,q,cells_errored,execution_s,cached,reason",
        "a,'=HYPERLINK(1),,,12.5,35,ok,2.5,0,3.1,yes,line1 line2"]
