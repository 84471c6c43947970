"""The kernel template (zygote) attacked from inside its children: real template, real namespaces, as root.

Each test runs code in a child of one template (``autograder/kernel_template/template_process.py``) the
way a submission's kernel would run it: after the child entered its fresh namespaces, built its
root, closed its descriptors, took the minimal environment, dropped to the slot uid and applied
confine's layers. SECURITY.md ("The kernel template (zygote)") lists the invariant each test
attacks. Skipped, with the reason, where the machine denies namespaces or the grader is not root.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest
from sandbox_helpers import FAST, worker_slot

from autograder.proc_info import pids_of_uid
from autograder.jail import jail
from autograder.kernel_template import template, template_launcher
from autograder.jail.users import chown_tree_top, claim_slot, ensure_user, reap_user

pytestmark = [pytest.mark.kernel, pytest.mark.root]

MODULES = ["json", "numpy", "onnxruntime", *template.KERNEL_MODULES]  # onnxruntime starts a thread
CANARY = "AUTOGRADER_TEMPLATE_CANARY"
CANARY_VALUE = "grader-secret-7f3a"


@pytest.fixture(scope="module")
def slot_template(tmp_path_factory):
    """``(template, user)``: one template for the module, on a claimed slot; ended and reaped after."""
    if os.geteuid() != 0:
        pytest.skip("the kernel template needs a root grader (mounts, the slot uid)")
    with claim_slot(worker_slot()) as slot:
        iso = jail.choose_isolation(slot=slot)
        why = template.unavailable_reason(iso)
        if why:
            pytest.skip(why)
        user = ensure_user(slot)
        os.environ[CANARY] = CANARY_VALUE  # in the grader's environment: it must reach no child
        tpl = template.KernelTemplate(tmp_path_factory.mktemp("template"), MODULES)
        try:
            tpl.start()
        finally:
            del os.environ[CANARY]
        try:
            yield tpl, user
        finally:
            tpl.stop()
            reap_user(user)


class Child:
    """One child of the template running ``code``; its stdout, stderr and exit code."""

    def __init__(self, tpl, user, folder: Path, code: str, timeout_s: float = 60.0) -> None:
        folder.mkdir()
        self.workspace, self.rundir = folder / "ws", folder / "run"
        for d in (self.workspace, self.rundir):
            d.mkdir()
            chown_tree_top(d, user)
        site = jail.write_site(folder / "site")
        self.request = template.child_request(
            tpl, user, FAST, self.workspace, self.rundir, site, code=textwrap.dedent(code)
        )
        out, err = folder / "stdout", folder / "stderr"
        with open(out, "wb") as o, open(err, "wb") as e:
            conn, reader, self.pid = template_launcher.spawn(tpl.socket_path, self.request, (o.fileno(), e.fileno()))
        conn.settimeout(timeout_s)
        try:
            self.end = template_launcher.wait_exit(reader)
        finally:
            conn.close()
        self.stdout, self.stderr = out.read_text(), err.read_text()

    @property
    def code(self) -> int | None:
        return self.end.get("exit")

    def json(self) -> dict:
        assert self.code == 0, f"child failed ({self.end}): {self.stderr[-2000:]}"
        return json.loads(self.stdout.strip().splitlines()[-1])


@pytest.fixture
def run_child(slot_template, tmp_path):
    tpl, user = slot_template
    count = iter(range(1000))

    def run(code: str) -> Child:
        return Child(tpl, user, tmp_path / f"child{next(count)}", code)

    yield run
    reap_user(user)


def test_template_imports_only_the_lesson_libraries(slot_template, run_child):
    tpl, _ = slot_template
    assert tpl.ready["threads"] == 1, tpl.ready  # nothing was running beside the fork
    assert len(tpl.ready["fds"]) <= 5, tpl.ready  # 0-2, the listening socket, the listing itself
    seen = run_child("""
        import json, sys
        print(json.dumps(sorted(m for m in sys.modules if m == "autograder" or m.startswith("autograder."))))
    """).json()
    assert seen == []  # no grader module: its code and data never were in the template
    assert set(tpl.ready["imported"]) <= set(MODULES)
    assert tpl.ready["left_out"] == ["onnxruntime"]  # its import starts a thread: each child imports it


def test_child_root_is_the_jails(run_child):
    child = run_child("""
        import json, os, socket
        out = {"root": sorted(os.listdir("/")), "home": os.getcwd(), "hostname": socket.gethostname()}
        for path in ("/escape", "/usr/escape", "/etc/escape", "/opt/autograder/escape"):
            try:
                open(path, "w").close()
                out[path] = "written"
            except OSError as e:
                out[path] = e.errno
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname(), timeout=5)
        out["loopback"] = client.getpeername()[0]
        print(json.dumps(out))
    """)
    result = child.json()
    request = child.request  # it names everything the root may hold
    targets = (
        [t for _, t, _ in request["binds"]] + [t for t, _ in request["symlinks"]] + [t for t, _ in request["tmpfs"]]
    )
    assert set(result["root"]) <= {t.split("/")[1] for t in targets} | {"proc"}
    assert "written" not in [result[p] for p in ("/escape", "/usr/escape", "/etc/escape", "/opt/autograder/escape")]
    assert result["home"] == "/home/student" and result["hostname"] == "sandbox"
    assert result["loopback"] == "127.0.0.1"  # lo is up, as in bwrap's jail


def test_template_is_invisible_and_untraceable(slot_template, run_child):
    tpl, _ = slot_template
    result = run_child(f"""
        import ctypes, errno, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        pid = {tpl.proc.pid}
        out = {{"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}}
        out["proc_entry"] = os.path.exists(f"/proc/{{pid}}")
        out["socket"] = os.path.exists({tpl.socket_path!r})  # only the grader may ask for a child
        out["ptrace"] = (libc.ptrace(16, pid, None, None), ctypes.get_errno())  # PTRACE_ATTACH
        buf = ctypes.create_string_buffer(8)
        iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
        out["vm_readv"] = (libc.syscall(310, pid, iov, 1, iov, 1, 0), ctypes.get_errno())
        try:
            open(f"/proc/{{pid}}/mem", "rb").read(1)
            out["mem"] = "read"
        except OSError as e:
            out["mem"] = e.errno
        print(json.dumps(out))
    """).json()
    assert result["pids"] == [1, 2], result  # the namespace's init and this kernel: nothing else
    assert result["proc_entry"] is False
    assert result["socket"] is False
    assert result["ptrace"][0] == -1 and result["ptrace"][1] in (1, 3)  # EPERM (seccomp) or ESRCH
    assert result["vm_readv"][0] == -1 and result["vm_readv"][1] in (1, 3)
    assert result["mem"] != "read"
    assert tpl.alive()


def test_kill_everything_leaves_the_template_alive(slot_template, run_child):
    tpl, _ = slot_template
    child = run_child(f"""
        import json, os, signal
        out = {{}}
        for name, target in (("template", {tpl.proc.pid}), ("init", 1)):
            try:
                os.kill(target, signal.SIGKILL)
                out[name] = "sent"
            except OSError as e:
                out[name] = e.errno
        print(json.dumps(out), flush=True)
        os.kill(-1, signal.SIGKILL)  # inside its own PID namespace: every process it may signal
    """)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["template"] == 3  # ESRCH: not in the child's PID namespace
    assert result["init"] in (1, "sent")  # the init is root (EPERM); were it sent, init ignores it
    assert tpl.alive()
    assert run_child("import json; print(json.dumps({'ok': True}))").json() == {"ok": True}


def _gone(uid: int, timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := pids_of_uid(uid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_daemon_of_child_one_is_gone_for_child_two(slot_template, run_child):
    _, user = slot_template
    run_child("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for fd in (0, 1, 2):
                    os.close(fd)
                time.sleep(600)
            os._exit(0)
        os.wait()
        print("{}")
    """).json()
    assert _gone(user.uid) == []  # the PID namespace ended with its init: no reaper was needed
    second = run_child("""
        import json, os
        print(json.dumps(sorted(int(p) for p in os.listdir("/proc") if p.isdigit())))
    """).json()
    assert second == [1, 2]


def test_files_of_child_one_are_not_seen_by_child_two(slot_template, run_child):
    run_child("""
        for path in ("/tmp/left-by-one", "/dev/shm/left-by-one", "/home/student/left-by-one"):
            with open(path, "w") as f:
                f.write("one")
        print("{}")
    """).json()
    seen = run_child("""
        import json, os
        paths = ("/tmp/left-by-one", "/dev/shm/left-by-one", "/home/student/left-by-one")
        print(json.dumps({p: os.path.exists(p) for p in paths} | {"tmp": os.listdir("/tmp"), "shm": os.listdir("/dev/shm")}))
    """).json()
    assert not any(seen[p] for p in ("/tmp/left-by-one", "/dev/shm/left-by-one", "/home/student/left-by-one"))
    assert not os.path.exists("/tmp/left-by-one") and not os.path.exists("/dev/shm/left-by-one")


def test_ipc_of_child_one_is_not_seen_by_child_two(slot_template, run_child):
    key = 0x5A7E
    run_child(f"""
        import ctypes, os, socket, time
        libc = ctypes.CDLL(None, use_errno=True)
        made = libc.shmget({key}, 4096, 0o1666)  # IPC_CREAT | 0666: would outlive us
        assert made >= 0 or ctypes.get_errno() == 1, ctypes.get_errno()  # EPERM: seccomp denies SysV IPC
        if os.fork() == 0:  # an abstract socket held open by a daemon
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(b"\\0autograder-left-by-one")
            s.listen(1)
            time.sleep(600)
        time.sleep(0.2)
        print("{{}}")
    """).json()
    seen = run_child(f"""
        import ctypes, json, socket
        libc = ctypes.CDLL(None, use_errno=True)
        shm = libc.shmget({key}, 0, 0)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(b"\\0autograder-left-by-one")
            connected = True
        except OSError:
            connected = False
        print(json.dumps({{"shm": shm, "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:], "abstract": connected}}))
    """).json()
    assert seen == {"shm": -1, "sysv": [], "abstract": False}
    host_keys = [line.split()[0] for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert str(key) not in host_keys  # nor in the grader's IPC namespace


def test_child_has_only_its_descriptors(run_child):
    fds = run_child("""
        import json, os
        fds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                pass  # the listing's own descriptor, closed by now
        print(json.dumps(fds))
    """).json()
    assert {"0", "1", "2"} <= set(fds)
    assert fds["0"] == "/dev/null"
    extra = {fd: link for fd, link in fds.items() if fd not in ("0", "1", "2")}
    assert all(link.startswith("/proc/") for link in extra.values()), extra  # at most the listing itself


def test_child_environment_is_the_minimal_one(slot_template, run_child):
    tpl, user = slot_template
    result = run_child("""
        import json, os
        print(json.dumps({"env": dict(os.environ), "initial": open("/proc/self/environ", "rb").read().decode()}))
    """).json()
    expected = jail.minimal_env(jail.HOME_IN_JAIL, "/tmp", jail.SITE_IN_JAIL)
    assert result["env"] == expected
    assert CANARY not in result["initial"] and CANARY_VALUE not in result["initial"]
    assert CANARY_VALUE not in json.dumps(result)


def test_child_is_the_slot_uid_without_capabilities(slot_template, run_child):
    _, user = slot_template
    result = run_child("""
        import ctypes, json, os
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
        out = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
        out["uids"], out["gids"], out["groups"] = os.getresuid(), os.getresgid(), os.getgroups()
        try:
            os.setuid(0)
            out["setuid"] = "worked"
        except PermissionError:
            out["setuid"] = "refused"
        libc = ctypes.CDLL(None, use_errno=True)
        out["mount"] = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
        out["unshare"] = libc.unshare(0x00020000)
        print(json.dumps(out))
    """).json()
    zero = "0000000000000000"
    assert [result[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")] == [zero] * 5
    assert result["NoNewPrivs"] == "1" and result["Seccomp"] == "2"
    assert result["uids"] == [user.uid] * 3 and result["gids"] == [user.gid] * 3 and result["groups"] == []
    assert result["setuid"] == "refused" and result["mount"] == -1 and result["unshare"] == -1


def test_a_patched_module_in_child_one_is_intact_in_child_two(run_child):
    run_child("""
        import json, numpy, sys
        numpy.add = None
        json.dumps = lambda *a, **k: "forged"
        sys.modules["numpy"].__dict__["pi"] = 3
        print("{}")
    """)
    result = run_child("""
        import json, numpy
        print(json.dumps({"add": type(numpy.add).__name__, "pi": numpy.pi, "dumps": json.dumps(1)}))
    """).json()
    assert result == {"add": "ufunc", "pi": pytest.approx(3.141592653589793), "dumps": "1"}


def test_random_state_is_fresh_in_every_child(run_child):
    draws = [
        run_child("import json, random, numpy; print(json.dumps([random.random(), numpy.random.rand()]))").json()
        for _ in range(2)
    ]
    assert draws[0][0] != draws[1][0] and draws[0][1] != draws[1][1]


def test_killing_the_launcher_ends_the_whole_submission(slot_template, tmp_path):
    """The grader's watchdog and stop_jail kill the launcher: the template kills the child, and its
    PID namespace takes every process with it (a daemon included)."""
    tpl, user = slot_template
    (tmp_path / "c").mkdir()
    ws, rd = tmp_path / "c" / "ws", tmp_path / "c" / "run"
    for d in (ws, rd):
        d.mkdir()
        chown_tree_top(d, user)
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ntime.sleep(600)\n"
    req = template.child_request(tpl, user, FAST, ws, rd, jail.write_site(tmp_path / "c" / "site"), code=code)
    import subprocess

    launcher = subprocess.Popen(template.kernel_command(tpl, req), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(pids_of_uid(user.uid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pids_of_uid(user.uid)) >= 2  # the kernel and its daemon are running
    finally:
        os.kill(launcher.pid, signal.SIGKILL)  # our own child
        launcher.wait()
    assert _gone(user.uid) == []
    assert tpl.alive()


def test_a_real_kernel_runs_cells_from_the_template(slot_template, tmp_path):
    """ipykernel's kernel app in a child, reached through the grader's JailedKernelManager."""
    from autograder.sandbox.kernel import JailedKernelManager

    tpl, user = slot_template
    ws, rd = tmp_path / "ws", tmp_path / "run"
    for d in (ws, rd):
        d.mkdir()
        chown_tree_top(d, user)
    site = jail.write_site(tmp_path / "site")

    build = template.kernel_builder(tpl, user, FAST, ws, rd, site)

    async def run() -> list[str]:
        km = JailedKernelManager(command_builder=build, rundir=rd, owner=(user.uid, user.gid))
        await km.start_kernel(cwd=str(ws), env={"PATH": "/usr/bin:/bin"})
        kc = km.client()
        kc.start_channels()
        out: list[str] = []
        try:
            await kc.wait_for_ready(timeout=60)
            source = "import os, numpy, onnxruntime\nprint(os.getuid(), os.getcwd(), numpy.ones(2).sum())"
            reply = await kc.execute_interactive(
                source, timeout=60, output_hook=lambda m: out.append(m["content"].get("text") or "")
            )
            assert reply["content"]["status"] == "ok", reply["content"]
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        return out

    out = asyncio.run(run())
    assert f"{user.uid} /home/student 2.0" in "".join(out)
    assert _gone(user.uid) == []


def test_a_dead_template_takes_its_children_along(slot_template, tmp_path):
    """A template that dies (a bug, an OOM kill) leaves no submission running, and the launcher says so."""
    import subprocess

    _, user = slot_template
    tpl = template.KernelTemplate(tmp_path / "tpl", ["json"]).start()
    try:
        ws, rd = tmp_path / "ws", tmp_path / "run"
        for d in (ws, rd):
            d.mkdir()
            chown_tree_top(d, user)
        code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ntime.sleep(600)\n"
        req = template.child_request(tpl, user, FAST, ws, rd, jail.write_site(tmp_path / "site"), code=code)
        launcher = subprocess.Popen(
            template.kernel_command(tpl, req), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 30
        while len(pids_of_uid(user.uid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pids_of_uid(user.uid)) >= 2
    finally:
        tpl.stop()  # SIGKILL, by pid: as a crash would
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == template_launcher.NO_TEMPLATE
    assert b"template ended before the kernel" in err
    assert _gone(user.uid) == []


def test_the_slot_cgroup_holds_every_process_of_the_child(slot_template, tmp_path):
    """The child joins the slot's cgroup before it unshares: its processes together are held to the
    slot's memory (the cgroup's OOM killer ends one of them; the template lives on)."""
    from dataclasses import replace

    from autograder.jail import cgroups
    from autograder.jail.users import USER_PREFIX

    tpl, user = slot_template
    slot = int(user.name.removeprefix(USER_PREFIX))
    limits = replace(FAST, memory_mb=256)
    with cgroups.slot_cgroup(slot, limits.memory_mb * 1024 * 1024) as (cg, why):
        if cg is None:
            pytest.skip(f"no slot cgroup here: {why}")
        ws, rd = tmp_path / "ws", tmp_path / "run"
        for d in (ws, rd):
            d.mkdir()
            chown_tree_top(d, user)
        code = textwrap.dedent("""
            import os, signal, time
            for _ in range(4):  # 4 × 100 MB: each process under RLIMIT_DATA, together over the cgroup's 256 MB
                if os.fork() == 0:
                    block = bytearray(100 * 1024 * 1024)
                    time.sleep(3)
                    os._exit(0)
            ends = [os.wait()[1] for _ in range(4)]
            print(sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in ends))
        """)
        req = template.child_request(
            tpl, user, limits, ws, rd, jail.write_site(tmp_path / "site"), cgroup=cg, code=code
        )
        with open(tmp_path / "out", "wb") as out:
            conn, reader, _ = template_launcher.spawn(tpl.socket_path, req, (out.fileno(), out.fileno()))
        conn.settimeout(120)
        try:
            end = template_launcher.wait_exit(reader)
        finally:
            conn.close()
        assert cg.oom_kills() >= 1, end
        assert end.get("exit") == 0 and int((tmp_path / "out").read_text().split()[-1]) >= 1  # a hog, not the kernel
    assert _gone(user.uid) == []
    assert tpl.alive()
