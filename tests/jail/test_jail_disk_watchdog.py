"""The disk watchdog's counts beyond the folders' listings (``autograder/jail/disk_watchdog.py``):
files held open or mapped after every name of them is gone, and the free space of the disk.

A real process holds real deleted files here; only the file system's free space is given by a
function (filling this machine's disk to test it is not an option).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.jail.disk_watchdog import DiskWatchdog, Held, descendants, held_open_bytes

MiB = 1 << 20

HOLDER = r"""
import mmap, os, sys, time
folder, how, n, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
held = []
for i in range(n):
    path = os.path.join(folder, "h%d" % i)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, each)
    if how == "linked":
        held.append(fd)
        continue
    os.unlink(path)
    if how == "mapped":
        held.append(mmap.mmap(fd, each))
        os.close(fd)
    else:
        held.append(fd)
print("ready", flush=True)
time.sleep(60)
"""


def _holder(folder: Path, how: str, n: int = 3, each: int = 2 * MiB) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), how, str(n), str(each)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("how, expected", [("open", 6 * MiB), ("mapped", 6 * MiB), ("linked", 0)])
def test_files_held_after_deletion_are_counted_once_and_linked_ones_not(tmp_path, how, expected):
    proc = _holder(tmp_path, how)
    try:
        held = held_open_bytes(descendants(proc.pid))
        assert expected <= held <= expected + 64 * 1024, (how, held)
    finally:
        proc.kill()
        proc.wait()


def test_the_watchdog_stops_a_process_holding_deleted_files_past_the_cap(tmp_path):
    proc = _holder(tmp_path, "open", n=3, each=2 * MiB)
    try:
        dog = DiskWatchdog(
            [("its working directory", tmp_path, 4 * MiB, 100, None)],
            lambda: proc.pid,
            interval_s=0.05,
            held=Held(4 * MiB, None, tmp_path),
        )
        dog.start()
        assert proc.wait(timeout=30) == -9, "the watchdog did not stop the holder"
        assert dog.fired == (
            "6 MB in its working directory (6 MB of it in files deleted but still open), more than its 4 MB"
        ), dog.fired
    finally:
        proc.kill()
        proc.wait()


class _Disk:
    """``statvfs`` of a disk whose free space the test sets."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, path):
        return os.statvfs_result((4096, 4096, 1 << 30, 0, self.free // 4096, 0, 0, 0, 0, 255))


@pytest.mark.parametrize(
    "free_after, fires",
    [
        (2048 * MiB, False),  # lost more than the cap, but the disk is far from full
        (1000 * MiB, True),  # lost more than the cap, and the disk is running low
    ],
)
def test_lost_free_space_past_the_cap_stops_the_jail_once_the_disk_runs_low(tmp_path, free_after, fires):
    disk = _Disk(4096 * MiB)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        dog = DiskWatchdog(
            [("its working directory", tmp_path, 64 * MiB, 100, None)],
            lambda: sleeper.pid,
            interval_s=0.05,
            held=Held(64 * MiB, None, tmp_path, statvfs=disk),
        )
        assert dog.over() is None
        disk.free = free_after
        why = dog.over()
        assert bool(why) is fires, why
        if fires:
            assert why == "3096 MB to the disk of its working directory (down to 1000 MB free), more than its 64 MB"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_tree_too_deep_fires_with_the_reason(tmp_path):
    deep = tmp_path.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        dog = DiskWatchdog(
            [("its working directory", tmp_path, 64 * MiB, 1000, None)], lambda: sleeper.pid, interval_s=0.05
        )
        dog.start()
        assert sleeper.wait(timeout=30) == -9
        assert dog.fired == "folders nested deeper than 256 levels in its working directory", dog.fired
    finally:
        sleeper.kill()
        sleeper.wait()


def test_descendants_are_the_process_and_everything_below_it():
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(descendants(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = descendants(proc.pid)
        assert found[0] == proc.pid and len(found) == 3, found
        assert os.getpid() not in found
    finally:
        for pid in reversed(descendants(proc.pid)):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()
