"""What the grader can read of the container it runs in: the memory limit and the number of
OOM kills of its own cgroup, on cgroup v1 or v2 (``/sys/fs/cgroup`` is mounted read-only inside
Docker, but readable). ``gradescope run`` uses it to tell a student that the container ran out
of memory.

This is the container's side only. The host's side (making a container's cgroups, for the
instructor's simulator) is :mod:`autograder.gradescope.sim.cgroups`, which is not in the wheel
that ships to Gradescope.
"""

from __future__ import annotations

import re
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 1 << 62  # v1 reports "no limit" as a page-rounded 2**63 - 1


def _read(path: Path) -> str:
    return path.read_text().strip()


def own_limits(root: Path = CGROUP_ROOT) -> dict:
    """The memory limit (MB) and OOM-kill count of the cgroup this process is in, as far as it can
    see them (v1: ``memory/``; v2: the unified tree); {} when neither is readable."""
    try:
        if (root / "memory" / "memory.limit_in_bytes").is_file():  # v1 (Docker binds its own cgroup here)
            mem = root / "memory"
            limit = int(_read(mem / "memory.limit_in_bytes"))
            oom = re.search(r"^oom_kill (\d+)", _read(mem / "memory.oom_control"), re.M)
            kills = int(oom.group(1)) if oom else None
        elif (root / "memory.max").is_file():  # v2 with a cgroup namespace
            raw = _read(root / "memory.max")
            limit = UNLIMITED if raw == "max" else int(raw)
            oom = re.search(r"^oom_kill (\d+)", _read(root / "memory.events"), re.M)
            kills = int(oom.group(1)) if oom else None
        else:
            return {}
    except (OSError, ValueError):
        return {}
    out: dict = {"oom_kills": kills}
    if limit < UNLIMITED:
        out["memory_limit_mb"] = limit // (1024 * 1024)
    return out
