"""How execution.json names cells, errors and a notebook's declared language (no kernel needed):
one numbering ("code cell N (cell M of the notebook)"), no "NoneType: None", the language named."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from autograder.cell_numbers import NO_NAME, cell_where, error_summary, where_of
from autograder.notebook_reader.reader import UnreadableNotebook, load_notebook
from autograder.sandbox.record import CellRecord, Outcome, build_record, reply_to_cell


def test_one_numbering_for_code_and_notebook_positions():
    assert cell_where(20, 40) == "code cell 20 (cell 41 of the notebook)"
    assert cell_where(None, 8) == "cell 9 of the notebook"  # a record from before code_cell existed
    assert where_of({"cell": 8}) == "cell 9 of the notebook"
    assert where_of({"cell": 40, "code_cell": 20}) == "code cell 20 (cell 41 of the notebook)"
    assert where_of(None) == "a cell"


def test_load_notebook_numbers_code_cells_among_markdown_raw_and_attachments(tmp_path):
    cells = [
        new_markdown_cell("# t"),
        new_raw_cell("raw"),
        new_code_cell("a = 1"),
        new_markdown_cell("![x](attachment:x.png)", attachments={"x.png": {"image/png": "iVBORw0KGgo="}}),
        new_code_cell("b = 2"),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    loaded = load_notebook(path)
    assert loaded.total == 5 and loaded.language is None
    assert [(c.index, c.number, c.where) for c in loaded.cells] == [
        (2, 1, "code cell 1 (cell 3 of the notebook)"),
        (4, 2, "code cell 2 (cell 5 of the notebook)"),
    ]


@pytest.mark.parametrize(
    "metadata, language",
    [
        ({"kernelspec": {"name": "ir", "display_name": "R", "language": "R"}, "language_info": {"name": "R"}}, "R"),
        ({"kernelspec": {"name": "julia-1.10", "display_name": "Julia 1.10", "language": "julia"}}, "julia"),
        ({"language_info": {"name": "julia"}}, "julia"),
        ({"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}, None),
        ({"kernelspec": {"name": "ir"}}, "ir"),
        ({}, None),
        # a name is data the notebook chose: only a few characters survive, bounded
        ({"kernelspec": {"language": "R<img src=x>`**" + "x" * 100}}, "Rimg srcx" + "x" * 31),
    ],
)
def test_the_language_a_notebook_names_is_recorded(tmp_path, metadata, language):
    path = tmp_path / "nb.ipynb"  # written as JSON: a submission need not pass nbformat's schema
    path.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": metadata,
                "cells": [{"cell_type": "code", "source": "1", "metadata": {}, "outputs": [], "execution_count": None}],
            }
        )
    )
    assert load_notebook(path).language == language


def test_a_malformed_cell_is_named_from_one(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [{"cell_type": "markdown", "source": ""}, {"source": "x"}],
            }
        )
    )
    with pytest.raises(UnreadableNotebook, match="cell 2 of nb.ipynb is malformed"):
        load_notebook(path)


@pytest.mark.parametrize(
    "content, ename, evalue",
    [
        ({"status": "error", "ename": "NoneType", "evalue": "None", "traceback": ["NoneType: None"]}, "", NO_NAME),
        ({"status": "error", "traceback": []}, "", NO_NAME),
        (
            {
                "status": "error",
                "ename": None,
                "evalue": None,
                "traceback": ["Traceback (most recent call last):", "  x", "\x1b[31mMyKernelError: lost\x1b[0m"],
            },
            "",
            "MyKernelError: lost",
        ),
        ({"status": "error", "ename": "KeyError", "evalue": "'latency'", "traceback": []}, "KeyError", "'latency'"),
    ],
)
def test_an_error_without_a_name_shows_what_is_known(content, ename, evalue):
    rec = reply_to_cell(3, content, 0.1, number=2)
    assert (rec.ename, rec.evalue) == (ename, evalue)
    record = build_record(Outcome("completed", None), [rec], {}, 0.0, probe="not_run", cells_in_notebook=4)
    first = record["first_error"]
    assert first["where"] == "code cell 2 (cell 4 of the notebook)"
    assert "NoneType" not in first["summary"]
    assert first["summary"] == (f"{ename}: {evalue}" if ename else evalue)


def test_error_summary_of_an_old_record_never_says_nonetype():
    assert error_summary("NoneType", "None") == NO_NAME
    assert error_summary(None, "boom") == "boom"
    assert error_summary("ValueError", "") == "ValueError"


def test_record_counts_code_cells_and_every_cell():
    cells = [CellRecord(0, "ok", 0.1, number=1), CellRecord(3, "not_run", 0.0, number=2)]
    record = build_record(Outcome("timeout", "x"), cells, {}, 0.0, probe="not_run", cells_in_notebook=6, language="R")
    assert (record["cells_total"], record["cells_run"], record["cells_in_notebook"]) == (2, 1, 6)
    assert record["language"] == "R"
    assert [c.get("code_cell") for c in record["cells"]] == [1, 2]
