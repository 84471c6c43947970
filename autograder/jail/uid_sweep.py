"""What a submission's sandbox uid leaves behind without a process, removed after the reaper.

Killing every process of the slot's uid (:func:`.users.reap_user`) ends what lives in a process:
abstract Unix sockets, timers, file locks, inotify watches, memory. Some kernel state outlives
every process, and in the fallback jail (no namespaces: Gradescope's container, a batch worker in
an unprivileged container) it is the host's, where the next submission of the same slot (the
same uid) could read it back:

- SysV shared memory segments, message queues and semaphore sets (``/proc/sysvipc``);
- POSIX message queues (``/dev/mqueue``, where it is mounted);
- files and folders in the shared temporary folders (``/tmp``, ``/var/tmp``, ``/dev/shm``: POSIX
  shared memory and named semaphores are files there).

The jail's seccomp filter denies the SysV and message-queue system calls in every mode (no lesson
library uses them), Landlock keeps the fallback's kernel out of ``/tmp`` and ``/var/tmp``, and
bwrap's and the template's namespaces give each kernel its own IPC objects, ``/tmp`` and
``/dev/shm``; :func:`sweep` is what holds when one of those layers is missing (a machine without
seccomp or Landlock), and the one place that empties the host's ``/dev/shm`` of the uid's files.
It runs once no process of the uid is left (after the reaper: before a run, for what a killed
grader left, and after it) and never raises: what it cannot remove is a warning for
``execution.json``.

- SysV objects are those whose owner or creator is the uid (the owner can be changed with
  ``IPC_SET``, the creator cannot). They are removed with ``IPC_RMID`` by a forked child that has
  become the uid: the owner or creator may remove an object, while root needs ``CAP_SYS_ADMIN``,
  which Docker's root (Gradescope's) does not have.
- In each shared folder, an entry the uid owns is removed with all that is inside it, at any
  depth, following no link (:func:`autograder.tree_walk.empty_folder`). A folder of another owner
  is entered only when the uid could have written in it (world-writable, or writable by the uid's
  group), down to :data:`MAX_DEPTH` levels, so a large read-only tree there (a grader installed
  under ``/tmp``) is never walked.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import tree_walk
from .users import USER_PREFIX, SandboxUser

SYSVIPC = Path("/proc/sysvipc")
# (file in /proc/sysvipc, its id column, the C function that removes one, its words)
SYSV_KINDS = (
    ("shm", "shmid", "shmctl", "SysV shared memory segment"),
    ("msg", "msqid", "msgctl", "SysV message queue"),
    ("sem", "semid", "semctl", "SysV semaphore set"),
)
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
MAX_DEPTH = 4  # folders of other owners entered below a shared folder
IPC_RMID = 0


@dataclass
class Swept:
    """What a sweep removed (``{"SysV shared memory segment": 3, "/tmp": 1}``) and what it could not."""

    removed: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def count(self, what: str, n: int) -> None:
        if n:
            self.removed[what] = self.removed.get(what, 0) + n


def sweep(user: SandboxUser, *, folders: tuple[str, ...] = SHARED_FOLDERS) -> Swept:
    """Remove the SysV IPC objects and the shared folders' entries of ``user``'s uid (call it when
    no process of the uid is left). Never raises: what stays is in ``warnings``."""
    done = Swept()
    if user.uid == 0 or not user.name.startswith(USER_PREFIX) or user.uid == os.geteuid():
        done.warnings.append(f"refused to sweep uid {user.uid} ({user.name}): not a sandbox user")
        return done
    try:
        _sweep_sysv(user, done)
    except Exception as e:  # noqa: BLE001 - a sweep that failed is a warning, never the run's failure
        done.warnings.append(f"SysV IPC objects of {user.name} were not swept: {type(e).__name__}: {e}")
    for folder in folders:
        try:
            _sweep_folder(Path(folder), user, 0, done)
        except Exception as e:  # noqa: BLE001 - as above
            done.warnings.append(f"{folder} was not swept of {user.name}'s files: {type(e).__name__}: {e}")
    return done


# ── SysV IPC ──────────────────────────────────────────────────────────────────────────────────


def sysv_objects(uid: int, kinds=SYSV_KINDS) -> list[tuple[str, int]]:
    """``(kind, id)`` of each SysV object whose owner or creator is ``uid`` (``kind``: shm, msg, sem)."""
    found = []
    for kind, id_column, _, _ in kinds:
        for row in read_sysvipc(kind):
            if uid in (row.get("uid"), row.get("cuid")):
                found.append((kind, row[id_column]))
    return found


def read_sysvipc(kind: str) -> list[dict[str, int]]:
    """The rows of ``/proc/sysvipc/<kind>`` as ``{column: int}`` (none where it cannot be read)."""
    try:
        lines = (SYSVIPC / kind).read_text(encoding="ascii").splitlines()
    except OSError:
        return []
    if not lines:
        return []
    header = lines[0].split()
    rows = []
    for line in lines[1:]:
        values = line.split()
        if len(values) == len(header):
            rows.append({name: int(value) for name, value in zip(header, values)})
    return rows


def _sweep_sysv(user: SandboxUser, done: Swept) -> None:
    objects = sysv_objects(user.uid)
    if not objects:
        return
    failed = _remove_as(user, objects)
    left = set(sysv_objects(user.uid))
    for kind, _, _, words in SYSV_KINDS:
        ours = [ident for k, ident in objects if k == kind]
        done.count(words, sum(1 for ident in ours if (kind, ident) not in left))
        stuck = [ident for ident in ours if (kind, ident) in left]
        if stuck:
            why = "; ".join(sorted({failed.get((kind, i), "still listed") for i in stuck}))
            done.warnings.append(
                f"{len(stuck)} {words}(s) of {user.name} could not be removed ({why}): ids {stuck[:10]}"
            )


def _remove_as(user: SandboxUser, objects: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """``IPC_RMID`` each object, from a forked child that has become ``user`` (the owner or creator
    may; root needs ``CAP_SYS_ADMIN``). Returns ``{(kind, id): why}`` for each one refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {kind: getattr(libc, ctl) for kind, _, ctl, _ in SYSV_KINDS}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: system calls only, then _exit
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            out = []
            for kind, ident in objects:
                # semctl(id, semnum, cmd); shmctl and msgctl(id, cmd, buf)
                args = (ident, 0, IPC_RMID) if kind == "sem" else (ident, IPC_RMID, None)
                if calls[kind](*args) != 0:
                    out.append(f"{kind} {ident} {ctypes.get_errno()}")
            os.write(write_end, "\n".join(out).encode()[:4000])
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            text = pipe.read(8192).decode(errors="replace")
    finally:
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return {obj: f"the child that becomes uid {user.uid} failed" for obj in objects}
    refused = {}
    for line in text.splitlines():
        what, number, err = line.split()
        refused[(what, int(number))] = f"IPC_RMID: {errno.errorcode.get(int(err), err)}"
    return refused


# ── shared folders ────────────────────────────────────────────────────────────────────────────


def _sweep_folder(folder: Path, user: SandboxUser, depth: int, done: Swept) -> None:
    """Remove ``user``'s entries of ``folder``, then look into the folders of others it could write in."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        done.count(str(folder), tree_walk.empty_folder(folder, include=lambda name, st: st.st_uid == user.uid))
    except OSError as e:
        done.warnings.append(f"{folder}: an entry of {user.name} could not be removed: {e}")
    if depth >= MAX_DEPTH:
        return
    for sub in _writable_folders(folder, user):
        _sweep_folder(folder / sub, user, depth + 1, done)


def _writable_folders(folder: Path, user: SandboxUser) -> list[str]:
    """Names of the folders (not links) in ``folder`` that ``user`` could write in but does not own."""
    names = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                writable = st.st_mode & stat.S_IWOTH or (st.st_gid == user.gid and st.st_mode & stat.S_IWGRP)
                if stat.S_ISDIR(st.st_mode) and st.st_uid != user.uid and writable:
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names)
