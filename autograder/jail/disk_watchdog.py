"""The disk watchdog: where no tmpfs caps what a notebook writes, count it the way the kernel does.

Where the grader may not mount (not root; a container without ``CAP_SYS_ADMIN``, as on
Gradescope), a :class:`DiskWatchdog` thread looks every half second at everything the jail can
hold on disk and kills it past its cap:

- the folders it may write (the working directory, the run folder, the sandbox uid's entries in
  the shared /dev/shm), sized with :func:`autograder.tree_walk.usage` (blocks on disk, entries, depth);
- the files the jail's processes hold open after deleting them (``/proc/<pid>/fd`` links marked
  ``(deleted)`` with no name left, sized by ``fstat`` through the link, and deleted files they
  keep mapped, from ``/proc/<pid>/maps``): no folder lists them, yet they fill the disk as long
  as the descriptor lives (1.5 GB were once held past a 256 MB cap). They count against the
  working directory's cap;
- the free space of the working directory's file system (``statvfs``): past the cap's worth of
  lost space while the disk falls under :data:`FREE_FLOOR`, whatever hides the files, the jail
  is stopped before the grader's own disk is full.

It bounds how long a notebook stays over a cap (one interval), not how much it writes within that
interval. What fired is a phrase for the student's reason (``"90 MB in its working directory, more
than its 32 MB"``): the run ends as ``kernel_died`` with it, the notebook's doing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import tree_walk
from ..proc_info import children_of, descendants, pids_of_uid

MiB = 1024 * 1024
SHM_DIR = "/dev/shm"
WATCH_INTERVAL_S = 0.5
FREE_FLOOR = 1024 * MiB  # below this much free space the disk itself is at risk
NOT_FILES = ("/dev/zero", "/SYSV")  # shared anonymous memory and SysV segments: memory, not disk
Watched = tuple[str, Path, int, int, "int | None"]  # (name, folder, max bytes, max entries, owner uid)


@dataclass
class Held:
    """What is counted beyond the folders' listings, against the working directory's cap.

    ``owner``: the sandbox uid and gid (their processes are the jail's), or None (the kernel and
    its descendants are). ``disk``: a folder on the file system whose free space is watched.
    """

    cap: int
    owner: tuple[int, int] | None
    disk: Path
    free_floor: int = FREE_FLOOR
    statvfs: Callable[[Path], os.statvfs_result] = os.statvfs


def remove_owned(folder: Path, uid: int) -> int:
    """Remove the entries of the shared ``folder`` (e.g. /dev/shm) owned by ``uid`` and everything
    inside them, at any depth; returns how many top-level entries went.

    Call only once no process of ``uid`` is left: what one submission leaves there must not reach
    the next one run as the same sandbox uid.
    """
    try:
        return tree_walk.empty_folder(folder, include=lambda name, st: st.st_uid == uid)
    except OSError:
        return 0


class DiskWatchdog(threading.Thread):
    """Kills the jail (``pid_of()`` and its children) when what it holds on disk passes a cap.

    ``watched``: ``(name, folder, max_bytes, max_entries, owner)`` each (``owner``: count only
    that uid's entries, or None); the first one is the working directory when ``held`` is given.
    """

    def __init__(
        self,
        watched: list[Watched],
        pid_of: Callable[[], int | None],
        interval_s: float = WATCH_INTERVAL_S,
        held: Held | None = None,
    ) -> None:
        super().__init__(daemon=True, name="autograder-disk-watchdog")
        self.watched, self.pid_of, self.interval_s, self.held = watched, pid_of, interval_s, held
        self.done = threading.Event()
        self.fired: str | None = None
        self._free_at_start = self._free() if held is not None else None

    def over(self) -> str | None:
        """What is over its cap (``"90 MB in the working directory, more than its 32 MB"``), or None."""
        for i, (name, folder, max_bytes, max_entries, owner) in enumerate(self.watched):
            try:
                used, _ = tree_walk.usage(folder, what=name, max_entries=max_entries, owner=owner)
            except tree_walk.TreeLimitError as e:
                return e.written
            if i == 0 and self.held is not None:
                hidden = held_open_bytes(self._jail_pids(), self.held.owner)
                if hidden and used + hidden > self.held.cap:
                    return (
                        f"{(used + hidden) / MiB:.0f} MB in {name} ({hidden / MiB:.0f} MB of it in files "
                        f"deleted but still open), more than its {self.held.cap / MiB:.0f} MB"
                    )
            if used > max_bytes:
                return f"{used / MiB:.0f} MB in {name}, more than its {max_bytes / MiB:.0f} MB"
        return self._disk_over()

    def _free(self) -> int | None:
        if self.held is None:  # nothing to measure free space on: a watchdog without a held disk
            return None
        try:
            st = self.held.statvfs(self.held.disk)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def _disk_over(self) -> str | None:
        """Space lost on the working directory's disk since the start, once the disk runs low."""
        if self.held is None or self._free_at_start is None:
            return None
        free = self._free()
        if free is None:
            return None
        lost = self._free_at_start - free
        if free < self.held.free_floor and lost > self.held.cap:
            return (
                f"{lost / MiB:.0f} MB to the disk of its working directory (down to {free / MiB:.0f} MB "
                f"free), more than its {self.held.cap / MiB:.0f} MB"
            )
        return None

    def _jail_pids(self) -> list[int]:
        if self.held is not None and self.held.owner is not None:
            return pids_of_uid(self.held.owner[0])
        top = self.pid_of()
        return descendants(top) if top else []

    def run(self) -> None:
        while not self.done.wait(self.interval_s):
            why = self.over()
            pid = self.pid_of() if why else None
            if not pid:
                continue
            self.fired = why
            for target in [*children_of(pid), pid]:
                try:
                    os.kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return


# ------------------------------------------------------------------ files held open after deletion
def held_open_bytes(pids: list[int], owner: tuple[int, int] | None = None) -> int:
    """Bytes on disk of files that ``pids`` hold open or mapped after deleting every name of them.

    Each file counts once (by device and inode). Reading another uid's /proc entries needs its
    credentials where the grader lacks ``CAP_SYS_PTRACE`` (Docker): with ``owner``, this thread
    takes that uid and gid as its file-system ids while it reads (they are per thread).
    """
    seen: dict[tuple[int, int], int] = {}
    with _as_fs_owner(owner):
        for pid in pids:
            _held_by_fds(pid, seen)
            _held_by_maps(pid, seen)
    return sum(seen.values())


def _held_by_fds(pid: int, seen: dict[tuple[int, int], int]) -> None:
    folder = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(folder)
    except OSError:
        return
    for fd in fds:
        link = f"{folder}/{fd}"
        try:
            if not os.readlink(link).endswith(" (deleted)"):
                continue
            st = os.stat(link)  # the open file itself, through the magic link
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 0:
            seen[(st.st_dev, st.st_ino)] = max(seen.get((st.st_dev, st.st_ino), 0), st.st_blocks * 512)


def _held_by_maps(pid: int, seen: dict[tuple[int, int], int]) -> None:
    """Deleted files kept only as a mapping (opened, mapped, closed, unlinked)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        if not line.endswith(b" (deleted)"):
            continue
        fields = line.split(None, 5)
        if len(fields) < 6 or fields[4] == b"0" or fields[5].startswith(tuple(n.encode() for n in NOT_FILES)):
            continue
        span, offset, dev, inode = fields[0].decode(), int(fields[2], 16), fields[3].decode(), int(fields[4])
        major, minor = (int(x, 16) for x in dev.split(":"))
        key = (os.makedev(major, minor), inode)
        try:  # the whole file (needs CAP_SYS_ADMIN)
            size = os.stat(f"/proc/{pid}/map_files/{span}").st_blocks * 512
        except OSError:  # else at least what is mapped of it
            start, end = (int(x, 16) for x in span.split("-"))
            size = offset + end - start
        seen[key] = max(seen.get(key, 0), size)


_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def _as_fs_owner(owner: tuple[int, int] | None) -> Iterator[None]:
    """This thread's file-system uid and gid set to ``owner`` for the block (root only)."""
    if owner is None or os.geteuid() != 0:
        yield
        return
    uid, gid = owner
    _libc.setfsgid(gid)
    _libc.setfsuid(uid)
    try:
        yield
    finally:
        _libc.setfsuid(os.geteuid())
        _libc.setfsgid(os.getegid())
