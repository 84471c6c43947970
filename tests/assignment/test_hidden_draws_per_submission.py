"""What a student's functions receive is drawn per submission (autograder/hidden_secret.py).

Probe cases, lesson 05's hidden model files and lesson 03's rows handed to
``sklearn_probabilities`` come from submission streams: the deployment's secret AND the
submission's key (a hash of its code cells). One student's leaked cases are nothing to another;
a regrade of the same code draws the same cases. Unit tests here, every lesson iterated (none
named): the key, the streams, each lesson's cases as a function of (secret, key), no input
that depends on the secret without depending on the key, ``prepare`` drawing nothing of a
submission, lesson 05's files valid for ``onnx.checker``. The real pipeline (jail, kernel):
a regrade of the same notebook gets the same cases and scores, a changed one other cases.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import nbformat
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import hidden_secret
from autograder.assignment import assignment_ids, load_assignment
from autograder.hidden_secret import NO_SUBMISSION, HiddenSecret, submission_key

ROOT = Path(__file__).resolve().parents[2]
ONE, TWO = HiddenSecret(bytes(range(32))), HiddenSecret(bytes(range(1, 33)))
LESSONS = assignment_ids(ROOT)
KEY_A, KEY_B = submission_key(["a = 1"]), submission_key(["a = 2"])


@pytest.fixture(scope="module")
def lessons():
    return {lesson: load_assignment(lesson, ROOT) for lesson in LESSONS}


def _value_digest(v) -> str:
    if isinstance(v, bytes):
        return hashlib.sha256(v).hexdigest()
    a = np.asarray(v)
    if a.dtype == object:
        return hashlib.sha256(repr(v).encode()).hexdigest()
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str((a.dtype, a.shape)).encode() + a.tobytes()).hexdigest()


def case_digests(assignment, secret: HiddenSecret, key: str | None) -> dict[str, str]:
    """Each case's id → a digest of every argument it hands the student's function."""
    with hidden_secret.using(secret):
        if key is None:
            cases = assignment.grading.probe_cases()
        else:
            with hidden_secret.submission(key):
                cases = assignment.grading.probe_cases()
    out = {}
    for case in cases:
        parts = [_value_digest(case.raw(i)) for i in range(len(case.args))]
        parts += [k + _value_digest(case.raw(k)) for k in sorted(case.kwargs)]
        out[case.id] = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return out


# ── the key ─────────────────────────────────────────────────────────────────────────────────────


def test_the_key_is_the_code_cells_in_order_and_nothing_else():
    assert submission_key(["x = 1", "y = 2"]) == submission_key(iter(["x = 1", "y = 2"]))
    assert len(submission_key([])) == hidden_secret.SUBMISSION_KEY_HEX
    others = [["x = 1", "y = 3"], ["y = 2", "x = 1"], ["x = 1y = 2"], ["x = 1", "", "y = 2"], ["x = 1"]]
    keys = {submission_key(c) for c in others} | {submission_key(["x = 1", "y = 2"])}
    assert len(keys) == len(others) + 1, "code, order and cell boundaries each change the key"


def test_a_notebooks_key_ignores_outputs_metadata_and_markdown(tmp_path):
    def write(name, cells, **meta):
        nb = nbformat.v4.new_notebook(cells=cells, metadata=meta)
        nbformat.write(nb, tmp_path / name)
        return hidden_secret.notebook_submission_key(tmp_path / name)

    code = nbformat.v4.new_code_cell
    ran = code("print(1)", execution_count=7, outputs=[nbformat.v4.new_output("stream", text="1\n")])
    plain = write("plain.ipynb", [code("print(1)"), code("x = 2")])
    saved_again = write(
        "ran.ipynb",
        [nbformat.v4.new_markdown_cell("# notes"), ran, code("x = 2")],
        kernelspec={"name": "python3", "display_name": "Python 3", "language": "python"},
    )
    edited = write("edited.ipynb", [code("print(1)"), code("x = 2  # changed")])
    assert plain == saved_again == submission_key(["print(1)", "x = 2"])
    assert edited != plain
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert hidden_secret.notebook_submission_key(tmp_path / "broken.ipynb") == submission_key([])


# ── the streams ─────────────────────────────────────────────────────────────────────────────────


def _draw(secret: HiddenSecret, stream: str, key: str | None) -> float:
    return float(secret.generator(stream, key).random())


@settings(max_examples=60, deadline=None)
@given(
    key=st.binary(min_size=16, max_size=64),
    stream=st.text(min_size=1, max_size=30),
    a=st.text(min_size=1, max_size=40),
    b=st.text(min_size=1, max_size=40),
)
def test_a_submission_stream_is_a_function_of_secret_name_and_key(key, stream, a, b):
    secret = HiddenSecret(key)
    assert _draw(secret, stream, a) == _draw(HiddenSecret(bytes(key)), stream, a)
    assert secret.random_state(stream, a).randint(1 << 30) == secret.random_state(stream, a).randint(1 << 30)
    assert _draw(secret, stream, a) != _draw(secret, stream, None), "never the deployment stream"
    if a != b:
        assert _draw(secret, stream, a) != _draw(secret, stream, b), "another submission, other draws"
    # (name, key) pairs are one message each: moving characters between them changes the draw
    assert _draw(secret, stream + a[0], a[1:] or "k") != _draw(secret, stream, a[0] + (a[1:] or "k"))


def test_the_submission_in_effect_is_the_innermost_and_outside_a_grade_there_is_none():
    assert hidden_secret.current_submission() == NO_SUBMISSION
    with hidden_secret.using(ONE):
        outside = float(hidden_secret.submission_generator("s").random())
        with hidden_secret.submission(KEY_A):
            a = float(hidden_secret.submission_generator("s").random())
            with hidden_secret.submission(KEY_B):
                assert hidden_secret.current_submission() == KEY_B
                b = float(hidden_secret.submission_generator("s").random())
            assert hidden_secret.current_submission() == KEY_A
        assert hidden_secret.current_submission() == NO_SUBMISSION
    assert len({outside, a, b}) == 3
    assert a == _draw(ONE, "s", KEY_A) and outside == _draw(ONE, "s", NO_SUBMISSION)
    for bad in ("", None, 5):
        with pytest.raises((TypeError, ValueError)):
            with hidden_secret.submission(bad):
                pass


# ── every lesson: the student's inputs are the submission's ────────────────────────────────────


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_lessons_cases_are_a_function_of_the_secret_and_the_submission(lessons, lesson):
    a = lessons[lesson]
    first = case_digests(a, ONE, KEY_A)
    assert first, f"{lesson} sends no case"
    assert case_digests(a, HiddenSecret(bytes(ONE.key)), KEY_A) == first, "the same secret and key: the same cases"
    other = case_digests(a, ONE, KEY_B)
    assert list(other) == list(first), "another submission gets the same calls (ids, order)"
    changed = [i for i in first if first[i] != other[i]]
    assert changed, f"{lesson}: another submission gets the very same inputs"


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_input_depends_on_the_secret_without_depending_on_the_submission(lessons, lesson):
    """The class of the leak: a case drawn from the secret alone is the same for every student of a
    deployment. Every case that changes with the secret must change with the submission's key
    too (the fixed edge cases, public in the grading code, change with neither)."""
    a = lessons[lesson]
    base = case_digests(a, ONE, KEY_A)
    other_secret = case_digests(a, TWO, KEY_A)
    other_key = case_digests(a, ONE, KEY_B)
    per_deployment = [i for i in base if base[i] != other_secret[i] and base[i] == other_key[i]]
    assert not per_deployment, f"{lesson}: these inputs are the same for every submission of a deployment"
    secret_made = [i for i in base if base[i] != other_secret[i]]
    assert secret_made, f"{lesson}: no input comes from the secret"


def test_the_lessons_with_functions_are_all_here():
    """A lesson added later is iterated by the tests above; these four are there today."""
    assert {"03-export-parity", "05-graph-optimization", "06-performance", "07-quantization"} <= set(LESSONS)


@pytest.mark.parametrize("lesson", LESSONS)
def test_prepare_draws_nothing_of_a_submission(lessons, lesson, monkeypatch):
    """The warm-ups run ``prepare`` once per process and secret (autograder/warm_ups.py): it may
    only build the deployment's data. Submission streams are forbidden while it runs."""
    a = lessons[lesson]
    prepare = getattr(a.grading, "prepare", None)
    if prepare is None:
        pytest.skip(f"{lesson} has no prepare")

    def forbidden(stream):
        raise AssertionError(f"prepare drew the submission stream {stream!r}")

    monkeypatch.setattr(hidden_secret, "submission_generator", forbidden)
    monkeypatch.setattr(hidden_secret, "submission_random_state", forbidden)
    with hidden_secret.using(HiddenSecret.generate()):
        prepare(a)


