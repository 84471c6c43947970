"""A budget per jail enforced by the kernel: one cgroup per slot (memory, processes, CPU).

rlimits are per process (``RLIMIT_AS``: three forked children held 4.8 GB against a 4 GB limit)
or per uid (``RLIMIT_NPROC``), and nothing in them shares the CPU between slots. Where the grader
may manage cgroups (root, a writable cgroup v1 hierarchy per controller or a cgroup v2 tree with
the controllers delegated), each run gets ``autograder-<grader pid>-sb<slot>`` under the grader's
own cgroup, with

- ``memory``: the limit of the whole tree (``memory.limit_in_bytes`` / ``memory.max``, no swap);
- ``pids``: ``pids.max`` (:data:`PIDS_MAX`: ONNX Runtime's default thread pools on a 64-core host
  fit many times over; a fork bomb does not);
- ``cpu``: an equal share (``cpu.shares`` / ``cpu.weight``): the kernel schedules each slot as
  one group, so sixty spinning processes in one slot weigh what one process in another does.

The jail's first process joins before anything else runs (:func:`join_prefix`: a root ``sh``
writes ``0`` to each ``cgroup.procs`` and execs the rest of the command), so every descendant
is inside. The cgroup is removed with the run (its leftover processes, ours, killed first);
:func:`sweep_stale` removes the empty cgroups of grader processes that died without cleaning up,
checking liveness by pid and never touching another live grader's.

Detection is at runtime (:func:`available`): on Gradescope's container ``/sys/fs/cgroup`` is
read-only and there is no ``CAP_SYS_ADMIN``; there the rlimits stay. ``AUTOGRADER_CGROUPS=off``
keeps the grader from making cgroups where it could (the rlimits then stay too).
"""

from __future__ import annotations

import functools
import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import proc_info

CONTROLLERS = ("memory", "pids", "cpu")
PIDS_MAX = 1024
CPU_SHARES_V1 = 1024  # the default weight: every slot the same
CPU_WEIGHT_V2 = 100
NAME_PREFIX = "autograder-"
_NAME = re.compile(r"^autograder-(\d+)-sb(\d+)$")


@dataclass(frozen=True)
class Hierarchy:
    """Where this grader may create cgroups: ``parents[controller]`` (v1: one per controller, the
    grader's own cgroup in that controller's hierarchy; v2: the same folder for all)."""

    version: int
    parents: dict[str, Path]


