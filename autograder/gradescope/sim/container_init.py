"""The first process of a simulated Docker container: file system, then Docker's restrictions,
then the container's command. Run by :mod:`autograder.gradescope.sim.container` as

    unshare --mount --pid --fork --uts --ipc --propagation private --kill-child \\
        /usr/bin/python3 -I container_init.py CONFIG_JSON

already inside the container's cgroup, as root with every capability, as PID 1 of a fresh PID
namespace. Self-contained (standard library, plus libseccomp's ``seccomp`` module from Debian's
``python3-seccomp``), because nothing of the project may be imported by an interpreter that is
about to lose its view of the host. In order:

1. the root: a small tmpfs (or a Debian root file system folder) that the ``ops`` of the config
   fill: read-only and read-write bind mounts, symlinks, ``/proc`` of the new PID namespace, a
   minimal ``/dev``, ``/sys`` read-only with ``/sys/fs/cgroup`` read-only (as Docker mounts them);
2. ``pivot_root`` into it; the host's tree is detached and gone;
3. Docker's restrictions: the capability bounding set cut to Docker's 14, its default seccomp
   profile loaded (without ``no_new_privs``, as Docker), the effective/permitted sets cut to the 14;
4. fork: the child ``execve``s the command as root (it then holds exactly the 14 capabilities);
   this process stays PID 1 and reaps orphans, as ``docker run --init`` does, and exits with the
   command's status, which ends every process left in the namespace.

Any failure before the command starts exits 125 with the reason on stderr (Docker's convention
for "the container could not start").
"""

import ctypes
import json
import os
import platform
import signal
import socket
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CAP_VERSION_3 = 0x20080522
START_FAILED = 125

libc = ctypes.CDLL(None, use_errno=True)


class InitError(Exception):
    pass


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise InitError(f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None):
    _check(
        libc.mount(
            source and source.encode(),
            target.encode(),
            fstype and fstype.encode(),
            ctypes.c_ulong(flags),
            data and data.encode(),
        ),
        f"mount {source} on {target}",
    )


def _statvfs_flags(path):
    st = os.statvfs(path)
    flags = 0
    for bit, mflag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if st.f_flag & bit:
            flags |= mflag
    return flags


def bind(source, target, read_only, recursive=False):
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "ab").close()
    mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    if read_only:
        remount_read_only(target)


def remount_read_only(target):
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _statvfs_flags(target))


def apply_op(root, op):
    kind = op[0]
    target = root + op[1 if kind != "bind" else 2]
    if kind == "tmpfs":
        os.makedirs(target, exist_ok=True)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, op[2])
    elif kind == "bind":
        bind(op[1], target, read_only=op[3] == "ro")
    elif kind == "symlink":
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(op[2], target)
    elif kind == "mkdir":
        os.makedirs(target, exist_ok=True)
        os.chmod(target, int(op[2], 8))
    elif kind == "proc":
        os.makedirs(target, exist_ok=True)
        mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif kind == "remount_ro":
        remount_read_only(target)
    else:
        raise InitError(f"unknown mount operation {op!r}")


def make_root(cfg):
    """Mount the new root and fill it; returns its path (still seen from the host's tree)."""
    root = cfg["root"]
    if cfg.get("rootfs"):  # a root file system folder: bind it onto itself
        mount(root, root, None, MS_BIND | MS_REC)
    else:
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    for op in cfg["ops"]:
        apply_op(root, op)
    return root


def pivot_into(root):
    old = os.path.join(root, ".host-root")
    os.makedirs(old, exist_ok=True)
    os.chdir(root)
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise InitError(f"no pivot_root number for {platform.machine()}")
    _check(libc.syscall(nr, b".", b".host-root"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.host-root", MNT_DETACH), "umount the host's root")
    os.rmdir("/.host-root")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def restrict(cfg, profile):
    """Docker's restrictions on this process: bounding set, seccomp, then the capability sets."""
    keep = set(profile.DEFAULT_CAPS.values())
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    if cfg.get("seccomp", True):
        import seccomp  # Debian's python3-seccomp; imported before the host's tree is gone

        flt, _skipped = profile.build_filter(seccomp, platform.machine())
        flt.load()  # needs CAP_SYS_ADMIN, still held: no no_new_privs, as in Docker
    mask = sum(1 << c for c in keep)
    data = (CapData * 2)(CapData(mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0), CapData(mask >> 32, mask >> 32, 0))
    _check(libc.capset(ctypes.byref(CapHeader(CAP_VERSION_3, 0)), data), "capset")


def run_as_pid1(cfg):
    """Fork the command; reap every child until it exits; return its exit status."""
    child = os.fork()
    if child == 0:
        try:
            os.chdir(cfg.get("cwd", "/"))
            os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
        except OSError as e:
            sys.stderr.write(f"container: cannot start {cfg['argv'][0]}: {e}\n")
        os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def load_profile(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("docker_profile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(config_json):
    cfg = json.loads(config_json)
    try:
        profile = load_profile(cfg["profile"])
        if cfg.get("seccomp", True):
            import seccomp  # noqa: F401 - fail here, with the host still visible, when it is missing
        root = make_root(cfg)
        socket.sethostname(cfg.get("hostname", "container"))
        pivot_into(root)
        restrict(cfg, profile)
    except Exception as e:  # noqa: BLE001 - every failure is a container that did not start
        sys.stderr.write(f"container: could not start: {type(e).__name__}: {e}\n")
        sys.exit(START_FAILED)
    sys.stdout.flush()
    sys.exit(run_as_pid1(cfg))


if __name__ == "__main__":
    main(sys.argv[1])
