"""The cap on everything a notebook writes (hole H1): the workspace's tmpfs, the copy kept for
the user, stale mounts of dead graders, and the disk watchdog used where mounting is impossible."""

from __future__ import annotations

import dataclasses
import errno
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from autograder.limits import ExecutionLimits
from autograder.errors import AutograderError
from autograder import proc_info, tree_walk
from autograder.jail import disk_watchdog
from autograder.sandbox import run_submission, workspace
from autograder.jail.disk_watchdog import DiskWatchdog
from autograder.sandbox.workspace import (
    MountError,
    copy_tree_safely,
    is_mount_point,
    mounted_cap,
    prepared_workspace,
    sweep_stale_mounts,
)

from sandbox_helpers import FAST, worker_slot, write_notebook
from waiting import NEVER_S, ended, returns

MiB = 1 << 20
as_root = pytest.mark.root  # mounting a tmpfs needs a root grader


def _my_mounts() -> list[str]:
    return [
        m.point
        for m in proc_info.mounts()
        if m.source.startswith("autograder-") and m.source.endswith(f"-{os.getpid()}")
    ]


@pytest.fixture(autouse=True)
def no_mount_left():
    """Every test unmounts what it mounted (and this one cleans up after a failed test)."""
    yield
    left = _my_mounts()
    for p in left:
        workspace._umount(p)
    assert not left, f"mounts left behind: {left}"


@as_root
def test_workspace_tmpfs_caps_bytes_and_files_and_is_gone_after(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace, "WORKSPACE_INODES", 40)
    ws = tmp_path / "ws"
    with prepared_workspace(ws, ExecutionLimits(workspace_mb=8), keep=False) as got:
        assert got == ws and is_mount_point(ws) and mounted_cap(ws) == 8 * MiB
        (ws / "a.bin").write_bytes(b"x" * (6 * MiB))
        with pytest.raises(OSError) as full:
            (ws / "b.bin").write_bytes(b"y" * (4 * MiB))
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as many:
            for i in range(60):
                (ws / f"f{i}").touch()
        assert many.value.errno == errno.ENOSPC
    assert not is_mount_point(ws) and mounted_cap(ws) is None
    assert list(ws.iterdir()) == [], "keep=False must not copy anything back"


@as_root
def test_kept_workspace_is_the_tree_as_it_was_and_inert(tmp_path):
    """Links stay links (never followed), FIFOs and sockets become new empty ones, set-uid bits go,
    sparse files stay sparse: the grader's later reads see what they would have seen."""
    import stat

    ws = tmp_path / "ws"
    secret = tmp_path / "secret.txt"
    secret.write_text("grader-only")
    with prepared_workspace(ws, ExecutionLimits(workspace_mb=8), keep=True):
        (ws / "a.txt").write_text("hello")
        os.chmod(ws / "a.txt", 0o4755)
        (ws / "d" / "e").mkdir(parents=True)
        (ws / "d" / "e" / "b.bin").write_bytes(b"x" * 100_000)
        with open(ws / "sparse.bin", "wb") as f:
            f.truncate(1 << 40)  # 1 TB apparent, no data: must not become 1 TB on disk
        os.symlink(secret, ws / "link")
        os.symlink(tmp_path, ws / "d" / "dirlink")
        os.mkfifo(ws / "fifo")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(str(ws / "sock"))
        srv.close()
    assert not is_mount_point(ws)
    kinds = {p.relative_to(ws).as_posix(): stat.S_IFMT(p.lstat().st_mode) for p in ws.rglob("*")}
    assert kinds == {
        "a.txt": stat.S_IFREG,
        "d": stat.S_IFDIR,
        "d/e": stat.S_IFDIR,
        "d/e/b.bin": stat.S_IFREG,
        "d/dirlink": stat.S_IFLNK,
        "sparse.bin": stat.S_IFREG,
        "link": stat.S_IFLNK,
        "fifo": stat.S_IFIFO,
        "sock": stat.S_IFSOCK,
    }, kinds
    assert (ws / "a.txt").read_text() == "hello" and (ws / "a.txt").stat().st_mode & 0o7777 == 0o755
    assert (ws / "d" / "e" / "b.bin").stat().st_size == 100_000
    assert os.readlink(ws / "link") == str(secret) and os.readlink(ws / "d" / "dirlink") == str(tmp_path)
    big = (ws / "sparse.bin").stat()
    assert big.st_size == 1 << 40 and big.st_blocks * 512 < MiB, "the sparse file was copied densely"
    assert not list(tmp_path.glob(".ws*")), "the copy's temporary sibling was left behind"


@as_root
def test_an_error_inside_still_unmounts_and_keeps(tmp_path):
    ws = tmp_path / "ws"
    with pytest.raises(RuntimeError, match="boom"):
        with prepared_workspace(ws, ExecutionLimits(workspace_mb=4), keep=True):
            (ws / "partial.txt").write_text("written before the error")
            raise RuntimeError("boom")
    assert not is_mount_point(ws)
    assert (ws / "partial.txt").read_text() == "written before the error"


