"""No byte of a submission is parsed in the grader's own process: each front end, run as the real
command in a fresh process, reads a 60 MB notebook of nested empty lists (over the size cap) and
one just under the cap (millions of lists: gigabytes once built) through the one bounded reader
(autograder/notebook_reader/reader.py), gives each a zero with a reason for the student, and its own
peak memory (``VmHWM`` of /proc/self/status: the command's process only; the parsing child, the
kernel and batch workers are other processes) stays under 300 MB.

Gradescope's ``run`` in the simulated 768 MB container is in
tests/gradescope/test_gradescope_container_huge_notebook.py. Nothing here starts a kernel: the
reader refuses these files first.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.notebook_reader.reader import MAX_NOTEBOOK_BYTES

pytestmark = pytest.mark.slow  # about 2 minutes: 60 MB files, fresh processes
ASSIGNMENT = "07-quantization"
GRADER_PEAK_MB = 300
OVER = 60 * 1024 * 1024
UNDER = MAX_NOTEBOOK_BYTES - 4096
REASONS = {OVER: f"more than the {MAX_NOTEBOOK_BYTES:,} allowed", UNDER: "JSON lists"}

WRAPPER = """
import atexit, sys
out = sys.argv.pop(1)
# VmHWM, this process's own peak (kB): ru_maxrss would inherit the spawning test worker's peak
# across exec (Linux keeps the larger of the old and new address space's high-water mark)
atexit.register(lambda: open(out, "w").write(next(l.split()[1] for l in open("/proc/self/status")
                                                  if l.startswith("VmHWM:"))))
sys.argv[0] = "autograder"
from autograder.cli import main
main()
"""


def lists_notebook(path: Path, size: int) -> Path:
    """``[[],[],…,[]]`` of exactly ``size`` bytes (valid JSON, not a notebook)."""
    body = b"[" + b"[]," * ((size - 4) // 3)
    body += b" " * (size - 3 - len(body)) + b"[]]"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    assert path.stat().st_size == size
    return path


def run_command(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """The real ``autograder`` command in a fresh process; (its result, its own peak RSS in MB)."""
    rss = tmp_path / "maxrss"
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(rss), *args], capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert rss.is_file(), f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc, int(rss.read_text()) / 1024


def test_grade_gives_a_zero_with_a_reason_and_stays_small(tmp_path):
    for size in (OVER, UNDER):
        notebook = lists_notebook(tmp_path / f"nested-{size}.ipynb", size)
        out = tmp_path / f"out-{size}"
        proc, peak_mb = run_command(tmp_path, "grade", str(notebook), "--assignment", ASSIGNMENT, "--out", str(out))
        notebook.unlink()
        assert proc.returncode == 0, proc.stderr[-2000:]
        results = json.loads((out / "results.json").read_text())
        assert results["score"] == 0 and REASONS[size] in results["output"], results["output"][:2000]
        assert peak_mb < GRADER_PEAK_MB, f"grade held {peak_mb:.0f} MB for a {size:,}-byte notebook"


def _assert_batch(tmp_path: Path, source: Path, expected: dict[str, int]) -> None:
    out = tmp_path / "class"
    proc, peak_mb = run_command(
        tmp_path, "batch", str(source), "--assignment", ASSIGNMENT, "--out", str(out), "-j", "1", "--no-progress"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["name"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == set(expected), rows.keys()
    for name, size in expected.items():
        assert float(rows[name]["score"]) == 0 and rows[name]["status"] == "unreadable", rows[name]
        results = json.loads((out / name / "results.json").read_text())
        assert REASONS[size] in results["output"], results["output"][:2000]
    assert peak_mb < GRADER_PEAK_MB, f"batch held {peak_mb:.0f} MB"


def test_batch_of_a_folder_gives_zeros_with_reasons_and_stays_small(tmp_path):
    folder = tmp_path / "subs"
    lists_notebook(folder / "over.ipynb", OVER)
    lists_notebook(folder / "under.ipynb", UNDER)
    _assert_batch(tmp_path, folder, {"over": OVER, "under": UNDER})


def test_batch_of_an_export_zip_gives_zeros_with_reasons_and_stays_small(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(
            "export/submission_metadata.yml", "submission_1:\n  :submitters: []\nsubmission_2:\n  :submitters: []\n"
        )
        for folder, size in (("submission_1", OVER), ("submission_2", UNDER)):
            notebook = lists_notebook(tmp_path / "tmp" / f"{ASSIGNMENT}.ipynb", size)
            zf.write(notebook, f"export/{folder}/{ASSIGNMENT}.ipynb")
            zf.writestr(f"export/{folder}/my_work.ipynb", '{"nbformat": 4, "cells": []}')  # the rule picks the other
            notebook.unlink()
    _assert_batch(tmp_path, archive, {"submission_1": OVER, "submission_2": UNDER})


@pytest.mark.parametrize("command", ["grade", "batch"])
def test_without_assignment_the_notebook_is_read_only_by_the_child(tmp_path, command):
    """Deciding the assignment (two assignments in this checkout) reads the notebook too: in the
    child. A 60 MB notebook that names no assignment is a one-line mistake, exit 2, with the
    grader small."""
    folder = tmp_path / "subs"
    notebook = lists_notebook(folder / "nested.ipynb", UNDER)
    target = notebook if command == "grade" else folder
    proc, peak_mb = run_command(tmp_path, command, str(target), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot tell which assignment" in lines[0], proc.stderr
    assert peak_mb < GRADER_PEAK_MB, f"{command} held {peak_mb:.0f} MB"
