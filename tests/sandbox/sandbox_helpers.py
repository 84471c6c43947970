"""Helpers shared by the sandbox tests (a unique module name: every test folder has a conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.limits import ExecutionLimits

FAST = ExecutionLimits(cell_timeout_s=20, notebook_timeout_s=60, memory_mb=2048, output_cap_kb=256)


def worker_slot() -> int:
    """A distinct sandbox slot per pytest-xdist worker (claim_slot would also find a free one)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name[2:].isdigit() else 0


def write_notebook(folder: Path, cells: list, name: str = "submission.ipynb", **nb_kw) -> Path:
    """``cells``: strings are code cells, ``("md", text)`` markdown, or ready nbformat cells."""
    built = []
    for c in cells:
        if isinstance(c, str):
            built.append(new_code_cell(c))
        elif isinstance(c, tuple) and c[0] == "md":
            built.append(new_markdown_cell(c[1]))
        else:
            built.append(c)
    path = folder / name
    nbformat.write(new_notebook(cells=built, **nb_kw), path)
    return path
