"""Tolerance overrides as data, the rescore diff, partial batches and version drift (fake stages)."""

from __future__ import annotations

import csv
import json

import pytest
from batchkit import GOOD, write_notebook

from autograder.grade_options import GradeOptions
from autograder.batch import rescore, run_batch
from autograder.batch.run import PartialBatchError
from autograder.tolerances import file_sha256, merge_tolerances


@pytest.fixture
def graded(tmp_path, fake_assignment, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "alice.ipynb", **GOOD)  # static size 0.30
    write_notebook(src / "bob.ipynb", agree=0.5, dyn=(0.25, 0.02), qdq=(0.26, 0.02))
    write_notebook(src / "carol.ipynb", **{**GOOD, "qdq": (0.33, 0.05)})
    out = tmp_path / "out"
    run_batch(src, out, assignment=fake_assignment, jobs=2, progress=False)
    return out


def diff_rows(out):
    with open(out / "rescore-diff.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_partial_override_changes_only_its_keys_and_is_recorded_everywhere(tmp_path, graded):
    override = tmp_path / "size-only.toml"
    override.write_text("[size]\nratio_max = 0.28\n")  # drift and functions keep their values
    summary = rescore(graded, options=GradeOptions(tolerances=override))

    changed = {"size.ratio_max": {"calibrated": 0.35, "value": 0.28}}
    grade = json.loads((graded / "alice" / "grade.json").read_text())
    assert grade["tolerances"]["override"] == {
        "path": str(override),
        "sha256": file_sha256(override),
        "changed": changed,
    }
    assert grade["tolerances"]["values"] == {
        "functions.agree_share_min": 1.0,
        "size.ratio_max": 0.28,
        "drift.max_abs_dp_max": 0.10,
    }
    results = json.loads((graded / "alice" / "results.json").read_text())
    shown = results["extra_data"]["tolerances"]  # the student's copy: file names, not the grader's paths
    assert shown["values"] == grade["tolerances"]["values"]
    assert shown["override"] == {**grade["tolerances"]["override"], "path": override.name}
    assert shown["calibrated"]["path"] == "tolerances.toml" and str(graded.parent) not in json.dumps(results)
    batch = json.loads((graded / "batch.json").read_text())
    assert batch["tolerances_used"]["override"]["changed"] == changed
    page = (graded / "summary.html").read_text()
    tolerances = page.split("<h2>Tolerances used</h2>")[1].split("</section>")[0]
    assert str(override) in tolerances and "size.ratio_max" in tolerances and "0.28" in tolerances
    assert {c["name"] for c in summary.diff} == {"alice", "carol"}


def test_rescore_writes_the_scores_that_changed_with_the_checks_that_moved(tmp_path, graded):
    override = tmp_path / "strict.toml"
    override.write_text("[size]\nratio_max = 0.28\n[drift]\nmax_abs_dp_max = 0.03\n")
    rescore(graded, options=GradeOptions(tolerances=override))
    rows = diff_rows(graded)
    assert [(r["name"], r["old_score"], r["new_score"], r["change"]) for r in rows] == [
        ("alice", "35", "20", "-15"),
        ("carol", "35", "20", "-15"),
    ]
    assert rows[0]["checks_moved"] == "size 10 → 5; drift 10 → 0"
    rescore(graded)  # the override is kept: nothing changes
    assert diff_rows(graded) == [] and (graded / "rescore-diff.csv").read_text().startswith("name,")
    rescore(graded, calibrated=True)  # back: the same changes, reversed
    assert [(r["name"], r["change"]) for r in diff_rows(graded)] == [("alice", "15"), ("carol", "15")]


@pytest.mark.parametrize(
    "steps",
    [
        # (tolerances given, calibrated) per rescore → the override expected to judge afterwards
        [("strict", False), (None, False), (None, False)],
        [("strict", False), ("loose", False), (None, False)],
        [("strict", False), (None, True), (None, False)],
        [(None, False), ("loose", False), (None, False), (None, True)],
    ],
    ids=["kept-twice", "replaced-then-kept", "calibrated-then-kept", "given-late-then-back"],
)
def test_a_plain_rescore_keeps_the_last_override_until_told_to_go_back(tmp_path, graded, steps):
    files = {"strict": tmp_path / "strict.toml", "loose": tmp_path / "loose.toml"}
    files["strict"].write_text("[size]\nratio_max = 0.28\n")
    files["loose"].write_text("[size]\nratio_max = 0.40\n")
    expected = None
    for given, calibrated in steps:
        summary = rescore(
            graded, options=GradeOptions(tolerances=files[given] if given else None), calibrated=calibrated
        )
        expected = files[given] if given else None if calibrated else expected
        how = "given" if given else "calibrated" if expected is None else "kept"
        batch = json.loads((graded / "batch.json").read_text())
        grade = json.loads((graded / "alice" / "grade.json").read_text())
        recorded = grade["tolerances"]["override"]
        assert (recorded or {}).get("path") == (str(expected) if expected else None), (given, calibrated)
        assert batch["tolerances"] == str(expected or "") and batch["tolerances_used"]["chosen"] == how
        assert summary.grading_note == batch["tolerances_used"]["note"] and "\n" not in summary.grading_note
        if expected is None:
            assert "calibrated" in summary.grading_note and "override " not in summary.grading_note
        else:
            assert str(expected) in summary.grading_note and "size.ratio_max 0.35 →" in summary.grading_note
            assert ("--calibrated" in summary.grading_note) == (how == "kept")


def test_a_kept_override_that_is_gone_is_an_error_not_a_silent_return(tmp_path, graded, fake_assignment):
    from autograder.batch.grading_files import GradingFilesError

    strict = tmp_path / "strict.toml"
    strict.write_text("[size]\nratio_max = 0.28\n")
    rescore(graded, options=GradeOptions(tolerances=strict))
    strict.unlink()
    before = (graded / "gradebook.csv").read_bytes()
    for again in (
        lambda: rescore(graded),
        lambda: run_batch(tmp_path / "src", graded, assignment=fake_assignment, jobs=1, progress=False),
    ):
        with pytest.raises(GradingFilesError, match=r"strict.toml.*is gone.*--tolerances.*--calibrated"):
            again()
    assert (graded / "gradebook.csv").read_bytes() == before
    with pytest.raises(GradingFilesError, match="give one of them"):
        rescore(graded, options=GradeOptions(tolerances=tmp_path / "other.toml"), calibrated=True)
    assert rescore(graded, calibrated=True).diff, "the calibrated values judge again"


def test_rescore_of_an_unfinished_batch_refuses_unless_partial(tmp_path, graded):
    for name in ("bob", "carol"):  # as if the batch was stopped before them
        (graded / name / "submission.json").unlink()
    before = (graded / "gradebook.csv").read_bytes()
    with pytest.raises(PartialBatchError, match=r"2 of 3 submissions .* are not graded yet.*--partial"):
        rescore(graded)
    assert (graded / "gradebook.csv").read_bytes() == before and not (graded / "rescore-diff.csv").exists()
    summary = rescore(graded, partial=True)
    assert summary.ungraded == 2 and summary.graded == 1
    statuses = {r["name"]: r["status"] for r in summary.rows}
    assert statuses == {"alice": "ok", "bob": "not_graded", "carol": "not_graded"}


def test_version_drift_is_a_warning_everywhere_and_never_changes_a_score(
    tmp_path, fake_root, fake_assignment, exec_log
):
    from autograder.environment import environment_versions

    src = tmp_path / "src"
    write_notebook(src / "alice.ipynb", **GOOD)
    plain = run_batch(src, tmp_path / "plain", assignment=fake_assignment, jobs=1, progress=False)
    assert plain.version_drift == []
    tolerances = fake_assignment.tolerances_path
    tolerances.write_text(
        '[provenance]\nversions = {onnxruntime = "0.0.1", numpy = "%s"}\n' % environment_versions()["numpy"]
        + tolerances.read_text()
    )
    drifted = run_batch(src, tmp_path / "drift", assignment=fake_assignment, jobs=1, progress=False)
    assert len(drifted.version_drift) == 1 and "onnxruntime" in drifted.version_drift[0]
    assert "0.0.1" in drifted.version_drift[0] and "numpy" not in drifted.version_drift[0]
    results = json.loads((tmp_path / "drift" / "alice" / "results.json").read_text())
    assert results["extra_data"]["version_drift"] == drifted.version_drift
    assert results["score"] == json.loads((tmp_path / "plain" / "alice" / "results.json").read_text())["score"]
    attention = (tmp_path / "drift" / "summary.html").read_text().split("<h2>Needs attention</h2>")[1]
    assert "version drift" in attention.split("</section>")[0]


def test_merge_refuses_unknown_keys_and_keeps_the_calibration_fields():
    calibrated = {
        "provenance": {"versions": {}},
        "size": {"a_max": {"value": 0.3, "worst": 0.2, "rule": "r"}, "b_max": 0.4},
    }
    merged = merge_tolerances(calibrated, {"size": {"a_max": 0.5}, "provenance": {"ignored": 1}}, source="o.toml")
    assert merged["size"]["a_max"] == {
        "value": 0.5,
        "worst": 0.2,
        "rule": "r",
        "calibrated_value": 0.3,
        "overridden": True,
    }
    assert merged["size"]["b_max"] == 0.4 and "ignored" not in merged["provenance"]
    assert calibrated["size"]["a_max"]["value"] == 0.3, "the calibrated dict is not mutated"
    from autograder.errors import AssignmentError

    with pytest.raises(AssignmentError, match="'size.c_max' is not a tolerance"):
        merge_tolerances(calibrated, {"size": {"c_max": 1.0}})


def test_the_calibrated_files_header_points_to_override_files_and_its_example_works(tmp_path):
    from autograder.assignment import load_assignment

    a07 = load_assignment("07-quantization")
    header = [line for line in a07.tolerances_path.read_text().splitlines() if line.startswith("#")]
    assert any("Do not edit by hand" in line for line in header)
    assert any("override file" in line for line in header) and any("--tolerances" in line for line in header)
    override = tmp_path / "o.toml"
    override.write_text("[size]\ndynamic_ratio_max = 0.40\n")
    merged = a07.tolerances(override)
    assert merged["size"]["dynamic_ratio_max"]["value"] == 0.40
    assert merged["size"]["static_ratio_max"] == a07.tolerances()["size"]["static_ratio_max"]
