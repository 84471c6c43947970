"""What a notebook leaves behind for the next submission of its slot (SECURITY.md, "What a notebook
leaves behind").

Red team (fallback jail): a last cell made three 32 MB SysV segments with ``shmget``, filled and
detached them, plus a SysV message queue holding one message and a semaphore set. After the grade
(100/100) ``ipcs`` still listed them, owned by the slot's uid: 96 MB resident, counted by no limit,
and the next notebook graded in the same slot read the marker and the message back (the fallback
has no IPC namespace, seccomp allowed the calls and nothing removed them).

Here a writer notebook makes one of each kind of per-uid kernel state (bounded: 3 segments of
4 MB, one message, 3 semaphores, 1 MB files) and the next submission of the same slot, a reader,
records what it can find of it. The reader must find nothing; each of the writer's attempts must
have been denied (seccomp: SysV IPC, POSIX message queues, keyrings), or what it made must be gone
from the host once the grade returned (swept by uid, ended with its process, or private to the
jail), as the test process checks itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

import psutil
import pytest

from advkit import TOKEN, isolation_of, jail_uid, require_mode

pytestmark = pytest.mark.slow

NAME = f"adv-left-{TOKEN}"
KEY = 0x10000000 + int(TOKEN[:6], 16)  # SysV keys: KEY..KEY+2 segments, KEY+8 the queue, KEY+9 the semaphores
KEYS = (KEY, KEY + 1, KEY + 2, KEY + 8, KEY + 9)
EPERM = 1
DENIED_BY_SECCOMP = ("sysv_shm", "sysv_msg", "sysv_sem", "mqueue", "keyring")
HOST_FILES = {  # what the writer's attempt leaves on the host if nothing closes it
    "tmp": f"/tmp/{NAME}",
    "var_tmp": f"/var/tmp/{NAME}",
    "dev_shm": f"/dev/shm/{NAME}",
    "named_semaphore": f"/dev/shm/sem.{NAME}-sem",
    "lock": f"/dev/shm/{NAME}-lock",
}

COMMON = """\
import ctypes, json, os, platform, socket, subprocess, sys, time
NAME, KEY = "@NAME@", @KEY@
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.syscall.restype = ctypes.c_long
ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(platform.machine())
PLACES = {"tmp": "/tmp", "var_tmp": "/var/tmp", "dev_shm": "/dev/shm",
          "home": os.path.expanduser("~"), "tmpdir": os.environ.get("TMPDIR", "/tmp")}
def err():
    return ctypes.get_errno()
"""

DAEMON = r"""
import fcntl, json, os, signal, socket, sys, time
name, ready = sys.argv[1], sys.argv[2]
out = {}
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(1)
    out["abstract"] = "made"
except OSError as e:
    out["abstract"] = e.errno
