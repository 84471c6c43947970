"""A Docker-like container without Docker: what Gradescope's grading container imposes on
``run_autograder``, reproduced with the kernel's own tools (needs root, cgroup v1, util-linux's
``unshare`` and Debian's ``python3-seccomp``).

- **cgroups** (:mod:`.cgroups`): memory and CPU limits, 768 MB and 0.5 CPU by default;
- **namespaces**: its own mount, PID, UTS and IPC namespaces (the host's network, as
  ``--network host``); PID 1 is a small init that reaps orphans (``docker run --init``);
- **file system**: a fresh root with the host's system folders read-only (or a Debian root file
  system folder, see :mod:`.rootfs`), its own ``/tmp``, ``/root``, ``/run``, ``/dev`` and
  ``/proc``, ``/sys`` and ``/sys/fs/cgroup`` read-only as Docker mounts them, plus the binds
  asked for (``/autograder``, ``/opt/autograder``);
- **privileges**: root keeps Docker's 14 default capabilities and runs under Docker's default
  seccomp profile (:mod:`.docker_profile`), so namespaces, mounts and cgroups are out of reach
  of the grader inside, exactly as on Gradescope.

The host side is :func:`run_container`; the container side is :mod:`.container_init`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import AutograderError
from ...tree_walk import remove_tree  # the container's files: what run_autograder left
from . import container_init, docker_profile
from .cgroups import CgroupError, CgroupStats, ContainerCgroup, current_v1_paths, v1_mounts

SYSTEM_PYTHON = "/usr/bin/python3"  # runs container_init; Debian's, with python3-seccomp
STATE_PARENT = Path("/var/tmp")  # on disk, as a container's writable layer is
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
SHARED_LOCKS = "/run/autograder"  # the sandbox slots' locks: machine-wide, like their uids
LOG_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ContainerUnavailable(AutograderError):
    """This machine cannot run the simulated container (and why)."""


@dataclass
class ContainerSpec:
    """One container: limits, root, binds. ``binds`` are ``(host path, container path, "ro"|"rw")``."""

    memory_mb: int | None = 768
    cpus: float | None = 0.5
    rootfs: Path | None = None  # a root file system folder; None: the host's system folders
    binds: list[tuple[str, str, str]] = field(default_factory=list)
    hostname: str = "gradescope"
    seccomp: bool = True


@dataclass
class ContainerRun:
    returncode: int
    wall_s: float
    timed_out: bool
    stats: CgroupStats
    log: str  # stdout and stderr of the command, interleaved, capped

    @property
    def start_failed(self) -> bool:
        return self.returncode == container_init.START_FAILED


def unavailable_reason() -> str | None:
    """Why the container cannot run here, or None."""
    if os.geteuid() != 0:
        return "the container simulation needs root (it makes cgroups and namespaces)"
    if not shutil.which("unshare"):
        return "util-linux's unshare is missing (apt-get install util-linux)"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (apt-get install python3)"
    probe = subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import seccomp"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "libseccomp's Python bindings are missing (apt-get install python3-seccomp; `make setup` does it)"
    missing = [c for c in ("memory", "cpu", "cpuacct") if c not in v1_mounts()]
    if missing:
        return f"the cgroup v1 controllers {missing} are not mounted"
    return None


# ------------------------------------------------------------------------------- the file system


def _system_ops(rootfs: Path | None) -> list[list]:
    """Mount operations for the container's system folders (paths inside the container)."""
    ops: list[list] = []
    if rootfs is None:
        ops.append(["bind", "/usr", "/usr", "ro"])
        for name in SYSTEM_LINKS:
            host = f"/{name}"
            if os.path.islink(host):
                ops.append(["symlink", host, os.readlink(host)])
            elif os.path.isdir(host):
                ops.append(["bind", host, host, "ro"])
        # /etc read-write and shared: the sandbox users and their slot locks are machine-wide
        ops.append(["bind", "/etc", "/etc", "rw"])
        for d, mode in (("/opt", "0755"), ("/var", "0755"), ("/home", "0755"), ("/mnt", "0755")):
            ops.append(["mkdir", d, mode])
    else:
        for name in ("resolv.conf", "hosts"):  # as Docker does: the host's name resolution
            if os.path.isfile(f"/etc/{name}"):
                ops.append(["bind", f"/etc/{name}", f"/etc/{name}", "ro"])
    ops.append(["proc", "/proc"])
    ops.append(["tmpfs", "/dev", "mode=0755,size=64k"])
    for dev in DEVICES:
        if os.path.exists(f"/dev/{dev}"):
            ops.append(["bind", f"/dev/{dev}", f"/dev/{dev}", "rw"])
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        ops.append(["symlink", f"/dev/{name}", target])
    ops.append(["tmpfs", "/dev/shm", "mode=1777,size=64m"])  # Docker's default --shm-size
    ops.append(["tmpfs", "/run", "mode=0755,size=16m"])
    return ops


