"""Authoring mistakes are caught when the lesson is built, not at the end of ``calibrate`` or in a
student's grade: every rubric text is rendered by ``build --check`` (and the conformance check
``rubric_texts_render``), a lesson never calibrated says so in one line naming ``autograder
calibrate <id>`` at build, grade and demo time, and ``autograder check-assignment ID --quick`` runs
the package's checks, one line each. None of these starts a kernel: ``build --check`` renders the
texts before its reference run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autograder.authoring.build import rubric_text_problems
from autograder.authoring.conformance import CHECKS
from autograder.authoring.scaffold import new_assignment
from autograder.cli import app
from autograder.grade_text import render

ROOT = Path(__file__).resolve().parents[2]
ID = "09-softmax"
CODE = ("autograder", "gradescope", "pyproject.toml", "README.md", "constraints.txt")  # what the zip packs
RUBRIC_FILE = Path("rubric.toml")
MEASUREMENTS = {
    "models": {"model": {"max_abs_diff": 1e-7, "problems": [], "note": None}},
    "execution": {"reason": "ran", "completed": True},
}


def rubric(**part_texts: str) -> dict:
    """A one-check rubric whose part carries ``part_texts`` (message, hint, expected)."""
    part = {"name": "close", "measure": "models.model.max_abs_diff", "op": "<=", "tolerance": "model.max", "points": 1}
    return {"checks": [{"id": "model", "points": 1, "parts": [{**part, **part_texts}]}]}


# ── each kind of broken text, named by check, part, field and problem ─────────────────────────

BROKEN = [  # (field, text, the problem's words; None: renders as meant)
    ("hint", "wrap the model in { and export it", "a lone brace"),
    ("hint", "a closing } alone", "a lone brace"),
    ("message", "{measured:pct} of the rows", "unknown format ':pct'"),
    ("message", "allowed {tolerances.model.maximum}", "unknown placeholder {tolerances.model.maximum}"),
    ("message", "{execution.reasons}", "unknown placeholder {execution.reasons}: not a field of measurements.json"),
    ("message", "off by {models.model.max_abs_dif}", "unknown placeholder {models.model.max_abs_dif}: not in the"),
    ("message", "{model.max_abs_diff}", "unknown placeholder {model.max_abs_diff}: not in the"),
    ("expected", "at most {threshold}", "is shown as written, not rendered"),
    ("hint", "a set is written {{1, 2}}", None),
    ("message", "{measured:percent} of {name}, allowed {tolerances.model.max}", None),
    ("message", "off by {models.model.max_abs_diff:auto}; {models.model.problems}", None),
    ("message", "{models.model.note}", None),  # present, null in this run: a student's may fill it
    ("message", "{models.model.note.where}", None),  # below a null: a table in a student's run, maybe
    ("message", "{models.model.notes.where}", "unknown placeholder {models.model.notes.where}: not in the"),
    ("message", "{execution.reason}", None),
    ("expected", "rows of X_train", None),
]


@pytest.mark.parametrize("field, text, problem", BROKEN, ids=[f"{f}:{t}" for f, t, _ in BROKEN])
def test_each_broken_rubric_text_is_named_with_its_check_part_and_field(field, text, problem):
    found = [str(p) for p in rubric_text_problems(rubric(**{field: text}), MEASUREMENTS, RUBRIC_FILE)]
    if problem is None:
        assert found == []
        return
    assert len(found) == 1, found
    assert found[0].startswith(f"{RUBRIC_FILE}: check 'model', part 'close' {field}: "), found
    assert problem in found[0], found


def test_without_a_run_only_the_lessons_own_paths_go_unchecked():
    """Before any run (the quick conformance check, ``build --check`` before its reference run):
    syntax, formats, the part's fields, tolerances and the core's sections are checked; a path
    into the lesson's own sections needs the reference run."""
    assert rubric_text_problems(rubric(message="{models.model.max_abs_dif}"), None, RUBRIC_FILE) == []
    assert rubric_text_problems(rubric(hint="a {"), None, RUBRIC_FILE)
    assert rubric_text_problems(rubric(message="{execution.reasons}"), None, RUBRIC_FILE)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="{}:ab. ", max_size=30))
def test_a_text_with_no_problem_renders_with_no_stray_brace(text):
    """Whatever an author types: either its problem is named, or the judge's renderer turns it into
    a text whose every brace was written doubled."""
    problems = rubric_text_problems(rubric(hint=text), MEASUREMENTS, RUBRIC_FILE)
    if problems:
        return
    fields = {"measured": "1", "threshold": "2", "op": "≤", "name": "close"}
    shown = render(text, fields, {}, MEASUREMENTS, {"model": {"max": 1.0}})
    assert shown.count("{") <= text.count("{{") and shown.count("}") <= text.count("}}"), (text, shown)


