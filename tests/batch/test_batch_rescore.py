"""rescore: re-judge a graded batch from stored measurements with new tolerances or rubric, running nothing."""

from __future__ import annotations

import json

import pytest
from batchkit import GOOD, RUBRIC_TOML, make_export_zip, notebook_json, read_gradebook, write_notebook

from autograder.grade_options import GradeOptions
from autograder.batch import BatchError, rescore, run_batch
from autograder.errors import AssignmentError

STRICT = "[functions]\nagree_share_min = 1.0\n[size]\nratio_max = 0.28\n[drift]\nmax_abs_dp_max = 0.03\n"


@pytest.fixture
def graded(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "alice.ipynb", **GOOD)  # qdq size 0.30, drift .04/.05
    write_notebook(src / "bob.ipynb", agree=0.5, dyn=(0.25, 0.02), qdq=(0.26, 0.02))
    write_notebook(src / "carol.ipynb", status="kernel_died", reason="the kernel died (out of memory?)")
    write_notebook(src / "dave.ipynb", **{"raise": "bug in the grader"})
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    return out


def forbid_execution(monkeypatch):
    """Make every way of executing a notebook raise: rescoring must not need one."""
    import autograder.pipeline

    def refuse(*args, **kwargs):
        raise AssertionError("rescore executed a notebook")

    monkeypatch.setattr(autograder.pipeline, "execute_and_measure", refuse)
    monkeypatch.setattr(autograder.pipeline, "grade_notebook", refuse)
    try:
        import autograder.sandbox
    except ImportError:  # no sandbox package: nothing more to guard
        return
    monkeypatch.setattr(autograder.sandbox, "run_submission", refuse, raising=False)


def scores(out):
    return {r["name"]: (r["score"], r["size"], r["drift"], r["status"]) for r in read_gradebook(out)}


def test_rescore_with_stricter_tolerances_changes_scores_without_executing(tmp_path, graded, monkeypatch):
    forbid_execution(monkeypatch)
    before = scores(graded)
    assert before == {
        "alice": ("35", "10", "10", "ok"),
        "bob": ("25", "10", "10", "ok"),
        "carol": ("0", "0", "0", "kernel_died"),
        "dave": ("0", "", "", "grader_error"),
    }
    measurements = (graded / "alice" / "measurements.json").read_bytes()
    strict = tmp_path / "strict.toml"
    strict.write_text(STRICT)

    summary = rescore(graded, options=GradeOptions(tolerances=strict))

    assert scores(graded) == {
        "alice": ("20", "5", "0", "ok"),
        "bob": ("25", "10", "10", "ok"),
        "carol": ("0", "0", "0", "kernel_died"),
        "dave": ("0", "", "", "grader_error"),
    }
    assert summary.graded == 3, "dave has no measurements: nothing to re-judge"
    results = json.loads((graded / "alice" / "results.json").read_text())
    assert results["score"] == 20.0
    assert "0.28" in (graded / "alice" / "feedback.md").read_text()
    assert (graded / "alice" / "measurements.json").read_bytes() == measurements
    assert json.loads((graded / "batch.json").read_text())["tolerances"] == str(strict)

    rescore(graded, calibrated=True)  # back to the assignment's own tolerances
    assert scores(graded) == before


def test_rescore_with_another_rubric(tmp_path, graded, monkeypatch):
    forbid_execution(monkeypatch)
    import tomli_w

    from autograder.assignment import load_toml

    (tmp_path / "base.toml").write_text(RUBRIC_TOML)
    data = load_toml(tmp_path / "base.toml")
    execution = next(c for c in data["checks"] if c["id"] == "execution")
    execution["points"] += 10
    execution["parts"][0]["points"] += 10  # "completed" now weighs 13
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(tomli_w.dumps(data))
    rescore(graded, options=GradeOptions(rubric=rubric))
    book = {r["name"]: r for r in read_gradebook(graded)}
    assert (book["alice"]["score"], book["alice"]["max_score"], book["alice"]["execution"]) == ("45", "45", "15")
    assert (book["carol"]["score"], book["carol"]["execution"]) == ("0", "0")
    assert book["dave"]["max_score"] == "45", "a row without a grade takes the rubric's total"


