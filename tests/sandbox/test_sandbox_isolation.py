"""Choosing the isolation: detection, the forced fallback, --unsafe-no-sandbox, concurrent slots."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from autograder.limits import ExecutionLimits
from autograder.errors import SandboxUnavailableError
from autograder.jail import jail
from autograder.sandbox import detect_isolation, run_submission
from autograder.jail.users import SandboxUser

from sandbox_helpers import FAST, worker_slot, write_notebook


def test_detect_isolation_shape():
    iso = detect_isolation()
    assert set(iso) == {"mode", "layers", "warnings"}
    assert iso["mode"] in ("bwrap", "fallback")
    assert "rlimits" in iso["layers"]
    if iso["mode"] == "bwrap":
        assert {"bwrap", "pidns", "netns", "mountns"} <= set(iso["layers"])


def test_fallback_command_confines_with_uid_landlock_and_seccomp(tmp_path):
    user = SandboxUser("autograder-sb0", 64000, 64000)
    iso = jail.Isolation("fallback", [], [], user=user, landlock=True, seccomp=True)
    ws, run, site = tmp_path / "ws", tmp_path / "run", tmp_path / "site"
    argv, env = jail.kernel_command(iso, FAST, ws, run, site, ["/x/python", "-m", "ipykernel_launcher"])
    assert argv[0].endswith("setpriv") and "--reuid=64000" in argv and "--no-new-privs" in argv
    import json

    config = json.loads(argv[-1])
    assert config["seccomp"] == {"block_inet": True}
    assert config["rlimits"]["NPROC"] == 64 and config["rlimits"]["AS"] == FAST.memory_mb * 1024 * 1024
    rules = config["landlock"]
    assert str(ws) in rules["rw"] and str(run) in rules["rw"] and str(site) in rules["ro"]
    assert "/tmp" not in rules["rw"] + rules["ro"] + rules["rx"]  # the host's /tmp is shared: not allowed
    assert env["HOME"] == str(ws) and env["TMPDIR"] == str(run / "tmp") and env["PYTHONPATH"] == str(site)
    assert config["argv"] == ["/x/python", "-m", "ipykernel_launcher"]


def test_bwrap_command_mounts_only_what_the_kernel_needs(tmp_path):
    iso = jail.Isolation("bwrap", [], [], user=SandboxUser("autograder-sb0", 64000, 64000), seccomp=True)
    ws, run, site = tmp_path / "ws", tmp_path / "run", tmp_path / "site"
    argv, _ = jail.kernel_command(iso, FAST, ws, run, site, ["/x/python"])
    joined = " ".join(argv[: argv.index("--") + 1])
    assert f"--bind {ws} /home/student" in joined and f"--bind {run} {run}" in joined
    assert f"--ro-bind {site} /opt/autograder" in joined
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--clearenv", "--new-session"):
        assert flag in argv
    project = str(Path(__file__).resolve().parents[2])
    bound = [argv[i + 2] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--ro-bind-try")]
    assert not any(
        b == project
        or b.startswith(project + "/autograder")
        or b.startswith(project + "/assignments")
        or b.startswith(project + "/reference")
        for b in bound
    ), bound


@pytest.mark.kernel
def test_forced_fallback_runs_or_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_JAIL", "fallback")
    try:
        iso = detect_isolation()
    except SandboxUnavailableError as e:
        assert "fallback unavailable" in str(e) or "fallback needs" in str(e), str(e)
        return
    assert iso["mode"] == "fallback"
    code = (
        "import socket\ntry:\n    socket.socket(socket.AF_INET)\n    net = 'open'\nexcept OSError:\n    net = 'blocked'\n"
        f"try:\n    open({str(Path(__file__).resolve())!r}).read()\n    read = 'read'\nexcept OSError:\n    read = 'denied'\n"
        "open('out.txt', 'w').write(net + ' ' + read)"
    )
    nb = write_notebook(tmp_path, [code])
    ws = Path("/tmp") / f"autograder-test-ws-{os.getpid()}"  # reachable by the sandbox uid (no 700 parents)
    try:
        rec = run_submission(nb, ws, limits=FAST, probe=None, slot=worker_slot())
        assert rec["status"] == "completed", rec["reason"]
        assert rec["isolation"]["mode"] == "fallback"
        net, read = (ws / "out.txt").read_text().split()
        assert net == ("blocked" if "seccomp" in rec["isolation"]["layers"] else "open")
        assert read == "denied"
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_unsafe_no_sandbox_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_JAIL", "none")
    with pytest.raises(SandboxUnavailableError, match="--unsafe-no-sandbox"):
        detect_isolation()
    iso = detect_isolation(unsafe_no_sandbox=True)
    assert iso["mode"] == "none" and any("UNSAFE" in w for w in iso["warnings"])


@pytest.mark.kernel
@pytest.mark.slow
def test_unsafe_mode_still_runs_with_rlimits(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_JAIL", "none")
    nb = write_notebook(
        tmp_path, ["import resource\nopen('as.txt', 'w').write(str(resource.getrlimit(resource.RLIMIT_AS)[0]))"]
    )
    rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, unsafe_no_sandbox=True, slot=worker_slot())
    assert rec["status"] == "completed", rec["reason"]
    assert rec["isolation"]["mode"] == "none"
    assert int((tmp_path / "ws" / "as.txt").read_text()) == FAST.memory_mb * 1024 * 1024


@pytest.mark.kernel
@pytest.mark.slow
def test_concurrent_runs_use_separate_slots(tmp_path):
    results = {}

    def one(k: int) -> None:
        folder = tmp_path / f"n{k}"
        folder.mkdir()
        nb = write_notebook(folder, ["import os, time\ntime.sleep(1)\nopen('uid.txt', 'w').write(str(os.getuid()))"])
        results[k] = (
            run_submission(nb, folder / "ws", limits=FAST, probe=None, slot=worker_slot() * 2 + k),
            folder / "ws",
        )

    threads = [threading.Thread(target=one, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(results[k][0]["status"] == "completed" for k in range(2)), results
    uids = {(results[k][1] / "uid.txt").read_text() for k in range(2)}
    if os.geteuid() == 0:
        assert len(uids) == 2, "two concurrent runs shared a sandbox uid"


def test_workspace_must_be_empty(tmp_path):
    from autograder.errors import AutograderError

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "stale.txt").write_text("x")
    nb = write_notebook(tmp_path, ["x = 1"])
    with pytest.raises(AutograderError, match="not empty"):
        run_submission(nb, ws, limits=ExecutionLimits(), probe=None, slot=worker_slot())


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.root  # sandbox uids exist only when the grader is root
def test_leftover_processes_of_the_uid_do_not_block_the_next_run(tmp_path):
    """70 processes of the slot's uid (more than RLIMIT_NPROC) are reaped before the kernel starts."""
    import subprocess

    from autograder.jail.users import ensure_user, pids_of_uid

    slot = 40 + worker_slot()  # a slot nothing else uses (claim_slot spares 16)
    user = ensure_user(slot)
    sleepers = [
        subprocess.Popen(["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "sleep", "300"])
        for _ in range(70)
    ]
    waiter = threading.Thread(target=lambda: [p.wait() for p in sleepers], daemon=True)
    waiter.start()  # reap them as they die: zombies count against NPROC too
    try:
        nb = write_notebook(tmp_path, ["import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)"])
        rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, slot=slot)
        if f"uid:{user.name}" not in rec["isolation"]["layers"]:
            pytest.skip(f"slot {slot} was busy; the run used another uid")
        assert rec["status"] == "completed", rec["reason"]
        waiter.join(10)
        assert all(p.poll() is not None for p in sleepers)
        assert pids_of_uid(user.uid) == []
    finally:
        for p in sleepers:
            p.kill()
