"""The kernel template (zygote) process: imports a lesson's libraries once, forks one jailed kernel per request.

Run by path, never imported by the grader: ``python -I template_process.py serve SOCKET MODULE...``
(standard library only, plus :mod:`confine` and :mod:`jail_site`, loaded by path from the jail's
folder beside this one, ``autograder/jail/``: the same functions every kernel's confinement uses). The process

1. imports ``MODULE...`` (the lesson's libraries: numpy, scikit-learn, ... and ipykernel's
   kernel app) with one BLAS/OpenMP thread, and nothing of the grader; a module whose import
   starts a thread (ONNX Runtime's does) is left out, and every module that imports it
   (:func:`import_fork_safe`): the child imports those itself;
2. makes itself non-dumpable and dies with its parent (``PR_SET_PDEATHSIG``);
3. listens on ``SOCKET`` (a Unix socket in the grader's private run folder). For each connection
   it checks it is still one thread, forks, and never reads a byte of the request itself: the
   child does. It sends ``{"pid": N}``, then ``{"exit": code, "utime": s, "stime": s}`` when the
   child ends, and SIGKILLs the child when the connection closes first (the launcher was killed).

The child (:func:`_child`), as root until it drops: reads the request and the two descriptors
passed with it (the kernel's stdout and stderr), joins the slot's cgroup, unshares fresh mount,
PID, network, IPC, UTS and cgroup namespaces, and forks the namespace's init; the init builds the
jail's root (tmpfs root, read-only system, the workspace as ``/home/student``, fresh ``/proc``,
``/tmp``, ``/dev/shm``), forks the kernel process and reaps until the kernel exits. The kernel
process closes every other descriptor, takes the request's environment, drops to the slot uid
with no capability, applies confine's rlimits, ``no_new_privs``, Landlock and seccomp, and runs
ipykernel's ``IPKernelApp`` on the connection file. SECURITY.md ("The kernel template") has the
design and the invariants; ``tests/sandbox/test_sandbox_template.py`` attacks them.

A request (one JSON line) holds: ``root`` (an empty folder to build the jail's root on),
``binds`` (``[source, target, "ro"|"rw"]``, targets inside the jail), ``symlinks``, ``devices``,
``tmpfs`` (``[target, bytes]``), ``cgroup_procs``, ``uid``, ``gid``, ``env``, ``cwd``,
``rlimits``, ``landlock`` (or null), ``seccomp`` (or null), ``threads`` (ONNX Runtime's default
pool size), and either ``connection_file`` (run the kernel) or ``code`` (run that Python source
instead of the kernel: the bench and the tests).
"""

import ctypes
import errno
import fcntl
import importlib.util
import json
import os
import platform
import select
import signal
import socket
import struct
import sys

JAIL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jail")  # confine.py, jail_site.py

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
MNT_DETACH = 2
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE = 442, -100, 0x8000  # 442 on every architecture
ATTR_RDONLY, ATTR_NOSUID, ATTR_NODEV, ATTR_NOEXEC = 1, 2, 4, 8
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_READ, PR_CAPBSET_DROP = 1, 4, 23, 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET = 47, 1
SYS_CAPGET = {"x86_64": 125, "aarch64": 90}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
MAX_REQUEST = 1 << 20


def _load(name):
    """``confine`` or ``jail_site`` from the jail's folder, by path (this process imports no grader package)."""
    spec = importlib.util.spec_from_file_location(f"autograder_template_{name}", os.path.join(JAIL_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


confine = _load("confine")
jail_site = _load("jail_site")
libc = confine._libc()


class SetupError(Exception):
    pass


def _check(result, what):
    if result != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(source, target, fstype, flags, data=None):
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source or fstype} on {target}",
    )


def threads():
    return len(os.listdir("/proc/self/task"))


def open_fds():
    return sorted(int(n) for n in os.listdir("/proc/self/fd"))