# ── the command line on a scaffolded lesson (no kernel) ──────────────────────────────────────


def project(tmp: Path) -> Path:
    """A project root holding only a scaffolded lesson, building zips from this checkout's code."""
    (tmp / "assignments").mkdir(parents=True)
    for name in CODE:
        (tmp / name).symlink_to(ROOT / name)
    new_assignment(ID, tmp)
    return tmp


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory) -> Path:
    return project(tmp_path_factory.mktemp("authoring-errors"))


@pytest.fixture
def root(scaffolded, tmp_path) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(scaffolded, copy, symlinks=True)
    return copy


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def invoke(root: Path, *args: str):
    return CliRunner().invoke(app, list(args), env={"AUTOGRADER_ROOT": str(root)})


def test_build_check_fails_on_a_lone_brace_in_a_hint_before_running_anything(root):
    rubric_path = root / "assignments" / ID / "rubric.toml"
    edit(rubric_path, "then divide each row by its sum;", "then divide each row by its sum {;")
    result = invoke(root, "build", ID, "--check")
    assert result.exit_code == 1, result.output
    assert f"{rubric_path}: check 'softmax', part 'ordinary rows' hint: a lone brace" in result.output
    assert "every rubric path" not in result.output, "it stopped before the reference run"


def test_a_lesson_never_calibrated_says_so_in_one_line_at_build_grade_and_demo(root, tmp_path):
    edit(root / "assignments" / ID / "rubric.toml", "  value = 1e-5\n", '  tolerance = "model.max_abs_diff_max"\n')
    line = re.compile(
        rf"assignment '{ID}': tolerance 'model.max_abs_diff_max' is not a value in \S+tolerances.toml "
        rf"\(not calibrated since the rubric named it\): run `autograder calibrate {ID}`"
    )
    built = invoke(root, "build", ID)
    assert built.exit_code == 0 and line.search(built.output), built.output
    notebook = root / "reference" / ID / "solution.ipynb"
    graded = invoke(root, "grade", str(notebook), "--assignment", ID, "--out", str(tmp_path / "g"))
    assert graded.exit_code == 2 and line.search(graded.output), graded.output
    demo = invoke(root, "demo", "--assignment", ID, "--out", str(tmp_path / "d"))
    assert demo.exit_code != 0 and line.search(demo.output), demo.output
    (root / "reference" / ID / "tolerances.toml").unlink()
    graded = invoke(root, "grade", str(notebook), "--assignment", ID, "--out", str(tmp_path / "g2"))
    assert graded.exit_code == 2, graded.output
    assert f"assignment '{ID}' was never calibrated (" in graded.output
    assert f"run `autograder calibrate {ID}`" in graded.output


def test_check_assignment_quick_prints_a_line_per_check_and_fails_on_one(root):
    ok = invoke(root, "check-assignment", ID, "--quick")
    quick = [c for c in CHECKS if not c.graded]
    assert ok.exit_code == 0, ok.output
    assert [line for line in ok.output.splitlines() if line.startswith("passed")] == [
        f"passed  {c.short}" for c in quick
    ]
    edit(root / "reference" / ID / "expected_examples.toml", 'loses = "softmax"', 'loses = "softmx"')
    edit(root / "assignments" / ID / "rubric.toml", "allowed {threshold}", "allowed {tolerances.model.max}")
    bad = invoke(root, "check-assignment", ID, "--quick")
    assert bad.exit_code == 1, bad.output
    failed = [line for line in bad.output.splitlines() if line.startswith("FAILED")]
    assert [line.split(":", 1)[0] for line in failed] == [
        "FAILED  rubric_texts_render",
        "FAILED  table_lists_exactly_the_examples",
    ]
    assert (
        "mistakes lose at checks the rubric does not have: {'softmax_without_max_shift.ipynb': 'softmx'}" in (failed[1])
    )
    assert f"{ID}: 2 checks failed" in bad.output


# ── a zip built from tolerances older than the lesson ────────────────────────────────────────


def calibrated_now(a) -> None:
    """Record, as ``calibrate`` does, the content the lesson's tolerances were calibrated for."""

    a.tolerances_path.write_text(
        f'[provenance]\nassignment_fingerprint = "{a.code_fingerprint()}"\nrubric_sha256 = "{a.rubric_sha256()}"\n'
    )


