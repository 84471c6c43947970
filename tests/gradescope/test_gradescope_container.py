"""The simulated Gradescope container itself (autograder/gradescope/sim/container.py): what the
grader inside holds and cannot do, as in Docker with its defaults. Each case is one short shell
or Python run in a real container; no notebook."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from container_testlib import require_container

from autograder.gradescope.sim import docker_profile
from autograder.gradescope.container_limits import own_limits
from autograder.gradescope.sim.container import ContainerSpec, run_container
from needs import needs

PROBE = r"""
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    rc = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
out = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")}
out["uid"] = os.getuid()
out["pid"] = os.getpid()
out["hostname"] = socket.gethostname()
out["unshare_user"] = call(272, 0x10000000)
out["unshare_mount"] = call(272, 0x00020000)
out["setns"] = call(308, -1, 0)
out["mount"] = call(165, 0, 0, 0, 0, 0)
out["clone3"] = call(435, 0, 0)
out["clone_newpid"] = call(56, 0x20000000 | 17, 0, 0, 0, 0)
out["socket_vsock"] = call(41, 40, 1, 0)
out["bpf"] = call(321, 0, 0, 0)
out["keyctl"] = call(250, 0, 0, 0, 0, 0)
try:
    open("/sys/fs/cgroup/memory/cgroup.procs", "w").write(str(os.getpid()))
    out["cgroup_write"] = "ok"
except OSError as e:
    out["cgroup_write"] = errno.errorcode[e.errno]
out["cgroup_limit"] = open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip()
out["quota"] = open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip()
out["root_listing"] = sorted(os.listdir("/root"))
out["host_paths"] = {p: os.path.exists(p) for p in ("/root/.pyenv", "/work", SECRET_PATH)}
out["env"] = sorted(os.environ)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
@needs("container")
def inside():
    require_container()
    secret = Path(__file__).resolve()  # a host file the container must not see
    spec = ContainerSpec(memory_mb=300, cpus=0.5)
    run = run_container(
        spec,
        ["/usr/bin/python3", "-I", "-c", f"SECRET_PATH = {str(secret)!r}\n" + PROBE],
        timeout_s=120,
        env={"AUTOGRADER_JAIL_TEST": "x"},
    )
    assert run.returncode == 0, run.log[-3000:]
    return json.loads(run.log.strip().splitlines()[-1]), run


def test_root_holds_exactly_dockers_14_capabilities(inside):
    out, _ = inside
    mask = sum(1 << n for n in docker_profile.DEFAULT_CAPS.values())
    assert len(docker_profile.DEFAULT_CAPS) == 14
    assert out["uid"] == 0
    for key in ("CapEff", "CapPrm", "CapBnd"):
        assert int(out[key], 16) == mask, f"{key} {out[key]} != {mask:016x}"
    assert out["NoNewPrivs"] == "0", "Docker does not set no_new_privs by default"
    assert out["Seccomp"] == "2"


def test_dockers_seccomp_profile_denies_namespaces_mounts_and_the_rest(inside):
    out, _ = inside
    denied = {
        k: out[k]
        for k in ("unshare_user", "unshare_mount", "setns", "mount", "clone_newpid", "socket_vsock", "bpf", "keyctl")
    }
    assert set(denied.values()) == {"EPERM"}, denied
    assert out["clone3"] == "ENOSYS", "Docker answers clone3 with ENOSYS so that glibc falls back to clone"


def test_cgroups_are_read_only_and_show_the_limits(inside):
    out, run = inside
    assert out["cgroup_write"] == "EROFS"
    assert int(out["cgroup_limit"]) == 300 * 1024 * 1024 == run.stats.memory_limit_bytes
    assert out["quota"] == "50000" and run.stats.cpu_quota == 0.5


def test_own_pid_namespace_hostname_and_no_view_of_the_hosts_private_folders(inside):
    out, _ = inside
    assert out["pid"] == 2, "PID 1 is the container's init, the command is its first child"
    assert out["hostname"] == "gradescope"
    assert out["root_listing"] == []
    assert not any(out["host_paths"].values()), out["host_paths"]
    assert out["env"] == sorted(["AUTOGRADER_JAIL_TEST", "HOME", "LANG", "PATH"]), "only the variables given"


@pytest.mark.container
def test_the_container_is_killed_at_its_timeout_and_leaves_no_process(tmp_path):
    require_container()
    marker = "autograder-container-sleeper-" + os.urandom(4).hex()
    run = run_container(
        ContainerSpec(memory_mb=64, cpus=0.5),
        ["/bin/bash", "-c", f"(exec -a {marker} sleep 300 &) ; exec -a {marker} sleep 300"],
        timeout_s=3,
    )
    assert run.timed_out, "the container's command outlived its timeout"
    left = [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]
    assert not left, f"processes of the killed container are still running: {left}"


@pytest.mark.container
def test_a_command_over_the_memory_limit_is_oom_killed_and_counted():
    require_container()
    hog = "b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('survived')"
    run = run_container(ContainerSpec(memory_mb=100, cpus=1), ["/usr/bin/python3", "-c", hog], timeout_s=60)
    assert run.returncode == 128 + 9 and "survived" not in run.log, run.log[-500:]
    assert run.stats.oom_kills >= 1 and run.stats.memory_max_usage_bytes <= 100 * 1024 * 1024


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------- own_limits (unit, no container)


def test_own_limits_reads_v1_and_v2_and_nothing(tmp_path):
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(str(768 * 1024 * 1024))
    (v1 / "memory" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert own_limits(v1) == {"memory_limit_mb": 768, "oom_kills": 2}
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("max\n")
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert own_limits(v2) == {"oom_kills": 1}
    assert own_limits(tmp_path / "none") == {}
