"""Dedicated sandbox uids (one per concurrent slot) and the reaper that ends their processes.

When the grader runs as root, each kernel runs as its own system user ``autograder-sb<slot>``:
RLIMIT_NPROC then applies (it is ignored for root), files the grader owns stay unreadable, and
every process of a submission can be found and killed by uid afterwards, even a double-forked
daemon that left its process group. The reaper signals only as that uid (a forked child that
drops to the uid before calling ``kill(-1)``), never as root.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..proc_info import pids_of_uid

USER_PREFIX = "autograder-sb"
LOCK_DIR = Path("/run/autograder") if os.path.isdir("/run") else Path("/var/lock/autograder")


@dataclass(frozen=True)
class SandboxUser:
    name: str
    uid: int
    gid: int


class SandboxUserError(Exception):
    """A sandbox user could not be found or created."""


def user_name(slot: int) -> str:
    return f"{USER_PREFIX}{int(slot)}"


def ensure_user(slot: int) -> SandboxUser:
    """The sandbox user of ``slot``, created (system user, no home, no login) when missing."""
    return ensure_named_user(user_name(slot))


def ensure_named_user(name: str) -> SandboxUser:
    """The system user ``name`` (no home, no login, a group of its own), created when missing."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        if os.geteuid() != 0 or not os.path.exists(useradd):
            raise SandboxUserError(
                f"sandbox user {name} is missing and cannot be created "
                f"(need root and useradd); hint: useradd --system {name}"
            ) from None
        proc = subprocess.run(
            [
                useradd,
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--user-group",
                name,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode not in (0, 9):  # 9: created meanwhile by a concurrent run
            raise SandboxUserError(f"useradd {name} failed (exit {proc.returncode}): {proc.stderr.strip()}") from None
        pw = pwd.getpwnam(name)
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        raise SandboxUserError(f"sandbox user {name} has uid/gid 0; refusing to use it")
    return SandboxUser(name, pw.pw_uid, pw.pw_gid)


def _kill_all_as(user: SandboxUser) -> None:
    """Fork a child that becomes ``user`` and sends SIGKILL to everything that uid may signal."""
    if user.uid == 0 or not user.name.startswith(USER_PREFIX):
        raise SandboxUserError(f"refusing to reap uid {user.uid} ({user.name}): not a sandbox user")
    pid = os.fork()
    if pid == 0:  # child: only system calls, then _exit
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            if os.getresuid() == (user.uid,) * 3 and os.getuid() != 0:
                os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def reap_user(user: SandboxUser, timeout_s: float = 5.0) -> list[int]:
    """Kill every process of ``user``; returns the pids still alive after ``timeout_s`` (normally [])."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = pids_of_uid(user.uid)
        if not alive or time.monotonic() > deadline or os.geteuid() != 0:
            return alive
        _kill_all_as(user)
        time.sleep(0.02)


@contextmanager
def claim_slot(slot: int, spare: int = 16) -> Iterator[int]:
    """Hold the lock of a free slot (``slot`` if free, else one of the next ``spare``) while a run uses it.

    Two runs must never share a sandbox uid: the reaper of one would kill the other's kernel.
    Runs in other processes that ask for a busy slot get the next free one; when all are busy,
    this waits for ``slot``. Without root there are no sandbox uids and nothing to lock.
    """
    if os.geteuid() != 0:
        yield slot
        return
    LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    candidates = [*range(slot, slot + spare), slot]
    for n, candidate in enumerate(candidates):
        fd = os.open(LOCK_DIR / f"sb{candidate}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            last = n == len(candidates) - 1  # every slot busy: wait for the one asked for
            fcntl.flock(fd, fcntl.LOCK_EX if last else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield candidate
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return


def chown_tree_top(path: Path, user: SandboxUser, mode: int = 0o700) -> None:
    """Give ``path`` (a directory the grader just made) to the sandbox user."""
    os.chown(path, user.uid, user.gid, follow_symlinks=False)
    os.chmod(path, mode)


def require_reachable(folder: Path, user: SandboxUser) -> None:
    """Fail clearly when the sandbox uid could not pass through ``folder`` or one of its parents."""
    for p in [folder, *folder.parents]:
        st = p.stat()
        ok = (
            st.st_mode & 0o001
            or (st.st_uid == user.uid and st.st_mode & 0o100)
            or (st.st_gid == user.gid and st.st_mode & 0o010)
        )
        if not ok:
            raise RuntimeError(
                f"the sandbox user {user.name} cannot reach the workspace: {p} is mode "
                f"{st.st_mode & 0o777:o}; hint: put the workspace under a folder others may "
                "traverse (e.g. /tmp)"
            )
