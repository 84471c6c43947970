"""What a sandbox uid leaves without a process (``autograder/jail/uid_sweep.py``), and the
seccomp rule that keeps SysV IPC and POSIX message queues out of every jail.

The sweep is tested on objects this test makes itself, as a uid of its own that no sandbox slot
uses (root only: a child drops to it): SysV segments, message queues and semaphore sets, a POSIX
message queue on an mqueue file system the test mounts, and files in the shared temporary folders.
What is not the uid's (root's, a neighbour uid's) stays, and what cannot be removed is a warning.
The whole path (a notebook that writes, the next one in the same slot that reads) is
``tests/adversarial/test_adv_leftover_state.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.jail import confine, uid_sweep
from autograder.jail.jail import _confine_argv
from autograder.jail.users import USER_PREFIX, SandboxUser
from autograder.tree_walk import remove_tree

IPC_CREAT, IPC_SET = 0o1000, 1
MiB = 1 << 20
SYSV_AND_MQ = (
    "shmget shmat shmctl shmdt semget semop semctl semtimedop msgget msgsnd msgrcv msgctl "
    "mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr"
).split()


def _own_uid(offset: int = 0) -> int:
    """A uid no process runs as, one per xdist worker (parallel workers never sweep each other's)."""
    worker = "".join(ch for ch in os.environ.get("PYTEST_XDIST_WORKER", "gw0") if ch.isdigit()) or "0"
    return 64200 + 10 * int(worker) + offset


def _user(uid: int) -> SandboxUser:
    return SandboxUser(f"{USER_PREFIX}unit{uid}", uid, uid)


def _as_uid(uid: int, body) -> dict:
    """Run ``body(libc)`` in a forked child that has become ``uid``; its dict comes back as JSON."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            out = body(ctypes.CDLL(None, use_errno=True))
            os.write(write_end, json.dumps(out).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"the child as uid {uid} failed"
    return json.loads(text)


class ShmidDs(ctypes.Structure):
    """``struct shmid_ds`` of x86_64 and aarch64 (ipc_perm first): only ``shm_perm.uid`` is set."""

    _fields_ = [
        ("key", ctypes.c_int),
        ("uid", ctypes.c_uint),
        ("gid", ctypes.c_uint),
        ("cuid", ctypes.c_uint),
        ("cgid", ctypes.c_uint),
        ("mode", ctypes.c_ushort),
        ("_pad", ctypes.c_byte * 118),
    ]


def _make_sysv(key: int, give_to: int | None = None):
    """A body for :func:`_as_uid`: a 2 MB segment (filled, detached), a queue with one message, a
    set of 3 semaphores; with ``give_to``, a fourth object (a segment) handed to that uid by
    ``IPC_SET`` (the creator stays the maker)."""

    def body(libc) -> dict:
        libc.shmat.restype = ctypes.c_void_p
        shm = libc.shmget(key, 2 * MiB, IPC_CREAT | 0o666)
        addr = libc.shmat(shm, None, 0)
        ctypes.memset(addr, 0x5A, 2 * MiB)
        libc.shmdt(ctypes.c_void_p(addr))
        msg = libc.msgget(key + 1, IPC_CREAT | 0o666)
        text = b"marker"
        buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + len(text))
        ctypes.c_long.from_buffer(buf).value = 1
        buf[ctypes.sizeof(ctypes.c_long) :] = text
        sent = libc.msgsnd(msg, buf, len(text), 0)
        sem = libc.semget(key + 2, 3, IPC_CREAT | 0o666)
        out = {"shm": shm, "msg": msg, "sent": sent, "sem": sem}
        if give_to is not None:
            given = libc.shmget(key + 3, 4096, IPC_CREAT | 0o666)
            ds = ShmidDs()
            libc.shmctl(given, 2, ctypes.byref(ds))  # IPC_STAT
            ds.uid = give_to
            out["given"] = given
            out["set"] = libc.shmctl(given, IPC_SET, ctypes.byref(ds))
        return out

    return body


def _rmid(kind: str, ident: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if kind == "sem":
        libc.semctl(ident, 0, 0)
    else:
        getattr(libc, f"{kind}ctl")(ident, 0, None)


@pytest.fixture
def cleanup_sysv():
    """``(kind, id, uid)`` of what the test made: what a failing sweep left is removed as root
    afterwards, if that id still belongs to that uid (an id may be reused by someone else's object)."""
    made: list[tuple[str, int, int]] = []
    yield made
    columns = {kind: column for kind, column, _, _ in uid_sweep.SYSV_KINDS}
    for kind, ident, uid in made:
        rows = uid_sweep.read_sysvipc(kind)
        if any(r[columns[kind]] == ident and uid in (r["uid"], r["cuid"]) for r in rows):
            _rmid(kind, ident)


@pytest.mark.root
def test_the_sweep_removes_the_uids_sysv_objects_and_files_and_nothing_else(cleanup_sysv, tmp_path):
    uid, neighbour = _own_uid(), _own_uid(1)
    key = 0x5EE00000 + uid
    assert not uid_sweep.sysv_objects(uid), "the test's own uid already holds SysV objects"
    mine = _as_uid(uid, _make_sysv(key, give_to=0))
    theirs = _as_uid(neighbour, _make_sysv(key + 16))
    for made, owner in ((mine, uid), (theirs, neighbour)):
        assert min(made["shm"], made["msg"], made["sem"], made["sent"] + 1) >= 0, made
        cleanup_sysv += [(kind, made[kind], owner) for kind in ("shm", "msg", "sem")]
    cleanup_sysv.append(("shm", mine["given"], uid))
    assert mine["set"] == 0, "IPC_SET of the owner failed: the case of a handed-over object is not made"
    listed = set(uid_sweep.sysv_objects(uid))
    expected = {("shm", mine["shm"]), ("msg", mine["msg"]), ("sem", mine["sem"]), ("shm", mine["given"])}
    assert listed == expected, listed

    # files: top level of each shared folder, a tree, a file in a world-writable folder of root's,
    # and one of the uid's inside a folder it could not have written (left alone: never entered)
    shared = [Path(tempfile.gettempdir()), Path("/var/tmp"), Path("/dev/shm")]
    world = Path(tempfile.mkdtemp(prefix="sweep-world-"))
    closed = Path(tempfile.mkdtemp(prefix="sweep-closed-"))
    try:
        os.chmod(world, 0o1777)
        os.chmod(closed, 0o755)
        (closed / "kept").write_text("root's folder")
        os.chown(closed / "kept", uid, uid)
        (world / "root-owned").write_text("stays")
        made_files = _as_uid(uid, lambda libc: _write_files(shared, world, uid))
        made_theirs = _as_uid(neighbour, lambda libc: _write_files(shared, world, neighbour))

        done = uid_sweep.sweep(_user(uid))

        assert done.warnings == [], done.warnings
        assert uid_sweep.sysv_objects(uid) == [], "a SysV object of the uid was left"
        assert done.removed["SysV shared memory segment"] == 2 and done.removed["SysV message queue"] == 1
        left = set(uid_sweep.sysv_objects(neighbour))
        assert left == {("shm", theirs["shm"]), ("msg", theirs["msg"]), ("sem", theirs["sem"])}, left
        for path in made_files:
            assert not os.path.lexists(path), f"{path} of the uid was not swept"
        for path in made_theirs:
            assert os.path.lexists(path), f"{path} of another uid was swept"
        assert (world / "root-owned").exists() and (closed / "kept").exists()
        assert uid_sweep.sweep(_user(neighbour)).warnings == []
        for path in made_theirs:
            assert not os.path.lexists(path), f"{path} of the neighbour uid was not swept in its turn"
    finally:
        for folder in (world, closed):
            remove_tree(folder, ignore_errors=True)


def _write_files(shared: list[Path], world: Path, uid: int) -> list[str]:
    made = []
    for folder in shared:
        path = folder / f"sweep-unit-{uid}"
        path.write_bytes(b"m" * MiB)
        made.append(str(path))
    tree = shared[0] / f"sweep-unit-tree-{uid}"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("deep")
    os.symlink("/etc/passwd", tree / "link")
    made.append(str(tree))
    inner = world / f"in-world-{uid}"
    inner.write_text("in a world-writable folder of root's")
    made.append(str(inner))
    return made


@pytest.mark.root
def test_the_sweep_removes_the_uids_posix_message_queues(tmp_path):
    """On an mqueue file system (mounted here by the test; /dev/mqueue where the machine mounts it)."""
    uid = _own_uid(2)
    point = tmp_path / "mqueue"
    point.mkdir()
    if subprocess.run(["mount", "-t", "mqueue", "none", str(point)], capture_output=True).returncode != 0:
        pytest.skip("an mqueue file system cannot be mounted here")
    try:

        def make(libc) -> dict:
            return {"fd": libc.mq_open(f"/sweep-unit-{uid}".encode(), os.O_CREAT | os.O_RDWR, 0o666, None)}

        assert _as_uid(uid, make)["fd"] >= 0
        assert os.path.exists(point / f"sweep-unit-{uid}")
        done = uid_sweep.sweep(_user(uid), folders=(str(point),))
        assert done.warnings == [] and done.removed == {str(point): 1}, done
        assert not os.path.exists(point / f"sweep-unit-{uid}")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(point / f"sweep-unit-{uid}")
        subprocess.run(["umount", str(point)], check=True)


@pytest.mark.root
def test_what_the_sweep_cannot_remove_is_a_warning_never_an_exception(cleanup_sysv, monkeypatch):
    uid = _own_uid(3)
    made = _as_uid(uid, _make_sysv(0x5EF00000 + uid))
    cleanup_sysv += [(kind, made[kind], uid) for kind in ("shm", "msg", "sem")]
    refused = {(kind, made[kind]): "IPC_RMID: EPERM" for kind in ("shm", "msg", "sem")}
    monkeypatch.setattr(uid_sweep, "_remove_as", lambda user, objects: refused)  # removes nothing

    def broken(folder, include=None):
        raise PermissionError(13, "Permission denied", str(folder))

    monkeypatch.setattr(uid_sweep.tree_walk, "empty_folder", broken)
    done = uid_sweep.sweep(_user(uid))
    text = "\n".join(done.warnings)
    for words in ("SysV shared memory segment", "SysV message queue", "SysV semaphore set"):
        assert f"1 {words}(s) of {USER_PREFIX}unit{uid} could not be removed (IPC_RMID: EPERM)" in text, text
    assert "/tmp: an entry of" in text and "Permission denied" in text, text
    monkeypatch.undo()
    assert uid_sweep.sweep(_user(uid)).warnings == [] and uid_sweep.sysv_objects(uid) == []

    for user in (SandboxUser("root", 0, 0), SandboxUser("autograder-measure", uid, uid)):
        done = uid_sweep.sweep(user)
        assert done.removed == {} and "refused to sweep" in done.warnings[0]


# ── seccomp: the calls are denied in every jail ──────────────────────────────────────────────

IPC_CHILD = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def call(name, *args):
    r = getattr(libc, name)(*args)
    out[name] = "ok" if r >= 0 else ctypes.get_errno()
    return r
shm = call("shmget", 0, 4096, 0o1600)  # IPC_PRIVATE
if shm >= 0:
    libc.shmctl(shm, 0, None)  # unconfined control run: leave nothing
msg = call("msgget", 0, 0o1600)
if msg >= 0:
    libc.msgctl(msg, 0, None)
sem = call("semget", 0, 1, 0o1600)
if sem >= 0:
    libc.semctl(sem, 0, 0)
name = b"/autograder-seccomp-probe-%d" % os.getpid()
mq = call("mq_open", name, os.O_CREAT | os.O_RDWR, 0o600, None)
if mq >= 0:
    libc.mq_unlink(name)
call("shmctl", 0, 2, None)  # IPC_STAT of someone's segment 0: denied before any lookup
print(json.dumps(out))
"""


def _ipc_confined(config: dict) -> dict:
    config = {"env": {"PATH": "/usr/bin:/bin"}, "argv": [sys.executable, "-c", IPC_CHILD], **config}
    proc = subprocess.run(_confine_argv(config), capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sysv_ipc_and_message_queue_calls_are_in_both_tables_and_denied():
    for machine, (_, numbers) in confine.ARCHES.items():
        assert set(SYSV_AND_MQ) <= set(numbers), f"{machine}: a call has no number"
        assert len(set(numbers.values())) == len(numbers), f"{machine}: two calls share a number"
    assert set(SYSV_AND_MQ) <= set(confine.DENIED_SYSCALLS)


@pytest.mark.kernel  # a confined child (tests/needs.py)
@pytest.mark.skipif(platform.machine() not in confine.ARCHES, reason="no syscall table for this machine")
@pytest.mark.parametrize("block_inet", [True, False], ids=["fallback", "bwrap-and-template"])
def test_seccomp_denies_sysv_ipc_and_posix_message_queues(block_inet):
    free = _ipc_confined({})
    assert free == {"shmget": "ok", "msgget": "ok", "semget": "ok", "mq_open": "ok", "shmctl": free["shmctl"]}, free
    denied = _ipc_confined({"seccomp": {"block_inet": block_inet}})
    assert denied == {name: 1 for name in ("shmget", "msgget", "semget", "mq_open", "shmctl")}, denied  # EPERM
