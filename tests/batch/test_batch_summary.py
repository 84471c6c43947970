"""summary.html and gradebook.csv content: escaping, sections, what each list holds (rendering: the browser test)."""

from __future__ import annotations

import json
import re

import pytest
from batchkit import GOOD, make_export_zip, notebook_json, write_notebook

from autograder.batch import run_batch
from autograder.report.gradebook import gradebook_csv, text_cell
from autograder.report.summary import rubric_limit, rubric_threshold
from autograder.report.summary_charts import rate_color
from autograder.report.summary_style import CSP, SCRIPT_HASH, SORT_SCRIPT

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def section(page: str, heading: str) -> str:
    assert f"<h2>{heading}</h2>" in page, heading
    return page.split(f"<h2>{heading}</h2>")[1].split("</section>")[0]


@pytest.fixture
def hostile_batch(tmp_path, fake_assignment, exec_log):
    meta = (
        f"submission_1:\n  :submitters:\n  - :name: '{HOSTILE}'\n    :email: a@x.edu\n"
        "submission_2:\n  :submitters:\n  - :name: Plain Name\n"
    )
    src = make_export_zip(
        tmp_path / "export.zip",
        {
            "submission_1": {
                "hw.ipynb": notebook_json(
                    **GOOD, duration=42.5, first_error={"cell": 2, "ename": "ValueError", "evalue": HOSTILE}
                )
            },
            "submission_2": {"hw.ipynb": notebook_json(status="timeout", reason=f"timeout in {HOSTILE}")},
            "submission_3": {"a.ipynb": "{}", "b.ipynb": "{}"},
        },
        meta,
        extra=[("../../evil.ipynb", b"{}")],
    )
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    return out


def test_summary_escapes_student_text_and_allows_only_its_own_script(hostile_batch):
    page = (hostile_batch / "summary.html").read_text()
    assert HOSTILE not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert scripts == [SORT_SCRIPT], "the only script is the table sorter, allowed by its hash"
    assert f"script-src 'sha256-{SCRIPT_HASH}'" in CSP and "default-src 'none'" in CSP
    assert not re.search(r'(src|href)="(https?:|//)', page), "nothing is loaded from elsewhere"


def test_summary_sections_and_inline_charts(hostile_batch):
    page = (hostile_batch / "summary.html").read_text()
    for heading in [
        "Needs attention",
        "Score distribution",
        "Pass rate per check",
        "Size vs drift of the int8 models",
        "Failures by check",
        "Most common failures",
        "Submissions that lost points",
        "Slowest submissions",
        "Most common errors in cells",
        "All submissions",
        "Warnings about the source",
        "Integrity: notebooks that share code",
        "Tolerances used",
    ]:
        section(page, heading)
    assert "<img" not in page and page.count('<svg class="chart"') == 3
    attention = section(page, "Needs attention")
    assert "1 timeout" in attention and 'href="submission_2/feedback.html"' in attention  # beside feedback.md
    assert "1 unreadable" in attention and "submission_3" in attention and "2 notebooks" in attention
    slowest = section(page, "Slowest submissions")
    assert slowest.index("submission_1") < slowest.index("submission_2") and "42.5" in slowest
    errors = section(page, "Most common errors in cells")
    assert "ValueError: &lt;script&gt;" in errors and 'href="submission_1/feedback.html"' in errors
    assert "rejected" in page and "evil.ipynb" in page


def test_lost_points_lists_every_submission_below_full_marks_and_only_those(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "perfect.ipynb", **GOOD)  # 35/35
    write_notebook(src / "last_cell_error.ipynb", **GOOD, first_error={"cell": 9, "ename": "NameError", "evalue": "x"})
    write_notebook(src / "too_big.ipynb", agree=1.0, dyn=(0.27, 0.04), qdq=(0.5, 0.05))  # 30/35, no error at all
    write_notebook(src / "hung.ipynb", status="timeout", reason="stopped after 10 s")
    run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=2, progress=False)
    lost = section((tmp_path / "out" / "summary.html").read_text(), "Submissions that lost points")
    rows = re.findall(r'<tr><td><span class="names"><a href="([^"/]+)/feedback.html">', lost)
    assert rows == ["hung", "too_big", "last_cell_error"], "lowest score first; the perfect one is not there"
    assert "int8 files are small" in lost, "the failed check is named by its title"


