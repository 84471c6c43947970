"""Memory and CPU limits of a simulated container, as Docker sets them: cgroup v1's memory and
cpu controllers (``memory.limit_in_bytes``, ``cpu.cfs_quota_us`` of ``cpu.cfs_period_us``).

:class:`ContainerCgroup` is the host's side (root, rw cgroups): make a cgroup per controller
under the one this process is in, set the limits, put the container's first process in it, read
its peak memory, OOM kills and CPU time, and remove it afterwards. What the grader reads of its
own container from inside is :mod:`autograder.gradescope.container_limits`.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from ... import proc_info

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
NAME_PREFIX = "autograder-container-"


class CgroupError(Exception):
    """The container's cgroups cannot be made here."""


def _read(path: Path) -> str:
    return path.read_text().strip()


def current_v1_paths() -> dict[str, str]:
    """controller → this process's cgroup path in that v1 hierarchy (from /proc/self/cgroup)."""
    return {c: path for c, path in proc_info.own_cgroups().items() if c}


def v1_mounts() -> dict[str, Path]:
    """controller → the folder its v1 hierarchy is mounted at (cpu and cpuacct may share one)."""
    return {c: Path(m.point) for c, m in proc_info.cgroup_v1_mounts().items()}


@dataclass
class CgroupStats:
    """What the host read from the container's cgroups after (or during) a run."""

    memory_limit_bytes: int
    memory_max_usage_bytes: int  # the kernel's high-water mark: anonymous memory and page cache
    peak_rss_bytes: int  # sampled: total_rss + total_shmem (what cannot be reclaimed)
    oom_kills: int
    cpu_quota: float  # CPUs (cfs_quota_us / cfs_period_us)
    cpu_seconds: float  # CPU time the whole tree used
    throttled_s: float  # time the tree waited for its CPU quota

    def as_dict(self) -> dict:
        mib = 1024 * 1024
        return {
            "memory_limit_mb": round(self.memory_limit_bytes / mib),
            "memory_max_usage_mb": round(self.memory_max_usage_bytes / mib, 1),
            "peak_rss_mb": round(self.peak_rss_bytes / mib, 1),
            "oom_kills": self.oom_kills,
            "cpus": self.cpu_quota,
            "cpu_seconds": round(self.cpu_seconds, 1),
            "throttled_s": round(self.throttled_s, 1),
        }


@dataclass
class ContainerCgroup:
    """The v1 memory, cpu and cpuacct cgroups of one container (host side; needs root)."""

    memory_mb: int | None
    cpus: float | None
    dirs: dict[str, Path] = field(default_factory=dict)
    peak_rss: int = 0

    @classmethod
    def create(cls, memory_mb: int | None, cpus: float | None) -> "ContainerCgroup":
        mounts = v1_mounts()
        missing = [c for c in ("memory", "cpu", "cpuacct") if c not in mounts]
        if missing:
            raise CgroupError(
                f"cgroup v1 controllers {missing} are not mounted under {CGROUP_ROOT}; the "
                "container simulation needs the v1 memory, cpu and cpuacct controllers (hint: "
                "a cgroup v2-only host is not supported by `gradescope simulate` yet)"
            )
        current = current_v1_paths()
        cls.remove_stale(mounts)
        name = f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        cg = cls(memory_mb, cpus)
        try:
            for ctrl in ("memory", "cpu", "cpuacct"):
                base = mounts[ctrl] / current.get(ctrl, "/").lstrip("/")
                if not os.access(base, os.W_OK):
                    base = mounts[ctrl]
                d = base / name
                if ctrl == "cpuacct" and mounts["cpuacct"] == mounts["cpu"]:
                    cg.dirs[ctrl] = cg.dirs["cpu"]
                    continue
                d.mkdir()
                cg.dirs[ctrl] = d
            mem = cg.dirs["memory"]
            if memory_mb:
                (mem / "memory.limit_in_bytes").write_text(str(int(memory_mb) * 1024 * 1024), encoding="ascii")
            if cpus:
                (cg.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(PERIOD_US), encoding="ascii")
                (cg.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(int(float(cpus) * PERIOD_US)), encoding="ascii")
        except OSError as e:
            cg.remove()
            raise CgroupError(
                f"cannot make the container's cgroups ({e}); the simulation needs root and "
                "writable cgroup v1 controllers"
            ) from e
        return cg

    @staticmethod
    def remove_stale(mounts: dict[str, Path]) -> None:
        """Remove empty container cgroups whose launcher process is gone (a killed earlier run)."""
        for ctrl in ("memory", "cpu", "cpuacct"):
            root = mounts.get(ctrl)
            if root is None:
                continue
            for d in root.rglob(f"{NAME_PREFIX}*"):
                m = re.match(rf"{NAME_PREFIX}(\d+)-", d.name)
                if m and not proc_info.pid_exists(int(m.group(1))):
                    try:
                        if not _read(d / "cgroup.procs"):
                            d.rmdir()
                    except OSError:
                        pass

    def attach(self, pid: int) -> None:
        """Put ``pid`` (and so everything it starts) in every cgroup of the container."""
        for d in dict.fromkeys(self.dirs.values()):
            (d / "cgroup.procs").write_text(str(pid), encoding="ascii")

    def sample(self) -> None:
        """Record the unreclaimable memory now (the kernel keeps no high-water mark of it)."""
        try:
            stat = dict(line.split() for line in _read(self.dirs["memory"] / "memory.stat").splitlines())
            rss = int(stat.get("total_rss", 0)) + int(stat.get("total_shmem", 0))
        except (OSError, ValueError):
            return
        self.peak_rss = max(self.peak_rss, rss)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in _read(self.dirs["memory"] / "cgroup.procs").split()]
        except OSError:
            return []

    def stats(self) -> CgroupStats:
        mem, cpu, acct = self.dirs["memory"], self.dirs["cpu"], self.dirs["cpuacct"]
        oom = re.search(r"^oom_kill (\d+)", _read(mem / "memory.oom_control"), re.M)
        quota = int(_read(cpu / "cpu.cfs_quota_us"))
        period = int(_read(cpu / "cpu.cfs_period_us"))
        throttled = re.search(r"^throttled_time (\d+)", _read(cpu / "cpu.stat"), re.M)
        return CgroupStats(
            memory_limit_bytes=int(_read(mem / "memory.limit_in_bytes")),
            memory_max_usage_bytes=int(_read(mem / "memory.max_usage_in_bytes")),
            peak_rss_bytes=self.peak_rss,
            oom_kills=int(oom.group(1)) if oom else 0,
            cpu_quota=round(quota / period, 3) if quota > 0 else 0.0,
            cpu_seconds=int(_read(acct / "cpuacct.usage")) / 1e9,
            throttled_s=int(throttled.group(1)) / 1e9 if throttled else 0.0,
        )

    def remove(self, timeout_s: float = 10.0) -> None:
        """Remove the cgroups; every process left in them is the container's and is killed first."""
        deadline = time.monotonic() + timeout_s
        for d in dict.fromkeys(reversed(list(self.dirs.values()))):
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    for pid in self.pids():
                        try:
                            os.kill(pid, 9)
                        except ProcessLookupError:
                            pass
                    time.sleep(0.05)
