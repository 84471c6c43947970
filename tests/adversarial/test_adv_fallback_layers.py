"""The fallback jail's layers, attacked directly (no kernel needed): where namespaces are blocked
(Docker's default seccomp profile, as on Gradescope) the grader runs the kernel as the sandbox uid
under ``autograder/jail/confine.py``: rlimits, no_new_privs, Landlock and a seccomp filter.

These tests run small attack programs under exactly that confinement (the grader's own rules:
``jail.landlock_rules``, ``jail.rlimits``, ``jail.minimal_env``, seccomp with ``block_inet``),
with the system Python as the confined program, so they run even where the fallback cannot start
a full kernel (e.g. when the grader's interpreter lives under a mode-700 home folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from needs import needs
from advkit import FILE_SECRET, GRADER_FILES, MARK_SOURCE, TOKEN, LoopbackServers, ROOT, xdist_slot

SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
@needs("root")
def confined():
    """``run(code) -> dict``: run ``code`` under the fallback confinement as the slot's sandbox uid."""
    if not os.access(SYSTEM_PYTHON, os.X_OK) or not shutil.which("setpriv"):
        pytest.skip(f"needs {SYSTEM_PYTHON} and setpriv")
    from autograder.assignment import ExecutionLimits
    from autograder.jail import confine, jail
    from autograder.jail.users import chown_tree_top, claim_slot, ensure_user

    slot_claim = claim_slot(xdist_slot())
    user = ensure_user(slot_claim.__enter__())
    base = Path(tempfile.mkdtemp(prefix=f"adv-{TOKEN}-fallback-"))
    os.chmod(base, 0o711)
    workspace, rundir = base / "ws", base / "run"
    for d in (workspace, rundir):
        d.mkdir()
    site_dir = jail.write_site(base / "site")
    for d in (workspace, rundir):
        chown_tree_top(d, user)
    source = Path(confine.__file__).read_text()

    def run(code: str, timeout: float = 30) -> dict:
        config = {
            "rlimits": jail.rlimits(ExecutionLimits(), with_nproc=True),
            "env": jail.minimal_env(str(workspace), str(rundir)),
            "argv": [SYSTEM_PYTHON, "-I", "-S", "-c", PRELUDE + code],
            "cwd": str(workspace),
            "landlock": jail.landlock_rules(workspace, rundir, site_dir),
            "seccomp": {"block_inet": True},
        }
        setpriv = [
            shutil.which("setpriv"),
            f"--reuid={user.uid}",
            f"--regid={user.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--",
        ]
        proc = subprocess.run(
            setpriv + [SYSTEM_PYTHON, "-I", "-S", "-c", source, json.dumps(config)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )
        if proc.returncode == 111:
            pytest.skip(f"the fallback's layers cannot be applied here: {proc.stderr.strip()[:300]}")
        lines = proc.stdout.strip().splitlines()
        assert lines, f"the confined program printed nothing (exit {proc.returncode}): {proc.stderr[-1500:]}"
        return json.loads(lines[-1])

    run.user = user
    yield run
    shutil.rmtree(base, ignore_errors=True)
    slot_claim.__exit__(None, None, None)


PRELUDE = MARK_SOURCE + "\nimport json, os, socket, sys\n"


def test_fallback_hides_the_graders_files_and_the_hosts(confined, canary_dir):
    targets = [str(p) for p in GRADER_FILES] + [
        str(canary_dir / "secret.txt"),
        str(canary_dir / "root_only.txt"),
        "/etc/shadow",
        str(ROOT / "pyproject.toml"),
    ]
    code = f"""
out = {{}}
for p in {targets!r}:
    try:
        out[p] = open(p).read(200)
    except OSError as e:
        out[p] = "ERR " + type(e).__name__
for d in ({str(canary_dir)!r}, {str(ROOT)!r}):
    try:
        open(os.path.join(d, "planted-" + MARK), "w").write(MARK)
        out["write " + d] = "written"
    except OSError as e:
        out["write " + d] = "ERR " + type(e).__name__
print(json.dumps(out))
"""
    out = confined(code)
    leaked = {k: v[:40] for k, v in out.items() if not v.startswith("ERR")}
    assert not leaked, f"under the fallback the kernel could read or write: {leaked}"
    assert FILE_SECRET not in json.dumps(out)


def test_fallback_blocks_loopback_and_host_sockets(confined):
    servers = LoopbackServers()
    try:
        targets = {k: (list(v) if isinstance(v, tuple) else v) for k, v in servers.targets.items()}
        code = f"""
targets = {targets!r}
kinds = {{"tcp4": (socket.AF_INET, socket.SOCK_STREAM), "tcp6": (socket.AF_INET6, socket.SOCK_STREAM),
         "udp4": (socket.AF_INET, socket.SOCK_DGRAM), "unix_abstract": (socket.AF_UNIX, socket.SOCK_STREAM),
         "unix_path": (socket.AF_UNIX, socket.SOCK_STREAM)}}
out = {{}}
for name, addr in targets.items():
    fam, kind = kinds[name]
    addr = chr(0) + addr if name == "unix_abstract" else tuple(addr) if isinstance(addr, list) else addr
    try:
        s = socket.socket(fam, kind)
        s.settimeout(2)
        if kind == socket.SOCK_DGRAM:
            s.sendto(MARK.encode(), addr)
        else:
            s.connect(addr)
            s.sendall(MARK.encode())
        out[name] = "CONNECTED"
    except OSError as e:
        out[name] = "ERR " + type(e).__name__ + ": " + str(e)[:60]
print(json.dumps(out))
"""
        out = confined(code)
        import time

        time.sleep(0.5)
        reached = list(servers.received)
    finally:
        servers.close()
    assert not reached, f"the fallback jail reached the host's sockets: {reached}; tries: {out}"


IO_URING_UDP = r'''
import ctypes, mmap, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
U32 = ctypes.c_uint32
class SqOff(ctypes.Structure):
    _fields_ = [(n, U32) for n in ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1")] + [("user_addr", ctypes.c_uint64)]
class CqOff(ctypes.Structure):
    _fields_ = [(n, U32) for n in ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1")] + [("user_addr", ctypes.c_uint64)]
class Params(ctypes.Structure):
    _fields_ = [("sq_entries", U32), ("cq_entries", U32), ("flags", U32), ("sq_thread_cpu", U32),
                ("sq_thread_idle", U32), ("features", U32), ("wq_fd", U32), ("resv", U32 * 3),
                ("sq_off", SqOff), ("cq_off", CqOff)]
def io_uring_socket(family, kind):
    """socket(family, kind) submitted through io_uring (IORING_OP_SOCKET), not as a system call."""
    p = Params()
    fd = libc.syscall(425, 4, ctypes.byref(p))                       # io_uring_setup
    if fd < 0:
        return "io_uring_setup refused: " + os.strerror(ctypes.get_errno())
    prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
    sq_len = p.sq_off.array + p.sq_entries * 4
    cq_len = p.cq_off.cqes + p.cq_entries * 16
    if p.features & 1:                                               # IORING_FEAT_SINGLE_MMAP
        sq_len = cq_len = max(sq_len, cq_len)
    sq = mmap.mmap(fd, sq_len, flags, prot, offset=0)
    cq = sq if p.features & 1 else mmap.mmap(fd, cq_len, flags, prot, offset=0x8000000)
    sqes = mmap.mmap(fd, p.sq_entries * 64, flags, prot, offset=0x10000000)
    sqe = struct.pack("<BBHiQQIIQ", 45, 0, 0, family, kind, 0, 0, 0, 77)   # IORING_OP_SOCKET
    sqes[0:64] = sqe + bytes(64 - len(sqe))
    tail = struct.unpack_from("<I", sq, p.sq_off.tail)[0]
    mask = struct.unpack_from("<I", sq, p.sq_off.ring_mask)[0]
    struct.pack_into("<I", sq, p.sq_off.array + (tail & mask) * 4, 0)
    struct.pack_into("<I", sq, p.sq_off.tail, tail + 1)
    if libc.syscall(426, fd, 1, 1, 1, None, 0) < 0:                  # io_uring_enter, GETEVENTS
        return "io_uring_enter refused: " + os.strerror(ctypes.get_errno())
    head = struct.unpack_from("<I", cq, p.cq_off.head)[0]
    cmask = struct.unpack_from("<I", cq, p.cq_off.ring_mask)[0]
    _, res, _ = struct.unpack_from("<QiI", cq, p.cq_off.cqes + (head & cmask) * 16)
    return res if res >= 0 else "IORING_OP_SOCKET failed: " + os.strerror(-res)
out = {}
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out["plain_socket"] = "created"
except OSError as e:
    out["plain_socket"] = "ERR " + str(e)
got = io_uring_socket(socket.AF_INET, socket.SOCK_DGRAM)
if isinstance(got, int):
    s = socket.socket(fileno=got)
    try:
        s.sendto(MARK.encode(), ("127.0.0.1", PORT))
        out["io_uring"] = "SENT through an io_uring socket"
    except OSError as e:
        out["io_uring"] = "socket made, send failed: " + str(e)
else:
    out["io_uring"] = got
print(json.dumps(out))
'''


def test_fallback_network_block_cannot_be_bypassed_with_io_uring(confined):
    """seccomp filters the socket() system call; io_uring can create a socket without making it."""
    servers = LoopbackServers()
    try:
        port = servers.targets["udp4"][1]
        out = confined(f"PORT = {port}\n" + IO_URING_UDP)
        import time

        time.sleep(0.5)
        reached = list(servers.received)
    finally:
        servers.close()
    assert out["plain_socket"].startswith("ERR"), f"seccomp let socket(AF_INET) through: {out}"
    assert not reached, (
        f"a UDP datagram left the fallback jail through an io_uring socket: {reached} ({out}); "
        "seccomp must deny io_uring_setup/io_uring_enter/io_uring_register"
    )


SIGNALS = """
out = {}
for name, pid in TARGETS.items():
    try:
        os.kill(pid, 9)
        out[name] = "KILLED"
    except OSError as e:
        out[name] = "ERR " + type(e).__name__
for name, fn in (("unshare_user", lambda: os.unshare(os.CLONE_NEWUSER)),
                 ("unshare_net", lambda: os.unshare(os.CLONE_NEWNET))):
    try:
        fn()
        out[name] = "DONE"
    except (OSError, AttributeError) as e:
        out[name] = "ERR " + type(e).__name__
print(json.dumps(out))
"""


def test_fallback_cannot_signal_outside_or_make_namespaces(confined):
    """A root process and a process of the same sandbox uid outside the jail are out of reach."""
    root_sleeper = subprocess.Popen(["sleep", "60"])
    user = confined.user
    same_uid_sleeper = subprocess.Popen(
        [shutil.which("setpriv"), f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "sleep", "60"]
    )
    try:
        targets = {"root_process": root_sleeper.pid, "same_uid_outside_the_jail": same_uid_sleeper.pid}
        out = confined(f"TARGETS = {targets!r}\n" + SIGNALS)
        assert root_sleeper.poll() is None and same_uid_sleeper.poll() is None, f"a signal left the jail: {out}"
        assert all(v.startswith("ERR") for v in out.values()), out
    finally:
        for p in (root_sleeper, same_uid_sleeper):
            p.kill()
            p.wait()