def touch(path: Path, seconds_after: Path) -> None:
    """Set ``path``'s modification time a minute after ``seconds_after``'s."""
    import os

    t = seconds_after.stat().st_mtime + 60
    os.utime(path, (t, t))


STALE = {  # what changes after calibration → the words of the warning (None: none)
    "nothing": (lambda a: None, None),
    "the rubric's text": (
        lambda a: edit(a.rubric_path, "Exponentiate, then", "Exponentiate first, then"),
        "older than rubric.toml (by content)",
    ),
    "a file of grading/": (
        lambda a: (a.folder / "grading" / "extra.py").write_text("X = 1\n"),
        "older than the grading code (grading/, assignment.toml; by content)",
    ),
    "assignment.toml": (
        lambda a: edit(a.folder / "assignment.toml", 'version = "', 'version = "2'),
        "older than the grading code",
    ),
    "only modification times (a git checkout)": (
        lambda a: [touch(p, a.tolerances_path) for p in (a.rubric_path, a.folder / "grading" / "__init__.py")],
        None,
    ),
}


@pytest.mark.parametrize("kind", sorted(STALE))
def test_calibration_drift_by_the_content_recorded_at_calibration(root, kind):
    from autograder.assignment import load_assignment

    a = load_assignment(ID, root)
    calibrated_now(a)
    change, words = STALE[kind]
    change(a)
    drift = load_assignment(ID, root).calibration_drift()
    if words is None:
        assert drift is None
        return
    assert drift is not None and words in drift, drift
    assert drift.startswith(f"{a.tolerances_path} is older than") and f"run `autograder calibrate {ID}`" in drift
    assert "\n" not in drift


def test_calibration_drift_by_modification_time_without_recorded_hashes(root):
    from autograder.assignment import load_assignment

    a = load_assignment(ID, root)
    a.tolerances_path.write_text("[provenance]\n")
    touch(a.tolerances_path, a.rubric_path)
    assert a.calibration_drift() is None
    touch(a.rubric_path, a.tolerances_path)
    assert "older than rubric.toml (by modification time)" in (a.calibration_drift() or "")
    touch(a.tolerances_path, a.rubric_path)
    touch(a.folder / "grading" / "__init__.py", a.tolerances_path)
    drift = a.calibration_drift() or ""
    assert "older than the grading code (grading/, assignment.toml; by modification time)" in drift
    assert "rubric.toml" not in drift


def test_gradescope_build_warns_in_one_line_and_still_writes_the_zip(root, tmp_path, monkeypatch):
    from autograder.assignment import load_assignment
    from autograder.gradescope import build as gradescope_build

    monkeypatch.setattr(gradescope_build, "checkout_root", lambda: root)
    a = load_assignment(ID, root)
    calibrated_now(a)
    fresh = invoke(root, "gradescope", "build", ID, "-o", str(tmp_path / "a.zip"))
    assert fresh.exit_code == 0 and (tmp_path / "a.zip").is_file(), fresh.output
    assert "warning" not in fresh.output
    edit(a.rubric_path, "Exponentiate, then", "Exponentiate first, then")
    stale = invoke(root, "gradescope", "build", ID, "-o", str(tmp_path / "b.zip"))
    assert stale.exit_code == 0 and (tmp_path / "b.zip").is_file(), stale.output
    warnings = [line for line in stale.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {a.tolerances_path} is older than rubric.toml (by content): its values may not follow "
        f"from the lesson as it is; run `autograder calibrate {ID}` before you upload"
    ], stale.output


@pytest.mark.parametrize(
    "tolerances", [{"model": {"max": 0.5}}, {"model": {"max": {"value": 0.5, "worst": 0.2, "rule": "worst × 2"}}}]
)
def test_a_tolerance_placeholder_shows_the_value_the_judge_reads(tolerances):
    """A calibrated tolerance is a table (value, worst, rule, …): ``{tolerances.key}`` shows its value."""
    fields = {"measured": "1", "threshold": "2", "op": "≤", "name": "close"}
    assert render("allowed {tolerances.model.max:float3}.", fields, {}, MEASUREMENTS, tolerances) == "allowed 0.500."


@pytest.mark.kernel
@pytest.mark.slow
def test_check_assignment_grades_the_examples_without_quick(root):
    """Without ``--quick`` the checks that grade run too: the scaffolded lesson passes every one."""
    result = invoke(root, "check-assignment", ID)
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.startswith(("passed", "FAILED"))] == [
        f"passed  {c.short}" for c in CHECKS
    ]
    assert any(c.graded for c in CHECKS)
    assert result.output.splitlines()[-1] == f"{ID}: every check passed"
