"""Fixtures of the batch tests: a tiny assignment and fake execute/measure stages (see batchkit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchkit import ASSIGNMENT_ID, fake_stages, make_assignment_tree


@pytest.fixture
def fake_root(tmp_path, monkeypatch) -> Path:
    root = make_assignment_tree(tmp_path / "project")
    monkeypatch.setenv("AUTOGRADER_ROOT", str(root))
    return root


@pytest.fixture
def fake_assignment(fake_root):
    from autograder.assignment import load_assignment

    return load_assignment(ASSIGNMENT_ID, fake_root)


@pytest.fixture
def exec_log(tmp_path, monkeypatch) -> Path:
    """Install the fake stages; the returned log has one line per (fake) execution."""
    import autograder.pipeline

    log = tmp_path / "executions.log"
    log.touch()
    monkeypatch.setattr(autograder.pipeline, "execute_and_measure", fake_stages(log))
    return log


@pytest.fixture(scope="module")
def assignment():
    """Lesson 07 as this checkout (or ``$AUTOGRADER_ROOT``) holds it, for the batch tests that grade
    real notebooks; skipped when its tolerances were never calibrated."""
    from autograder.assignment import load_assignment

    a = load_assignment("07-quantization")
    if not a.tolerances_path.is_file():
        pytest.skip(f"{a.tolerances_path} is missing (run `autograder calibrate 07-quantization`)")
    return a
