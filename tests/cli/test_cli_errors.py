"""Exit codes and messages of the command line: a mistake in the command is one line on stderr,
exit 2, found before anything runs, and nothing is written; a student's broken notebook is a
graded zero (exit 0) with its reason above the table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from batchkit import GOOD, make_export_zip, write_notebook
from typer.testing import CliRunner

from autograder.cli import app

EXIT_USAGE = 2


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_usage_error(result, *fragments: str) -> str:
    assert result.exit_code == EXIT_USAGE, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ── grade ─────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: d / "missing.ipynb", "does not exist"),
        (lambda d: (d / "folder").mkdir() or d / "folder", "is a folder, not a notebook"),
        (lambda d: (d / "notes.txt").write_text("{}") and d / "notes.txt", "expected a .ipynb file, got '.txt'"),
        (lambda d: (d / "empty.ipynb").touch() or d / "empty.ipynb", "is empty (0 bytes)"),
    ],
    ids=["missing", "folder", "txt", "empty"],
)
def test_grade_refuses_a_path_that_is_not_a_notebook(tmp_path, fake_root, exec_log, make, fragment):
    target = make(tmp_path)
    result = run("grade", target, "--assignment", "fake-07", "--out", tmp_path / "out")
    assert_usage_error(result, fragment)
    assert not (tmp_path / "out").exists() and exec_log.read_text() == ""


def test_grade_refuses_an_out_that_is_a_file(tmp_path, fake_root, exec_log):
    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD)
    (tmp_path / "out").write_text("a file")
    assert_usage_error(run("grade", nb, "-a", "fake-07", "--out", tmp_path / "out"), "is an existing file")
    assert (tmp_path / "out").read_text() == "a file" and exec_log.read_text() == ""


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[size\n", "is not valid TOML"),
        ("[size]\nratio_mx = 0.3\n", "'size.ratio_mx' is not a tolerance"),
    ],
    ids=["syntax", "unknown-key"],
)
def test_grade_checks_the_tolerances_before_running_anything(tmp_path, fake_root, exec_log, text, fragment):
    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD)
    (tmp_path / "t.toml").write_text(text)
    assert_usage_error(
        run("grade", nb, "-a", "fake-07", "--out", tmp_path / "out", "--tolerances", tmp_path / "t.toml"), fragment
    )
    assert not (tmp_path / "out").exists() and exec_log.read_text() == ""
    assert_usage_error(run("grade", nb, "-a", "fake-07", "--tolerances", tmp_path / "none.toml"), "does not exist")


def _readonly(folder: Path) -> list[str]:
    """A command prefix under which ``folder`` is read-only, even for root (a read-only bind mount)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("root ignores permission bits, and bwrap (for a read-only mount) is not installed")
    return [bwrap, "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder)]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("where", ["inside", "itself"])
def test_grade_refuses_an_out_in_or_at_a_read_only_folder(tmp_path, fake_root, where):
    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD)
    readonly = tmp_path / "ro"
    prefix = _readonly(readonly)
    out = readonly / "out" if where == "inside" else readonly
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "autograder.cli", "grade", str(nb), "-a", "fake-07", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AUTOGRADER_ROOT": str(fake_root)},
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: --out ") and "not writable" in proc.stderr
    assert listing(readonly) == []


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_a_broken_notebook_is_a_graded_zero_with_its_reason_above_the_table(tmp_path):
    nb = tmp_path / "broken.ipynb"
    nb.write_text('{"cells": [')  # a student's truncated upload
    result = run("grade", nb, "-a", "07-quantization", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("unreadable: ") and "not valid JSON" in first
    assert result.stdout.index("not valid JSON") < result.stdout.index("┏"), "the reason comes before the table"
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["score"] == 0


# ── batch ─────────────────────────────────────────────────────────────────────────────────────


def test_batch_refuses_a_missing_or_non_zip_source(tmp_path, fake_root, exec_log):
    assert_usage_error(run("batch", tmp_path / "nope", "-o", tmp_path / "out", "-a", "fake-07"), "does not exist")
    (tmp_path / "notes.txt").write_text("x")
    assert_usage_error(
        run("batch", tmp_path / "notes.txt", "-o", tmp_path / "out", "-a", "fake-07"), "neither a folder nor a zip"
    )
    (tmp_path / "file").write_text("x")
    (tmp_path / "src").mkdir()
    assert_usage_error(run("batch", tmp_path / "src", "-o", tmp_path / "file", "-a", "fake-07"), "is an existing file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["empty folder", "zip without notebook", "export without notebook"])
def test_an_empty_batch_is_an_error_unless_allowed(tmp_path, fake_root, exec_log, kind):
    if kind == "empty folder":
        source = tmp_path / "src"
        source.mkdir()
    elif kind == "zip without notebook":
        source = tmp_path / "src.zip"
        with zipfile.ZipFile(source, "w") as zf:
            zf.writestr("readme.txt", "no notebooks here")
    else:
        source = make_export_zip(tmp_path / "src.zip", {"submission_1": {"hw.pdf": b"%PDF"}}, None)
    out = tmp_path / "out"
    assert_usage_error(run("batch", source, "-o", out, "-a", "fake-07"), "--allow-empty")
    assert not out.exists(), "nothing written, not even .sources"
    result = run("batch", source, "-o", out, "-a", "fake-07", "--allow-empty", "--no-progress")
    assert result.exit_code == 0, result.output
    assert (out / "gradebook.csv").is_file() and (out / "summary.html").is_file()


@pytest.mark.parametrize("kind", ["empty folder", "zip without notebook"])
def test_an_empty_batch_says_nothing_to_grade_before_asking_which_assignment(tmp_path, kind):
    """With several assignments and no --assignment, an empty source is told as such, not as a
    missing --assignment (which would send the instructor the wrong way)."""
    if kind == "empty folder":
        source = tmp_path / "src"
        source.mkdir()
    else:
        source = tmp_path / "src.zip"
        with zipfile.ZipFile(source, "w") as zf:
            zf.writestr("readme.txt", "no notebooks here")
    out = tmp_path / "out"
    line = assert_usage_error(run("batch", source, "-o", out), "nothing to grade", "--allow-empty")
    assert "choose one with --assignment" not in line
    assert not out.exists()


def test_batch_reports_every_conflicting_option_in_one_line(tmp_path, fake_root, exec_log):
    (tmp_path / "src").mkdir()
    (tmp_path / "t.toml").write_text("")
    args = ["-j", "2", "--scheduler", "local:2", "--no-cache", "--cache-dir", tmp_path / "c"]
    args += ["--calibrated", "--tolerances", tmp_path / "t.toml"]
    line = assert_usage_error(
        run("batch", tmp_path / "src", "-o", tmp_path / "out", "-a", "fake-07", *args),
        "-j N (the local pool) or --scheduler",
        "--no-cache (execute everything) or --cache-dir",
        "--calibrated or --tolerances",
    )
    assert line.count("either") == 3
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


def test_a_failed_batch_leaves_no_stray_folders(tmp_path, fake_root, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "a.ipynb", no_sandbox=True)  # no isolation: every submission would fail
    out = tmp_path / "out"
    result = run("batch", src, "-o", out, "-a", "fake-07", "--no-progress", "-j", "1")
    assert_usage_error(result, "no isolation")
    leftovers = listing(out) if out.exists() else []
    assert ".sources" not in " ".join(leftovers) and "a" not in leftovers, leftovers


def test_batch_checks_tolerances_before_writing(tmp_path, fake_root, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "a.ipynb", **GOOD)
    (tmp_path / "t.toml").write_text("[drift]\nmax_abs_dp = 0.2\n")
    assert_usage_error(
        run("batch", src, "-o", tmp_path / "out", "-a", "fake-07", "--tolerances", tmp_path / "t.toml"),
        "'drift.max_abs_dp' is not a tolerance",
    )
    assert not (tmp_path / "out").exists() and exec_log.read_text() == ""


# ── rescore ───────────────────────────────────────────────────────────────────────────────────


def test_rescore_exit_codes_partial_batch_and_diff(tmp_path, fake_root, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "a.ipynb", **GOOD)
    write_notebook(src / "b.ipynb", **GOOD)
    out = tmp_path / "out"
    assert run("batch", src, "-o", out, "-a", "fake-07", "--no-progress").exit_code == 0
    assert_usage_error(run("rescore", tmp_path / "src"), "batch.json is missing")
    assert_usage_error(run("rescore", tmp_path / "nowhere"), "is not a folder")
    (tmp_path / "size.toml").write_text("[size]\nratio_max = 0.28\n")
    result = run("rescore", out, "--tolerances", tmp_path / "size.toml")
    assert result.exit_code == 0, result.output
    assert "2 score(s) changed" in result.stdout and "size 10 → 5" in result.stdout
    assert (out / "rescore-diff.csv").read_text().count("\n") == 3
    (out / "b" / "submission.json").unlink()
    line = assert_usage_error(run("rescore", out), "1 of 2 submissions", "--partial")
    assert "not graded yet" in line
    result = run("rescore", out, "--partial")
    assert result.exit_code == 0 and "1 of 2 submissions are not graded yet" in result.stdout


# ── help and flags ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("command", ["grade", "batch", "rescore", "demo", "build", "calibrate"])
def test_help_shows_flags_without_a_value_placeholder(command):
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout and "Traceback" not in result.stdout


def test_flags_take_no_value(tmp_path, fake_root, exec_log):
    src = tmp_path / "src"
    write_notebook(src / "a.ipynb", **GOOD)
    result = run("batch", src, "-o", tmp_path / "out", "-a", "fake-07", "--no-cache", "true")
    assert result.exit_code == EXIT_USAGE and "unexpected extra argument" in result.output.lower()
    assert not (tmp_path / "out").exists()
    assert run("batch", src, "-o", tmp_path / "out", "-a", "fake-07", "--no-cache", "--no-progress").exit_code == 0


def test_grade_warns_about_version_drift_and_keeps_the_score(tmp_path, fake_root, exec_log):
    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD)
    plain = run("grade", nb, "-a", "fake-07", "--out", tmp_path / "plain")
    assert plain.exit_code == 0 and "warning" not in plain.stdout
    tolerances = fake_root / "reference" / "fake-07" / "tolerances.toml"
    tolerances.write_text('[provenance]\nversions = {onnx = "0.1"}\n' + tolerances.read_text())
    drift = run("grade", nb, "-a", "fake-07", "--out", tmp_path / "drift")
    assert drift.exit_code == 0
    warning = next(line for line in drift.stdout.splitlines() if line.startswith("warning: "))
    assert "onnx" in warning and "0.1" in warning and "calibrated" in warning
    assert drift.stdout.index("warning: ") < drift.stdout.index("┏")
    scores = [json.loads((tmp_path / d / "results.json").read_text())["score"] for d in ("plain", "drift")]
    assert scores[0] == scores[1] == 35.0


def test_an_unreadable_notebook_or_source_is_a_command_mistake(tmp_path, monkeypatch):
    """Root reads every file, so the permission is faked here; the real check is os.access."""
    from autograder import cli_checks

    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD)
    monkeypatch.setattr(cli_checks.os, "access", lambda path, mode: False)
    with pytest.raises(cli_checks.CommandError, match="cannot be read"):
        cli_checks.check_notebook(nb)
    with pytest.raises(cli_checks.CommandError, match="cannot be read"):
        cli_checks.check_source(tmp_path)
    with pytest.raises(cli_checks.CommandError, match="not writable"):
        cli_checks.check_out_dir(tmp_path)