@dataclass
class SlotCgroup:
    """The cgroup(s) of one run: v1 one folder per controller, v2 one folder."""

    version: int
    dirs: dict[str, Path]
    warnings: list[str] = field(default_factory=list)

    @property
    def folders(self) -> list[Path]:
        return list(dict.fromkeys(self.dirs.values()))

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.folders]

    def layers(self) -> list[str]:
        return [f"cgroup_{c}" for c in CONTROLLERS if c in self.dirs]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.folders:
            try:
                found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                continue
        return sorted(found)

    def oom_kills(self) -> int:
        """How many processes of the run the kernel's OOM killer ended (0 if unknown)."""
        d = self.dirs.get("memory")
        if d is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (d / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def memory_limit(self) -> int | None:
        d = self.dirs.get("memory")
        if d is None:
            return None
        try:
            text = (d / ("memory.max" if self.version == 2 else "memory.limit_in_bytes")).read_text().strip()
            return int(text) if text.isdigit() else None
        except OSError:
            return None

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill what is left inside (processes this run started), then remove the folders."""
        deadline = time.monotonic() + timeout_s
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for d in self.folders:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as e:  # EBUSY: a process is still exiting
                    if time.monotonic() > deadline:
                        self.warnings.append(f"cgroup {d} could not be removed: {e.strerror}")
                        break
                    time.sleep(0.05)


# ------------------------------------------------------------------ detection
def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


@functools.lru_cache(maxsize=1)
def available() -> tuple[Hierarchy | None, str]:
    """The hierarchy this grader may use, or ``(None, why not)``."""
    if os.geteuid() != 0:
        return None, "cgroups need root (the grader is not root)"
    mounts, own = proc_info.mounts(), proc_info.own_cgroups()
    v1: dict[str, Path] = {}
    for m in mounts:
        if m.fstype != "cgroup" or not m.writable:
            continue
        for c in CONTROLLERS:
            if c in m.super_options and c in own:
                parent = Path(m.point) / own[c].lstrip("/")
                if _writable(parent):
                    v1[c] = parent
    if set(v1) == set(CONTROLLERS):
        return Hierarchy(1, v1), ""
    for m in mounts:
        if m.fstype != "cgroup2" or not m.writable or "" not in own:
            continue
        parent = Path(m.point) / own[""].lstrip("/")
        why = _v2_delegate(parent)
        if why is None:
            return Hierarchy(2, {c: parent for c in CONTROLLERS}), ""
        if (Path(m.point) / "cgroup.controllers").is_file():
            return None, why
    missing = sorted(set(CONTROLLERS) - set(v1))
    return None, (f"no writable cgroup hierarchy for {', '.join(missing)} (/sys/fs/cgroup read-only or not mounted)")


def _v2_delegate(parent: Path) -> str | None:
    """None when children of ``parent`` get memory, pids and cpu (enabling them if needed)."""
    try:
        available_here = (parent / "cgroup.controllers").read_text().split()
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError as e:
        return f"cgroup v2 at {parent} is not readable: {e.strerror}"
    if not set(CONTROLLERS) <= set(available_here):
        return f"cgroup v2 at {parent} lacks controllers {sorted(set(CONTROLLERS) - set(available_here))}"
    missing = [c for c in CONTROLLERS if c not in enabled]
    if missing:
        try:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing), encoding="ascii")
        except OSError as e:  # EBUSY: the grader's own cgroup holds processes (not the root)
            return (
                f"cgroup v2: cannot enable {missing} for children of {parent} ({e.strerror}); hint: run the "
                "grader in a cgroup whose controllers are delegated (systemd Delegate=yes)"
            )
    return None


# ------------------------------------------------------------------ one run's cgroup
def slot_name(slot: int, pid: int | None = None) -> str:
    return f"{NAME_PREFIX}{pid if pid is not None else os.getpid()}-sb{int(slot)}"


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def create(hierarchy: Hierarchy, slot: int, memory_bytes: int) -> SlotCgroup:
    """Make (or reuse, emptied) this grader's cgroup of ``slot`` and set its limits."""
    sweep_stale(hierarchy)
    name = slot_name(slot)
    dirs = {c: hierarchy.parents[c] / name for c in CONTROLLERS}
    cg = SlotCgroup(hierarchy.version, dirs)
    try:
        for d in cg.folders:
            d.mkdir(exist_ok=True)
        if hierarchy.version == 1:
            mem = dirs["memory"]
            _write(mem / "memory.limit_in_bytes", str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
            _write(dirs["pids"] / "pids.max", str(PIDS_MAX))
            _write(dirs["cpu"] / "cpu.shares", str(CPU_SHARES_V1))
        else:
            d = dirs["memory"]
            _write(d / "memory.max", str(memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(PIDS_MAX))
            _write(d / "cpu.weight", str(CPU_WEIGHT_V2))
    except OSError:
        cg.remove(timeout_s=1.0)
        raise
    return cg


@contextmanager
def slot_cgroup(slot: int, memory_bytes: int) -> Iterator[tuple[SlotCgroup | None, str]]:
    """``(cgroup, "")`` for the block where cgroups can be used, else ``(None, why not)``.
    The cgroup is removed on exit."""
    if os.environ.get("AUTOGRADER_CGROUPS", "auto").strip().lower() in ("off", "0", "no"):
        yield None, "cgroups are turned off (AUTOGRADER_CGROUPS=off)"
        return
    hierarchy, why = available()
    if hierarchy is None:
        yield None, why
        return
    try:
        cg = create(hierarchy, slot, memory_bytes)
    except OSError as e:
        yield None, f"cgroup for slot {slot} could not be set up: {e}"
        return
    try:
        yield cg, ""
    finally:
        cg.remove()


def sweep_stale(hierarchy: Hierarchy | None = None) -> list[Path]:
    """Remove the empty cgroups of grader processes that no longer exist; returns them."""
    hierarchy = hierarchy or available()[0]
    if hierarchy is None:
        return []
    removed = []
    for parent in dict.fromkeys(hierarchy.parents.values()):
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            m = _NAME.match(entry.name)
            if not m or not entry.is_dir(follow_symlinks=False):
                continue
            pid = int(m.group(1))
            if pid == os.getpid() or proc_info.pid_exists(pid):
                continue  # ours, or a live grader's
            try:
                os.rmdir(entry.path)
                removed.append(Path(entry.path))
            except OSError:
                continue  # still holds processes: left to that slot's reaper
    return removed


# ------------------------------------------------------------------ joining
JOIN_SCRIPT = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 112; shift; n=$((n-1)); done; exec "$@"'


def join_prefix(cg: SlotCgroup) -> list[str]:
    """A command prefix that moves itself into ``cg`` (as root), then execs the rest of the argv."""
    files = cg.procs_files()
    return ["/bin/sh", "-c", JOIN_SCRIPT, "autograder-cgroup-join", str(len(files)), *files]
