"""`autograder build`: deterministic, up to date, students get no solutions, the solution no markup."""

from __future__ import annotations

import copy
import json
import string
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.build import INIT_MARKER, build_assignment, build_notebooks, normalize, strip_solution_markup

ROOT = Path(__file__).resolve().parents[2]
SOLUTION_SNIPPETS = (  # lines only the solution has (one per graded part)
    "np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale))",
    "np.asarray(q).astype(np.int32) - np.int32(zero_point)",
    "rmin = min(np.float32(rmin), np.float32(0.0))",
    'to_onnx(clf, X_train[:1], options={"zipmap": False}, name="mlp_moons")',
    'quantize_dynamic("artifacts/fp32.onnx"',
    "quant_format=QuantFormat.QDQ, per_channel=True,",
    "np.max(np.max(np.abs(p - r), axis=1) / np.max(np.abs(r), axis=1))",
)


@pytest.fixture(scope="module")
def built(assignment07) -> dict[str, str]:
    return build_notebooks(assignment07)


def _nb(text: str) -> nbformat.NotebookNode:
    return nbformat.reads(text, as_version=4)


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_building_twice_writes_identical_bytes(assignment07, tmp_path):
    first = build_assignment(assignment07, out_root=tmp_path / "a")
    second = build_assignment(assignment07, out_root=tmp_path / "b")
    rel = sorted(p.relative_to(tmp_path / "a").as_posix() for p in first.written)
    assert rel == sorted(p.relative_to(tmp_path / "b").as_posix() for p in second.written)
    for r in rel:
        assert (tmp_path / "a" / r).read_bytes() == (tmp_path / "b" / r).read_bytes(), f"{r} differs between two builds"
    again = build_assignment(assignment07, out_root=tmp_path / "a")
    assert again.changed == [], f"a rebuild over its own output changed {again.changed}"


def test_build_writes_student_solution_and_examples(built):
    assert "assignments/07-quantization/07-quantization.ipynb" in built
    assert "reference/07-quantization/solution.ipynb" in built
    examples = {k.rsplit("/", 1)[1] for k in built if "/examples/" in k}
    assert {"reference.ipynb", "untouched.ipynb"} <= examples and len(examples) >= 8


def test_student_notebook_has_stubs_and_no_solution(built):
    student = _nb(built["assignments/07-quantization/07-quantization.ipynb"])
    code = _code(student)
    for snippet in SOLUTION_SNIPPETS:
        assert snippet not in code, f"the student notebook gives away {snippet!r}"
    for name in ("quantize", "dequantize", "choose_qparams", "make_session", "max_rel_drift"):
        assert f'raise NotImplementedError("{name}")' in code, f"{name} should be a stub raising NotImplementedError"
    assert "BEGIN SOLUTION" not in code and "BEGIN PROMPT" not in code
    assert "MODEL_SEED = 0" in code and "CALIBRATION_SEED = 0" in code
    assert "_Type your answer here" in "\n".join(c.source for c in student.cells), "the reflection needs an answer cell"


def test_solution_has_no_otter_markup_and_is_complete(built):
    solution = _nb(built["reference/07-quantization/solution.ipynb"])
    code = _code(solution)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN PROMPT", "END PROMPT", "# SOLUTION", "NotImplementedError"):
        assert marker not in code, f"the solution still contains {marker!r}"
    for snippet in SOLUTION_SNIPPETS:
        assert snippet in code, f"the solution lacks {snippet!r}"


def test_public_tests_are_embedded_so_grader_check_needs_no_files(built):
    for rel in ("assignments/07-quantization/07-quantization.ipynb", "reference/07-quantization/solution.ipynb"):
        nb = _nb(built[rel])
        init = [c for c in nb.cells if c.cell_type == "code" and "_PUBLIC_TESTS = {" in c.source]
        assert len(init) == 1, f"{rel}: one init cell with the embedded public tests expected"
        assert INIT_MARKER not in _code(nb), f"{rel}: the master's placeholder cell was not replaced"
        assert 'otter.Notebook(tests_dir="tests")' in init[0].source
        assert "'hidden': True" not in init[0].source, "only public tests may be shipped"
        checks = {c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("grader.check(")}
        for q in ("q1", "q2", "q3", "q4", "q5", "q6"):
            assert f'grader.check("{q}")' in checks and f"'{q}'" in init[0].source


def test_built_notebooks_are_normalised(built):
    for rel, text in built.items():
        assert text.endswith("\n")
        nb = _nb(text)
        ids = [c.id for c in nb.cells]
        assert len(set(ids)) == len(ids), f"{rel}: duplicate cell ids"
        for c in nb.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None, f"{rel}: outputs must be stripped"
        assert json.loads(text)["nbformat_minor"] == 5


def test_normalize_gives_content_ids():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_markdown_cell("x = 1"),
        ]
    )
    ids = [c.id for c in normalize(nb).cells]
    assert ids[1] == ids[0] + "-2" and ids[2] != ids[0]
    again = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    assert normalize(again).cells[0].id == ids[0]


def test_strip_solution_markup_removes_markers_and_prompts():
    src = (
        "def f(x):\n"
        "    # BEGIN SOLUTION NO PROMPT\n"
        "    return x + 1\n"
        "    # END SOLUTION\n"
        '    """ # BEGIN PROMPT\n'
        "    raise NotImplementedError\n"
        '    """ # END PROMPT\n'
        "y = f(1)  # SOLUTION"
    )
    assert strip_solution_markup(src) == "def f(x):\n    return x + 1\ny = f(1)"


