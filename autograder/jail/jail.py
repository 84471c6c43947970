"""Which isolation this machine offers, and the command that starts a kernel inside it.

Modes, best first:

- ``bwrap``: bubblewrap with fresh pid/net/ipc/uts/mount namespaces; only the interpreter, the
  system folders (read-only), the workspace (as /home/student), the run folder (sockets) and the
  site folder (read-only, as /opt/autograder: the ``sitecustomize`` that bounds ONNX Runtime's
  default thread pools and gives every session the grader's configuration) exist inside. As
  root, bwrap runs without a user namespace and ``setpriv`` drops to the slot's sandbox uid with
  no capabilities and ``no_new_privs``; as a normal user, bwrap makes a user namespace itself.
- ``fallback`` (namespaces blocked, as in Docker's default seccomp profile): the sandbox uid,
  Landlock allow-lists and a seccomp filter that also denies ``socket(AF_INET/AF_INET6)``.
- ``none`` only with ``unsafe_no_sandbox``: rlimits and nothing else.

The grader's ONNX measuring child gets the same bwrap jail (:func:`measure_isolation`,
:func:`worker_command`): no network, read-only system, only its job folder writable, as the
``autograder-measure`` uid when the grader is root.

Where the grader may manage cgroups (:mod:`.cgroups`), the command starts by joining the run's
cgroup (memory of the whole tree, ``pids.max``, a CPU share), which then replaces ``RLIMIT_AS``
(``RLIMIT_DATA`` of the same size keeps a single oversized allocation a ``MemoryError``) and
``RLIMIT_NPROC``. Every mode ends in :mod:`autograder.jail.confine` (rlimits, no_new_privs, Landlock, seccomp,
then ``execve`` of the kernel with a minimal environment). ``AUTOGRADER_JAIL=bwrap|fallback|none``
restricts the choice to that mode (for tests, and for operators who know their machine; ``none``
still needs ``unsafe_no_sandbox``); the default ``auto`` takes the best that works.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from .. import ort_platform
from ..limits import ExecutionLimits
from ..errors import SandboxUnavailableError
from . import confine, jail_site
from .cgroups import SlotCgroup, join_prefix
from .users import SandboxUser, SandboxUserError, ensure_named_user, ensure_user

MiB = 1024 * 1024
HOME_IN_JAIL = "/home/student"
SITE_IN_JAIL = "/opt/autograder"  # read-only: sitecustomize.py (see jail_site.py)
TMPFS_BYTES = 64 * MiB
FILE_SIZE_LIMIT = 64 * MiB
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "fonts",
    "alternatives",
    "mime.types",
)
# What the kernel may read of the machine: the CPUs as the grader sees them (ONNX Runtime sizes its
# pools from both; bound from the grader's namespace, so a test can present a many-core host).
READ_ONLY_EXTRA = ("/sys/devices/system/cpu", "/proc/cpuinfo")
# What the fallback's kernel may read of /proc (Landlock; no PID namespace there): its own entries
# (``/proc/self`` binds the kernel's ``/proc/<pid>`` when the rules are made, just before
# ``execve``; its threads are under it; its children have none) and the machine-wide files of
# READ_ONLY_EXTRA. Never ``/proc`` whole: another process's ``/proc/<pid>/stat`` showed the
# grader's measuring children's memory while they ran the student's models on hidden rows.
OWN_PROC = "/proc/self"
# The CPU quota of the machine (or container) where it is a file of /sys/fs/cgroup (v2, v1), which
# joblib's loky reads before it starts workers; the fallback's kernel reads nothing else of there.
CPU_QUOTA_FILES = (
    "/sys/fs/cgroup/cpu.max",
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full")
BWRAP_NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
# The uid of the grader's ONNX measuring child (not a slot's: a slot's reaper could kill it).
MEASURE_USER = "autograder-measure"
# The uid that checks whether the fallback works (not a slot's, for the same reason): an
# unprivileged uid with a group of its own reaches what a slot's uid reaches.
CHECK_USER = "autograder-check"


@dataclass
class Isolation:
    """The isolation chosen for one run (``record()`` is execution.json's ``isolation``)."""

    mode: str  # bwrap | fallback | none
    layers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    user: SandboxUser | None = None
    bwrap_userns: bool = False
    landlock: bool = False
    seccomp: bool = False

    def record(self) -> dict:
        return {"mode": self.mode, "layers": list(self.layers), "warnings": list(self.warnings)}


def interpreter_paths() -> list[str]:
    """Folders the kernel's interpreter needs, at their real paths (venv, base install, target of symlinks)."""
    paths = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        str(Path(os.path.realpath(sys.executable)).parent.parent),
    }
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    real = {os.path.realpath(p) for p in paths if p and os.path.isdir(p)}
    paths |= real
    out = sorted(p for p in paths if p and os.path.isdir(p) and p != "/")
    # keep only outermost folders not already covered by the system folders
    kept: list[str] = []
    for p in out:
        if any(p == s or p.startswith(s + "/") for s in SYSTEM_DIRS):
            continue
        if any(p.startswith(k + "/") for k in kept):
            continue
        kept.append(p)
    return kept