@as_root
def test_nested_preparation_mounts_once(tmp_path):
    ws = tmp_path / "ws"
    with prepared_workspace(ws, ExecutionLimits(workspace_mb=4), keep=False):
        with prepared_workspace(ws, ExecutionLimits(workspace_mb=4), keep=True):
            (ws / "x").write_text("1")
        assert is_mount_point(ws) and len(_my_mounts()) == 1, "the inner block must not unmount the outer tmpfs"
    assert not is_mount_point(ws)


def test_a_full_workspace_is_refused_before_anything_is_mounted(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "stale.txt").write_text("x")
    with pytest.raises(AutograderError, match="not empty"):
        with prepared_workspace(ws, ExecutionLimits()):
            pass
    assert not is_mount_point(ws)


def test_a_refused_mount_means_no_cap_recorded(tmp_path, monkeypatch):
    def refuse(*a, **kw):
        raise MountError(errno.EPERM, "mount: operation not permitted")

    monkeypatch.setattr(workspace, "_mount_tmpfs", refuse)
    ws = tmp_path / "ws"
    with prepared_workspace(ws, ExecutionLimits()) as got:
        assert got == ws and ws.is_dir() and mounted_cap(ws) is None and not is_mount_point(ws)


@as_root
def test_mounts_of_a_dead_grader_are_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    if Path(f"/proc/{dead.pid}").exists():
        pytest.skip("the dead process's pid was reused at once")
    stale, mine = tmp_path / "stale", tmp_path / "mine"
    stale.mkdir()
    mine.mkdir()
    workspace._mount_tmpfs(str(stale), f"autograder-ws-{dead.pid}", MiB, 16, 0, 0)
    workspace._mount_tmpfs(str(mine), f"autograder-ws-{os.getpid()}", MiB, 16, 0, 0)
    try:
        swept = sweep_stale_mounts()
        assert str(stale) in swept and not is_mount_point(stale)
        assert is_mount_point(mine), "a live grader's mount was swept"
    finally:
        workspace._umount(str(stale))
        workspace._umount(str(mine))


