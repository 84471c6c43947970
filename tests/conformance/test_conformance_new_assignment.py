"""``autograder new-assignment ID`` writes a lesson that passes the conformance suite unchanged, in a
project root of its own (a fourth folder beside none of the real ones); it refuses a malformed or
taken id, writing nothing; and ``build --check`` on that lesson fails, naming the rubric file, the
check and the path, when a rubric ``measure`` path has a typo."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autograder.authoring.scaffold import ID_MAX, ID_PATTERN, check_new_id, new_assignment
from autograder.cli import app
from autograder.errors import AssignmentError
from conformancekit import CHECKS, failures

ROOT = Path(__file__).resolve().parents[2]
ID = "09-softmax"
CODE = ("autograder", "gradescope", "pyproject.toml", "README.md", "constraints.txt")  # what the zip packs


def project(tmp: Path) -> Path:
    """An empty project root that builds zips from this checkout's code."""
    (tmp / "assignments").mkdir(parents=True)
    for name in CODE:
        (tmp / name).symlink_to(ROOT / name)
    return tmp


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory) -> Path:
    root = project(tmp_path_factory.mktemp("scaffold-root"))
    new_assignment(ID, root)
    return root


def test_it_writes_the_lesson_the_docs_describe(scaffolded):
    files = {p.relative_to(scaffolded).as_posix() for p in (scaffolded / "assignments").rglob("*") if p.is_file()}
    files |= {p.relative_to(scaffolded).as_posix() for p in (scaffolded / "reference").rglob("*") if p.is_file()}
    a, r = f"assignments/{ID}", f"reference/{ID}"
    assert files == {
        f"{a}/assignment.toml",
        f"{a}/rubric.toml",
        f"{a}/README.md",
        f"{a}/{ID}.ipynb",
        f"{a}/grading/__init__.py",
        f"{a}/examples/reference.ipynb",
        f"{a}/examples/untouched.ipynb",
        f"{a}/examples/softmax_without_max_shift.ipynb",
        f"{r}/solution.ipynb",
        f"{r}/make_examples.py",
        f"{r}/expected_examples.toml",
        f"{r}/tolerances.toml",
    }


@pytest.mark.parametrize("check", [c for c in CHECKS if not c.graded], ids=lambda c: c.name)
def test_it_passes_the_checks_that_need_no_kernel(scaffolded, lessons, check):
    check(lessons(scaffolded, ID))


@pytest.mark.kernel
@pytest.mark.slow
def test_it_passes_the_whole_conformance_suite_unchanged(scaffolded, lessons):
    lesson = lessons(scaffolded, ID)
    assert failures(lesson) == {}
    scores = {name: g.grade["score"] for name, g in lesson.graded.items()}
    assert scores == {"reference.ipynb": 100.0, "softmax_without_max_shift.ipynb": 80.0, "untouched.ipynb": 0.0}


@pytest.mark.kernel
@pytest.mark.slow
def test_build_check_names_a_rubric_path_the_reference_does_not_produce(tmp_path, monkeypatch):
    root = project(tmp_path / "root")
    new_assignment(ID, root)
    monkeypatch.setenv("AUTOGRADER_ROOT", str(root))
    ok = CliRunner().invoke(app, ["build", ID, "--check"])
    assert ok.exit_code == 0, ok.output
    assert "every rubric path is in the reference run's measurements" in ok.output
    assert "every rubric text renders with the reference run's measurements" in ok.output
    rubric = root / "assignments" / ID / "rubric.toml"
    rubric.write_text(
        rubric.read_text().replace('measure = "models.model.max_abs_diff"', 'measure = "models.model.max_abs_dif"')
    )
    typo = CliRunner().invoke(app, ["build", ID, "--check"])
    assert typo.exit_code == 1, typo.output
    assert (
        f"{rubric}: check 'model', part 'computes softmax on hidden rows' measure "
        "'models.model.max_abs_dif' is not produced by the reference run"
    ) in typo.output
    assert "models.model has: interface_ok, max_abs_diff" in typo.output, "the neighbours of the typo are named"
    rubric.write_text(
        rubric.read_text()
        .replace('measure = "models.model.max_abs_dif"', 'measure = "models.model.max_abs_diff"')
        .replace("{models.model.problems}", "{models.model.problem}")
    )
    text = CliRunner().invoke(app, ["build", ID, "--check"])
    assert text.exit_code == 1, text.output
    assert (
        f"{rubric}: check 'model', part 'the contract's interface' message: unknown placeholder "
        "{models.model.problem}: not in the reference run's measurements"
    ) in text.output, "a placeholder of the lesson's own sections is checked against the run"


# ── refusals ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Bad",
        "a_b",
        "-a",
        "a-",
        "a--b",
        "../x",
        "a/b",
        ".x",
        "x" * (ID_MAX + 1),
        "é-lesson",
        "05 graph",
        "05-graph\n",
    ],
)
def test_a_malformed_id_is_refused_and_nothing_is_written(tmp_path, bad):
    root = project(tmp_path)
    result = CliRunner().invoke(app, ["new-assignment", "--", bad], env={"AUTOGRADER_ROOT": str(root)})
    assert result.exit_code == 2 and "is not an assignment id: use lower-case letters" in result.output
    assert list((root / "assignments").iterdir()) == [] and not (root / "reference").exists()