def kernel_python() -> str:
    return sys.executable


def minimal_env(home: str, tmp: str, site: str | None = None) -> dict[str, str]:
    bindir = os.path.dirname(sys.executable)
    extra = (
        {
            "PYTHONPATH": site,
            jail_site.THREADS_VARIABLE: str(jail_site.kernel_threads()),
            jail_site.CONFIG_VARIABLE: ort_platform.config_text(),
        }
        if site
        else {}
    )
    return {
        **extra,
        "HOME": home,
        "TMPDIR": tmp,
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{tmp}/matplotlib",
        "IPYTHONDIR": f"{tmp}/ipython",
        "XDG_CACHE_HOME": f"{tmp}/cache",
        "XDG_CONFIG_HOME": f"{tmp}/config",
        "JUPYTER_PLATFORM_DIRS": "1",
        "JUPYTER_RUNTIME_DIR": f"{tmp}/jupyter",
    }


NPROC_LIMIT = 64  # processes and threads of the sandbox uid, where no pids cgroup counts them


def rlimits(limits: ExecutionLimits, with_nproc: bool, cgroup: SlotCgroup | None = None) -> dict[str, int]:
    """The kernel's rlimits: a cgroup's memory limit replaces ``RLIMIT_AS`` (per process, it let
    three children hold 4.8 GB against 4 GB, and counts address space, not memory), its
    ``pids.max`` replaces ``RLIMIT_NPROC``.

    Beside the cgroup, ``RLIMIT_DATA`` of the whole budget per process: no single process may map
    more private writable memory than the tree may hold, so one allocation that could never fit
    (``np.ones(1_000_000_000)``, 8 GB) fails in the student's own code with ``MemoryError``, as
    Python does, instead of the cgroup's OOM killer ending the kernel and every cell after it. It
    counts what a process could write (heap, anonymous mappings, thread stacks), not reserved
    address space (``PROT_NONE`` arenas) nor libraries, so ONNX Runtime's and BLAS's threads fit
    as before (each stack counts 8 MB: about 400 threads in 4 GB)."""
    layers = set(cgroup.layers()) if cgroup is not None else set()
    out = {"FSIZE": FILE_SIZE_LIMIT, "NOFILE": 256, "CORE": 0}
    if "cgroup_memory" not in layers:
        out["AS"] = int(limits.memory_mb) * MiB
    else:
        out["DATA"] = int(limits.memory_mb) * MiB
    if with_nproc and "cgroup_pids" not in layers:
        out["NPROC"] = NPROC_LIMIT
    return out