try:
    lock = open("/dev/shm/" + name + "-lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    out["lock"] = "made"
except OSError as e:
    out["lock"] = e.errno
signal.signal(signal.SIGALRM, signal.SIG_IGN)
signal.setitimer(signal.ITIMER_REAL, 1, 1)
out["timer"] = "made"
with open(ready + ".tmp", "w") as f:
    json.dump(out, f)
os.rename(ready + ".tmp", ready)
time.sleep(120)
"""

WRITER = """\
made = {}
def attempt(what, fn):
    try:
        made[what] = fn()
    except OSError as e:
        made[what] = e.errno
    except Exception as e:
        made[what] = repr(e)[:200]

def sysv_shm():
    for i in range(3):
        shm = libc.shmget(KEY + i, 4 << 20, 0o1666)  # IPC_CREAT
        if shm < 0:
            return err()
        addr = libc.shmat(shm, None, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return err()
        ctypes.memset(addr, 0x5A, 4 << 20)
        ctypes.memmove(addr, NAME.encode(), len(NAME))
        libc.shmdt(ctypes.c_void_p(addr))
    return "made"

def sysv_msg():
    queue = libc.msgget(KEY + 8, 0o1666)
    if queue < 0:
        return err()
    text = NAME.encode()
    buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + len(text))
    ctypes.c_long.from_buffer(buf).value = 1
    buf[ctypes.sizeof(ctypes.c_long):] = text
    return "made" if libc.msgsnd(queue, buf, len(text), 0) == 0 else err()

def sysv_sem():
    sems = libc.semget(KEY + 9, 3, 0o1666)
    if sems < 0:
        return err()
    return "made" if libc.semctl(sems, 0, 16, 7) == 0 else err()  # SETVAL

def mqueue():
    fd = libc.mq_open(("/" + NAME).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    if fd < 0:
        return err()
    return "made" if libc.mq_send(fd, NAME.encode(), len(NAME), 0) == 0 else err()

def keyring():
    if ADD_KEY is None:
        return "no syscall number here"
    serial = libc.syscall(ADD_KEY, b"user", NAME.encode(), NAME.encode(), len(NAME), -4)  # the user keyring
    return "made" if serial >= 0 else err()

def a_file(place):
    def make():
        with open(os.path.join(PLACES[place], NAME), "wb") as f:
            f.write(NAME.encode() + bytes(1 << 20))
        return "made"
    return make

def named_semaphore():
    import _multiprocessing
    global KEPT
    KEPT = _multiprocessing.SemLock(1, 1, 1, "/" + NAME + "-sem", False)  # not unlinked
    return "made"

def daemon():
    ready = os.path.abspath(NAME + ".ready")
    subprocess.Popen([sys.executable, "-c", DAEMON, NAME, ready], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        if os.path.exists(ready):
            with open(ready) as f:
                return json.load(f)
        time.sleep(0.05)
    return "the daemon did not answer"

for what, fn in (("sysv_shm", sysv_shm), ("sysv_msg", sysv_msg), ("sysv_sem", sysv_sem), ("mqueue", mqueue),
                 ("keyring", keyring), ("named_semaphore", named_semaphore), ("daemon", daemon)):
    attempt(what, fn)
for place in PLACES:
    attempt(place, a_file(place))
made["uid"] = os.getuid()
_record("writer", made)
"""

READER = """\
seen = {}
def sysv_rows(kind):
    try:
        with open("/proc/sysvipc/" + kind) as f:
            lines = f.read().splitlines()
    except OSError as e:
        return e.errno
    head, rows = lines[0].split(), []
    for line in lines[1:]:
        row = dict(zip(head, line.split()))
        if int(row["key"]) in KEYS or os.getuid() in (int(row["uid"]), int(row["cuid"])):
            rows.append(row)
    return rows

def found(path):
    return "found" if os.path.lexists(path) else "absent"

for kind in ("shm", "msg", "sem"):
    seen["sysv_" + kind] = sysv_rows(kind)
seen["shmget"] = "found" if libc.shmget(KEY, 0, 0) >= 0 else err()
seen["msgget"] = "found" if libc.msgget(KEY + 8, 0) >= 0 else err()
seen["mq_open"] = "found" if libc.mq_open(("/" + NAME).encode(), os.O_RDONLY) >= 0 else err()
seen["dev_mqueue"] = found("/dev/mqueue/" + NAME)
try:
    with open("/proc/keys") as f:
        seen["keys"] = [line for line in f if NAME in line]
except OSError as e:
    seen["keys"] = e.errno
for place, folder in PLACES.items():
    seen[place] = found(os.path.join(folder, NAME))
seen["named_semaphore"] = found("/dev/shm/sem." + NAME + "-sem")
seen["lock"] = found("/dev/shm/" + NAME + "-lock")
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\\0" + NAME)
    s.close()
    seen["abstract_bind"] = "free"
except OSError as e:
    seen["abstract_bind"] = e.errno
try:
    with open("/proc/self/net/unix") as f:  # this network namespace's sockets
        seen["abstract_listed"] = [line for line in f if NAME in line]
except OSError as e:
    seen["abstract_listed"] = e.errno
try:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
except OSError as e:  # the fallback shows the kernel only its own /proc/<pid>
    pids, seen["processes"] = [], e.errno
else:
    seen["processes"] = []
for pid in pids:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if NAME.encode() in f.read():
                seen["processes"].append(pid)
    except OSError:
        pass
seen["uid"] = os.getuid()
_record("reader", seen)
"""


def _cells(body: str) -> list[str]:
    common = COMMON.replace("@NAME@", NAME).replace("@KEY@", str(KEY)) + f"KEYS = {KEYS!r}\nDAEMON = {DAEMON!r}\n"
    return [common, body]


def _sysv_rows_of_ours() -> list[str]:
    """Lines of the host's /proc/sysvipc holding one of the writer's keys."""
    rows = []
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        for line in lines[1:]:
            if int(line.split()[0]) in KEYS:
                rows.append(f"{kind}: {line.strip()}")
    return rows


def _on_the_host(uid: int | None) -> dict[str, list]:
    """What of the writer's is left on the host, seen from the test process (outside every jail)."""
    mqueue = Path("/dev/mqueue") / NAME
    unix = Path("/proc/net/unix").read_text().splitlines()
    procs = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if NAME in " ".join(p.info["cmdline"] or []):
                procs.append(p.info["pid"])
    return {
        "sysv": _sysv_rows_of_ours(),
        "files": [path for path in HOST_FILES.values() if os.path.lexists(path)]
        + ([str(mqueue)] if os.path.lexists(mqueue) else []),
        "abstract sockets": [line for line in unix if NAME in line],
        "processes": procs,
    }


def _remove_what_a_failure_left() -> None:
    """If the jail or the sweep failed, the test still leaves nothing: the writer's objects by key."""
    libc = ctypes.CDLL(None, use_errno=True)
    for line in _sysv_rows_of_ours():
        kind, fields = line.split(":", 1)
        ident = int(fields.split()[1])
        if kind == "sem":
            libc.semctl(ident, 0, 0)
        else:
            getattr(libc, f"{kind}ctl")(ident, 0, None)
    for path in HOST_FILES.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


def test_nothing_a_notebook_creates_reaches_the_next_submission_of_its_slot(
    grade_cells, jail_check, jail_mode, limited
):
    """A writer makes SysV segments, a message queue and a semaphore set, a POSIX message queue, a
    key, files in /tmp, /var/tmp, /dev/shm, its home and TMPDIR, a named semaphore, and a daemon
    holding an abstract socket, a lock and a timer; the next submission of the same slot finds none
    of it, and none of it is on the host once the writer's grade returned."""
    assignment = limited(cell_timeout_s=60, notebook_timeout_s=180)  # a daemon's start at 5x slower CPU
    try:
        for _ in range(3):  # slots are machine-wide: another grading may take this one between the two
            writer = grade_cells(_cells(WRITER), name=f"leftover-writer-{jail_mode}", assignment=assignment)
            require_mode(writer, jail_mode)
            left = _on_the_host(jail_uid(writer.execution))
            reader = grade_cells(_cells(READER), name=f"leftover-reader-{jail_mode}", assignment=assignment)
            require_mode(reader, jail_mode)
            if jail_uid(reader.execution) == jail_uid(writer.execution):
                break
        else:
            pytest.fail("the writer and the reader never ran in the same slot in three tries")
        for g in (writer, reader):
            jail_check(g)
            assert g.execution["status"] == "completed", g.execution_brief()
        made, seen = writer.record("writer"), reader.record("reader")
        assert made["uid"] == seen["uid"], (made["uid"], seen["uid"])

        # the writer: each attempt denied, or what it made gone from the host
        layers = isolation_of(writer)["layers"]
        if "seccomp" in layers:
            denied = {what: made[what] for what in DENIED_BY_SECCOMP}
            assert denied == dict.fromkeys(DENIED_BY_SECCOMP, EPERM), f"not denied by seccomp: {denied}"
        assert isinstance(made["daemon"], dict) and made["daemon"]["abstract"] == "made", made["daemon"]
        assert left == {"sysv": [], "files": [], "abstract sockets": [], "processes": []}, (
            f"left on the host after the writer's grade: {left}; the writer made {made}"
        )

        # the reader: nothing of it, whatever it may look at
        nothing = {
            "dev_mqueue": "absent",
            **dict.fromkeys(("tmp", "var_tmp", "dev_shm", "home", "tmpdir"), "absent"),
            "named_semaphore": "absent",
            "lock": "absent",
            "abstract_bind": "free",
        }
        assert {k: seen[k] for k in nothing} == nothing, f"the next submission found: {seen}; the writer made {made}"
        listings = ("sysv_shm", "sysv_msg", "sysv_sem", "keys", "abstract_listed", "processes")
        for listing in listings:  # [] or unreadable (an errno: the fallback hides most of /proc)
            assert seen[listing] == [] or isinstance(seen[listing], int), f"{listing}: the next submission found {seen}"
        for call in ("shmget", "msgget", "mq_open"):
            assert seen[call] != "found", f"{call}: the next submission opened the writer's object"
    finally:
        _remove_what_a_failure_left()