@pytest.mark.parametrize("taken", ["assignments", "reference"])
def test_a_taken_id_is_refused_and_nothing_is_written(tmp_path, taken):
    root = project(tmp_path)
    (root / taken / ID).mkdir(parents=True, exist_ok=True)
    (root / taken / ID / "keep.txt").write_text("mine")
    result = CliRunner().invoke(app, ["new-assignment", ID], env={"AUTOGRADER_ROOT": str(root)})
    assert result.exit_code == 2 and f"assignment '{ID}' exists already" in result.output
    assert sorted(p.name for p in (root / taken / ID).iterdir()) == ["keep.txt"]
    other = "reference" if taken == "assignments" else "assignments"
    assert not (root / other / ID).exists()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + "-_./ é", max_size=60))
def test_every_accepted_id_is_one_plain_folder_name(tmp_path_factory, candidate):
    root = tmp_path_factory.getbasetemp() / "ids"
    (root / "assignments").mkdir(parents=True, exist_ok=True)
    try:
        check_new_id(candidate, root)
    except AssignmentError as e:
        assert "is not an assignment id" in str(e) and not (
            ID_PATTERN.fullmatch(candidate) and len(candidate) <= ID_MAX
        )
        return
    assert ID_PATTERN.fullmatch(candidate) and len(candidate) <= ID_MAX
    assert Path(candidate).name == candidate and candidate not in (".", "..") and candidate == candidate.lower()


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=120))
def test_every_accepted_title_renders_into_files_that_parse_and_keep_it(title):
    """A title reaches TOML, Python and notebook cells: each accepted one parses everywhere and
    reads back unchanged; every other one is refused with the rule."""
    import tomllib

    from autograder.authoring.scaffold import FILES, _environment, check_title, notebooks

    try:
        check_title(title)
    except AssignmentError as e:
        assert "give one printable line" in str(e)
        return
    env, values = _environment(), {"id": "12-my-lesson", "title": title}
    assert tomllib.loads(env.get_template("assignment.toml.j2").render(**values))["title"] == title
    for name in FILES:
        text = env.get_template(name).render(**values)
        if name.endswith(".py.j2"):
            compile(text, name, "exec")
        elif name.endswith(".toml.j2"):
            tomllib.loads(text)
    student, solution = notebooks(env, values)
    assert student.cells[0].source.startswith(f"# {title}\n") and solution.cells[0].source == student.cells[0].source


def test_a_title_that_cannot_be_quoted_is_refused_and_nothing_is_written(tmp_path):
    root = project(tmp_path)
    result = CliRunner().invoke(
        app, ["new-assignment", ID, "--title", "two\nlines"], env={"AUTOGRADER_ROOT": str(root)}
    )
    assert result.exit_code == 2 and "give one printable line" in result.output
    assert list((root / "assignments").iterdir()) == [] and not (root / "reference").exists()


# ── each check catches its kind of broken lesson ─────────────────────────────────────────────


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


BREAKS = {  # what breaks the scaffolded lesson → the checks (needing no kernel) that must fail, and only they
    "solution edited, not rebuilt": (
        lambda r: _edit(
            r / "reference" / ID / "solution.ipynb",
            "e / e.sum(axis=-1, keepdims=True)",
            "e / np.sum(e, axis=-1, keepdims=True)",
        ),
        {"check_built_files_are_up_to_date", "check_reference_and_untouched_are_the_shipped_notebooks"},
    ),
    "the untouched example edited by hand": (
        lambda r: _edit(
            r / "assignments" / ID / "examples" / "untouched.ipynb",
            'raise NotImplementedError(\\"softmax\\")',
            "return x",
        ),
        {"check_built_files_are_up_to_date", "check_reference_and_untouched_are_the_shipped_notebooks"},
    ),
    "an example missing from the table": (
        lambda r: _edit(
            r / "reference" / ID / "expected_examples.toml",
            '["softmax_without_max_shift.ipynb"]\nloses = "softmax"\nparts = ["large values"]\nscore = 80\n',
            "",
        ),
        {"check_table_lists_exactly_the_examples"},
    ),
    "a mistake losing at a check the rubric lacks": (
        lambda r: _edit(r / "reference" / ID / "expected_examples.toml", 'loses = "softmax"', 'loses = "softmx"'),
        {"check_table_lists_exactly_the_examples"},
    ),
    "a tolerance the rubric names, never calibrated": (
        lambda r: _edit(
            r / "assignments" / ID / "rubric.toml", "  value = 1e-5\n", '  tolerance = "model.max_abs_diff_max"\n'
        ),
        {"check_tolerances_are_calibrated_and_current"},
    ),
    "a calibrated tolerance the rubric no longer names": (
        lambda r: (r / "reference" / ID / "tolerances.toml").write_text(
            '[model]\nmax_abs_diff_max = {value = 1e-5, measure = "models.model.max_abs_diff", worst = 4e-6, '
            'rule = "(worst + step 1e-06) × 2"}\n'
        ),
        {"check_tolerances_are_calibrated_and_current"},
    ),
}


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_each_kind_of_broken_lesson_fails_its_own_check(scaffolded, tmp_path, kind):
    import shutil

    from conformancekit import Lesson

    root = tmp_path / "root"
    shutil.copytree(scaffolded, root, symlinks=True)
    brk, check_names = BREAKS[kind]
    brk(root)
    lesson = Lesson(root, ID, tmp_path / "work")
    failed = failures(lesson, [c for c in CHECKS if not c.graded])
    assert set(failed) == check_names, failed