# ------------------------------------------------------------------ detection
@functools.lru_cache(maxsize=4)
def _bwrap_works(as_root: bool) -> tuple[bool, str]:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False, "bwrap is not installed (apt install bubblewrap)"
    cmd = [bwrap, *BWRAP_NAMESPACES, "--die-with-parent"]
    if not as_root:
        cmd.append("--unshare-user")
    cmd += [*_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bwrap could not start: {e}"
    if proc.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {proc.stderr.strip()[:200]}"
    return True, ""


@functools.lru_cache(maxsize=1)
def bwrap_supports_size() -> bool:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    proc = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    return "--size" in proc.stdout + proc.stderr


@functools.lru_cache(maxsize=1)
def _confine_source() -> str:
    """confine.py without its docstring (the source is on a command line every ``ps`` shows)."""
    text = Path(confine.__file__).read_text()
    return text.split('"""', 2)[2].lstrip() if text.startswith('"""') else text


def _confine_argv(config: dict) -> list[str]:
    return [kernel_python(), "-I", "-S", "-c", _confine_source(), json.dumps(config)]


def _setpriv_argv(user: SandboxUser) -> list[str]:
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [
        setpriv,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--clear-groups",
        "--no-new-privs",
        "--bounding-set=-all",
        "--inh-caps=-all",
        "--",
    ]


@functools.lru_cache(maxsize=8)
def _confine_layers(uid: int | None, gid: int | None) -> tuple[dict, str]:
    """Which confinement layers apply here: confine in check mode (as the sandbox uid when given)."""
    prefix = _setpriv_argv(SandboxUser("check", uid, gid)) if uid is not None else []
    config = {
        "check": True,
        "rlimits": {"CORE": 0},
        "landlock": {"rx": list(SYSTEM_DIRS), "ro": [], "rw": []},
        "seccomp": {"block_inet": True},
    }
    try:
        proc = subprocess.run(prefix + _confine_argv(config), capture_output=True, text=True, timeout=30, cwd="/")
        return json.loads(proc.stdout.strip().splitlines()[-1]), ""
    except Exception as e:  # noqa: BLE001 - any failure means: no fallback on this machine
        return {"applied": [], "error": str(e)}, f"confinement check failed: {type(e).__name__}: {e}"


_FALLBACK_WORKS: dict[tuple[int | None, int | None], dict] = {}  # (uid, gid) → the layers, once they worked


def _fallback_check(uid: int | None, gid: int | None) -> tuple[dict, str]:
    """Which confinement layers apply here, and whether the kernel's interpreter then really starts.

    Runs confine twice (as ``uid`` when given: :data:`CHECK_USER`'s, never a slot's, see
    :func:`_fallback_isolation`): in check mode to learn the layers (:func:`_confine_layers`), then
    for real with those layers around ``python -c "import ipykernel, numpy"``. The second run
    matters: an interpreter under a mode-700 folder (pyenv in /root) is unreachable for a sandbox
    uid. Only a success is kept for the process: a failure (a machine being set up, a check killed
    from outside) is checked again at the next run rather than refusing every later submission.
    """
    if (uid, gid) in _FALLBACK_WORKS:
        return _FALLBACK_WORKS[(uid, gid)], ""
    check, why = _fallback_check_once(uid, gid)
    if not why:
        _FALLBACK_WORKS[(uid, gid)] = check
    return check, why


def _fallback_check_once(uid: int | None, gid: int | None) -> tuple[dict, str]:
    check, why = _confine_layers(uid, gid)
    if why:
        return check, why
    prefix = _setpriv_argv(SandboxUser("check", uid, gid)) if uid is not None else []
    applied = check.get("applied", [])
    real: dict = {
        "rlimits": {"CORE": 0},
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": "/",
        "argv": [kernel_python(), "-c", "import sys, ipykernel, numpy; print(sys.prefix)"],
    }
    if any(a.startswith("landlock") for a in applied):
        real["landlock"] = {
            "rx": [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)] + interpreter_paths(),
            "ro": [OWN_PROC, *READ_ONLY_EXTRA, *DEVICES] + [f"/etc/{n}" for n in ETC_FILES],
            "rw": [],
        }
    if "seccomp" in applied:
        real["seccomp"] = {"block_inet": True}
    try:
        proc = subprocess.run(prefix + _confine_argv(real), capture_output=True, text=True, timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return check, f"the kernel interpreter did not start confined: {e}"
    if proc.returncode != 0 or proc.stdout.strip() != sys.prefix:
        who = f"the sandbox uid {uid}" if uid is not None else "a confined process"
        detail = (proc.stderr.strip().splitlines() or [proc.stdout.strip()])[-1:]
        return check, (
            f"{who} cannot run {kernel_python()} with its packages (prefix "
            f"{proc.stdout.strip() or '?'}; {' '.join(detail)[:200]}); hint: install Python where "
            "every user can read it, not under a mode-700 home folder"
        )
    return check, ""


def _check_user(slot_user: SandboxUser) -> SandboxUser:
    """:data:`CHECK_USER` (created when missing), or ``slot_user`` where it cannot be had."""
    try:
        return ensure_named_user(CHECK_USER)
    except SandboxUserError:
        return slot_user


def choose_isolation(unsafe_no_sandbox: bool = False, slot: int = 0) -> Isolation:
    """Detect what works here and pick the strongest mode; raise when nothing does and it's not allowed."""
    forced = os.environ.get("AUTOGRADER_JAIL", "auto").strip().lower() or "auto"
    as_root = os.geteuid() == 0
    warnings: list[str] = []
    user = None
    if as_root:
        try:
            user = ensure_user(slot)
        except SandboxUserError as e:
            warnings.append(str(e))
    if forced in ("auto", "bwrap"):
        ok, why = _bwrap_works(as_root)
        if ok and (user is not None or not as_root):
            return _bwrap_isolation(user, as_root, warnings)
        warnings.append(why or "bwrap needs a sandbox user when run as root")
    if forced in ("auto", "fallback"):
        iso = _fallback_isolation(user, as_root, warnings)
        if iso is not None:
            return iso
    if unsafe_no_sandbox:
        warnings.append("UNSAFE: the notebook runs with no isolation besides rlimits (--unsafe-no-sandbox)")
        return Isolation("none", ["rlimits", "clearenv"], warnings)
    raise SandboxUnavailableError(
        "no isolation is available on this machine: "
        + "; ".join(warnings)
        + ". Install bubblewrap or run as root with Landlock; or pass "
        "--unsafe-no-sandbox to run untrusted notebooks unprotected."
    )


def _bwrap_isolation(user: SandboxUser | None, as_root: bool, warnings: list[str]) -> Isolation:
    layers = [f"uid:{user.name}"] if user else []
    layers += ["bwrap", "mountns", "pidns", "netns", "ipcns", "utsns"]
    if not as_root:
        layers.append("userns")
    check, _ = _confine_layers(None, None)  # only whether seccomp applies: bwrap starts the kernel itself
    seccomp = "seccomp" in check.get("applied", [])
    layers += ["rlimits", "no_new_privs", "clearenv"] + (["seccomp"] if seccomp else [])
    if not bwrap_supports_size():
        warnings.append("bwrap has no --size: /tmp in the jail is not size-capped (only by RLIMIT_FSIZE)")
    if not user:
        warnings.append("kernel runs under the grader's own uid inside a user namespace (grader not root)")
    return Isolation("bwrap", layers, warnings, user=user, bwrap_userns=not as_root, seccomp=seccomp)


def _fallback_isolation(user: SandboxUser | None, as_root: bool, warnings: list[str]) -> Isolation | None:
    if as_root and user is None:
        warnings.append("fallback needs a sandbox user when the grader is root")
        return None
    # the check runs as a uid of its own: a slot's uid belongs to the run holding that slot, whose
    # reaper kills every process of the uid (a check killed that way read as "no fallback here")
    checker = user and _check_user(user)
    check, why = _fallback_check(checker.uid if checker else None, checker.gid if checker else None)
    if why:
        warnings.append(f"fallback unavailable: {why}")
        return None
    applied = check.get("applied", [])
    landlock = any(a.startswith("landlock") for a in applied)
    seccomp = "seccomp" in applied
    if check.get("error"):
        warnings.append(f"fallback layer missing: {check['error']}")
    layers = ([f"uid:{user.name}"] if user else []) + ["rlimits", "no_new_privs", "clearenv"]
    layers += (["landlock"] if landlock else []) + (["seccomp"] if seccomp else [])
    if not user and not landlock:
        warnings.append("fallback without a sandbox uid or Landlock isolates nothing")
        return None
    if not landlock:
        warnings.append("Landlock is unavailable: the kernel can read every file its uid can read")
    if not seccomp:
        warnings.append("seccomp is unavailable: the kernel may open network sockets")
    if not user:
        warnings.append("kernel runs under the grader's own uid (grader not root)")
    return Isolation("fallback", layers, warnings, user=user, landlock=landlock, seccomp=seccomp)


# ------------------------------------------------------------------ commands
def _system_binds() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def _mkdirs(target: str, made: set[str]) -> list[str]:
    """``--dir`` (mode 0755) for every missing ancestor of ``target``: bwrap would make them 0700."""
    args: list[str] = []
    parts = Path(target).parts[1:-1]
    for i in range(len(parts)):
        d = "/" + "/".join(parts[: i + 1])
        if d not in made:
            made.add(d)
            args += ["--perms", "0755", "--dir", d]
    return args


def _bwrap_base(iso: Isolation, made: set[str]) -> list[str]:
    """bwrap's namespaces, /proc, /dev, tmpfs /tmp and /dev/shm, and the read-only system and interpreter."""
    args = [shutil.which("bwrap") or "bwrap", *BWRAP_NAMESPACES, "--die-with-parent", "--new-session"]
    if iso.bwrap_userns:
        args += ["--unshare-user", "--disable-userns"]
    size = ["--size", str(TMPFS_BYTES)] if bwrap_supports_size() else []
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        *size,
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        *size,
        "--tmpfs",
        "/dev/shm",
    ]
    args += _system_binds()
    for name in ETC_FILES:
        args += _mkdirs(f"/etc/{name}", made) + ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for p in interpreter_paths():  # after the tmpfs: a venv under /tmp stays visible
        args += _mkdirs(p, made) + ["--ro-bind", p, p]
    for p in READ_ONLY_EXTRA:
        args += _mkdirs(p, made) + ["--ro-bind-try", p, p]
    return args