def test_lesson_03_measures_the_model_on_rows_of_the_submission_no_function_receives(lessons):
    a = lessons["03-export-parity"]
    data, fn = a.grading.data, a.grading.functions
    seen = {}
    for key in (KEY_A, KEY_B):
        with hidden_secret.using(ONE), hidden_secret.submission(key):
            cases = [c for c in fn.probe_cases() if c.function == fn.SKLEARN_FUNCTION]
            hidden = data.hidden_sets()
        assert [c.group for c in cases] == ["public_test"], "sklearn_probabilities gets X_test only"
        assert np.array_equal(cases[0].raw(0), data.public_split().X_test)
        assert key in hidden.seed
        seen[key] = hidden.X
    assert not np.array_equal(seen[KEY_A], seen[KEY_B])


# ── lesson 05: the hidden files are valid models ───────────────────────────────────────────────


def _files(assignment, n_submissions: int):
    for k in range(n_submissions):
        with hidden_secret.using(HiddenSecret.generate()), hidden_secret.submission(submission_key([str(k)])):
            yield from assignment.grading.count_ops.probe_cases()  # the hidden files (the timing cases are public)


def test_lesson_05_hidden_files_pass_the_full_onnx_checker_and_load_in_onnx_runtime(lessons):
    """Every file passes ``onnx.checker.check_model(full_check=True)`` (types, shapes, schemas,
    strict shape inference), but for one thing the checker cannot know: a node whose default
    domain is written ``"ai.onnx"``, as the contract says a file may hold (the ``other_domains``
    group; onnx's registry knows the default domain as ``""`` only). Those files pass once that
    spelling is written ``""``, and are refused for nothing else. Every file loads in ONNX Runtime."""
    import onnxruntime as ort

    from autograder.ort_platform import session_options

    a = lessons["05-graph-optimization"]
    cases = list(_files(a, 12))
    assert len(cases) == 12 * 7
    for case in cases:
        model = onnx.load_from_string(case.raw(0))
        spelled = [n for n in model.graph.node if n.domain == "ai.onnx"]
        assert bool(spelled) == (case.group == "other_domains"), case.id
        if not spelled:
            onnx.checker.check_model(model, full_check=True)
        else:
            with pytest.raises(onnx.checker.ValidationError, match="ai.onnx|No Op registered"):
                onnx.checker.check_model(model, full_check=True)
            for node in spelled:
                node.domain = ""
            onnx.checker.check_model(model, full_check=True)
        for io in (*model.graph.input, *model.graph.output):
            assert io.type.tensor_type.HasField("shape"), f"{case.id}: {io.name} declares no shape"
        ort.InferenceSession(case.raw(0), sess_options=session_options(), providers=["CPUExecutionProvider"])


