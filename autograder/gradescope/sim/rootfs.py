"""A fresh Debian root file system, as the base of a simulated Gradescope image: ``mmdebstrap``
(Debian's package; ``make setup`` installs it) makes a ``minbase`` system with ``python3`` (as
Gradescope's base image has), of the host's own Debian release, from the host's configured
Debian mirror. The tarball is cached for a week; each image unpacks its own copy.
"""

from __future__ import annotations

import fcntl
import grp
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path

from ...errors import AutograderError
from ...safe_files import atomic_replace

MAX_AGE_S = 7 * 24 * 3600
HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
INCLUDE = ("python3",)


class RootfsError(AutograderError):
    """No Debian root file system could be made here."""


def host_release() -> str:
    """The host's Debian codename (``bookworm``), from /etc/os-release."""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise RootfsError("cannot tell the host's Debian release (no VERSION_CODENAME in /etc/os-release)")


def debian_tarball(cache_dir: Path, *, refresh: bool = False) -> Path:
    """A cached ``mmdebstrap`` tarball of a minimal Debian (made when missing or a week old)."""
    mmdebstrap = shutil.which("mmdebstrap")
    if not mmdebstrap:
        raise RootfsError("mmdebstrap is missing (apt-get install mmdebstrap; `make setup` does it)")
    release = host_release()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tarball = cache_dir / f"debian-{release}-minbase.tar"
    with open(cache_dir / f"{tarball.name}.lock", "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.is_file() and not refresh and time.time() - tarball.stat().st_mtime < MAX_AGE_S:
            return tarball
        with atomic_replace(tarball) as tmp:  # a name ending in .tar: mmdebstrap writes a tarball
            cmd = [mmdebstrap, "--quiet", "--variant=minbase", f"--include={','.join(INCLUDE)}", release, str(tmp)]
            if HOST_SOURCES.is_file():
                cmd.append(str(HOST_SOURCES))  # the mirror this host already uses
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise RootfsError(f"mmdebstrap failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return tarball


def unpack(tarball: Path, target: Path) -> Path:
    """Unpack ``tarball`` (owners and modes kept) into the empty folder ``target``."""
    target.mkdir(parents=True)
    proc = subprocess.run(
        ["tar", "--numeric-owner", "--same-owner", "-xpf", str(tarball), "-C", str(target)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RootfsError(f"cannot unpack {tarball}: {proc.stderr.strip()[-500:]}")
    return target


SEPARATE_IDS = (61000, 61999)


def separate_system_ids(root: Path) -> None:
    """Make the root file system's ``useradd --system`` take uids and gids no user or group of
    this host has. On Gradescope the container is alone; here, setup.sh's ``autograder-sb0`` would
    otherwise get uid 999, which on this shared machine may be another run's sandbox user, and
    ``RLIMIT_NPROC`` (counted per uid, machine-wide) would couple the two."""
    low, high = SEPARATE_IDS
    taken = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
    if any(low <= i <= high for i in taken):
        raise RootfsError(f"uids/gids {low}-{high} are in use on this host; the simulation needs them free")
    defs = root / "etc" / "login.defs"
    text = defs.read_text(encoding="utf-8") if defs.is_file() else ""
    for key, value in (("SYS_UID_MIN", low), ("SYS_UID_MAX", high), ("SYS_GID_MIN", low), ("SYS_GID_MAX", high)):
        text, n = re.subn(rf"^#?\s*{key}\s+\d+\s*$", f"{key} {value}", text, flags=re.M)
        if not n:
            text += f"{key} {value}\n"
    defs.write_text(text, encoding="utf-8")
