"""The leak budget (autograder/leak_budget.py, SECURITY.md "The leak budget"): every student-visible
field that depends on hidden data is declared with its bits, the sum per lesson is at most 64, and
no report shows more of a hidden measurement than its declaration allows.

- the table: at most 64 bits per lesson, SECURITY.md's table is the same table, each lesson's
  rubric parts and placeholders that read a hidden measurement are declared;
- the words: a probed call's record keeps its exception's type from a closed list, nothing else;
- the numbers: a hidden measurement reads as its relation to the threshold, fixed fields as their
  words; probability problems are fixed sentences;
- every lesson's examples, graded for real (the ``lessons`` fixture): every number computed from
  hidden data (:data:`~autograder.leak_budget.HIDDEN_MEASUREMENTS`) is moved by a little, keeping
  every part's verdict, and results.json, feedback.md, feedback.html and the console table must
  not change by a character. A new message that shows such a number, or a new hidden measurement
  a message names, fails here.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from autograder import leak_budget
from autograder.assignment import load_assignment
from autograder.judge import judge
from autograder.leak_budget import (
    EXCEPTION_TYPES,
    FIRST_FAILURE,
    FIRST_FAILURE_BITS,
    KINDS,
    MAX_BITS,
    OTHER_EXCEPTION,
    OTHER_FAILURE,
    RUN_PREFIX,
    exception_name,
    lesson_budget,
    run_failure_words,
    shown_as,
)
from autograder.grade_text import placeholders
from autograder.measure import probabilities
from autograder.report.console import grade_table
from autograder.report.feedback import feedback_markdown
from autograder.report.feedback_html import feedback_html
from autograder.report.gradescope_results import results_json
from autograder.sandbox.probe_run import closed_error

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ("03-export-parity", "05-graph-optimization", "06-performance", "07-quantization")


def _budget(lesson: str):
    return lesson_budget(load_assignment(lesson, ROOT).folder)


def _field(budget, path: str):
    return next((f for f in budget.fields if any(_same(p, path) for p in f.paths)), None)


def _same(pattern: str, path: str) -> bool:
    p, q = pattern.split("."), path.split(".")
    return len(p) == len(q) and all(a == "*" or a == b for a, b in zip(p, q))


# ── the table ─────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_lesson_stays_within_the_budget(lesson):
    budget = _budget(lesson)
    assert budget.fields and budget.hidden_measurements, f"{lesson} declares nothing"
    assert budget.total_bits <= MAX_BITS, [(f.name, f.total) for f in budget.fields]
    for f in budget.fields:
        assert f.shown in KINDS, f
        for path in f.paths:  # the lesson counts a path the way the core shows it
            assert shown_as(path) is not None and shown_as(path)[0] == f.shown, (f.name, path, shown_as(path))
        if f.shown == FIRST_FAILURE:
            assert f.count == 1 and f.bits >= FIRST_FAILURE_BITS, f


def test_security_md_mirrors_the_table():
    """SECURITY.md's "The leak budget" has one row per declared field (lesson, field, bits) and
    each lesson's total, the same numbers as the module."""
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    section = text.split("## The leak budget", 1)[1].split("\n## ", 1)[0]
    rows = {
        (m.group(1), m.group(2).strip(), float(m.group(3)))
        for m in re.finditer(r"^\| (\d\d)[^|]*\| ([^|]+?) \| [^|]+ \| [^|]+ \| ([\d.]+) \|$", section, re.M)
    }
    declared = {(lesson[:2], f.name, round(f.total, 1)) for lesson in LESSONS for f in _budget(lesson).fields}
    assert rows == declared, f"missing from SECURITY.md: {declared - rows}; not in the lessons: {rows - declared}"
    for lesson in LESSONS:
        total = _budget(lesson).total_bits
        assert f"**{lesson}: {total:g} bits**" in section, (lesson, total)


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_rubric_path_that_reads_hidden_data_is_declared(lesson):
    """A part's measure or a message's placeholder that holds a number computed from hidden data is
    a declared field (shown as the declaration says), so a new message cannot quote one unnoticed."""
    rubric, budget = load_assignment(lesson, ROOT).rubric(), _budget(lesson)
    undeclared = []
    for check in rubric["checks"]:
        for part in check["parts"]:
            paths = [part["measure"]] + [
                p
                for key in ("message", "hint")
                for p in placeholders(part.get(key, ""))
                if p not in ("measured", "threshold", "op", "name") and not p.startswith("tolerances.")
            ]
            undeclared += [p for p in paths if budget.hidden(p) and (shown_as(p) is None or _field(budget, p) is None)]
    assert not undeclared, f"{lesson}: hidden measurements without a declared field: {undeclared}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_declared_counts_cover_the_rubrics_verdicts(lesson):
    """Each VERDICT field's count is at least the rubric's parts that read one of its paths (one
    pass/fail bit each)."""
    rubric, budget = load_assignment(lesson, ROOT).rubric(), _budget(lesson)
    used: dict[str, int] = {}
    for check in rubric["checks"]:
        for part in check["parts"]:
            f = _field(budget, part["measure"])
            if f is not None and f.shown in (leak_budget.VERDICT, leak_budget.FIXED):
                used[f.name] = used.get(f.name, 0) + 1
    for f in budget.fields:
        assert used.get(f.name, 0) <= f.count, (f.name, used.get(f.name), f.count)