def _cgroup_ops(cgroup: ContainerCgroup) -> list[list]:
    """/sys read-only, and under /sys/fs/cgroup each v1 hierarchy read-only: the container's own
    cgroup where it has one (memory, cpu, cpuacct), the host's current one elsewhere."""
    ops: list[list] = [["bind", "/sys", "/sys", "ro"], ["tmpfs", "/sys/fs/cgroup", "mode=0755,size=64k"]]
    current = current_v1_paths()
    ours = {ctrl: str(d) for ctrl, d in cgroup.dirs.items()}
    seen: set[str] = set()
    for ctrl, mountpoint in sorted(v1_mounts().items()):
        name = mountpoint.name
        if name in seen or mountpoint.parent != Path("/sys/fs/cgroup"):
            continue
        seen.add(name)
        source = ours.get(ctrl) or str(mountpoint / current.get(ctrl, "/").lstrip("/"))
        ops.append(["bind", source, f"/sys/fs/cgroup/{name}", "ro"])
    ops.append(["remount_ro", "/sys/fs/cgroup"])
    return ops


def _private_dirs(state: Path, rootfs: Path | None) -> list[list]:
    """The container's own writable folders, on disk under ``state`` (its "writable layer")."""
    if rootfs is not None:
        return []
    ops = []
    for name, target, mode in (("tmp", "/tmp", 0o1777), ("var-tmp", "/var/tmp", 0o1777), ("root", "/root", 0o700)):
        d = state / name
        d.mkdir(mode=0o700)
        os.chmod(d, mode)
        ops.append(["bind", str(d), target, "rw"])
    Path(SHARED_LOCKS).mkdir(mode=0o700, parents=True, exist_ok=True)
    ops.append(["bind", SHARED_LOCKS, SHARED_LOCKS, "rw"])
    return ops


# ------------------------------------------------------------------------------- running


def run_container(
    spec: ContainerSpec,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str = "/",
    timeout_s: float | None = None,
    log_path: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> ContainerRun:
    """Run ``argv`` as root in the container ``spec`` describes; wait (at most ``timeout_s``, then
    the whole container is killed, as Gradescope's time limit does) and return what happened.
    ``on_line``: called with each line of its output as it comes (a build's steps, shown while it runs)."""
    why = unavailable_reason()
    if why:
        raise ContainerUnavailable(why)
    try:
        cgroup = ContainerCgroup.create(spec.memory_mb, spec.cpus)
    except CgroupError as e:
        raise ContainerUnavailable(str(e)) from e
    state = Path(tempfile.mkdtemp(prefix="autograder-container-", dir=STATE_PARENT))
    try:
        if spec.rootfs is not None:
            root = str(Path(spec.rootfs).resolve())
        else:
            (state / "root-mount").mkdir()
            root = str(state / "root-mount")
        ops = _system_ops(spec.rootfs) + _private_dirs(state, spec.rootfs) + _cgroup_ops(cgroup)
        ops += [["bind", host, inside, mode] for host, inside, mode in spec.binds]
        config = {
            "root": root,
            "rootfs": spec.rootfs is not None,
            "ops": ops,
            "hostname": spec.hostname,
            "profile": docker_profile.__file__,
            "seccomp": spec.seccomp,
            "argv": list(argv),
            "cwd": cwd,
            "env": {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", **(env or {})},
        }
        command = [
            shutil.which("unshare") or "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--uts",
            "--ipc",
            "--propagation",
            "private",
            "--kill-child",
            SYSTEM_PYTHON,
            "-I",
            container_init.__file__,
            json.dumps(config),
        ]
        log_file = Path(log_path) if log_path else state / "container.log"
        return _supervise(command, cgroup, log_file, timeout_s, on_line)
    finally:
        cgroup.remove()
        remove_tree(state, ignore_errors=True)


def _supervise(
    command: list[str],
    cgroup: ContainerCgroup,
    log_file: Path,
    timeout_s: float | None,
    on_line: Callable[[str], None] | None = None,
) -> ContainerRun:
    stop = threading.Event()
    tail = _LogTail(log_file, on_line)

    def sampler() -> None:
        while not stop.wait(0.2):
            cgroup.sample()
            tail.poll()

    started = time.monotonic()
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: cgroup.attach(os.getpid()),
            cwd="/",
        )
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()  # unshare --kill-child: its child, PID 1 of the namespace, dies, and all of it
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            stop.set()
            thread.join()
            tail.poll()
    wall = time.monotonic() - started
    deadline = time.monotonic() + 10
    while cgroup.pids() and time.monotonic() < deadline:  # the namespace's processes are going
        time.sleep(0.05)
    cgroup.sample()
    stats = cgroup.stats()
    data = log_file.read_bytes()
    if len(data) > LOG_MAX_BYTES:
        data = data[: LOG_MAX_BYTES // 2] + b"\n[... log cut ...]\n" + data[-LOG_MAX_BYTES // 2 :]
    return ContainerRun(returncode=rc, wall_s=wall, timed_out=timed_out, stats=stats, log=data.decode(errors="replace"))


class _LogTail:
    """The complete lines a running container has added to its log since the last poll, each
    handed to ``on_line`` (bounded: a line is cut at 500 characters)."""

    def __init__(self, path: Path, on_line: Callable[[str], None] | None) -> None:
        self.path, self.on_line, self.offset, self.rest = path, on_line, 0, b""

    def poll(self) -> None:
        if self.on_line is None:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(1 << 20)
        except OSError:
            return
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        self.rest = self.rest[-4096:]
        for line in lines:
            self.on_line(line.decode(errors="replace")[:500])