def bwrap_argv(iso: Isolation, workspace: Path, rundir: Path, site_dir: Path) -> list[str]:
    made = {"/usr", "/tmp", "/proc", "/dev"}
    args = _bwrap_base(iso, made)
    args += _mkdirs(HOME_IN_JAIL, made) + ["--bind", str(workspace), HOME_IN_JAIL]
    args += _mkdirs(str(rundir), made) + ["--bind", str(rundir), str(rundir)]
    args += _mkdirs(SITE_IN_JAIL, made) + ["--ro-bind", str(site_dir), SITE_IN_JAIL]
    args += ["--hostname", "sandbox", "--chdir", HOME_IN_JAIL, "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--"]
    return args


def kernel_command(
    iso: Isolation,
    limits: ExecutionLimits,
    workspace: Path,
    rundir: Path,
    site_dir: Path,
    kernel_argv: list[str],
    cgroup: SlotCgroup | None = None,
) -> tuple[list[str], dict]:
    """``(argv, env)`` that start ``kernel_argv`` inside the jail ``iso`` describes (inside
    ``cgroup`` from its first process on, when given). ``site_dir`` holds the jail's
    ``sitecustomize.py`` (:func:`write_site`)."""
    if iso.mode == "bwrap":
        home, tmp, cwd, site = HOME_IN_JAIL, "/tmp", HOME_IN_JAIL, SITE_IN_JAIL
        prefix = bwrap_argv(iso, workspace, rundir, site_dir)
    else:
        home, tmp, cwd, site = str(workspace), str(rundir / "tmp"), str(workspace), str(site_dir)
        prefix = []
    config: dict = {
        "rlimits": rlimits(limits, with_nproc=iso.user is not None, cgroup=cgroup),
        "env": minimal_env(home, tmp, site),
        "argv": kernel_argv,
        "cwd": cwd,
    }
    if iso.seccomp:
        config["seccomp"] = {"block_inet": iso.mode != "bwrap"}
    if iso.mode == "fallback" and iso.landlock:
        config["landlock"] = landlock_rules(workspace, rundir, site_dir)
    if iso.user is not None:
        prefix += _setpriv_argv(iso.user)
    if cgroup is not None:
        prefix = join_prefix(cgroup) + prefix
    return prefix + _confine_argv(config), config["env"]