# ── the words ─────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "record, status, shown_type",
    [
        ({"type": "ValueError", "message": "one two dot five", "traceback": "x = 1.25"}, "raised", "ValueError"),
        ({"type": "SpelledOneTwoDotFive", "message": "", "traceback": ""}, "raised", OTHER_EXCEPTION),
        ({"type": "MatMul_Add_Relu", "message": "MatMul Add Relu"}, "raised", OTHER_EXCEPTION),
        ({"type": "ProbeError", "message": "f returned Secret (not JSON-like)"}, "unconvertible", "ProbeError"),
        ({"type": "NameError", "message": "f is missing one two"}, "missing_function", "NameError"),
        (
            {"type": "ProbeError", "message": "f returned X (not JSON-like: a value of type SecretOneTwoDot)"},
            "unconvertible",
            "ProbeError",
        ),
        ("not a dict", "raised", OTHER_EXCEPTION),
    ],
)
def test_a_probed_calls_record_keeps_only_closed_words(record, status, shown_type):
    kept = closed_error(status, record)
    assert kept["type"] == shown_type and kept["traceback"] == ""
    assert kept["message"] in (
        "",
        "returned a value the probe could not convert",
        "the function is not defined",
        "a value of a type defined in the notebook or a library",
    ), kept


def test_the_closed_list_holds_builtins_and_library_errors_only():
    assert {"ValueError", "TypeError", "OverflowError", "ZeroDivisionError", "InvalidArgument"} <= EXCEPTION_TYPES
    assert all(re.fullmatch(r"[A-Za-z_]{2,30}", name) for name in EXCEPTION_TYPES)
    assert exception_name("Leak1000_8125") == OTHER_EXCEPTION and exception_name(None) == OTHER_EXCEPTION
    assert len(EXCEPTION_TYPES) < 128  # under 7 bits


@pytest.mark.parametrize(
    "text, shown",
    [
        (
            f"invalid model: {RUN_PREFIX}: a `Gather` index out of range (INVALID_ARGUMENT)",
            f"invalid model: {RUN_PREFIX} (index out of range)",
        ),
        (f"{RUN_PREFIX}: a `Reshape` shape mismatch (INVALID_ARGUMENT); more", f"{RUN_PREFIX} (shape mismatch); more"),
        (f"{RUN_PREFIX}: a Python ValueError", f"{RUN_PREFIX} (error)"),
        (f"{RUN_PREFIX}: an error (FAIL)", f"{RUN_PREFIX} (error)"),
        ("no run failure here", "no run failure here"),
    ],
)
def test_a_run_failure_reads_as_its_category(text, shown):
    assert run_failure_words(text) == shown


# ── the numbers ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "p",
    [
        np.array([[-2.25, 2.245], [0.5, 0.5]], np.float32),
        np.array([[0.3, 0.3], [0.1, 0.1]], np.float32),
        np.array([[np.nan, 1.0]], np.float32),
        np.array([[1e6 * 1.2345, 0.0]], np.float32),
    ],
)
def test_probability_problems_are_fixed_sentences(p):
    problems = probabilities.probability_problems(p)
    assert problems and set(problems) <= {
        probabilities.NOT_FINITE,
        probabilities.OUT_OF_RANGE,
        probabilities.ROWS_NOT_ONE,
    }


def _lesson07():
    a = load_assignment("07-quantization", ROOT)
    return a.rubric(), a.tolerances()


def _part(grade, check_id, measure):
    check = next(c for c in grade["checks"] if c["id"] == check_id)
    return next(p for p in check["parts"] if p["measure"] == measure)


