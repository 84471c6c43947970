"""The harness's own failure paths: a kernel that cannot start, a broken setup, the watchdog."""

from __future__ import annotations

import subprocess

import pytest

from autograder.jail import procs
from autograder.sandbox import execute, run_submission
from autograder.sandbox.kernel import JailedKernelManager

from sandbox_helpers import FAST, worker_slot, write_notebook
from waiting import ended


@pytest.mark.kernel
@pytest.mark.slow
def test_kernel_that_cannot_start_is_startup_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(
        JailedKernelManager,
        "format_kernel_cmd",
        lambda self, extra_arguments=None: ["/bin/sh", "-c", "echo no interpreter here >&2; exit 7"],
    )
    nb = write_notebook(tmp_path, ["x = 1"])
    rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, slot=worker_slot())
    assert rec["status"] == "startup_failed"
    assert "no interpreter here" in rec["reason"]  # the kernel's own stderr is quoted
    assert [c["status"] for c in rec["cells"]] == ["not_run"]
    assert rec["probe"] == "not_run"


def test_broken_setup_is_sandbox_error(tmp_path, monkeypatch):
    def boom(self):
        raise OSError("disk full")

    monkeypatch.setattr(execute._Run, "_prepare", boom)
    nb = write_notebook(tmp_path, ["x = 1"])
    rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, slot=worker_slot())
    assert rec["status"] == "sandbox_error"
    assert "disk full" in rec["reason"]


def test_watchdog_kills_the_process_it_was_given():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        dog = procs.Watchdog(0.2, lambda: proc.pid)
        dog.start()
        assert proc.wait(timeout=10) == -9
        assert dog.fired
    finally:
        proc.kill()
        proc.wait()


def test_watchdog_stands_down_when_done():
    """Told it is done within its 30 s, the watchdog ends without firing (joined, not slept on: a
    watchdog that ignored ``done`` would fire at 30 s and be caught by the join's wider bound)."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        dog = procs.Watchdog(30, lambda: proc.pid)
        dog.start()
        dog.done.set()
        ended(dog, "the watchdog told it is done")
        assert not dog.fired and proc.poll() is None, "the watchdog fired after it was told it is done"
    finally:
        proc.kill()
        proc.wait()
