"""Reading submissions: anything that is not a runnable nbformat-4 notebook is 'unreadable' with a reason;
metadata, tags and kernelspec never survive stripping."""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.sandbox import run_submission
from autograder.notebook_reader.reader import UnreadableNotebook, load_code_cells, stripped_notebook

from sandbox_helpers import FAST, worker_slot


def _nb(tmp_path, text: str | bytes, name="nb.ipynb"):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(
    "content, expected",
    [
        ("this is not json", "not valid JSON"),
        ('{"cells": [{"cell_type": "code", "source": "x=1"', "not valid JSON"),  # truncated
        ('{"a": 1}', "not a Jupyter notebook"),
        ("[1, 2, 3]", "not a Jupyter notebook"),
        ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}', "format 3"),
        ('{"nbformat": 4, "nbformat_minor": 5, "cells": "nope", "metadata": {}}', "'cells' is not a list"),
        ('{"nbformat": 4, "nbformat_minor": 5, "cells": [{"source": "x"}], "metadata": {}}', "malformed"),
        (
            '{"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code", "source": 5}], "metadata": {}}',
            "neither text",
        ),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
    ],
)
def test_unreadable_notebook_gives_reason(tmp_path, content, expected):
    with pytest.raises(UnreadableNotebook, match=expected):
        load_code_cells(_nb(tmp_path, content))


def test_symlink_and_directory_are_refused(tmp_path):
    real = _nb(tmp_path, json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {}}))
    link = tmp_path / "link.ipynb"
    link.symlink_to(real)
    with pytest.raises(UnreadableNotebook, match="symlinks are not accepted"):
        load_code_cells(link)
    (tmp_path / "dir.ipynb").mkdir()
    with pytest.raises(UnreadableNotebook, match="not a regular file"):
        load_code_cells(tmp_path / "dir.ipynb")
    with pytest.raises(UnreadableNotebook, match="cannot be opened"):
        load_code_cells(tmp_path / "missing.ipynb")


def test_code_cells_keep_original_indices_and_lose_metadata(tmp_path):
    nb = new_notebook(
        cells=[
            new_markdown_cell("# title"),
            new_code_cell("x = 1", metadata={"tags": ["skip-execution"]}),
            new_markdown_cell("text"),
            new_code_cell(["y = ", "2"], metadata={"tags": ["raises-exception"]}),
        ],
        metadata={"kernelspec": {"name": "evil", "display_name": "evil", "language": "sh"}},
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    cells, total = load_code_cells(path)
    assert total == 4
    assert [(c.index, c.source) for c in cells] == [(1, "x = 1"), (3, "y = 2")]
    stripped = stripped_notebook(cells)
    assert stripped.metadata == {}
    assert all(c.metadata == {} and c.outputs == [] for c in stripped.cells)
    assert nbformat.validate(stripped) is None


def test_run_submission_reports_unreadable_without_starting_a_kernel(tmp_path):
    nb = _nb(tmp_path, "{ truncated")
    rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, slot=worker_slot())
    assert rec["status"] == "unreadable"
    assert "not valid JSON" in rec["reason"]
    assert rec["cells_total"] == 0 and rec["probe"] == "not_run"
    assert rec["isolation"]["mode"] in ("bwrap", "fallback", "none")
    assert os.listdir(tmp_path / "ws") == []
