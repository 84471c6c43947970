"""summary.html counts right (unit level: rows and grade.json files written by hand, no kernel):
pass rates over graded submissions only, not attempted and unreadable listed under Needs
attention, failures grouped by root cause, links to feedback.html where it sits beside
feedback.md, and the assignment's own examples a family whose pairs are expected.
The page from a real batch, in a browser: tests/integration/test_summary_page_real.py."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from autograder.report.integrity import integrity_report
from autograder.report.summary import summary_html

RUBRIC = {
    "checks": [
        {"id": "quantize", "title": "quantize agrees", "points": 10},
        {"id": "dequantize", "title": "dequantize agrees", "points": 5},
        {"id": "models", "title": "the models", "points": 2},
        {"id": "execution", "title": "runs", "points": 1},
    ]
}
SYNTAX = {
    "name": "quantize",
    "kind": "syntax_error",
    "where": "code cell 9 (cell 16 of the notebook)",
    "text": "quantize could not be checked: code cell 9 (cell 16 of the notebook), where it is defined, "
    "has a syntax error at line 4: expected ':'",
}


def _part(name, passed, *, reason=None, measure="functions.x", message="failed"):
    return {
        "name": name,
        "passed": passed,
        "points": 1,
        "score": 1 if passed else 0,
        "measure": measure,
        "reason": reason,
        "message": reason or message,
    }


def _check(cid, parts, cause=None):
    check = {
        "id": cid,
        "title": cid,
        "visibility": "visible",
        "passed": all(p["passed"] for p in parts),
        "score": sum(p["score"] for p in parts),
        "max_score": len(parts),
        "parts": parts,
    }
    if cause:
        check["cause"] = {**cause, "name": cid}
    return check


def _write(out, name, status, checks, *, html=True):
    folder = out / name
    folder.mkdir(parents=True)
    (folder / "feedback.md").write_text("# Feedback\n")
    if html:
        (folder / "feedback.html").write_text("<html></html>")
    grade = {
        "checks": checks,
        "score": sum(c["score"] for c in checks),
        "max_score": sum(c["max_score"] for c in checks),
    }
    (folder / "grade.json").write_text(json.dumps(grade))
    failures = [
        {"check": c["id"], "title": c["id"], "part": p["name"], "message": p["message"], "reason": p["reason"]}
        for c in checks
        for p in c["parts"]
        if not p["passed"]
    ]
    return {
        "name": name,
        "status": status,
        "score": float(grade["score"]),
        "max": float(grade["max_score"]),
        "reason": "not a notebook" if status == "unreadable" else None,
        "checks": {c["id"]: c["score"] for c in checks},
        "checks_passed": {c["id"]: c["passed"] for c in checks},
        "failures": failures,
        "first_error": None,
        "cells_errored": 0,
        "execution_s": 3.0,
    }


def _cascade(cid, n):
    return [
        _part(f"{cid} part {k}", False, reason=f"the notebook does not define {cid} at its top level") for k in range(n)
    ]


@pytest.fixture
def page(tmp_path):
    out = tmp_path / "class"
    ok = lambda cid, n=2: _check(cid, [_part(f"{cid} part {k}", True) for k in range(n)])  # noqa: E731
    runs = _check("execution", [_part("ran", True, measure="execution.completed")])
    rows = [
        _write(out, "ann", "ok", [ok("quantize"), ok("dequantize"), ok("models"), runs]),
        _write(out, "ben", "ok", [ok("quantize"), ok("dequantize"), ok("models"), runs], html=False),
        # a cascade: one broken cell leaves two checks and 13 parts unmeasured; the models are fine
        _write(
            out,
            "cy",
            "ok",
            [
                _check("quantize", _cascade("quantize", 8), SYNTAX),
                _check("dequantize", _cascade("dequantize", 5), SYNTAX),
                ok("models"),
                runs,
            ],
        ),
        # the untouched starter: only the execution part passes (1 point)
        _write(
            out,
            "template",
            "ok",
            [
                _check("quantize", [_part("q", False, message="raised NotImplementedError")]),
                _check("dequantize", [_part("d", False, message="raised NotImplementedError")]),
                _check("models", [_part("m", False, reason="artifacts/fp32.onnx is missing")]),
                runs,
            ],
        ),
        _write(
            out,
            "garbled",
            "unreadable",
            [
                _check(c, [_part("p", False, reason="the notebook did not run (unreadable)")])
                for c in ("quantize", "dequantize", "models", "execution")
            ],
        ),
    ]
    return out, summary_html(rows, out=out, assignment=None, rubric=RUBRIC, tolerances={}, warnings=[])


def _section(page, heading):
    return page.split(f"<h2>{heading}</h2>")[1].split("</section>")[0]


def test_pass_rates_count_graded_submissions_only(page):
    _, html = page
    rates = _section(html, "Pass rate per check")
    # ann, ben and cy are graded; cy's quantize and dequantize failed: 2 of 3 pass each
    assert "3 graded submissions" in rates
    assert re.search(r"quantize agrees[^<]*</title>", rates) or "quantize agrees" in rates
    titles = re.findall(r"<title>([^<]*)</title>", rates)
    assert any("2 of 3" in t or "67%" in t for t in titles), titles
    assert not any("of 5" in t or "of 4" in t or "40%" in t for t in titles), titles


def test_not_attempted_and_unreadable_are_listed_apart(page):
    _, html = page
    attention = _section(html, "Needs attention")
    assert "1 not attempted" in attention and ">template</a>" in attention
    assert "1 unreadable" in attention and ">garbled</a>" in attention
    stats = html.split("<h2>")[0]
    assert re.search(r"<b>3</b><span>graded</span>", stats) and re.search(r"<b>1</b><span>not attempted</span>", stats)
    every = _section(html, "All submissions")
    row = next(r for r in every.split("</tr>") if ">template</a>" in r)
    assert "not attempted" in row and "graded" not in row.replace("not attempted", ""), (
        "the table says what the box says"
    )


def test_common_failures_group_a_cascade_into_its_root_cause(page):
    _, html = page
    common = _section(html, "Most common failures")
    rows = common.split("<tbody>")[1].split("</tr>")[:-1]
    assert len(rows) == 1, rows  # cy's 13 unmeasured parts are one cause
    assert "dequantize, quantize: the cell that defines them has a syntax error" in rows[0]
    assert "line 4" in rows[0] and ">cy</a>" in rows[0]
    assert "template" not in common.split("<tbody>")[1] and "garbled" not in common.split("<tbody>")[1]


def test_links_go_to_feedback_html_where_it_sits_beside_feedback_md(page):
    _, html = page
    links = set(re.findall(r'href="([^"#]+)"', html))
    assert "ann/feedback.html" in links and "ben/feedback.md" in links
    assert "ann/feedback.md" not in links and "ben/feedback.html" not in links


def test_the_assignments_examples_are_a_family_whose_pairs_are_expected(tmp_path, assignment07):
    examples = assignment07.folder / "examples"
    staged = {}
    for name in ("reference", "quantize_no_saturation", "static_per_tensor"):
        staged[name] = tmp_path / f"{name}.ipynb"
        shutil.copyfile(examples / f"{name}.ipynb", staged[name])
    copy = tmp_path / "student.ipynb"  # a student's copy of an example, one byte changed
    copy.write_bytes(staged["reference"].read_bytes().replace(b'"cells"', b'"cells" ', 1))
    leaked = {n: tmp_path / f"{n}.ipynb" for n in ("submission_1", "submission_2")}  # byte for byte, other names
    for path in leaked.values():
        shutil.copyfile(examples / "reference.ipynb", path)
    report = integrity_report({**staged, "student": copy, **leaked}, assignment07)
    assert sorted(report.family) == ["quantize_no_saturation", "reference", "static_per_tensor"]
    family_pairs = [p for p in report.pairs if p.a in report.family and p.b in report.family]
    assert len(family_pairs) == 3 and all(p.expected and not p.flagged and p.share > 0.6 for p in family_pairs)
    others = [p for p in report.pairs if not (p.a in report.family and p.b in report.family)]
    assert len(others) == 3 * 3 + 3 and all(p.flagged and not p.expected for p in others), (
        "a student's copy, and two students handing in the same example under their names, are still flagged"
    )
    assert report.flagged_total == len(others)
    assert all(re.fullmatch(r"code cell \d+ \(cell \d+ of the notebook\)", c) for p in report.pairs for c in p.cells_a)


def test_the_page_in_a_browser_shows_the_rates_of_the_graded_and_the_not_attempted_apart(page, tmp_path):
    """The summary of a class with an unreadable and an untouched notebook in headless chromium:
    the rendered text (after layout, CSS and the sorting script) and a screenshot."""
    from browserkit import chromium, chromium_binary

    if chromium_binary() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    out, html = page
    path = out / "summary.html"
    path.write_text(html)
    dom = chromium(tmp_path, "--dump-dom", path.as_uri())
    text = re.sub(r"<[^>]+>", " ", dom)
    assert re.search(r"1 not attempted\s*: they ran", text) and re.search(r"1 unreadable\s*:", text)
    assert "Share of the 3 graded submissions" in text
    shot = tmp_path / "summary.png"
    chromium(tmp_path, "--window-size=1280,1600", f"--screenshot={shot}", path.as_uri())
    assert shot.stat().st_size > 10_000


def test_what_happened_names_a_cell_once():
    from autograder.report.summary import _what_happened

    where = "code cell 3 (cell 5 of the notebook)"
    row = {
        "reason": f"{where} exceeded the 60 s cell limit and did not stop when interrupted",
        "cells_errored": 1,
        "first_error": {"cell": 4, "code_cell": 3, "where": where, "ename": "KeyboardInterrupt", "evalue": ""},
    }
    assert _what_happened(row).count("code cell 3") == 1, _what_happened(row)
    other = {**row, "reason": "the notebook ran longer than its 600 s limit"}
    assert _what_happened(other).count("code cell 3") == 1 and "the first, code cell 3" in _what_happened(other)
