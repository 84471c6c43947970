"""Fixtures of the hostile-submission suite: grade a notebook made of cell sources through the
real jail with short limits, and check the invariants every attack must leave intact:

- a grade was produced: ``results.json`` is valid Gradescope JSON (``results_validator``);
- the notebook's doing is never the grader's failure: every graded notebook (``grade_path``, and
  ``advkit.grade_in_child``) ends in a status the student reads as their own, and nothing tells
  them "a problem on our side" (``advkit.require_student_facing``);
- no points were gained: every check scores at most what a harmless notebook scores;
- nothing outside the workspace changed: a world-writable canary folder, the repo's grading files;
- no process was left: nothing owned by the run's sandbox uid, nothing working in the workspace;
- nothing of the grader's leaked into ``results.json`` / ``feedback.md``: the environment
  canary, the file canary, the grader's paths.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import nbformat
import pytest

from advkit import (
    ASSIGNMENT_ID,
    ENV_SECRET,
    ENV_SECRET_NAME,
    FILE_SECRET,
    JAIL_RUNS,
    KERNEL_RUNS,
    ROOT,
    SHORT_LIMITS,
    TEMPLATE_MARKER,
    TOKEN,
    WRONG_FUNCTIONS,
    Graded,
    build_notebook,
    grader_files_state,
    leaks,
    jail_uid,
    leftover_processes,
    read_json,
    require_student_facing,
    snapshot,
    xdist_slot,
)
from autograder.assignment import Assignment, load_assignment
from autograder.errors import SandboxUnavailableError
from autograder.tree_walk import remove_tree
from needs import needs


@pytest.fixture(scope="module", autouse=True)
def env_secret():
    """A canary in the grader's environment: it must never reach the kernel or the results."""
    old = os.environ.get(ENV_SECRET_NAME)
    os.environ[ENV_SECRET_NAME] = ENV_SECRET
    yield ENV_SECRET
    if old is None:
        os.environ.pop(ENV_SECRET_NAME, None)
    else:
        os.environ[ENV_SECRET_NAME] = old


@pytest.fixture(scope="session")
def canary_dir():
    """A world-writable folder outside the workspace with world- and root-readable secrets.

    Its mode leaves only the jail (mount namespace / Landlock) between it and the notebook.
    """
    d = Path(tempfile.mkdtemp(prefix=f"adv-canary-{TOKEN}-"))
    (d / "sub").mkdir()
    for name, mode in (("secret.txt", 0o644), ("root_only.txt", 0o600), ("sub/nested.txt", 0o644)):
        (d / name).write_text(FILE_SECRET + "\n")
        os.chmod(d / name, mode)
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def with_limits(base: Assignment, **limits) -> Assignment:
    """A copy of ``base`` whose ``[execution]`` limits are overridden (rubric, tolerances, grading stay)."""
    config = copy.deepcopy(base.config)
    config["execution"] = {**config.get("execution", {}), **limits}
    return Assignment(id=base.id, folder=base.folder, reference_folder=base.reference_folder, config=config)


@pytest.fixture(scope="session")
def short_assignment() -> Assignment:
    """Assignment 07 with short execution limits (the rubric, tolerances and grading are real)."""
    return with_limits(load_assignment(ASSIGNMENT_ID, root=ROOT), **SHORT_LIMITS)


@pytest.fixture(scope="session")
def limited(short_assignment) -> Callable[..., Assignment]:
    """``limited(cell_timeout_s=3, ...)``: the short assignment with other limits."""
    return lambda **limits: with_limits(short_assignment, **limits)


# ----------------------------------------------------------------------------- grading