def test_failures_by_check_name_the_submissions_and_common_failures_leave_out_do_nothing(
    tmp_path, fake_assignment, exec_log
):
    src = tmp_path / "src"
    for name in ("a", "b", "c"):
        write_notebook(src / f"{name}.ipynb", agree=0.5, dyn=(0.27, 0.04), qdq=(0.30, 0.05))  # quantize fails
    untouched = write_notebook(src / "zero.ipynb", agree=0.0, dyn=(0.9, 0.9), qdq=(0.9, 0.9))
    nb = json.loads(untouched.read_text())
    nb["cells"] = []  # no code of its own: it did nothing
    untouched.write_text(json.dumps(nb))
    run_batch(src, tmp_path / "out", assignment=fake_assignment, jobs=2, progress=False)
    page = (tmp_path / "out" / "summary.html").read_text()
    by_check = section(page, "Failures by check")
    quantize = by_check.split('id="check-quantize"')[1].split("</details>")[0]
    assert "3 of 3 failed" in quantize and all(f'href="{n}/feedback.html"' in quantize for n in "abc"), (
        "the notebook that did nothing is not counted among the graded"
    )
    common = section(page, "Most common failures")
    first = common.split("<tbody>")[1].split("</tr>")[0]
    assert "quantize agrees with QuantizeLinear: agreement" in first
    assert '<td data-sort="3">' in first or "<td>3</td>" in first, "counted among a, b, c only"
    assert "not attempted" in common.split("<tbody>")[0], "the do-nothing notebook is said to be left out"
    attention = section(page, "Needs attention")
    assert "1 not attempted" in attention and 'href="zero/feedback.html"' in attention


def test_pass_rate_bars_are_coloured_by_rate():
    assert rate_color(0.0) == "#c62828" and rate_color(1.0) == "#2e7d32"
    assert len({rate_color(r / 10) for r in range(11)}) == 11


def test_rubric_threshold_and_limit_read_values_tolerances_and_the_rubric_words():
    rubric = {
        "checks": [
            {
                "id": "size",
                "title": "Files are small",
                "parts": [
                    {
                        "name": "dynamic model size",
                        "measure": "models.a.size_ratio",
                        "op": "<=",
                        "tolerance": "size.ratio_max",
                    },
                    {"measure": "models.b.size_ratio", "op": "<=", "tolerance": "size.table"},
                    {"measure": "models.c.size_ratio", "op": "<=", "value": 0.5},
                    {"measure": "models.d.classification", "op": "==", "value": "dynamic"},
                ],
            }
        ]
    }
    tolerances = {"size": {"ratio_max": 0.3, "table": {"value": 0.4, "derived": "p99 + 50%"}}}
    assert [
        rubric_threshold(rubric, tolerances, f"models.{m}")
        for m in ["a.size_ratio", "b.size_ratio", "c.size_ratio", "d.classification", "e.size_ratio"]
    ] == [0.3, 0.4, 0.5, None, None]
    assert rubric_limit(rubric, tolerances, "models.a.size_ratio") == {
        "value": 0.3,
        "op": "<=",
        "label": "dynamic model size ≤ 0.3 (Files are small)",
    }
    assert rubric_limit(rubric, tolerances, "models.d.classification") is None


def test_gradebook_neutralises_spreadsheet_formulas():
    assert [text_cell(v) for v in ["=1+1", "+1", "-x", "@SUM(A1)", "ok", "a=b", None]] == [
        "'=1+1",
        "'+1",
        "'-x",
        "'@SUM(A1)",
        "ok",
        "a=b",
        "",
    ]
    rows = [
        {
            "name": "a",
            "submitters": "=HYPERLINK(1)",
            "sids": "",
            "emails": "",
            "score": 12.5,
            "max": 35.0,
            "status": "ok",
            "checks": {"q": 2.5},
            "cells_errored": 0,
            "execution_s": 3.14159,
            "cached": True,
            "reason": "line1\nline2",
        }
    ]
    assert gradebook_csv(rows, ["q"]).splitlines() == [
        "name,submitters,sids,emails,submitted_at,score,max_score,status,outcome,q,cells_errored,execution_s,cached,reason",
        "a,'=HYPERLINK(1),,,,12.5,35,ok,graded,2.5,0,3.1,yes,line1 line2",
    ]