# ── the real pipeline: a regrade draws the same, another notebook other cases ──────────────────


def _worker_slot() -> int:
    """A distinct sandbox slot per pytest-xdist worker (as tests/sandbox/sandbox_helpers.py)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name[2:].isdigit() else 0


@pytest.mark.kernel
@pytest.mark.slow
def test_a_regrade_gets_the_same_cases_and_scores_and_other_code_other_cases(tmp_path, monkeypatch):
    """Lesson 05's reference through the real pipeline (jail, kernel, probe), graded twice as it is
    and once with a comment added to a code cell: the key is recorded in measurements.json, the
    same notebook gets the very same hidden files and the same grade, the edited one other files
    (and still full marks: tolerances hold over draws)."""
    from autograder.pipeline import grade_notebook

    a = load_assignment("05-graph-optimization", ROOT)
    sent: list[dict[str, str]] = []
    real = a.grading.probe_cases

    def spy():
        cases = real()
        sent.append({c.id: _value_digest(c.raw(0)) for c in cases if c.function == "count_ops"})  # the hidden files
        return cases

    monkeypatch.setattr(a.grading, "probe_cases", spy)
    solution = ROOT / "reference" / "05-graph-optimization" / "solution.ipynb"
    nb = nbformat.read(solution, as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    first_code.source += "\n# resubmitted with a comment"
    edited = tmp_path / "edited.ipynb"
    nbformat.write(nb, edited)

    grades, keys = [], []
    for i, notebook in enumerate((solution, solution, edited)):
        out = tmp_path / f"out{i}"
        grades.append(grade_notebook(notebook, a, out, slot=_worker_slot()))
        keys.append(json.loads((out / "measurements.json").read_text())["assignment"]["submission_key"])
    assert keys[0] == keys[1] == hidden_secret.notebook_submission_key(solution)
    assert keys[2] == hidden_secret.notebook_submission_key(edited) != keys[0]
    assert len(sent) == 3
    assert sent[0] == sent[1], "a regrade of the same notebook sends the same hidden files"
    assert all(sent[2][i] != sent[0][i] for i in sent[0]), "another notebook gets other files, every one"

    def parts(grade):
        return [(c["id"], c["score"], [p["passed"] for p in c["parts"]]) for c in grade["checks"]]

    assert grades[0]["score"] == grades[1]["score"] == grades[2]["score"] == 100
    assert parts(grades[0]) == parts(grades[1])
