"""The total size of what a notebook may write: a capped tmpfs, or a watchdog where mounts fail.

``RLIMIT_FSIZE`` caps one file; nothing else caps the sum (hole H1). When the grader is root,
:func:`prepared_workspace` mounts a size- and inode-capped tmpfs on the host's workspace folder
before the kernel starts, and unmounts it when the grader is done with the files: with
``keep=True`` (a workspace read or kept after the block) the tree is first copied out as it is,
inert (no link followed, nothing but regular files read; see :func:`copy_tree_safely`), and
moved back into the folder once the tmpfs is gone.
:func:`run_submission` wraps itself in it (``keep=True``) unless the caller already did, so every
caller gets the cap; the pipeline wraps its execute-and-measure stages (``keep=False`` for its own
temporary workspace, nothing copied). The run folder (sockets, the fallback's ``TMPDIR``), which
the kernel can also write, gets a tmpfs of its own (:func:`capped_mount`).

Where mounting is impossible (not root; a container without ``CAP_SYS_ADMIN``), a
:class:`~.disk_watchdog.DiskWatchdog` counts what the jail holds on disk every half second and
kills it past the cap. Mounts are named ``autograder-<kind>-<pid>``: a later run unmounts those of a
grader process that died without cleaning up (SIGKILL), so none outlives its process for long.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..limits import ExecutionLimits
from ..errors import AutograderError
from .. import proc_info, tree_walk

MiB = 1024 * 1024
WORKSPACE_INODES = tree_walk.MAX_ENTRIES  # files + folders; a graded notebook of assignment 07 makes < 20
RUNDIR_BYTES, RUNDIR_INODES = 64 * MiB, 4_096  # also the fallback's share of the host's /dev/shm
MS_NOSUID, MS_NODEV = 0x2, 0x4
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8
MOUNT_PREFIX = "autograder-"

_mounted: dict[str, int] = {}  # real path → cap in bytes, for tmpfs mounts this process made
_lock = threading.Lock()


class MountError(OSError):
    """mount(2) refused (not root, no CAP_SYS_ADMIN, seccomp): the caller falls back to a watchdog."""


def workspace_cap_bytes(limits: ExecutionLimits) -> int:
    return int(getattr(limits, "workspace_mb", 256)) * MiB


def mounted_cap(path: Path) -> int | None:
    """The byte cap of the tmpfs this process mounted on ``path``, or None."""
    with _lock:
        return _mounted.get(os.path.realpath(path))


def require_empty(workspace: Path) -> None:
    if workspace.is_dir() and any(workspace.iterdir()):
        raise AutograderError(f"workspace {workspace} is not empty; the kernel must start in an empty folder")


# ------------------------------------------------------------------ mount(2) and umount2(2)
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def _mount_tmpfs(path: str, source: str, size: int, inodes: int, uid: int, gid: int) -> None:
    opts = f"size={int(size)},nr_inodes={int(inodes)},mode=0700,uid={int(uid)},gid={int(gid)}"
    if _libc().mount(source.encode(), path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode()) != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"cannot mount a tmpfs on {path}: {os.strerror(err)}")


def _umount(path: str) -> None:
    """Unmount ``path``; detach lazily when it is busy (the mount is gone from the tree either way)."""
    libc = _libc()
    if libc.umount2(path.encode(), UMOUNT_NOFOLLOW) == 0:
        return
    err = ctypes.get_errno()
    if err == errno.EINVAL:  # not a mount point (any more)
        return
    if libc.umount2(path.encode(), UMOUNT_NOFOLLOW | MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err != errno.EINVAL:
            raise OSError(err, f"cannot unmount {path}: {os.strerror(err)}")


def is_mount_point(path: Path | str) -> bool:
    real = os.path.realpath(path)
    return any(m.point == real for m in proc_info.mounts())


def sweep_stale_mounts() -> list[str]:
    """Unmount ``autograder-*-<pid>`` tmpfs mounts whose grader process is gone; returns their paths."""
    swept = []
    for m in proc_info.mounts():
        if not m.source.startswith(MOUNT_PREFIX):
            continue
        pid = m.source.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid() or proc_info.pid_exists(int(pid)):
            continue
        try:
            _umount(m.point)
            swept.append(m.point)
        except OSError:
            continue
    return swept


@contextmanager
def capped_mount(path: Path, kind: str, size: int, inodes: int, owner: tuple[int, int] | None = None) -> Iterator[bool]:
    """A capped tmpfs on the empty folder ``path`` while the block runs; yields False (nothing
    mounted) where mounting is impossible. The contents are discarded on exit."""
    real = os.path.realpath(path)
    if os.geteuid() != 0:
        yield False
        return
    sweep_stale_mounts()
    uid, gid = owner or (os.geteuid(), os.getegid())
    try:
        _mount_tmpfs(real, f"{MOUNT_PREFIX}{kind}-{os.getpid()}", size, inodes, uid, gid)
    except MountError:
        yield False
        return
    with _lock:
        _mounted[real] = size
    try:
        yield True
    finally:
        with _lock:
            _mounted.pop(real, None)
        _umount(real)


# ------------------------------------------------------------------ the workspace
@contextmanager
def prepared_workspace(workspace: Path, limits: ExecutionLimits, keep: bool = True) -> Iterator[Path]:
    """Mount the capped tmpfs on ``workspace`` (made if missing; it must be empty) for the block.

    On exit it is unmounted; with ``keep`` its tree is first copied back into the folder, inert
    (:func:`copy_tree_safely`). Nested use on a workspace already prepared is a no-op. Without root, or
    when the mount is refused, nothing is mounted and :func:`run_submission` watches the folder
    instead (``isolation.layers``: ``workspace_tmpfs`` or ``workspace_watchdog``).
    """
    workspace = Path(workspace).absolute()
    if mounted_cap(workspace) is not None:
        yield workspace
        return
    require_empty(workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(workspace, 0o700)
    kept = False
    try:
        with capped_mount(workspace, "ws", workspace_cap_bytes(limits), WORKSPACE_INODES) as mounted:
            try:
                yield workspace
            finally:
                if mounted and keep:
                    kept = True
                    _keep_contents(workspace)
    finally:
        if kept:
            _restore_contents(workspace)


def _kept_name(workspace: Path) -> Path:
    return workspace.parent / f".{workspace.name}.autograder-keep"


def _keep_contents(workspace: Path) -> None:
    """Copy the tmpfs's tree to a sibling folder (still mounted; restored after the unmount)."""
    dest = _kept_name(workspace)
    tree_walk.remove_tree(dest, ignore_errors=True)
    try:
        dest.mkdir(mode=0o700)
        copy_tree_safely(workspace, dest, max_bytes=mounted_cap(workspace))
    except (OSError, tree_walk.TreeLimitError) as e:
        warnings.warn(f"the workspace {workspace} could not be kept: {e}", RuntimeWarning, stacklevel=2)


