"""The one way the grader walks, copies, sizes and removes a tree a student wrote.

A notebook controls every name, type and shape in its working directory (and in what it leaves
in the run folder or /dev/shm), and a thread of it may keep changing them while the grader looks.
So every walk here is:

- **iterative**: an explicit stack, never recursion (a folder nested 3,000 deep once made
  ``shutil.rmtree`` raise ``RecursionError``, and the grade was lost);
- **relative to folder descriptors**: each entry is looked at with ``lstat`` relative to its
  folder's descriptor and opened with ``O_NOFOLLOW`` (``O_NONBLOCK`` for files, so a FIFO cannot
  block): no symlink is ever followed, at any depth, and no path is longer than one name;
- **tolerant**: a name that vanishes or changes type between the listing and its use is skipped
  (a thread creating and deleting files during the copy once made it raise, and the student's
  doing was reported as the grader's failure);
- **bounded**: :func:`walk` stops with :class:`TreeLimitError` past ``max_depth`` nested folders
  or ``max_entries`` entries. That error is not a failure of the grader: it carries the reason
  the student reads ("the working directory is nested deeper than 256 folders").

Removal (:func:`remove_tree`, :func:`empty_folder`) has no limit, because it is the grader's disk:
it keeps at most :data:`REMOVE_OPEN_MAX` folders open and moves folders deeper than that up to
the top (``rename`` within the tree), so any depth is removed with a bounded number of
descriptors. It never crosses into another file system (a mount inside the tree stays).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 256  # folders nested in a student's tree
MAX_ENTRIES = 20_000  # files and folders (the workspace's tmpfs has as many inodes)
REMOVE_OPEN_MAX = 64  # folders a removal keeps open; deeper ones are moved up first
REMOVE_ROUNDS_MAX = 100_000  # rounds of a removal (a round removes 64 levels of every chain)
HOIST_PREFIX = ".autograder-hoisted-"  # + a token per removal: a student cannot guess the names
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# errors of an entry that vanished or changed type between the listing and its use
GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO)


class TreeLimitError(Exception):
    """A tree past a walk's limits: a graded reason for the student, never the grader's failure."""

    def __init__(self, what: str, kind: str, limit: int) -> None:
        self.what, self.kind, self.limit = what, kind, limit
        super().__init__(self.sentence)

    @property
    def sentence(self) -> str:
        """``the working directory is nested deeper than 256 folders``."""
        if self.kind == "depth":
            return f"{self.what} is nested deeper than {self.limit:,} folders"
        return f"{self.what} holds more than {self.limit:,} files and folders"

    @property
    def written(self) -> str:
        """What the notebook wrote: ``more than 20,000 files and folders in its working directory``."""
        if self.kind == "depth":
            return f"folders nested deeper than {self.limit:,} levels in {self.what}"
        return f"more than {self.limit:,} files and folders in {self.what}"


@dataclass(frozen=True)
class Entry:
    """One entry of a walk. ``dir_fd`` is its folder's descriptor, open until the walk moves on;
    ``st`` its ``lstat`` (for a folder: the ``fstat`` of what was opened); ``path`` relative to the
    top, '/'-joined; ``depth`` 1 for the top's own entries. A folder is given twice: on the way in
    (``leaving`` False, before its entries) and on the way out (``leaving`` True)."""

    dir_fd: int
    name: str
    path: str
    depth: int
    st: os.stat_result
    leaving: bool = False

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


def _names(fd: int, room: int) -> list[str] | None:
    """The names in the folder ``fd``, sorted, at most ``room`` + 1 of them (None: it cannot be listed)."""
    names: list[str] = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                names.append(entry.name)
                if len(names) > room:
                    break
    except OSError:
        return None
    return sorted(names)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in the folder ``dir_fd``; None when it is gone."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as e:
        if e.errno in GONE:
            return None
        raise


def open_at(dir_fd: int, name: str, *, folder: bool) -> int | None:
    """Open ``name`` in ``dir_fd`` without following a link (a folder, or a file without blocking);
    None when it vanished, changed type or may not be opened."""
    try:
        return os.open(name, DIR_FLAGS if folder else FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in GONE or e.errno in (errno.EACCES, errno.EPERM):
            return None
        raise


def walk(
    top: int,
    *,
    what: str = "the working directory",
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
    include: Callable[[Entry], bool] | None = None,
) -> Iterator[Entry]:
    """Every entry under the open folder ``top``, depth first, folders before their contents,
    each folder's entries in sorted order.

    ``include(entry)`` False leaves an entry out (and a folder's contents: a way to stop short of
    the limits). Raises
    :class:`TreeLimitError` at the first folder nested deeper than ``max_depth`` or the first entry
    past ``max_entries``; the caller closes ``top``.
    """
    count = 0
    # a frame: (the folder's fd, its names, the next name's index, its path, its depth, its entry)
    stack: list[list] = [[top, _names(top, max_entries) or [], 0, "", 0, None]]
    try:
        while stack:
            frame = stack[-1]
            fd, names, i, rel, depth, own = frame
            if i >= len(names):
                stack.pop()
                if own is not None:
                    os.close(fd)
                    yield Entry(own.dir_fd, own.name, own.path, own.depth, own.st, leaving=True)
                continue
            frame[2] = i + 1
            name = names[i]
            st = lstat_at(fd, name)
            if st is None:
                continue
            path = f"{rel}/{name}" if rel else name
            entry = Entry(fd, name, path, depth + 1, st)
            if include is not None and not include(entry):
                continue
            if stat.S_ISDIR(st.st_mode) and depth + 1 > max_depth:
                raise TreeLimitError(what, "depth", max_depth)
            count += 1
            if count > max_entries:
                raise TreeLimitError(what, "entries", max_entries)
            if not stat.S_ISDIR(st.st_mode):
                yield entry
                continue
            child = open_at(fd, name, folder=True)
            if child is None:
                continue
            try:
                entry = Entry(fd, name, path, depth + 1, os.fstat(child))
                sub = _names(child, max_entries - count)
            except BaseException:
                os.close(child)
                raise
            stack.append([child, sub or [], 0, path, depth + 1, entry])
            yield entry
    finally:
        for frame in stack[1:]:
            os.close(frame[0])


def open_folder(path: Path | str) -> int:
    """The folder ``path`` itself opened for a walk (raises if it is a link or not a folder)."""
    return os.open(path, DIR_FLAGS)


def usage(
    folder: Path | str,
    *,
    what: str,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
    owner: int | None = None,
) -> tuple[int, int]:
    """``(bytes on disk, entries)`` under ``folder``; with ``owner``, only that uid's top-level
    entries (and what is inside them) count. :class:`TreeLimitError` past the limits."""
    include = None
    if owner is not None:

        def include(e: Entry) -> bool:
            return e.depth > 1 or e.st.st_uid == owner

    try:
        top = open_folder(folder)
    except OSError:
        return 0, 0
    used = entries = 0
    try:
        for e in walk(top, what=what, max_depth=max_depth, max_entries=max_entries, include=include):
            if not e.leaving:
                used += e.st.st_blocks * 512
                entries += 1
    finally:
        os.close(top)
    return used, entries


# ------------------------------------------------------------------ removal
def remove_tree(path: Path | str, *, ignore_errors: bool = False) -> None:
    """Remove ``path`` and everything under it, at any depth, following no link; a missing path is
    fine. With ``ignore_errors``, what cannot be removed stays; else the first such error is raised
    once everything else is gone."""
    errors: list[OSError] = []
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        errors.append(e)
    else:
        try:
            if stat.S_ISDIR(st.st_mode):
                _empty(path, errors)
                os.rmdir(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            errors.append(e)
    if errors and not ignore_errors:
        raise errors[0]


def empty_folder(folder: Path | str, *, include: Callable[[str, os.stat_result], bool] | None = None) -> int:
    """Remove everything inside ``folder`` (with ``include(name, lstat)``: only the top-level
    entries it accepts, and all that is inside them); returns how many top-level entries went.
    Raises the first error once everything else is gone."""
    errors: list[OSError] = []
    removed = _empty(folder, errors, include)
    if errors:
        raise errors[0]
    return removed


def _empty(
    folder: Path | str, errors: list[OSError], include: Callable[[str, os.stat_result], bool] | None = None
) -> int:
    top = open_folder(folder)
    prefix = f"{HOIST_PREFIX}{secrets.token_hex(6)}-"
    try:
        dev = os.fstat(top).st_dev
        removed, hoisted = 0, 0
        chosen: set[str] | None = None
        if include is not None:
            chosen = set()
            for name in _names(top, 1 << 62) or []:
                st = lstat_at(top, name)
                if st is not None and include(name, st):
                    chosen.add(name)
        for _ in range(REMOVE_ROUNDS_MAX):
            names = _names(top, 1 << 62) or []
            if chosen is not None:  # the chosen entries, and what was moved up out of them
                names = [n for n in names if n in chosen or n.startswith(prefix)]
            if not names:
                break
            progress = False
            for name in names:
                done, moved = _remove_entry(top, name, dev, errors, (prefix, hoisted))
                hoisted += moved
                progress = progress or done or moved > 0
                removed += done and not name.startswith(prefix)
            if not progress:
                break
        return removed
    finally:
        os.close(top)


def _remove_entry(top: int, name: str, dev: int, errors: list[OSError], hoist: tuple[str, int]) -> tuple[bool, int]:
    """Remove the entry ``name`` of ``top`` (depth first, at most REMOVE_OPEN_MAX folders open);
    folders deeper than that are moved up into ``top`` for a later round. Returns (gone, moved)."""
    moved = 0
    st = lstat_at(top, name)
    if st is None:
        return True, 0
    if not stat.S_ISDIR(st.st_mode):
        return _unlink(top, name, errors), 0
    if st.st_dev != dev:
        errors.append(OSError(errno.EXDEV, "a mount point inside the tree was left in place", name))
        return False, 0
    fd = open_at(top, name, folder=True)
    if fd is None and _make_listable(top, name):
        fd = open_at(top, name, folder=True)
    if fd is None:
        return _rmdir(top, name, errors), 0
    # a frame: (fd, its name in the folder above, the names left in it)
    stack: list[tuple[int, str, list[str]]] = [(fd, name, _names(fd, 1 << 62) or [])]
    try:
        while stack:
            fd, own, names = stack[-1]
            if not names:
                stack.pop()
                os.close(fd)
                parent = stack[-1][0] if stack else top
                _rmdir(parent, own, errors)
                continue
            child = names.pop()
            cst = lstat_at(fd, child)
            if cst is None:
                continue
            if not stat.S_ISDIR(cst.st_mode):
                _unlink(fd, child, errors)
                continue
            if cst.st_dev != dev:
                errors.append(OSError(errno.EXDEV, "a mount point inside the tree was left in place", child))
                continue
            if len(stack) >= REMOVE_OPEN_MAX:  # deep: move it up, remove it in a later round
                if _hoist(fd, child, top, hoist[0], hoist[1] + moved, errors):
                    moved += 1
                continue
            sub = open_at(fd, child, folder=True)
            if sub is None and _make_listable(fd, child):
                sub = open_at(fd, child, folder=True)
            if sub is None:
                _rmdir(fd, child, errors)
                continue
            stack.append((sub, child, _names(sub, 1 << 62) or []))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return lstat_at(top, name) is None, moved


def _hoist(fd: int, name: str, top: int, prefix: str, n: int, errors: list[OSError]) -> bool:
    for attempt in range(n, n + 1000):
        try:
            os.rename(name, f"{prefix}{attempt}", src_dir_fd=fd, dst_dir_fd=top)
            return True
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
                continue
            if e.errno not in GONE:
                errors.append(e)
            return False
    return False


def _make_listable(dir_fd: int, name: str) -> bool:
    """A folder its owner made unreadable (mode 000; matters where the grader is not root)."""
    try:
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except (OSError, NotImplementedError):
        try:
            st = lstat_at(dir_fd, name)
            if st is not None and stat.S_ISDIR(st.st_mode):
                os.chmod(name, 0o700, dir_fd=dir_fd)  # Linux has no lchmod; it is a folder, not a link
                return True
        except OSError:
            pass
    return False


def _unlink(dir_fd: int, name: str, errors: list[OSError]) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno == errno.EISDIR:  # it became a folder meanwhile: a later round removes it
            return False
        errors.append(e)
        return False
    return True


def _rmdir(dir_fd: int, name: str, errors: list[OSError]) -> bool:
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):  # refilled or replaced: next round
            return False
        errors.append(e)
        return False
    return True