def capabilities():
    """``{"CapEff": bits, "CapPrm": ..., "CapInh": ..., "CapBnd": ..., "CapAmb": ...}`` of this process,
    from the kernel itself (``capget``; ``prctl`` for the bounding and ambient sets)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two of {effective, permitted, inheritable}
    _check(libc.syscall(SYS_CAPGET[platform.machine()], header, data), "capget")
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    bounding = sum(1 << c for c in range(last + 1) if libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
    ambient = sum(1 << c for c in range(last + 1) if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
    return {
        "CapEff": data[0] | data[3] << 32,
        "CapPrm": data[1] | data[4] << 32,
        "CapInh": data[2] | data[5] << 32,
        "CapBnd": bounding,
        "CapAmb": ambient,
    }


# ------------------------------------------------------------------ the template
def serve(sock_path, args):
    """``args``: the modules to import, in order; ``-NAME`` leaves NAME out (see :func:`import_fork_safe`)."""
    os.environ.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    imported, left_out = import_fork_safe(sock_path, args)
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    os.chmod(sock_path, 0o600)
    listener.listen(16)
    ready = {"ready": True, "threads": threads(), "fds": open_fds(), "imported": imported, "left_out": left_out}
    print(json.dumps(ready), flush=True)
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)  # nobody reads the template's stdout after this line
    os.close(devnull)
    poll = select.epoll()
    poll.register(listener.fileno(), select.EPOLLIN)
    watched = {}  # fd -> ("hangup" | "exit", conn, pid, pidfd)
    while True:
        for fd, _ in poll.poll():
            if fd == listener.fileno():
                conn, _ = listener.accept()
                _fork_for(conn, listener, poll, watched)
                continue
            kind, conn, pid, pidfd = watched.pop(fd)
            poll.unregister(fd)
            if kind == "hangup":  # the launcher went away (killed, timed out): end its child
                os.kill(pid, signal.SIGKILL)  # our own child, not reaped yet: the pid is still its
                continue
            _, status, usage = os.wait4(pid, 0)
            os.close(pidfd)
            if watched.pop(conn.fileno(), None) is not None:
                poll.unregister(conn.fileno())
            code = os.waitstatus_to_exitcode(status)
            reply = {"exit": code if code >= 0 else 128 - code, "utime": usage.ru_utime, "stime": usage.ru_stime}
            try:
                conn.sendall((json.dumps(reply) + "\n").encode())
            except OSError:
                pass
            conn.close()


def import_fork_safe(sock_path, args):
    """Import the modules of ``args`` in order, except those whose import starts a thread.

    A fork copies only the calling thread: a library whose import started one (ONNX Runtime does)
    would find, in every child, locks and queues of a thread that is not there. When an import
    leaves this process with more than one thread, the template replaces itself (``execv``, same
    pid) with a run that leaves that module out, and so on: whatever imports it later is left out
    too. The children import what was left out themselves, as a fresh kernel would.
    """
    wanted = [a for a in args if not a.startswith("-")]
    left_out = [a[1:] for a in args if a.startswith("-")]
    imported = []
    for name in wanted:
        if name in left_out:
            continue
        importlib.import_module(name)
        if threads() != 1:
            argv = [sys.executable, "-I", os.path.abspath(__file__), "serve", sock_path, *args, f"-{name}"]
            os.execv(sys.executable, argv)
        imported.append(name)
    return imported, left_out


def _fork_for(conn, listener, poll, watched):
    if threads() != 1:  # a fork of a threaded process copies locks no thread will release
        conn.sendall(b'{"error": "the template has more than one thread; it does not fork"}\n')
        conn.close()
        return
    template_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            # a dead template takes its children along (their namespaces end with them)
            _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
            if os.getppid() != template_pid:
                return
            listener.close()
            code = _child(conn)
        except BaseException as e:  # noqa: BLE001 - reported on the kernel's stderr, then _exit
            _say(f"autograder template: the child's setup failed: {type(e).__name__}: {e}")
        finally:
            os._exit(code)
    pidfd = os.pidfd_open(pid)
    try:
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    except OSError:
        pass
    # the request is still unread in the socket (the child reads it): watch only for the hang-up
    poll.register(conn.fileno(), select.EPOLLRDHUP)
    watched[conn.fileno()] = ("hangup", conn, pid, pidfd)
    poll.register(pidfd, select.EPOLLIN)
    watched[pidfd] = ("exit", conn, pid, pidfd)


def _say(text):
    try:
        os.write(2, (text + "\n").encode(errors="replace"))
    except OSError:
        pass


# ------------------------------------------------------------------ the child (per submission)
def _read_request(conn):
    """The request's JSON line and the descriptors passed with it (the kernel's stdout and stderr)."""
    buf, fds = b"", []
    while not buf.endswith(b"\n"):
        msg, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(2 * 4))
        if not msg:
            raise SetupError("the launcher closed the connection before its request")
        buf += msg
        if len(buf) > MAX_REQUEST:
            raise SetupError("request too large")
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(memoryview(data).cast("i"))
    return json.loads(buf), fds


def _child(conn):
    req, fds = _read_request(conn)
    conn.close()
    if len(fds) == 2:  # the kernel's stdout and stderr: the grader's output pipe
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.closerange(3, 1 << 16)  # other launchers' connections, the template's selector and pidfds
    for path in req.get("cgroup_procs", []):
        with open(path, "w", encoding="ascii") as f:
            f.write("0")
    _check(libc.unshare(NAMESPACES), "unshare(mount, pid, net, ipc, uts, cgroup)")
    init = os.fork()
    if init == 0:
        code = 1
        try:
            code = _init(req)
        except BaseException as e:  # noqa: BLE001 - reported on the kernel's stderr, then _exit
            _say(f"autograder template: the jail's init failed: {type(e).__name__}: {e}")
        finally:
            os._exit(code)
    _, status = os.waitpid(init, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        _say(f"autograder template: the jail's init was ended by signal {-code}")
    return code if code >= 0 else 128 - code


def _init(req):
    """PID 1 of the submission's namespaces: build the root, fork the kernel, reap until it exits."""
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    build_root(req)
    socket.sethostname("sandbox")
    loopback_up()
    kernel = os.fork()
    if kernel == 0:
        code = 1
        try:
            code = _kernel(req)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # noqa: BLE001 - reported on the kernel's stderr, then _exit
            _say(f"autograder template: the kernel process failed: {type(e).__name__}: {e}")
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)
    while True:
        pid, status = os.wait()
        if pid == kernel:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:
                _say(f"autograder template: the kernel was ended by signal {-code}")
            return code if code >= 0 else 128 - code


