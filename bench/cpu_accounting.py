"""CPU seconds of a group of processes, counted by the kernel: cgroup CPU accounting for the benchmarks.

A :class:`CpuGroup` is a cgroup of the benchmark's own making, used only to count CPU time (no
limit is set on it): cgroup v1's ``cpuacct`` controller (``cpuacct.usage``, nanoseconds) where it is
mounted, else cgroup v2 (``cpu.stat``'s ``usage_usec``, present in every non-root v2 cgroup). A
process joins it by writing its pid to ``cgroup.procs``: the benchmark moves itself with
:meth:`CpuGroup.enter`, and a command is made to join before it execs with :func:`join_prefix`
(a root ``sh`` that writes ``0``, then ``exec``\\ s the rest: every descendant is inside). The usage
stays counted after the processes exit, so a group is read once its processes are gone and then
removed. Needs root and a writable hierarchy; :func:`available` says why not otherwise.

Bottom layer of bench/ (beside ``common``): of the grader it imports only ``autograder.proc_info``,
the one reader of ``/proc``'s mount and cgroup tables.
"""

from __future__ import annotations

import functools
import itertools
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import proc_info  # the one reader of /proc's mount and cgroup tables (standard library only)

PREFIX = "autograder-bench-"  # never the grader's own ``autograder-<pid>-sb<slot>`` pattern
JOIN_SCRIPT = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 112; shift; n=$((n-1)); done; exec "$@"'
_serial = itertools.count()


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1: cpuacct, 2: the unified hierarchy
    parent: Path  # this process's own cgroup in it: the groups are made below it


@functools.lru_cache(maxsize=1)
def available() -> tuple[Hierarchy | None, str]:
    """Where CPU groups can be made here, or ``(None, why not)``."""
    if os.geteuid() != 0:
        return None, "counting the jail's CPU needs cgroups, and cgroups need root"
    own, table = proc_info.own_cgroups(), proc_info.mounts()
    v1 = proc_info.cgroup_v1_mounts(table).get("cpuacct")
    if v1 is not None and "cpuacct" in own:
        parent = Path(v1.point) / own["cpuacct"].lstrip("/")
        if (parent / "cpuacct.usage").is_file() and os.access(parent, os.W_OK):
            return Hierarchy(1, parent), ""
    for m in table:
        if m.fstype == "cgroup2" and "" in own:
            parent = Path(m.point) / own[""].lstrip("/")
            if parent.is_dir() and os.access(parent, os.W_OK):
                return Hierarchy(2, parent), ""
    return None, "no writable cpuacct (cgroup v1) or cgroup v2 hierarchy"


class CpuGroup:
    """One counting cgroup (see the module's docstring). ``seconds()``: CPU used inside it so far,
    the groups made ``under`` it included (the counting is hierarchical in v1 ``cpuacct`` and in v2)."""

    def __init__(self, label: str, hierarchy: Hierarchy | None = None, *, under: CpuGroup | None = None) -> None:
        h = under.hierarchy if under is not None else hierarchy or available()[0]
        if h is None:
            raise OSError(available()[1])
        self.hierarchy = h
        self.path = (under.path if under is not None else h.parent) / f"{PREFIX}{os.getpid()}-{label}-{next(_serial)}"
        self.path.mkdir()
        self._left: Path | None = None

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def seconds(self) -> float:
        """CPU seconds (user + system) of every process that ran in the group."""
        try:
            if self.hierarchy.version == 1:
                return int((self.path / "cpuacct.usage").read_text()) / 1e9
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            pass
        return 0.0

    def enter(self) -> None:
        """Move this process (all its threads) into the group; :meth:`leave` moves it back."""
        self._left = self._own_path()
        self.procs.write_text(str(os.getpid()))

    def _own_path(self) -> Path:
        own = proc_info.own_cgroups().get("cpuacct" if self.hierarchy.version == 1 else "", "/")
        table = proc_info.mounts()
        mount = (
            proc_info.cgroup_v1_mounts(table).get("cpuacct")
            if self.hierarchy.version == 1
            else next((m for m in table if m.fstype == "cgroup2"), None)
        )
        return Path(mount.point) / own.lstrip("/") if mount else self.hierarchy.parent

    def leave(self) -> None:
        if self._left is not None:
            (self._left / "cgroup.procs").write_text(str(os.getpid()))
            self._left = None

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the group once its processes are gone (a process still exiting keeps it busy briefly)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left behind, empty once its last process exits; named after our pid
                time.sleep(0.05)


def join_prefix(*groups: CpuGroup) -> list[str]:
    """A command prefix that joins ``groups`` (as root) and then execs the rest of the argv."""
    files = [str(g.procs) for g in groups]
    return ["/bin/sh", "-c", JOIN_SCRIPT, "autograder-bench-cpu-join", str(len(files)), *files]


def rusage_seconds(who: int) -> float:
    """User + system CPU seconds of ``resource.RUSAGE_SELF`` / ``RUSAGE_CHILDREN`` (reaped children)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def self_seconds() -> float:
    return rusage_seconds(resource.RUSAGE_SELF)


def children_seconds() -> float:
    return rusage_seconds(resource.RUSAGE_CHILDREN)