def test_master_is_the_only_source(assignment07):
    master = assignment07.reference_folder / "master.ipynb"
    nb = nbformat.read(master, as_version=4)
    assert nb.cells[0].cell_type == "raw" and nb.cells[0].source.startswith("# ASSIGNMENT CONFIG")
    config = nb.cells[0].source
    for setting in ("run_tests: false", "generate: false", "init_cell: false", "files: true"):
        assert setting in config, f"the master's config needs {setting!r} (see autograder/authoring/build.py)"
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "MODEL_SEED = 0" in params[0].source and "CALIBRATION_SEED = 0" in params[0].source
    assert Path(assignment07.folder / "07-quantization.ipynb").is_file()


def measured(paths: list[str]) -> dict:
    """Measurements holding exactly ``paths``: each path that no other extends is a number."""
    out: dict = {}
    for path in [p for p in paths if not any(q.startswith(p + ".") for q in paths)]:
        node = out
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node.setdefault(leaf, 1.0)
    return out


def placeholder_paths(rubric: dict) -> set[str]:
    """The measurement paths the rubric's texts name (``{a.b.c}``; a part's own fields have no dot)."""
    found: set[str] = set()
    for check in rubric["checks"]:
        for part in check.get("parts", []):
            for value in part.values():
                if isinstance(value, str):
                    found |= {f for _, f, _, _ in string.Formatter().parse(value) if f and "." in f}
    return {f for f in found if not f.startswith("tolerances.")}


def _without(measurements: dict, path: str) -> dict:
    """``measurements`` (copied) without the leaf at ``path``."""
    out = copy.deepcopy(measurements)
    node = out
    *parents, leaf = path.split(".")
    for key in parents:
        node = node[key]
    del node[leaf]
    return out


LESSONS = sorted(p.name for p in (ROOT / "assignments").iterdir() if (p / "assignment.toml").is_file())


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_rubric_path_left_out_of_the_measurements_is_named_alone(lesson):
    """For every lesson's rubric: measurements with every path miss none; without one path (and
    what only it needs), exactly the parts reading it are named, with their check and part."""
    from autograder.assignment import load_assignment
    from autograder.authoring.build import rubric_paths, rubric_paths_missing

    a = load_assignment(lesson, ROOT)
    rubric = a.rubric()
    entries = rubric_paths(rubric)
    paths = sorted({path for _, _, path in entries})
    assert not rubric_paths_missing(rubric, measured(paths), a.rubric_path)
    leaves = [p for p in paths if not any(q.startswith(p + ".") for q in paths)]
    for gone in leaves:
        left = [p for p in leaves if p != gone]
        expected = {p for p in paths if not any(q == p or q.startswith(p + ".") for q in left)}
        assert gone in expected
        missing = rubric_paths_missing(rubric, measured(left), a.rubric_path)
        assert {m.path for m in missing} == expected, gone
        assert {(m.check, m.part) for m in missing} == {(c, part) for c, part, path in entries if path in expected}
        # each message names the rubric and its own path: the leaf left out, or a path (e.g. a
        # `requires`) that only that leaf filled
        assert all(str(a.rubric_path) in str(m) and f"'{m.path}'" in str(m) and m.path in expected for m in missing)


def test_a_path_below_an_errored_section_is_missing_with_its_reason(assignment07):
    from autograder.authoring.build import rubric_paths_missing

    rubric = {"checks": [{"id": "c", "requires": "models.m", "parts": [{"name": "p", "measure": "models.m.valid"}]}]}
    missing = rubric_paths_missing(rubric, {"models": {"m": {"error": "artifacts/m.onnx is missing"}}}, Path("r.toml"))
    assert [(m.part, m.reason) for m in missing] == [
        (None, "artifacts/m.onnx is missing"),
        ("p", "artifacts/m.onnx is missing"),
    ]


def test_cli_build_check_reports_up_to_date_and_names_a_missing_path(monkeypatch, tmp_path):
    """The command's exits and lines, with the reference run replaced (the real run: the
    conformance suite's test of a scaffolded lesson)."""
    import typer
    from typer.testing import CliRunner

    from autograder.authoring import build as build_mod
    from autograder.authoring.build import rubric_paths
    from autograder.authoring.cli import register

    app = typer.Typer()
    register(app)
    from autograder.assignment import load_assignment

    rubric = load_assignment("07-quantization", ROOT).rubric()
    paths = sorted({path for _, _, path in rubric_paths(rubric)})
    paths.sort(key=lambda p: any(q.startswith(p + ".") for q in paths))  # a leaf first
    texts = measured(paths + sorted(placeholder_paths(rubric) - set(paths)))  # the texts render too
    monkeypatch.setattr(build_mod, "reference_measurements", lambda a, **_: texts)
    result = CliRunner().invoke(app, ["build", "07-quantization", "--check"])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output and "every rubric path is in the reference run's measurements" in result.output
    monkeypatch.setattr(build_mod, "reference_measurements", lambda a, **_: _without(texts, paths[0]))
    result = CliRunner().invoke(app, ["build", "07-quantization", "--check"])
    assert result.exit_code == 1 and f"'{paths[0]}' is not produced by the reference run" in result.output
    missing = CliRunner().invoke(app, ["build", "no-such-assignment", "--check"])
    assert missing.exit_code == 2 and "no assignment" in missing.output