def test_rescore_refuses_a_broken_tolerances_file_before_touching_anything(tmp_path, graded, monkeypatch):
    forbid_execution(monkeypatch)
    grade = (graded / "alice" / "grade.json").read_bytes()
    for text, why in [
        ("[size\n", "not valid TOML"),
        ("[size]\nratio_mx = 0.3\n", "'size.ratio_mx' is not a tolerance"),
        ("[size]\nratio_max = 'small'\n", "not of the kind"),
        ("size = 0.3\n", "a table of tolerances"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(AssignmentError, match=why):
            rescore(graded, options=GradeOptions(tolerances=bad))
    assert (graded / "alice" / "grade.json").read_bytes() == grade
    assert not (graded / "rescore-diff.csv").exists()
    with pytest.raises(BatchError, match="does not exist"):
        rescore(graded, options=GradeOptions(tolerances=tmp_path / "missing.toml"))


def test_rescore_needs_a_batch_folder(tmp_path):
    with pytest.raises(BatchError, match="batch.json is missing"):
        rescore(tmp_path)


def test_rescore_keeps_unreadable_zeros_and_export_metadata(tmp_path, fake_assignment, exec_log, monkeypatch):
    meta = (
        "submission_1:\n  :submitters:\n  - :name: Ada\n    :sid: '1'\nsubmission_2:\n  :submitters:\n  - :name: Bo\n"
    )
    src = make_export_zip(
        tmp_path / "e.zip", {"submission_1": {"x.ipynb": notebook_json(**GOOD)}, "submission_2": {}}, meta
    )
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=1, progress=False)
    strict = tmp_path / "strict.toml"
    strict.write_text(STRICT)
    forbid_execution(monkeypatch)
    rescore(out, options=GradeOptions(tolerances=strict))
    book = read_gradebook(out)
    assert [(r["name"], r["submitters"], r["sids"], r["score"], r["status"]) for r in book] == [
        ("submission_1", "Ada", "1", "20", "ok"),
        ("submission_2", "Bo", "", "0", "unreadable"),
    ]
    assert "No notebook (.ipynb) found" in book[1]["reason"]


def test_a_later_run_judges_new_submissions_with_the_rescored_tolerances(tmp_path, graded, fake_assignment):
    strict = tmp_path / "strict.toml"
    strict.write_text(STRICT)
    rescore(graded, options=GradeOptions(tolerances=strict))
    write_notebook(tmp_path / "src" / "late.ipynb", **GOOD)  # submitted after the rescore
    run_batch(tmp_path / "src", graded, assignment=fake_assignment, jobs=1, progress=False)
    book = scores(graded)
    assert book["late"] == book["alice"] == ("20", "5", "0", "ok")


def test_rescore_recomputes_the_integrity_report_without_executing(tmp_path, fake_assignment, exec_log, monkeypatch):
    code = (
        "def quantize(x, s, z):\n    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(s)) + z\n"
        "    return np.clip(q, -128, 127).astype(np.int8)\n\nfor k in range(10):\n"
        "    total = sum(v * v for v in range(k)) + k\n    print(k, total, quantize(total, 0.5, 0))\n"
    )
    src = tmp_path / "src"
    for name, text in (("ann", code), ("ben", code.replace("total", "acc")), ("cy", "print('hello')\n")):
        path = write_notebook(src / f"{name}.ipynb", **GOOD)
        nb = json.loads(path.read_text())
        nb["cells"][0]["source"] = text
        path.write_text(json.dumps(nb))
    out = tmp_path / "out"
    summary = run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    assert [(p.a, p.b) for p in summary.integrity.flagged] == [("ann", "ben")]
    first = (out / "integrity.csv").read_text()
    assert first.splitlines()[1].startswith("1,ann,ben,1,1,1,yes,")
    (out / "integrity.csv").unlink()
    forbid_execution(monkeypatch)
    rescored = rescore(out)
    assert (out / "integrity.csv").read_text() == first
    assert rescored.integrity.too_little_code == ["cy"]


# (file, how it is spoiled, the words of the reason): stored files a rescore cannot trust
SPOILED = [
    (
        "measurements.json",
        lambda m: {**m, "execution": {**m["execution"], "status": "exploded"}},
        ["alice/measurements.json", "$.execution.status", "unknown status 'exploded'"],
    ),
    (
        "measurements.json",
        lambda m: {k: v for k, v in m.items() if k != "assignment"},
        ["alice/measurements.json", "$:", "needs assignment"],
    ),
    ("measurements.json", lambda m: {**m, "models": "fast"}, ["alice/measurements.json", "$.models", "a table"]),
    ("measurements.json", lambda m: [m], ["alice/measurements.json", "must be a table"]),
    (
        "execution.json",
        lambda e: {**e, "cells": [{"index": -1, "status": "ok", "duration_s": 0}]},
        ["alice/execution.json", "$.cells[0].index", ">= 0"],
    ),
    (
        "execution.json",
        lambda e: {**e, "isolation": {**e["isolation"], "mode": "vm"}},
        ["alice/execution.json", "$.isolation.mode"],
    ),
    ("execution.json", None, ["alice/execution.json", "not JSON"]),
]


@pytest.mark.parametrize("name, spoil, words", SPOILED, ids=[f"{s[0]}:{' '.join(s[2][1:])}" for s in SPOILED])
def test_rescore_reports_a_submission_whose_stored_files_break_their_schema(graded, monkeypatch, name, spoil, words):
    forbid_execution(monkeypatch)
    path = graded / "alice" / name
    if spoil is None:
        path.write_text("{not json")
    else:
        path.write_text(json.dumps(spoil(json.loads(path.read_text()))))

    summary = rescore(graded)  # the batch goes on: bob and carol are re-judged

    rows = {r["name"]: r for r in summary.rows}
    assert rows["alice"]["status"] == "grader_error" and rows["alice"]["score"] == 0
    for word in words:
        assert word in rows["alice"]["reason"], f"{rows['alice']['reason']!r} should say {word!r}"
    assert (rows["bob"]["status"], rows["bob"]["score"]) == ("ok", 25.0)
    assert rows["carol"]["status"] == "kernel_died"
    book = {r["name"]: r for r in read_gradebook(graded)}
    assert book["alice"]["status"] == "grader_error" and book["bob"]["score"] == "25"


@pytest.mark.parametrize(
    "spoil, words",
    [
        (lambda b: {**b, "submissions": {"alice": {}}}, ["$.submissions", "must be a list"]),
        (lambda b: {**b, "submissions": [{**b["submissions"][0], "name": ""}]}, ["$.submissions[0].name"]),
        (lambda b: {**b, "state": "paused"}, ["$.state", "unknown state 'paused'"]),
        (lambda b: {k: v for k, v in b.items() if k != "assignment"}, ["needs assignment"]),
    ],
)
def test_rescore_refuses_a_batch_file_that_breaks_its_schema_before_touching_anything(
    graded, monkeypatch, spoil, words
):
    forbid_execution(monkeypatch)
    batch_file = graded / "batch.json"
    batch_file.write_text(json.dumps(spoil(json.loads(batch_file.read_text()))))
    grade = (graded / "alice" / "grade.json").read_bytes()
    with pytest.raises(BatchError) as info:
        rescore(graded)
    for word in ["batch.json", *words]:
        assert word in str(info.value)
    assert (graded / "alice" / "grade.json").read_bytes() == grade
    assert not (graded / "rescore-diff.csv").exists()


def test_batch_json_fits_its_schema_after_a_run_and_after_a_rescore(tmp_path, graded):
    from autograder.contracts import validate

    validate("batch", json.loads((graded / "batch.json").read_text()))
    strict = tmp_path / "strict.toml"
    strict.write_text(STRICT)
    rescore(graded, options=GradeOptions(tolerances=strict))
    validate("batch", json.loads((graded / "batch.json").read_text()))