@pytest.fixture(scope="session")
@needs("kernel")
def grade_path(short_assignment) -> Callable[..., Graded]:
    """Grade a notebook file through the real pipeline with short limits (one sandbox slot per worker)."""
    made: list[Path] = []

    def run(
        notebook: Path, *, name: str = "submission", assignment: Assignment | None = None, out: Path | None = None
    ) -> Graded:
        # Not under pytest's 0700 tmp folder: the fallback jail's uid must be able to pass through.
        base = Path(tempfile.mkdtemp(prefix=f"adv-{TOKEN}-{name}-"))
        os.chmod(base, 0o711)
        made.append(base)
        out, workspace = out or base / "out", base / "ws"
        from autograder.pipeline import grade_notebook

        try:
            grade = grade_notebook(
                notebook, assignment or short_assignment, out, workspace=workspace, slot=xdist_slot()
            )
        except SandboxUnavailableError as e:
            pytest.skip(f"no isolation layer on this machine: {e}")
        g = Graded(
            name=name,
            grade=grade,
            out=out,
            workspace=workspace,
            ended=time.time(),
            results=read_json(out / "results.json"),
            feedback=(out / "feedback.md").read_text() if (out / "feedback.md").is_file() else "",
            execution=read_json(out / "execution.json"),
            measurements=read_json(out / "measurements.json"),
        )
        require_student_facing(g)  # every hostile notebook: its doing is never the grader's failure
        return g

    yield run
    for d in made:
        remove_tree(d, ignore_errors=True)  # what a notebook left: any depth, no link followed


@pytest.fixture(scope="session")
def grade_cells(grade_path, tmp_path_factory) -> Callable[..., Graded]:
    """Grade a notebook made of these cell sources (after a prelude defining ``MARK``, ``_record``)."""

    def run(
        cells: list[str | dict],
        *,
        name: str = "hostile",
        metadata: dict | None = None,
        prelude: bool = True,
        assignment: Assignment | None = None,
        out: Path | None = None,
    ) -> Graded:
        folder = tmp_path_factory.mktemp(f"nb-{name}")
        path = folder / f"{name}.ipynb"
        nbformat.write(build_notebook(cells, metadata=metadata, prelude=prelude), path)
        return grade_path(path, name=name, assignment=assignment, out=out)

    return run


@pytest.fixture(scope="session")
def baseline(grade_cells) -> Graded:
    """A harmless notebook that does nothing: what each check scores for no work."""
    return grade_cells(["x = 1"], name="baseline")


@pytest.fixture(scope="session")
def wrong_baseline(grade_cells) -> Graded:
    """Honest but wrong functions: what a hostile notebook's functions must not beat.

    The function checks give a part per kind of input, and answers of the right kind that are
    wrong still agree where any such answer does (empty inputs, zero-width ranges), so these earn
    those parts; a forgery or a lie must earn no more than that.
    """
    return grade_cells([WRONG_FUNCTIONS], name="wrong-baseline")


# ----------------------------------------------------------------------------- invariants
@pytest.fixture
def jail_check(canary_dir, baseline, results_validator):
    """Snapshot before, and after grading check the invariants every hostile notebook must keep.

    Usage: ``g = grade_cells(...); jail_check(g)``. ``gains_allowed`` names checks a hostile
    notebook may legitimately score on (it did real work there); ``compare_to`` replaces the
    do-nothing baseline (e.g. ``wrong_baseline`` for attacks on the function checks).
    """
    before_canary = snapshot(canary_dir)
    before_grader = grader_files_state()
    autograder_dir_existed = Path("/autograder").exists()

    def check(
        g: Graded, *, gains_allowed: tuple[str, ...] = (), grade_required: bool = True, compare_to: Graded | None = None
    ) -> None:
        problems = []
        # a grade was produced, in Gradescope's format
        results_validator(g.results)
        if grade_required:
            assert g.grade.get("checks"), f"{g.name}: no checks were graded; execution: {g.execution_brief()}"
        # no points gained
        reference = compare_to or baseline
        base = reference.scores()
        allowed = set(gains_allowed)
        if gains_allowed and g.grade.get("attempted", True):  # real work: how it ran earns beside it
            allowed |= running_checks(g)
        for cid, score in g.scores().items():
            if cid not in allowed and score > base.get(cid, 0.0) + 1e-9:
                problems.append(f"check '{cid}' scored {score}, {reference.name} scores {base.get(cid, 0.0)}")
        if g.results.get("score", 0) > reference.results.get("score", 0) + 1e-9 and not gains_allowed:
            problems.append(
                f"results.json score {g.results['score']} > {reference.name}'s {reference.results.get('score')}"
            )
        # nothing outside the workspace changed
        after_canary = snapshot(canary_dir)
        if after_canary != before_canary:
            changed = sorted(
                k for k in set(before_canary) | set(after_canary) if before_canary.get(k) != after_canary.get(k)
            )
            problems.append(f"the canary folder {canary_dir} changed: {changed}")
        after_grader = grader_files_state()
        for path, state in after_grader.items():
            if state[3] or (path in before_grader and state[:3] != before_grader[path][:3]):
                problems.append(f"grader file {path} was changed (owner/mode/content): {state}")
        if Path("/autograder").exists() and not autograder_dir_existed:
            shutil.rmtree("/autograder", ignore_errors=True)
            problems.append("/autograder appeared on the host during grading")
        # no process left
        left = leftover_processes(g.workspace, jail_uid(g.execution), g.ended)
        if left:
            problems.append("processes left after grading:\n  " + "\n  ".join(left[:10]))
        # nothing of the grader's leaked
        problems += leaks(g)
        assert not problems, f"{g.name}: " + "\n".join(problems) + f"\nexecution: {g.execution_brief()}"

    return check