def test_a_hidden_measurement_reads_as_its_verdict_and_a_fixed_field_as_its_words():
    rubric, tolerances = _lesson07()
    m = {
        "assignment": {"id": "07-quantization"},
        "models": {
            "fp32": {"accuracy": 0.4321, "interface_ok": True, "valid": True, "classification": "fp32"},
            "int8_qdq": {
                "calibration": {"coverage": 0.6789, "data_range": [-1.288, 2.393], "input_range": [[-1.0, 1.0]]}
            },
        },
    }
    grade = judge(rubric, tolerances, m)
    acc = _part(grade, "fp32_model", "models.fp32.accuracy")
    assert acc["measured_text"].startswith("not ≥ ") and "43" not in acc["message"], acc
    cov = _part(grade, "static_model", "models.int8_qdq.calibration.coverage")
    assert "67.9" not in cov["message"] and "1.288" not in cov["message"] and "2.393" not in cov["message"], cov


def test_only_the_first_failing_group_is_described():
    rubric, tolerances = _lesson07()
    groups = {
        g: {"cases": 4, "agree": 2, "agree_share": 0.5, "raised": 2, "failure": f"raised ValueError ({g})"}
        for g in ("ties", "saturation")
    }
    m = {"assignment": {"id": "07-quantization"}, "functions": {"quantize": {"defined": True, "groups": groups}}}
    grade = judge(rubric, tolerances, m)
    messages = [p["message"] for p in next(c for c in grade["checks"] if c["id"] == "quantize")["parts"][:2]]
    assert "raised ValueError (ties)" in messages[0] and OTHER_FAILURE in messages[1], messages
    assert all("2 of 4" not in s and "50" not in s for s in messages), messages


# ── every lesson's examples, graded for real ──────────────────────────────────────────────────


def _leaves(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, f"{path}.{i}")
    else:
        yield path, node


def _set(node, path, value):
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _moved(value, sign):
    """A number moved enough to change any rendering of it (3 significant digits and more)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if isinstance(value, int):
        return value + sign
    return value * (1 + sign * 0.013) + sign * 0.0137


def _student_texts(grade, measurements) -> str:
    md = feedback_markdown(grade, measurements)
    console = Console(record=True, width=240, color_system=None)
    console.print(grade_table(grade))
    return "\n".join(
        [
            json.dumps(results_json(grade, None), ensure_ascii=False, sort_keys=True),
            md,
            feedback_html(md, None),
            console.export_text(),
        ]
    )


def _verdicts(grade):
    return [[p["passed"] for p in c["parts"]] for c in grade["checks"]]


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.parametrize("lesson_id", LESSONS)
def test_no_report_shows_more_of_a_hidden_measurement_than_its_verdict(lessons, lesson_id):
    """For every graded example, each number computed from hidden data, moved so that no part's
    verdict changes, leaves every student-visible rendering as it was."""
    lesson = lessons(ROOT, lesson_id)
    rubric, tolerances = lesson.assignment.rubric(), lesson.assignment.tolerances()
    budget = lesson_budget(lesson.assignment.folder)
    moved_any = 0
    shown = []
    for name, g in sorted(lesson.graded.items()):
        m = g.measurements
        if not m:
            continue
        base = judge(rubric, tolerances, m)
        before = _student_texts(base, m)
        for path, value in _leaves(m):
            if not budget.hidden(path):
                continue
            for sign in (1, -1):
                new = _moved(value, sign)
                if new is None:
                    break
                m2 = copy.deepcopy(m)
                _set(m2, path, new)
                grade = judge(rubric, tolerances, m2)
                if _verdicts(grade) != _verdicts(base):
                    continue  # this move crosses a threshold: the other direction
                moved_any += 1
                if _student_texts(grade, m2) != before:
                    shown.append(f"{name}: {path} = {value!r}")
                break
    assert moved_any, f"{lesson_id}: no hidden measurement in any example"
    assert not shown, f"{lesson_id}: hidden measurements readable in the reports: {shown[:20]}"


def test_a_message_that_asks_for_a_hidden_number_in_any_format_does_not_get_it():
    """A rubric author who writes ``{models.fp32.accuracy:percent}`` in another part's message still
    shows no number: the formatter honours the declaration, not the template."""
    rubric, tolerances = _lesson07()
    rubric = copy.deepcopy(rubric)
    check = next(c for c in rubric["checks"] if c["id"] == "fp32_model")
    part = next(p for p in check["parts"] if p["measure"] == "models.fp32.accuracy")
    part["message"] = "accuracy {models.fp32.accuracy:percent} ({measured:float3}), drop {measured:int}"
    m = {"assignment": {"id": "07-quantization"}, "models": {"fp32": {"accuracy": 0.4321, "valid": True}}}
    shown = _part(judge(rubric, tolerances, m), "fp32_model", "models.fp32.accuracy")["message"]
    assert "a value measured on hidden data" in shown and "not ≥" in shown, shown
    assert not re.search(r"43|0\.432", shown), shown
