"""What the kernel's ``/proc`` says about mounts, cgroups and processes: the one reader of it.

- :func:`mounts` — this process's mount table (``/proc/self/mountinfo``), every field parsed and
  unescaped (:func:`parse_mountinfo`): the workspace's tmpfs mounts, the cgroup hierarchies;
- :func:`own_cgroups` — this process's cgroup per v1 controller, ``""`` for v2
  (``/proc/self/cgroup``, :func:`parse_cgroup_membership`); :func:`cgroup_v1_mounts` — where each
  v1 controller's hierarchy is mounted;
- :func:`processes` — every process's pid, parent, state and uids (``/proc/<pid>/status``), and
  from it :func:`children_of`, :func:`descendants`, :func:`pids_of_uid`; :func:`pid_exists`,
  :func:`is_running`.

psutil gives processes but not a mount's options or optional fields, and ``disk_partitions``
hides pseudo file systems (cgroup, tmpfs), so this reads ``/proc`` itself, with the standard
library only (it is at the bottom of the import graph). A file that cannot be read (a process
that is gone, ``/proc`` not mounted) reads as nothing, never as an exception.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"
OWN_CGROUP = "/proc/self/cgroup"
_ESCAPE = re.compile(rb"\\([0-7]{3})")
_V1_FLAGS = frozenset({"rw", "ro", "xattr", "noprefix", "clone_children", "cpuset_v2_mode", "favordynmods"})


# ── mounts ────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo (proc(5)): ``36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw``."""

    mount_id: int
    parent_id: int
    device: str  # major:minor
    root: str  # the folder of the file system mounted here
    point: str  # where, in this process's view
    options: tuple[str, ...]  # per mount: rw/ro, nosuid, ...
    optional: tuple[str, ...]  # shared:N, master:N, propagate_from:N, unbindable
    fstype: str
    source: str
    super_options: tuple[str, ...]  # per file system: size=, nr_inodes=; a v1 cgroup's controllers

    @property
    def writable(self) -> bool:
        return "rw" in self.options


def _unescape(field: bytes) -> str:
    """A mountinfo field: space, tab, newline and backslash are written as octal escapes (``\\040``)."""
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m[1], 8)]), field))


def _options(field: bytes) -> tuple[str, ...]:
    return tuple(_unescape(o) for o in field.split(b",") if o)


def parse_mountinfo(text: bytes | str) -> list[Mount]:
    """Every well-formed line of a mountinfo text; a malformed one is skipped."""
    data = os.fsencode(text) if isinstance(text, str) else text
    out = []
    for line in data.split(b"\n"):  # not splitlines: a mount point may hold a bare \r
        left, sep, right = line.partition(b" - ")
        fields, rfields = left.split(b" "), right.split(b" ")
        if not sep or len(fields) < 6 or len(rfields) < 3:
            continue
        try:
            mount_id, parent_id = int(fields[0]), int(fields[1])
        except ValueError:
            continue
        out.append(
            Mount(
                mount_id,
                parent_id,
                fields[2].decode("ascii", "replace"),
                _unescape(fields[3]),
                _unescape(fields[4]),
                _options(fields[5]),
                tuple(_unescape(f) for f in fields[6:] if f),
                _unescape(rfields[0]),
                _unescape(rfields[1]),
                _options(rfields[2]),
            )
        )
    return out


def mounts() -> list[Mount]:
    """This process's mount table (empty when ``/proc`` cannot be read)."""
    try:
        with open(MOUNTINFO, "rb") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


# ── cgroups ───────────────────────────────────────────────────────────────────────────────────


def parse_cgroup_membership(text: str) -> dict[str, str]:
    """``controller → path`` from a ``/proc/<pid>/cgroup`` text (``4:memory:/user.slice``; a named
    hierarchy as ``name=systemd``); cgroup v2's line (``0::/path``) under ``""``."""
    own: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    return own


def own_cgroups() -> dict[str, str]:
    """This process's cgroup per controller (see :func:`parse_cgroup_membership`); empty if unreadable."""
    try:
        return parse_cgroup_membership(Path(OWN_CGROUP).read_text(encoding="utf-8", errors="surrogateescape"))
    except OSError:
        return {}


def cgroup_v1_mounts(table: list[Mount] | None = None) -> dict[str, Mount]:
    """``controller → the mount of its v1 hierarchy`` (cpu and cpuacct may share one; a named
    hierarchy as ``name=systemd``); the first mount of each wins."""
    found: dict[str, Mount] = {}
    for m in mounts() if table is None else table:
        if m.fstype == "cgroup":
            for opt in m.super_options:
                if opt not in _V1_FLAGS and ("=" not in opt or opt.startswith("name=")):
                    found.setdefault(opt, m)
    return found


# ── processes ─────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    state: str  # R, S, D, Z, X, ...
    uids: tuple[int, ...]  # real, effective, saved, file system


def parse_status(pid: int, text: bytes) -> Process | None:
    """A process from its ``/proc/<pid>/status`` text; None when a field is missing."""
    fields: dict[bytes, list[bytes]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(b":")
        if sep and key in (b"State", b"PPid", b"Uid"):
            fields[key] = value.split()
    try:
        return Process(
            pid, int(fields[b"PPid"][0]), fields[b"State"][0].decode("ascii"), tuple(int(u) for u in fields[b"Uid"])
        )
    except (KeyError, IndexError, ValueError, UnicodeDecodeError):
        return None


def process(pid: int) -> Process | None:
    """Process ``pid`` now, or None when it is gone (or hidden)."""
    try:
        with open(f"/proc/{int(pid)}/status", "rb") as f:
            return parse_status(int(pid), f.read())
    except OSError:
        return None


def processes() -> list[Process]:
    """Every process this one can see (one pass over ``/proc``; those gone meanwhile are left out)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if name.isdigit() and (p := process(int(name))) is not None:
            found.append(p)
    return found


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (empty when it is gone)."""
    return [p.pid for p in processes() if p.ppid == pid]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (one pass over ``/proc``)."""
    children: dict[int, list[int]] = {}
    for p in processes():
        children.setdefault(p.ppid, []).append(p.pid)
    found: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def cpu_and_wait_of_tree(pid: int) -> tuple[int, int]:
    """Nanoseconds ``pid`` and every process below it spent on a CPU, and waiting in a run queue
    for one (``/proc/<pid>/task/<tid>/schedstat``, summed over the threads that live now); (0, 0)
    for what is gone. The second number says whether a process was starved by its neighbours: a
    sleeping or blocked process does not wait in a run queue."""
    cpu = wait = 0
    for p in descendants(pid):
        try:
            tids = os.listdir(f"/proc/{int(p)}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{int(p)}/task/{tid}/schedstat", "rb") as f:
                    on_cpu, waiting = f.read().split()[:2]
                cpu, wait = cpu + int(on_cpu), wait + int(waiting)
            except (OSError, ValueError):
                continue
    return cpu, wait


def pids_of_uid(uid: int) -> list[int]:
    """Processes whose real, effective or saved uid is ``uid``."""
    return sorted(p.pid for p in processes() if uid in p.uids[:3])


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie included): how a dead grader's leftovers are told."""
    return os.path.exists(f"/proc/{int(pid)}")


def is_running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists, is neither a zombie nor dead, and still has its command line
    (an exiting process has released its memory and reads as an empty one)."""
    p = process(pid)
    if p is None or p.state in ("Z", "X"):
        return False
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False
