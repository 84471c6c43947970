"""The confinement launcher on its own (no kernel): seccomp, Landlock and rlimits really apply."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.jail import confine
from autograder.jail.jail import _confine_argv

PROJECT_FILE = str(Path(__file__).resolve().parents[2] / "pyproject.toml")

CHILD = r"""
import ctypes, json, os, resource, socket, sys
out = {}
for name, fam in (("inet", socket.AF_INET), ("inet6", socket.AF_INET6), ("unix", socket.AF_UNIX)):
    try:
        socket.socket(fam).close(); out[name] = "ok"
    except OSError as e:
        out[name] = e.errno
try:
    open(sys.argv[1]).read(); out["read"] = "ok"
except OSError as e:
    out["read"] = e.errno
libc = ctypes.CDLL(None, use_errno=True)
out["unshare"] = libc.unshare(0x10000000) == 0
out["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
out["env"] = sorted(os.environ)
import threading, subprocess
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["subprocess"] = subprocess.run(["/bin/echo", "hi"], capture_output=True, text=True).stdout.strip()
print(json.dumps(out))
"""


def run_confined(config: dict) -> dict:
    config = {
        "env": {"PATH": "/usr/bin:/bin"},
        "rlimits": {"NOFILE": 200, "CORE": 0},
        "argv": [sys.executable, "-c", CHILD, PROJECT_FILE],
        **config,
    }
    proc = subprocess.run(_confine_argv(config), capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_seccomp_program_is_whole_instructions():
    for machine in confine.ARCHES:
        code = confine.seccomp_program(machine, block_inet=True)
        assert len(code) % 8 == 0 and 0 < len(code) // 8 < 4096
    with pytest.raises(confine.ConfineError, match="no seccomp syscall table"):
        confine.seccomp_program("sparc", block_inet=False)


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.skipif(platform.machine() not in confine.ARCHES, reason="no syscall table for this machine")
def test_seccomp_blocks_inet_sockets_and_namespaces_but_not_unix_or_threads():
    out = run_confined({"seccomp": {"block_inet": True}})
    assert out["inet"] == 97 and out["inet6"] == 97  # EAFNOSUPPORT
    assert out["unix"] == "ok"
    assert out["unshare"] is False
    assert out["subprocess"] == "hi"
    assert out["nofile"] == 200
    assert out["env"] in (["PATH"], ["LC_CTYPE", "PATH"])


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_landlock_denies_reading_outside_the_allow_list():
    probe = subprocess.run(
        _confine_argv({"check": True, "landlock": {"rx": ["/usr"], "ro": [], "rw": []}}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    applied = json.loads(probe.stdout.strip().splitlines()[-1])["applied"]
    if not any(a.startswith("landlock") for a in applied):
        pytest.skip("Landlock is not available on this kernel")
    from autograder.jail.jail import SYSTEM_DIRS, interpreter_paths

    rx = [d for d in SYSTEM_DIRS if Path(d).is_dir() and not Path(d).is_symlink()] + interpreter_paths()
    out = run_confined({"landlock": {"rx": rx, "ro": ["/proc", "/dev/null"], "rw": []}})
    assert out["read"] == 13  # EACCES on the project's own file
    without = run_confined({})
    assert without["read"] == "ok"  # the same read works unconfined


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_check_mode_reports_a_failed_layer_instead_of_running():
    cfg = {"check": True, "rlimits": {"NOFILE": 10**9}}  # above the hard limit: refused
    proc = subprocess.run(_confine_argv(cfg), capture_output=True, text=True, timeout=60)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "rlimits" not in result["applied"] and "no_new_privs" in result["applied"]
    assert "rlimits: ValueError" in result["error"]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_failed_layer_is_fatal_when_not_checking():
    cfg = {"rlimits": {"NOFILE": 10**9}, "argv": ["/bin/echo", "must not run"], "env": {}}
    proc = subprocess.run(_confine_argv(cfg), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 111
    assert "must not run" not in proc.stdout and "autograder confine" in proc.stderr
