"""What a notebook (or a killed grader) leaves on the host: the kernel's raw output, run folders,
workspaces and cgroups.

Round 2: writes to the kernel's original stdout (``os.write(1, ...)``) landed uncapped in
``/tmp/autograder-run-*/kernel.log`` on the host (64 MB tried), and the folder survived a killed
grader. Now the kernel's stdout and stderr are a pipe the grader drains, keeping only a tail;
run and workspace folders are named after the grader's pid, and a later run removes those of a
grader that is gone (with its cgroups), never those of a live one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from advkit import disk_usage, require_mode

pytestmark = pytest.mark.slow

MiB = 1 << 20
RAW_FLOOD = """\
import os
chunk = b"z" * (1 << 20)
for fd in (1, 2):
    for _ in range(32):
        os.write(fd, chunk)
"""


def test_the_kernels_raw_output_never_lands_on_the_hosts_disk(grade_cells, jail_check, jail_mode, monkeypatch, limited):
    """64 MB written to the kernel's file descriptors 1 and 2: the run folder (kept for the test)
    holds none of it, and the grading goes on."""
    monkeypatch.setenv("AUTOGRADER_KEEP_RUNDIR", "1")
    before = set(Path(tempfile.gettempdir()).glob(f"autograder-run-{os.getpid()}-*"))
    # 64 MB through a pipe at 0.5 CPU on a busy machine took more than 5 s: a cell limit that holds at 5x slower CPU
    g = grade_cells(
        [RAW_FLOOD, "x = 1"],
        name=f"raw-output-{jail_mode}",
        assignment=limited(cell_timeout_s=60, notebook_timeout_s=120),
    )
    require_mode(g, jail_mode)
    kept = set(Path(tempfile.gettempdir()).glob(f"autograder-run-{os.getpid()}-*")) - before
    try:
        jail_check(g)
        assert g.execution["status"] == "completed", g.execution_brief()
        assert len(kept) == 1, f"expected this run's folder to be kept: {kept}"
        used = disk_usage(next(iter(kept)))
        assert used < 1 * MiB, f"the run folder holds {used / MiB:.1f} MB after 64 MB of raw output"
    finally:
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_dead_graders_folders_and_cgroups_are_swept_and_a_live_ones_kept(grade_cells, jail_check):
    """Folders and cgroups named after a dead grader's pid go at the next run; a live one's stay."""
    from autograder.jail import cgroups

    dead = _dead_pid()
    live = subprocess.Popen(["sleep", "120"])  # stands for another grader that is still running
    tmp = Path(tempfile.gettempdir())
    made: list[Path] = []
    try:
        for pid in (dead, live.pid):
            for kind in ("run", "ws"):
                folder = Path(tempfile.mkdtemp(prefix=f"autograder-{kind}-{pid}-", dir=tmp))
                (folder / "left.txt").write_text("x" * 1000)
                made.append(folder)
        hierarchy = cgroups.available()[0]
        groups: list[Path] = []
        if hierarchy is not None:
            for parent in set(hierarchy.parents.values()):
                for pid in (dead, live.pid):
                    group = parent / cgroups.slot_name(99, pid)
                    group.mkdir(exist_ok=True)
                    groups.append(group)
        g = grade_cells(["x = 1"], name="sweep")
        jail_check(g)
        for folder in made:
            gone = f"-{dead}-" in folder.name
            assert folder.exists() != gone, f"{folder}: {'not swept' if gone else 'swept though its grader lives'}"
        for group in groups:
            gone = f"-{dead}-" in group.name
            assert group.exists() != gone, f"cgroup {group}: {'not swept' if gone else 'swept though its grader lives'}"
    finally:
        live.kill()
        live.wait()
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        for group in locals().get("groups", []):
            try:
                group.rmdir()
            except OSError:
                pass