def write_site(site_dir: Path) -> Path:
    """Make ``site_dir`` (grader-owned, readable by the jail) hold the jail's ``sitecustomize.py``."""
    site_dir.mkdir(mode=0o755, exist_ok=True)
    os.chmod(site_dir, 0o755)
    target = site_dir / "sitecustomize.py"
    target.write_text(jail_site.source(), encoding="utf-8")
    os.chmod(target, 0o644)
    return site_dir


def landlock_rules(workspace: Path, rundir: Path, site_dir: Path) -> dict:
    """The fallback kernel's Landlock allow-lists: ``rx`` read and execute, ``ro`` read, ``rw`` all.
    Of /proc only the kernel's own entries and the CPUs' description (:data:`OWN_PROC`)."""
    rx = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)] + interpreter_paths()
    ro = [f"/etc/{n}" for n in ETC_FILES] + list(READ_ONLY_EXTRA) + [str(site_dir), OWN_PROC, *CPU_QUOTA_FILES]
    rw = [str(workspace), str(rundir), *DEVICES, "/dev/shm"]
    return {"rx": rx, "ro": ro, "rw": rw}


# ------------------------------------------------------------------ the measuring child
def measure_isolation() -> Isolation | None:
    """The jail of the grader's ONNX measuring child, or None where bwrap does not work here (or
    ``AUTOGRADER_JAIL`` asks for ``fallback``/``none``): then it runs with rlimits only.

    bwrap with fresh pid, net, ipc and uts namespaces and a read-only system; as root the child
    runs as :data:`MEASURE_USER` (no capabilities, ``no_new_privs``), else in a user namespace.
    """
    if os.environ.get("AUTOGRADER_JAIL", "auto").strip().lower() in ("fallback", "none"):
        return None
    as_root = os.geteuid() == 0
    if not _bwrap_works(as_root)[0]:
        return None
    user = None
    if as_root:
        try:
            user = ensure_named_user(MEASURE_USER)
        except SandboxUserError:
            return None
    seccomp = "seccomp" in _confine_layers(None, None)[0].get("applied", [])
    return Isolation("bwrap", [], [], user=user, bwrap_userns=not as_root, seccomp=seccomp)


def worker_command(
    iso: Isolation, work_dir: Path, read_only: list[str], argv: list[str], env: dict[str, str], limits: dict[str, int]
) -> list[str]:
    """``argv`` jailed by ``iso`` (bwrap): ``work_dir`` (same path) its only writable folder, the
    system, the interpreter and ``read_only`` (same paths) readable, no network, ``env`` only."""
    made = {"/usr", "/tmp", "/proc", "/dev"}
    args = _bwrap_base(iso, made)
    for p in read_only:
        args += _mkdirs(p, made) + ["--ro-bind", p, p]
    args += _mkdirs(str(work_dir), made) + ["--bind", str(work_dir), str(work_dir)]
    args += ["--hostname", "sandbox", "--chdir", str(work_dir), "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--"]
    if iso.user is not None:
        args += _setpriv_argv(iso.user)
    config: dict = {"rlimits": limits, "env": env, "argv": argv, "cwd": str(work_dir)}
    if iso.seccomp:
        config["seccomp"] = {"block_inet": False}
    return args + _confine_argv(config)
