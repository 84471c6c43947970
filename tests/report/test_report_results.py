"""results.json: valid against Gradescope's documented format, one tagged test per check, hidden
checks counted but never named in the student-wide output, and written atomically."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
from judge_report_fixtures import (
    HIDDEN_IDS,
    HIDDEN_TITLES,
    MEASUREMENTS,
    RUBRIC,
    SECRET_HINT,
    TOLERANCES,
    failing_measurements,
    with_values,
)

from autograder.judge import judge
from autograder.report import failure_results_json, results_json
from autograder.safe_files import write_json_atomic

SCHEMA_PATH = os.path.join(
    os.path.dirname(__file__), "..", "..", "autograder", "schemas", "gradescope_results.schema.json"
)


def zero_measurements():
    """Nothing could be measured: the kernel died before the first cell finished."""
    died = "the kernel died in cell 2 (out of memory?)"
    return with_values(
        MEASUREMENTS,
        functions={"error": died},
        models={"error": died},
        reported={"error": died},
        execution={
            **MEASUREMENTS["execution"],
            "status": "kernel_died",
            "reason": died,
            "cells_run": 2,
            "cells_errored": 1,
            "completed": False,
            "probe": "not_run",
        },
    )


@pytest.fixture
def schema_validator():
    with open(SCHEMA_PATH) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# ── valid against the schema ────────────────────────────────────────────────────────────────


def test_results_full_grade_is_valid(results_validator):
    grade = judge(RUBRIC, TOLERANCES, MEASUREMENTS)
    results = results_json(grade, MEASUREMENTS, execution_time=15.6)
    results_validator(results)
    assert results["score"] == 60.0
    assert results["execution_time"] == 16 and isinstance(results["execution_time"], int)
    assert all(t["status"] == "passed" for t in results["tests"])
    json.dumps(results, allow_nan=False)


def test_results_zero_grade_is_valid(results_validator):
    measurements = zero_measurements()
    grade = judge(RUBRIC, TOLERANCES, measurements)
    results = results_json(grade, measurements, execution_time=None)
    results_validator(results)
    assert results["score"] == 0.0 and grade["score"] == 0.0
    assert "execution_time" not in results
    assert all(t["status"] == "failed" and t["score"] == 0 for t in results["tests"])
    assert "kernel died" in results["output"] and "2 of 23 code cells ran" in results["output"]


def test_results_partial_grade_is_valid_and_matches_the_grade(results_validator):
    measurements = failing_measurements()
    grade = judge(RUBRIC, TOLERANCES, measurements)
    results = results_json(grade, measurements, execution_time=3)
    results_validator(results)
    assert results["score"] == grade["score"] == 25.0
    by_tag = {t["tags"][0]: t for t in results["tests"]}
    for c in grade["checks"]:
        test = by_tag[c["id"]]
        assert (test["score"], test["max_score"]) == (c["score"], c["max_score"])
        assert test["status"] == ("passed" if c["passed"] else "failed")
        assert test["visibility"] == c["visibility"]
        assert test["name"] == c["title"]
        assert test["output_format"] == "md"


def test_results_failure_result_is_valid(results_validator):
    results = failure_results_json(
        "the notebook is not valid JSON (line 3, column 1)", extra={"submission": "sub_17"}, execution_time=0.2
    )
    results_validator(results)
    assert results["score"] == 0.0
    assert "could not be graded" in results["output"] and "not valid JSON" in results["output"]
    assert results["tests"][0]["status"] == "failed" and results["tests"][0]["tags"] == ["grading_failed"]
    assert results["extra_data"]["submission"] == "sub_17"
    assert results["extra_data"]["failure"].startswith("the notebook is not valid JSON")


def test_results_failure_reason_cannot_inject_html(results_validator):
    results = failure_results_json("<script>alert(1)</script>")
    results_validator(results)
    shown = [results["output"]] + [t["output"] for t in results["tests"]]
    assert all("<script>" not in text for text in shown) and "&lt;script&gt;" in results["output"]
    assert results["extra_data"]["failure"] == "<script>alert(1)</script>"  # raw, for instructors only


# ── content ─────────────────────────────────────────────────────────────────────────────────────


def test_results_tags_carry_the_check_ids_in_rubric_order():
    results = results_json(judge(RUBRIC, TOLERANCES, MEASUREMENTS), MEASUREMENTS)
    assert [t["tags"] for t in results["tests"]] == [[c["id"]] for c in RUBRIC["checks"]]
    assert [t["number"] for t in results["tests"]] == [str(i) for i in range(1, len(RUBRIC["checks"]) + 1)]


def test_results_output_counts_hidden_failures_without_naming_them():
    measurements = failing_measurements()
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    output = results["output"]
    assert "2 more checks are not shown here" in output
    assert "Score" not in output and "25" not in output and "1 of 2" not in output
    for secret in (*HIDDEN_IDS, *HIDDEN_TITLES, SECRET_HINT, "95.0%", "calibration"):
        assert secret not in output, f"the top-level output leaks {secret!r}"


def test_results_hidden_tests_keep_their_visibility_and_details_for_instructors():
    measurements = failing_measurements()
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    by_tag = {t["tags"][0]: t for t in results["tests"]}
    assert by_tag["static_model"]["visibility"] == "hidden"
    assert by_tag["reported_results"]["visibility"] == "after_due_date"
    assert "int8_qdq.onnx is missing" in by_tag["static_model"]["output"]


def test_results_test_output_shows_parts_measured_threshold_and_hint_for_failures():
    measurements = failing_measurements()
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    output = next(t for t in results["tests"] if t["tags"] == ["dynamic_model"])["output"]
    assert "✗ **accuracy drop** (0 / 5): measured `3.1%`, expected ≤ `1.2%`" in output
    assert "**Hint:** quantize the fp32 model you trained" in output
    assert "✓ **really dynamically quantized** (5 / 5)" in output
    assert "DynamicQuantizeLinear" not in output  # a passed part's hint is not shown


def test_results_output_reports_the_first_error_and_disarms_its_html():
    measurements = failing_measurements()
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    line = next(ln for ln in results["output"].splitlines() if "ValueError" in ln)
    assert line.startswith("- Code cell 6 (cell 12 of the notebook) raised")
    assert "`ValueError: operands could not be broadcast <b>together</b>`" in line  # inside a code span


@pytest.mark.parametrize(
    "status, reason, words",
    [
        ("timeout", "timed out after 600 s", ["ran out of time", "timed out after 600 s", "cells ran"]),
        ("kernel_died", "the kernel died in cell 7", ["kernel died", "cell 7"]),
        ("sandbox_error", "bwrap failed", ["not in your work"]),
    ],
)
def test_results_output_explains_how_execution_ended(status, reason, words):
    measurements = with_values(
        MEASUREMENTS,
        execution={**MEASUREMENTS["execution"], "status": status, "reason": reason, "cells_run": 9, "completed": False},
    )
    output = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)["output"]
    for word in words:
        assert word in output


def test_results_extra_data_records_versions_isolation_and_execution():
    results = results_json(
        judge(RUBRIC, TOLERANCES, MEASUREMENTS), MEASUREMENTS, extra={"submission": "s1", "cache": "hit"}
    )
    extra = results["extra_data"]
    assert extra["environment"]["onnxruntime"] == "1.32.0"
    assert extra["isolation"]["layers"][:2] == ["uid:autograder-sb0", "bwrap"]
    assert extra["execution"]["status"] == "completed" and "isolation" not in extra["execution"]
    assert extra["checks"]["size"] == {"score": 10.0, "max_score": 10.0, "passed": True}
    assert (extra["submission"], extra["cache"]) == ("s1", "hit")


def test_results_without_measurements_still_valid(results_validator):
    results = results_json(judge(RUBRIC, TOLERANCES, MEASUREMENTS), None)
    results_validator(results)
    assert "Running your notebook" not in results["output"]


def test_results_are_plain_json_even_with_nan_and_numpy(results_validator):
    np = pytest.importorskip("numpy")
    measurements = with_values(
        MEASUREMENTS,
        models__int8_dynamic__accuracy_drop=float("nan"),
        environment={"cpu_flags": np.array(["avx2"]), "threads": np.int64(1), "ratio": float("inf")},
    )
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    results_validator(results)
    text = json.dumps(results, allow_nan=False)
    assert results["extra_data"]["environment"] == {"cpu_flags": ["avx2"], "threads": 1, "ratio": "inf"}
    assert "`nan`" in text


def test_results_long_output_is_capped():
    measurements = failing_measurements()
    measurements["execution"]["first_error"]["evalue"] = "x" * 100_000
    results = results_json(judge(RUBRIC, TOLERANCES, measurements), measurements)
    assert len(results["output"]) < 5_000 and "x" * 200 in results["output"]


# ── the schema itself rejects what Gradescope's format does not allow ──────────────────────────

VALID = {
    "score": 1.0,
    "tests": [
        {
            "name": "t",
            "score": 1.0,
            "max_score": 1.0,
            "status": "passed",
            "visibility": "visible",
            "tags": ["t"],
            "output_format": "md",
        }
    ],
}


@pytest.mark.parametrize(
    "change",
    [
        {"visibility": "secret"},
        {"output_format": "markdown"},
        {"stdout_visibility": "always"},
        {"execution_time": -1},
        {"score": "full"},
        {"visiblity": "hidden"},  # a typo of a documented key
        {"leaderboard": [{"name": "Accuracy"}]},
        {"leaderboard": [{"name": "Time", "value": 1.0, "order": "ascending"}]},
    ],
    ids=lambda c: next(iter(c)),
)
def test_schema_rejects_bad_top_level(schema_validator, change):
    assert schema_validator.is_valid(VALID)
    assert not schema_validator.is_valid({**VALID, **change})


@pytest.mark.parametrize(
    "change",
    [
        {"visibility": "students"},
        {"status": "error"},
        {"output_format": "markdown"},
        {"tags": "t"},
        {"number": 1},
        {"max_score": -1},
        {"extra_data": []},
        {"points": 1},
    ],
    ids=lambda c: next(iter(c)),
)
def test_schema_rejects_bad_test(schema_validator, change):
    bad = {**VALID, "tests": [{**VALID["tests"][0], **change}]}
    assert not schema_validator.is_valid(bad)


def test_schema_needs_a_score_somewhere(schema_validator):
    test_without_score = {k: v for k, v in VALID["tests"][0].items() if k != "score"}
    assert schema_validator.is_valid({"tests": [VALID["tests"][0]]})  # every test has one
    assert not schema_validator.is_valid({"tests": [test_without_score]})  # nobody has one
    assert schema_validator.is_valid({"score": 0, "tests": [test_without_score]})
    assert not schema_validator.is_valid({})


def test_schema_accepts_the_documented_example(schema_validator):
    example = {
        "score": 44.0,
        "execution_time": 136,
        "output": "Text relevant to the entire submission",
        "output_format": "simple_format",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "after_due_date",
        "stdout_visibility": "visible",
        "extra_data": {},
        "tests": [
            {
                "score": 2.0,
                "max_score": 2.0,
                "status": "passed",
                "name": "Your name here",
                "name_format": "text",
                "number": "1.1",
                "output": "Giant multiline string",
                "output_format": "text",
                "tags": ["tag1", "tag2", "tag3"],
                "visibility": "visible",
                "extra_data": {},
            }
        ],
        "leaderboard": [
            {"name": "Accuracy", "value": 0.926},
            {"name": "Time", "value": 15.1, "order": "asc"},
            {"name": "Stars", "value": "*****"},
        ],
    }
    assert schema_validator.is_valid(example), list(schema_validator.iter_errors(example))


# ── writing ─────────────────────────────────────────────────────────────────────────────────────


def test_write_json_atomic_writes_and_replaces(tmp_path):
    target = tmp_path / "out" / "results.json"
    write_json_atomic(target, {"score": 1.0, "x": float("nan")})
    assert json.loads(target.read_text()) == {"score": 1.0, "x": "nan"}
    write_json_atomic(target, {"score": 2.0})
    assert json.loads(target.read_text()) == {"score": 2.0}
    assert target.read_text().endswith("}\n") and "\r" not in target.read_text()
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]


def test_write_json_atomic_keeps_the_old_file_when_replacing_fails(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    write_json_atomic(target, {"score": 1.0})

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(target, {"score": 2.0})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"score": 1.0}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left behind


def test_write_json_atomic_keeps_a_replaced_files_permissions(tmp_path):
    target = tmp_path / "results.json"
    write_json_atomic(target, {"score": 1.0})
    os.chmod(target, 0o600)
    write_json_atomic(target, {"score": 2.0})
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert json.loads(target.read_text()) == {"score": 2.0}