def starts_a_kernel(metafunc: pytest.Metafunc) -> bool:
    """The test grades a notebook (``grade_path``, also through ``grade_cells``) or carries the
    ``kernel`` marker itself. A fixture's ``@needs("kernel")`` alone (a jailed measuring child, say)
    marks the test, but starts no notebook kernel: a template would change nothing there."""
    return "grade_path" in metafunc.fixturenames or metafunc.definition.get_closest_marker("kernel") is not None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here that starts a kernel runs, in the same pytest run, from a fresh kernel and
    from a child of the kernel template; one that asks for ``jail_mode`` runs in the best jail
    (fresh and template) and in the fallback: ``[auto]``, ``[auto-template]``, ``[fallback]``
    (advkit.JAIL_RUNS); the others ``[fresh]``, ``[template]``. The template runs carry the
    ``kernel_template`` marker (``make test-template`` selects them). A new test gets every mode
    by using ``grade_cells`` / ``grade_path`` / ``jail_mode``, or by carrying ``@pytest.mark.kernel``."""
    template = getattr(pytest.mark, TEMPLATE_MARKER)
    if "jail_mode" in metafunc.fixturenames:
        runs = [
            pytest.param(jail, kind, id=ident, marks=[template] if kind == "template" else [])
            for jail, kind, ident in JAIL_RUNS
        ]
        metafunc.parametrize(("jail_mode", "kernel_kind"), runs, indirect=True)
    elif "kernel_kind" in metafunc.fixturenames and starts_a_kernel(metafunc):
        runs = [
            pytest.param(kind, id=ident, marks=[template] if kind == "template" else []) for kind, ident in KERNEL_RUNS
        ]
        metafunc.parametrize("kernel_kind", runs, indirect=True)


@pytest.fixture(autouse=True)
def kernel_kind(request, monkeypatch) -> str | None:
    """The kernel this test's gradings start: "fresh" (the switch off, whatever the caller's
    environment says) or "template" (``AUTOGRADER_KERNEL_TEMPLATE=1``: a template's child where the
    jail can hold one, checked of every graded notebook by ``advkit.require_kernel_asked``).
    None for a test that starts no kernel."""
    from autograder.kernel_template import template

    kind = getattr(request, "param", None)
    if kind == "template":
        monkeypatch.setenv(template.SWITCH, "1")
    elif kind == "fresh":
        monkeypatch.delenv(template.SWITCH, raising=False)
    return kind


@pytest.fixture
def jail_mode(request, monkeypatch, kernel_kind):
    """Run the test in the best jail ("auto": bwrap here) and in the namespace-less fallback
    (``AUTOGRADER_JAIL``); each of its runs is one of advkit.JAIL_RUNS (see pytest_generate_tests)."""
    monkeypatch.setenv("AUTOGRADER_JAIL", request.param)
    return request.param


def running_checks(g: Graded) -> set[str]:
    """The checks about how the notebook ran (every part an ``execution.*`` measure): they score
    only beside graded work (autograder/attempt.py), so the do-nothing baseline scores 0 there."""
    from autograder.attempt import is_about_running

    return {c["id"] for c in g.grade.get("checks", []) if c.get("parts") and all(map(is_about_running, c["parts"]))}