def build_root(req):
    """The jail's file system, as bwrap builds it: a tmpfs root with only what the request binds."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = req["root"]
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for target, size in req.get("tmpfs", []):  # first: a bind below /tmp (the run folder, a venv) stays visible
        os.makedirs(root + target, mode=0o755, exist_ok=True)
        _mount("tmpfs", root + target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(size)}")
    for target, link in req.get("symlinks", []):
        os.makedirs(root + os.path.dirname(target), mode=0o755, exist_ok=True)
        os.symlink(link, root + target)
    for source, target, mode in req.get("binds", []):
        if not os.path.exists(source):
            continue
        dest = root + target
        is_dir = os.path.isdir(source)
        os.makedirs(dest if is_dir else os.path.dirname(dest), mode=0o755, exist_ok=True)
        if not is_dir and not os.path.exists(dest):
            os.close(os.open(dest, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(source, dest, None, MS_BIND | MS_REC)
        _restrict(dest, mode)
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    _check(libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _restrict(dest, mode):
    """Make the bind at ``dest`` and every mount below it read-only (``ro``), or at least nosuid.

    ``mount_setattr(AT_RECURSIVE)`` (Linux 5.12) reaches the submounts a recursive bind brought
    along, as bwrap does one by one; an older kernel gets the remount of the top mount only.
    """
    attrs = {
        "ro": ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
        "rw": ATTR_NOSUID | ATTR_NODEV,
        "dev": ATTR_NOSUID | ATTR_NOEXEC,
    }
    attr = ctypes.create_string_buffer(struct.pack("=QQQQ", attrs[mode], 0, 0, 0), 32)
    done = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, dest.encode(), AT_RECURSIVE, attr, ctypes.c_size_t(32))
    if done == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:
        raise SetupError(f"mount_setattr {dest}: {os.strerror(ctypes.get_errno())}")
    extra = {"ro": MS_RDONLY | MS_NODEV, "rw": MS_NODEV, "dev": MS_NOEXEC}[mode]
    _mount(None, dest, None, MS_BIND | MS_REMOUNT | MS_NOSUID | extra)


def loopback_up():
    """Bring up ``lo`` in the fresh network namespace, as bwrap does (nothing else exists there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def _kernel(req):
    """The kernel process: nothing of the template's but the imported modules, then the student's kernel."""
    os.setsid()
    os.closerange(3, 1 << 16)  # the template's socket, the launcher's connection, any library's file
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    drop_privileges(int(req["uid"]), int(req["gid"]))
    confine.set_rlimits(req.get("rlimits", {}))
    confine.set_no_new_privs(libc)
    if req.get("landlock"):
        ll = req["landlock"]
        confine.apply_landlock(libc, ll.get("rx", []), ll.get("ro", []), ll.get("rw", []))
    if req.get("seccomp") is not None:
        confine.apply_seccomp(libc, bool(req["seccomp"].get("block_inet")))
    fresh_state(int(req.get("threads") or 1))
    if req.get("code") is not None:
        exec(compile(req["code"], "<template-child>", "exec"), {"__name__": "__main__"})
        return 0
    from ipykernel.kernelapp import IPKernelApp

    sys.argv = ["ipykernel_launcher", "-f", req["connection_file"]]  # not the template's socket
    IPKernelApp.launch_instance(argv=["-f", req["connection_file"]])
    return 0


def drop_privileges(uid, gid):
    """The slot uid with no capability left (every set empty, checked); dumpable again for its own /proc."""
    if uid == 0 or gid == 0:
        raise SetupError("refusing to run a kernel as root")
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    left = {k: v for k, v in capabilities().items() if v}
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups() or left:
        raise SetupError(f"privileges not dropped: uids {os.getresuid()}, capabilities {left}")
    _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 1)")


def fresh_state(pool_threads):
    """What a fresh kernel would have drawn anew or set at start-up (``random`` reseeds itself at fork)."""
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))  # -I ignored the variable
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    # the sitecustomize of a fresh kernel never runs in a fork: ONNX Runtime (imported by the
    # template, or later by the notebook: the template leaves it out) gets the jail's pool size and
    # session configuration here
    jail_site.limit_onnxruntime(pool_threads, jail_site.session_config())


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "serve":
        sys.exit("usage: template_process.py serve SOCKET [MODULE ...]")
    serve(sys.argv[2], sys.argv[3:])