def _restore_contents(workspace: Path) -> None:
    src = _kept_name(workspace)
    if not src.is_dir():
        return
    try:
        for entry in os.scandir(src):
            os.rename(entry.path, workspace / entry.name)
    except OSError as e:
        warnings.warn(f"the workspace {workspace} could not be restored from {src}: {e}", RuntimeWarning, stacklevel=2)
    finally:
        tree_walk.remove_tree(src, ignore_errors=True)


def copy_tree_safely(
    src: Path,
    dest: Path,
    max_bytes: int | None = None,
    *,
    what: str = "the working directory",
    max_depth: int = tree_walk.MAX_DEPTH,
    max_entries: int = tree_walk.MAX_ENTRIES,
) -> int:
    """Copy the untrusted tree ``src`` into the existing folder ``dest`` as it is, inert; returns
    the files copied.

    Walked with :func:`autograder.tree_walk.walk` (nothing followed, names that vanish or change type on the
    way skipped, :class:`~autograder.tree_walk.TreeLimitError` past ``max_depth`` folders or ``max_entries``
    entries); written relative to ``dest``'s folder descriptors. Only folders and regular files
    are opened: symlinks are recreated from their target text, FIFOs and sockets as new empty
    ones, devices left out; so the grader later sees "a symlink", "a FIFO", exactly as without
    the tmpfs. Modes keep their permission bits only, sparse files stay sparse, and at most
    ``max_bytes`` of data are copied.
    """
    budget = [max_bytes if max_bytes is not None else 1 << 62]
    top = tree_walk.open_folder(src)
    outs = [tree_walk.open_folder(dest)]  # outs[d]: the copy of the folder holding entries of depth d + 1
    copied = 0
    try:
        for e in tree_walk.walk(top, what=what, max_depth=max_depth, max_entries=max_entries):
            out, mode = outs[e.depth - 1], stat.S_IMODE(e.st.st_mode) & 0o777
            if e.leaving:
                os.fchmod(outs[-1], mode)
                os.close(outs.pop())
            elif e.is_dir:
                os.mkdir(e.name, 0o700, dir_fd=out)
                outs.append(os.open(e.name, tree_walk.DIR_FLAGS, dir_fd=out))
            elif stat.S_ISREG(e.st.st_mode):
                copied += _copy_file(e, out, budget)
            elif stat.S_ISLNK(e.st.st_mode):
                try:
                    target = os.readlink(e.name, dir_fd=e.dir_fd)
                except OSError as err:
                    if err.errno in tree_walk.GONE or err.errno == errno.EINVAL:  # gone, or no longer a link
                        continue
                    raise
                os.symlink(target, e.name, dir_fd=out)
            elif stat.S_ISFIFO(e.st.st_mode):
                os.mkfifo(e.name, mode, dir_fd=out)
            elif stat.S_ISSOCK(e.st.st_mode):
                os.mknod(e.name, stat.S_IFSOCK | mode, dir_fd=out)
    finally:
        for fd in outs:
            os.close(fd)
        os.close(top)
    return copied


def _copy_file(e: tree_walk.Entry, out: int, budget: list[int]) -> int:
    """Copy the regular file ``e`` into the folder ``out``; 0 when it vanished or is no longer one."""
    fd = tree_walk.open_at(e.dir_fd, e.name, folder=False)
    if fd is None:
        return 0
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            return 0
        dst = os.open(
            e.name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            stat.S_IMODE(fst.st_mode) & 0o777,
            dir_fd=out,
        )
        try:
            _copy_data(fd, dst, fst.st_size, budget)
        finally:
            os.close(dst)
        return 1
    finally:
        os.close(fd)


def _copy_data(src: int, dst: int, size: int, budget: list[int]) -> None:
    """Copy the data regions of ``src`` (holes stay holes), within what is left of ``budget``."""
    pos = 0
    while pos < size and budget[0] > 0:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
            end = os.lseek(src, start, os.SEEK_HOLE)
        except OSError:  # ENXIO: no data after pos
            break
        end = min(end, size, start + budget[0])
        os.lseek(src, start, os.SEEK_SET)
        os.lseek(dst, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            sent = os.sendfile(dst, src, None, min(left, 16 * MiB))
            if sent == 0:
                break
            left -= sent
            budget[0] -= sent
        pos = end
    os.ftruncate(dst, size)
