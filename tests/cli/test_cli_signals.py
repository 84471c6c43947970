"""Ctrl-C and SIGTERM leave a state a user can trust: real ``autograder`` processes (the console
script's ``cli.main``) are signalled mid-run. An interrupted ``grade`` leaves no results.json (the
zero placeholder is only there while grading runs); an interrupted ``batch`` removes its staging
folder and unfinished submissions and stops its workers; SIGTERM does what Ctrl-C does.

The fast tests use the batch tests' fake stages (a stage that sleeps stands for a notebook that
runs); the slow one grades a real notebook in the real jail and signals it while its kernel runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from batchkit import GOOD, write_notebook

BATCH_TESTS = Path(__file__).resolve().parent.parent / "batch"
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])

# the console script, with the batch tests' fake stages in place of the jail (forked workers inherit them)
DRIVER = f"""
import sys
sys.path.insert(0, {str(BATCH_TESTS)!r})
from pathlib import Path
import autograder.pipeline
from batchkit import fake_stages
autograder.pipeline.execute_and_measure = fake_stages(Path(sys.argv[1]))
from autograder import cli
sys.argv = ["autograder", *sys.argv[2:]]
cli.main()
"""


def _start(tmp_path: Path, fake_root: Path, *args: object) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "executions.log"
    log.touch()
    env = {**os.environ, "AUTOGRADER_ROOT": str(fake_root)}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(log), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    return proc, log


def _wait_for(condition, proc: subprocess.Popen, what: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the command ended before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no sign of {what} within {limit_s:g} s")
        time.sleep(0.05)


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running 120 s after the signal: {err}")
    return proc.returncode, out, err


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@SIGNALS
@pytest.mark.parametrize("out_exists", [False, True], ids=["new-out", "out-with-an-earlier-grade"])
def test_an_interrupted_grade_leaves_no_results(tmp_path, fake_root, sig, out_exists):
    nb = write_notebook(tmp_path / "nb.ipynb", **GOOD, sleep=300)
    out = tmp_path / "out"
    if out_exists:  # an earlier grade's files, and a file of the instructor's that is not the grade's
        out.mkdir()
        (out / "results.json").write_text('{"score": 35}')
        (out / "notes.txt").write_text("mine")
    proc, log = _start(tmp_path, fake_root, "grade", nb, "-a", "fake-07", "--out", out)
    _wait_for(lambda: log.read_text(), proc, "the notebook running")
    placeholder = json.loads((out / "results.json").read_text())
    assert placeholder["score"] == 0 and "did not finish" in placeholder["output"], "the placeholder while it runs"
    proc.send_signal(sig)
    code, stdout, stderr = _finish(proc)
    assert code == EXIT[sig], stderr
    assert "interrupted" in stderr and "Traceback" not in stderr and "score" not in stdout
    if out_exists:
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"], "only what was there and not the grade's"
    else:
        assert not out.exists(), "the folder made for this grade is gone"


@SIGNALS
def test_an_interrupted_batch_cleans_up_and_resumes(tmp_path, fake_root, sig):
    src = tmp_path / "src"
    write_notebook(src / "quick.ipynb", **GOOD, tag="quick")
    write_notebook(src / "slow.ipynb", **GOOD, sleep=300, tag="slow")
    out = tmp_path / "class"
    proc, log = _start(tmp_path, fake_root, "batch", src, "-o", out, "-a", "fake-07", "-j", "2", "--no-progress")
    _wait_for(
        lambda: "slow" in log.read_text() and (out / "quick" / "submission.json").is_file(),
        proc,
        "the slow notebook running beside a finished one",
    )
    workers = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert workers and (out / ".sources").is_dir()
    proc.send_signal(sig)
    code, _, stderr = _finish(proc)
    assert code == EXIT[sig], stderr
    assert "interrupted: finished submissions are kept" in stderr and "Traceback" not in stderr
    assert not (out / ".sources").exists(), "the staging folder is removed"
    assert not (out / "slow").exists(), "the unfinished submission's folder is removed"
    assert (out / "quick" / "submission.json").is_file(), "the finished one is kept"
    assert json.loads((out / "batch.json").read_text())["state"] == "interrupted"
    deadline = time.monotonic() + 60
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(workers) == [], "every worker the batch started is gone"
    write_notebook(src / "slow.ipynb", **GOOD, tag="slow")  # resubmitted quicker: the re-run resumes
    proc, log = _start(tmp_path, fake_root, "batch", src, "-o", out, "-a", "fake-07", "-j", "2", "--no-progress")
    code, stdout, stderr = _finish(proc)
    assert code == 0, stderr
    assert "2 submissions (2 ok)" in stdout and "1 already done" in stdout, stdout


@pytest.mark.kernel
@pytest.mark.slow
def test_sigterm_during_a_real_kernel_leaves_no_results_and_no_process(tmp_path):
    """The real jail: SIGTERM while the student's cell runs shuts the kernel down and removes the grade."""
    import nbformat

    nb = tmp_path / "07-quantization.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    nb.write_text(nbformat.writes(notebook))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.cli", "grade", str(nb), "-a", "07-quantization", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    seen: list[int] = []

    def kernel_runs() -> bool:
        try:
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return False
        seen[:] = [p.pid for p in family]
        return any("ipykernel" in " ".join(_cmdline(p)) for p in family) and (out / "results.json").is_file()

    _wait_for(kernel_runs, proc, "the jailed kernel running", limit_s=300)
    proc.send_signal(signal.SIGTERM)
    code, stdout, stderr = _finish(proc)
    assert code == 143, stderr
    assert not out.exists(), f"an interrupted grade leaves nothing: {sorted(out.rglob('*')) if out.exists() else ''}"
    deadline = time.monotonic() + 60
    while _alive(seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(seen) == [], "the kernel and everything the grade started are gone"


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
