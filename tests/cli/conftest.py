"""Fixtures of the CLI tests: the batch tests' tiny assignment and fake stages (tests/batch/batchkit)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "batch"))

from batchkit import ASSIGNMENT_ID, fake_stages, make_assignment_tree  # noqa: E402


@pytest.fixture
def fake_root(tmp_path, monkeypatch) -> Path:
    root = make_assignment_tree(tmp_path / "project")
    monkeypatch.setenv("AUTOGRADER_ROOT", str(root))
    return root


@pytest.fixture
def exec_log(tmp_path, monkeypatch) -> Path:
    import autograder.pipeline

    log = tmp_path / "executions.log"
    log.touch()
    monkeypatch.setattr(autograder.pipeline, "execute_and_measure", fake_stages(log))
    return log


@pytest.fixture
def fake_id() -> str:
    return ASSIGNMENT_ID
