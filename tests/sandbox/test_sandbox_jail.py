"""The jail, checked from inside a real kernel: files, uid, network, environment, limits, leftovers.

One notebook probes everything and writes ``jail.json``; each test asserts one property of it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from autograder.limits import ExecutionLimits
from autograder.sandbox import detect_isolation
from autograder.jail.users import USER_PREFIX, pids_of_uid

from sandbox_helpers import worker_slot
from needs import needs

pytestmark = pytest.mark.slow

INSPECT = r"""
import ctypes, json, os, socket, sys, time
res = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
       "cwd": os.getcwd(), "env": dict(os.environ), "ifaces": [n for _, n in socket.if_nameindex()]}
def attempt(name, fn):
    try:
        res[name] = ["ok", repr(fn())[:100]]
    except BaseException as e:
        res[name] = [type(e).__name__, str(e)[:200]]
attempt("list_root", lambda: sorted(os.listdir("/")))
attempt("read_host_tmp_file", lambda: open(SECRET).read())
attempt("read_project_file", lambda: open(PROJECT_FILE).read())
attempt("read_grader_module", lambda: __import__("autograder"))
attempt("write_usr", lambda: open(sys.prefix + "/evil.txt", "w"))
def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", PORT))
    return "connected"
attempt("connect_host_port", connect)
def fill_tmp():
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "fill.bin")
    try:
        with open(path, "wb") as f:
            for _ in range(100):
                f.write(b"\0" * (1 << 20))
    finally:
        os.path.exists(path) and os.unlink(path)
