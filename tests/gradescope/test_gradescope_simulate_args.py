"""``autograder gradescope simulate`` checks its arguments like every other command: a mistake is
exit 2 and one line on stderr, before any image is built or anything written (autograder/
gradescope/cli.py, ``check_simulation``). Fast: the simulation itself is replaced."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograder.cli import app
from autograder.gradescope.sim import container, simulate


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    good = tmp_path / "autograder.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("setup.sh", "#!/bin/sh\n")
        zf.writestr("run_autograder", "#!/bin/sh\n")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "x")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a zip")
    fake = tmp_path / "fake.zip"
    fake.write_text("not a zip either")
    nb = tmp_path / "my.ipynb"
    nb.write_text('{"nbformat": 4, "cells": []}')
    empty = tmp_path / "empty.ipynb"
    empty.write_bytes(b"")
    (tmp_path / "folder").mkdir()
    out_file = tmp_path / "out.txt"
    out_file.write_text("x")
    return {
        "good": good,
        "other": other,
        "notes": notes,
        "fake": fake,
        "nb": nb,
        "empty": empty,
        "folder": tmp_path / "folder",
        "missing": tmp_path / "missing.zip",
        "out_file": out_file,
    }


CASES = [
    (["missing", "nb"], "missing.zip does not exist"),
    (["notes", "nb"], "notes.txt is not a zip file (not a zip archive)"),
    (["fake", "nb"], "fake.zip is not a zip file (its name ends in .zip, but its contents are not a zip archive)"),
    (["folder", "nb"], "is a folder, not the autograder zip"),
    (["other", "nb"], "is a zip but not an autograder zip (no setup.sh or run_autograder at its root)"),
    (["good", "missing"], "missing.zip does not exist: give a notebook (.ipynb) or a folder"),
    (["good", "notes"], "notes.txt is not a notebook: expected a .ipynb file"),
    (["good", "empty"], "empty.ipynb is empty (0 bytes)"),
    (["good", "nb", "--memory-mb", "0"], "--memory-mb must be more than 0, got 0"),
    (["good", "nb", "--cpus", "0"], "--cpus must be more than 0, got 0"),
    (["good", "nb", "--timeout-s", "-5"], "--timeout-s must be more than 0, got -5"),
    (["good", "nb", "--base", "alpine"], "--base 'alpine' is not one of host, debian"),
    (["good", "nb", "--out", "out_file"], "is an existing file, not a folder"),
]


@pytest.mark.parametrize("args, fragment", CASES, ids=[c[1][:40] for c in CASES])
def test_a_mistake_is_exit_2_and_one_line_before_anything_runs(files, monkeypatch, args, fragment):
    monkeypatch.setattr(simulate, "simulate", lambda *a, **k: pytest.fail("nothing may be built or run"))
    monkeypatch.setattr(container, "unavailable_reason", lambda: None)
    argv = [str(files[a]) if a in files else a for a in args]
    result = CliRunner().invoke(app, ["gradescope", "simulate", *argv])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.output


def test_a_machine_where_the_container_cannot_run_is_one_line_too(files, monkeypatch):
    monkeypatch.setattr(simulate, "simulate", lambda *a, **k: pytest.fail("nothing may be built or run"))
    monkeypatch.setattr(container, "unavailable_reason", lambda: "the container simulation needs root")
    result = CliRunner().invoke(app, ["gradescope", "simulate", str(files["good"]), str(files["folder"])])
    assert result.exit_code == 2
    assert result.output.strip() == "error: gradescope simulate cannot run here: the container simulation needs root"


def test_good_arguments_reach_the_simulation(files, monkeypatch):
    calls = []

    class Done:
        stdout, results = "ran", {"score": 1.0}

        def summary(self):
            return {"score": 1.0}

    monkeypatch.setattr(simulate, "simulate", lambda *a, **k: calls.append((a, k)) or Done())
    monkeypatch.setattr(container, "unavailable_reason", lambda: None)
    result = CliRunner().invoke(app, ["gradescope", "simulate", str(files["good"]), str(files["nb"]), "--cpus", "1"])
    assert result.exit_code == 0, result.output
    assert calls and calls[0][0] == (files["good"], files["nb"]) and calls[0][1]["cpus"] == 1.0