def test_copy_never_blocks_never_follows_and_stays_within_its_budget(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    deep = src.joinpath(*["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("70 deep")
    (src / "f.txt").write_text("kept")
    os.mkfifo(src / "fifo")  # never opened: no writer would ever come
    os.symlink("/etc/hostname", src / "l")
    dest.mkdir()
    assert returns(lambda: copy_tree_safely(src, dest), "copying a tree with a FIFO") == 2
    assert (dest / "f.txt").read_text() == "kept" and Path(dest / "fifo").is_fifo()
    assert os.readlink(dest / "l") == "/etc/hostname"
    assert dest.joinpath(*["d"] * 70, "bottom.txt").read_text() == "70 deep"
    src.joinpath(*["d"] * 70, *["e"] * (tree_walk.MAX_DEPTH - 69)).mkdir(parents=True)
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(tree_walk.TreeLimitError, match="nested deeper than 256 folders"):
        copy_tree_safely(src, again)
    big_src, big_dest = tmp_path / "big_src", tmp_path / "big_dest"
    big_src.mkdir()
    big_dest.mkdir()
    (big_src / "big.bin").write_bytes(b"x" * (3 * MiB))
    assert copy_tree_safely(big_src, big_dest, max_bytes=MiB) == 1
    assert (big_dest / "big.bin").stat().st_blocks * 512 <= 1.1 * MiB, "more data copied than the budget"


def _counting_polls(dog: DiskWatchdog) -> threading.Semaphore:
    """Released each time ``dog`` has looked at what it watches (its ``over``), so a test waits
    for looks that happened instead of sleeping and hoping they did."""
    polls, look = threading.Semaphore(0), dog.over

    def counted() -> str | None:
        try:
            return look()
        finally:
            polls.release()

    dog.over = counted
    return polls


def test_disk_watchdog_kills_past_the_byte_cap_or_the_file_cap(tmp_path):
    for name, fill in (
        ("bytes", lambda d: (d / "big").write_bytes(b"x" * (2 * MiB))),
        ("files", lambda d: [(d / f"f{i}").touch() for i in range(300)]),
    ):
        folder = tmp_path / name
        folder.mkdir()
        sleeper = subprocess.Popen(["sleep", "600"])
        try:
            dog = DiskWatchdog([("the folder", folder, MiB, 100, None)], lambda s=sleeper: s.pid, interval_s=0.05)
            polls = _counting_polls(dog)
            dog.start()
            for _ in range(2):  # it looked at the folder below the cap, twice
                assert polls.acquire(timeout=NEVER_S), f"{name}: the watchdog never looked at the folder"
            assert sleeper.poll() is None and not dog.fired, f"{name}: killed below the cap"
            fill(folder)
            assert sleeper.wait(timeout=10) == -9, f"{name}: the watchdog did not kill past the cap"
            assert dog.fired == (
                "2 MB in the folder, more than its 1 MB"
                if name == "bytes"
                else "more than 100 files and folders in the folder"
            ), dog.fired
        finally:
            sleeper.kill()
            sleeper.wait()


@as_root
def test_in_a_shared_folder_only_the_sandbox_uids_entries_count_and_are_removed(tmp_path):
    uid = 64123  # no process runs as it
    (tmp_path / "mine").write_bytes(b"x" * 100_000)
    (tmp_path / "mine_dir").mkdir()
    (tmp_path / "mine_dir" / "inner").write_bytes(b"y" * 100_000)
    (tmp_path / "other").write_bytes(b"z" * 300_000)
    for name in ("mine", "mine_dir", "mine_dir/inner"):
        os.chown(tmp_path / name, uid, uid)
    used, entries = tree_walk.usage(tmp_path, what="the folder", max_entries=100, owner=uid)
    assert entries == 3 and 200_000 <= used < 300_000, (used, entries)
    assert disk_watchdog.remove_owned(tmp_path, uid) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]


def test_disk_watchdog_stands_down_when_done(tmp_path):
    """Told it is done, the watchdog ends without killing, though the folder is over its cap from
    the start (joined: a watchdog that ignored ``done`` would kill at its first look)."""
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        (tmp_path / "f").write_bytes(b"x" * 10_000)
        dog = DiskWatchdog([("the folder", tmp_path, 1, 1, None)], lambda: sleeper.pid, interval_s=0.1)
        assert dog.over(), "the folder must be over the cap for this test to mean anything"
        dog.done.set()
        dog.start()
        ended(dog, "the disk watchdog told it is done")
        assert sleeper.poll() is None and not dog.fired
    finally:
        sleeper.kill()
        sleeper.wait()


# ------------------------------------------------------------------ through run_submission
FILL = """
import os, sys, json
def fill(folder, files, each):
    written, error = 0, None
    for i in range(files):
        try:
            with open(os.path.join(folder, "fill%d.bin" % i), "wb") as f:
                os.posix_fallocate(f.fileno(), 0, each)
            written += each
        except OSError as e:
            error = e.strerror
            break
    return {"written": written, "error": error}
rundir = os.path.dirname(sys.argv[sys.argv.index("-f") + 1])
out = {"run": fill(rundir, 4, 30 << 20)}
for i in range(4):
    try:
        os.unlink(os.path.join(rundir, "fill%d.bin" % i))
    except OSError:
        pass
out["ws"] = fill(".", 5, 30 << 20)
for i in range(1, 5):
    if os.path.exists("fill%d.bin" % i):
        os.unlink("fill%d.bin" % i)
json.dump(out, open("fill.json", "w"))
"""


@pytest.mark.kernel
@pytest.mark.slow
@as_root
def test_notebook_writes_stop_at_the_caps(tmp_path):
    """Workspace capped at 64 MB, the run folder (sockets; TMPDIR in the fallback) at 64 MB."""
    import json

    nb = write_notebook(tmp_path, [FILL])
    ws = tmp_path / "ws"
    rec = run_submission(nb, ws, limits=dataclasses.replace(FAST, workspace_mb=64), probe=None, slot=worker_slot())
    assert rec["status"] == "completed", rec["reason"]
    assert "workspace_tmpfs" in rec["isolation"]["layers"], rec["isolation"]
    out = json.loads((ws / "fill.json").read_text())
    assert out["ws"]["written"] <= 64 * MiB and out["ws"]["error"] == "No space left on device", out
    assert out["run"]["written"] <= 64 * MiB and out["run"]["error"] == "No space left on device", out
    assert (ws / "fill0.bin").stat().st_size == 30 * MiB, "the kept workspace lost the notebook's file"
    assert not is_mount_point(ws)


@pytest.mark.kernel
@pytest.mark.slow
def test_without_a_mount_the_watchdog_stops_the_kernel(tmp_path, monkeypatch):
    def refuse(*a, **kw):
        raise MountError(errno.EPERM, "mount: operation not permitted")

    monkeypatch.setattr(workspace, "_mount_tmpfs", refuse)
    # the cell would sleep past its 20 s limit: only the watchdog ends it as a dead kernel (a watchdog
    # that waited for the cell would see it end as a timeout instead)
    cells = [
        "import os\nfor i in range(3):\n    with open('f%d.bin' % i, 'wb') as f:\n"
        "        os.posix_fallocate(f.fileno(), 0, 30 << 20)\nimport time\ntime.sleep(600)",
        "x = 1",
    ]
    nb = write_notebook(tmp_path, cells)
    rec = run_submission(
        nb, tmp_path / "ws", limits=dataclasses.replace(FAST, workspace_mb=32), probe=None, slot=worker_slot()
    )
    assert "workspace_watchdog" in rec["isolation"]["layers"], rec["isolation"]
    assert rec["status"] == "kernel_died", rec["reason"]
    assert "in its working directory, more than its 32 MB" in rec["reason"], rec["reason"]
    assert [c["status"] for c in rec["cells"]] == ["error", "not_run"], "the watchdog waited for the cell to end"
