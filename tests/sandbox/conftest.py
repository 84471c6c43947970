"""Fixtures for the sandbox tests: run small notebooks in the real jail with short limits."""

from __future__ import annotations

import pytest
from sandbox_helpers import FAST, worker_slot, write_notebook

from autograder.limits import ExecutionLimits
from autograder.sandbox import run_submission
from needs import needs


@pytest.fixture
@needs("kernel")
def run_cells(tmp_path):
    """Run code cells in the jail; returns ``(record, workspace)``."""

    def run(cells, limits: ExecutionLimits = FAST, probe=None, **nb_kw):
        nb = write_notebook(tmp_path, cells, **nb_kw)
        ws = tmp_path / "ws"
        rec = run_submission(nb, ws, limits=limits, probe=probe, slot=worker_slot())
        return rec, ws

    return run