attempt("fill_tmp_100mb", fill_tmp)
def allocate_in_child():   # in a child: a cgroup's OOM killer ends the process, RLIMIT_AS raises
    pid = os.fork()
    if pid == 0:
        try:
            len(bytearray(3 << 30))
            os._exit(0)
        except MemoryError:
            os._exit(3)
    status = os.waitpid(pid, 0)[1]
    return "MemoryError" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3 else (
        "killed by signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status) else "allocated")
attempt("allocate_3gb", allocate_in_child)
libc = ctypes.CDLL(None, use_errno=True)
res["unshare_user"] = [libc.unshare(0x10000000), os.strerror(ctypes.get_errno())]
res["kill_minus_one"] = None
try:
    os.kill(-1, 0)
    res["kill_minus_one"] = "ok"
except OSError as e:
    res["kill_minus_one"] = type(e).__name__
children = []
for _ in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
res["forks"] = len(children)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
json.dump(res, open("jail.json", "w"))
"""

DAEMON = r"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "3011"])
    os._exit(0)
time.sleep(0.5)
"""


@pytest.fixture(scope="module")
@needs("kernel")
def jail(tmp_path_factory):
    from autograder.sandbox import run_submission

    from sandbox_helpers import write_notebook

    tmp = tmp_path_factory.mktemp("jail")
    secret = Path(f"/tmp/autograder-test-secret-{os.getpid()}.txt")  # world-readable, on the host's /tmp
    secret.write_text("hidden answer")
    os.chmod(secret, 0o644)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    os.environ["AUTOGRADER_FAKE_SECRET_TOKEN"] = "do-not-leak"
    project_file = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml"))
    header = f"SECRET = {str(secret)!r}\nPORT = {port}\nPROJECT_FILE = {project_file!r}\n"
    try:
        nb = write_notebook(tmp, [header + INSPECT, DAEMON])
        rec = run_submission(
            nb,
            tmp / "ws",
            limits=ExecutionLimits(cell_timeout_s=40, notebook_timeout_s=80, memory_mb=2048),
            probe=None,
            slot=worker_slot(),
        )
        try:
            conn, _ = listener.accept()
            conn.close()
            accepted = True
        except (TimeoutError, socket.timeout):
            accepted = False
    finally:
        del os.environ["AUTOGRADER_FAKE_SECRET_TOKEN"]
        listener.close()
        secret.unlink()
    data = json.loads((tmp / "ws" / "jail.json").read_text())
    return {"record": rec, "inside": data, "ws": tmp / "ws", "accepted": accepted}


def test_notebook_completed(jail):
    assert jail["record"]["status"] == "completed", jail["record"]["reason"]
    assert [c["status"] for c in jail["record"]["cells"]] == ["ok", "ok"]


def test_kernel_is_not_root(jail):
    inside = jail["inside"]
    assert inside["uid"] != 0 and inside["euid"] != 0 and inside["gid"] != 0
    if os.geteuid() == 0:
        assert "uid:" + USER_PREFIX in " ".join(jail["record"]["isolation"]["layers"])
        assert inside["groups"] in ([], [inside["gid"]])


def test_host_files_are_invisible(jail):
    inside = jail["inside"]
    assert inside["read_host_tmp_file"][0] in ("FileNotFoundError", "PermissionError")
    assert inside["read_project_file"][0] in ("FileNotFoundError", "PermissionError")
    assert inside["read_grader_module"][0] in ("ModuleNotFoundError", "PermissionError")


def test_system_is_read_only(jail):
    assert jail["inside"]["write_usr"][0] in ("OSError", "PermissionError")


def test_only_loopback_and_no_route_to_host_port(jail):
    inside = jail["inside"]
    if jail["record"]["isolation"]["mode"] == "bwrap":
        assert inside["ifaces"] == ["lo"]
    assert inside["connect_host_port"][0] != "ok", inside["connect_host_port"]
    assert jail["accepted"] is False


def test_environment_is_minimal(jail):
    env = jail["inside"]["env"]
    assert "AUTOGRADER_FAKE_SECRET_TOKEN" not in env
    assert not any(k.startswith("JPY_") for k in env), sorted(env)
    assert env["OMP_NUM_THREADS"] == "1" and env["MPLBACKEND"] == "Agg"
    from autograder.jail.jail import minimal_env

    set_by_ipykernel = {
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "FORCE_COLOR",
        "PAGER",
        "GIT_PAGER",
        "TERM",
        "PYDEVD_USE_FRAME_EVAL",
        "LC_CTYPE",
    }
    extra = set(env) - set(minimal_env("/h", "/t", "/s")) - set_by_ipykernel
    assert extra == set(), f"unexpected variables in the kernel: {sorted(extra)}"


def test_limits_hold(jail):
    inside = jail["inside"]
    assert inside["fill_tmp_100mb"][0] == "OSError", inside["fill_tmp_100mb"]  # ENOSPC (tmpfs) or EFBIG
    layers = jail["record"]["isolation"]["layers"]
    # one 3 GB allocation against a 2 GB budget fails in the process itself: RLIMIT_DATA beside the
    # cgroup (whose OOM killer bounds the tree: tests/adversarial/test_adv_budget.py), else RLIMIT_AS
    assert inside["allocate_3gb"] == ["ok", "'MemoryError'"], inside["allocate_3gb"]
    if "cgroup_pids" in layers:  # pids.max is far above 100 (tests/adversarial fork-bombs it)
        assert inside["forks"] == 100, f"only {inside['forks']} of 100 forks succeeded under pids.max"
    else:
        assert inside["forks"] < 64, f"{inside['forks']} forks succeeded; RLIMIT_NPROC is 64"
    assert inside["unshare_user"][0] == -1


def test_kernel_cannot_signal_outside(jail):
    # in a pid namespace kill(-1) reaches only the sandbox's own processes; as its own uid, only its own
    assert jail["inside"]["kill_minus_one"] in ("ok", "ProcessLookupError", "PermissionError")


def test_forked_daemon_is_gone_after_the_run(jail):
    leftovers = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"3011" in cmd and b"sleep" in cmd:
                leftovers.append(pid)
    assert leftovers == []
    user = [layer for layer in jail["record"]["isolation"]["layers"] if layer.startswith("uid:")]
    if user:
        import pwd

        assert pids_of_uid(pwd.getpwnam(user[0][4:]).pw_uid) == []


def test_workspace_holds_only_what_the_notebook_wrote(jail):
    assert sorted(p.name for p in jail["ws"].iterdir()) == ["jail.json"]


def test_isolation_record_matches_detection(jail):
    iso = jail["record"]["isolation"]
    detected = detect_isolation()
    assert iso["mode"] == detected["mode"]
    if iso["mode"] == "bwrap":
        assert {"bwrap", "pidns", "netns", "mountns", "rlimits"} <= set(iso["layers"])
