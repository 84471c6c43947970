"""The lines `autograder grade` prints before its table: the same cell numbering and words as the
student's feedback, plain text for a terminal."""

from __future__ import annotations

import json

from autograder.cli_grade import execution_notes


def _notes(tmp_path, **execution):
    path = tmp_path / "execution.json"
    path.write_text(json.dumps({"status": "completed", "cells_total": 3, **execution}))
    return execution_notes(path)


def test_first_error_is_named_with_both_numbers(tmp_path):
    notes = _notes(
        tmp_path,
        first_error={
            "cell": 40,
            "code_cell": 20,
            "ename": "KeyError",
            "evalue": "'latency'",
            "where": "code cell 20 (cell 41 of the notebook)",
            "summary": "KeyError: 'latency'",
        },
    )
    assert notes == ["code cell 20 (cell 41 of the notebook) raised KeyError: 'latency'"]


def test_language_no_code_and_unnamed_error(tmp_path):
    assert _notes(tmp_path, cells_total=0, language="R") == [
        "the notebook's metadata names R; it ran as Python",
        "the notebook has no code cell: nothing ran",
    ]
    notes = _notes(tmp_path, first_error={"cell": 2, "ename": "NoneType", "evalue": "None"})
    assert notes == ["cell 3 of the notebook raised the kernel reported an error without a name"]


def test_control_characters_from_the_notebook_are_removed(tmp_path):
    notes = _notes(tmp_path, status="timeout", reason="x\x1b[31my\nz", first_error=None)
    assert notes == ["timeout: xy z"]  # the ANSI escape dropped whole, the line break a space
