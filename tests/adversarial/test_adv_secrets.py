"""Hostile notebooks that look for what the grader keeps from them: the rubric, the tolerances,
the reference solution, the probe's inputs, root's files, the grader's environment, the network.

Each notebook records what it could see into its workspace; the test reads that back (without
following links) and asserts that nothing of the grader's was there. Every test runs in the best
jail the machine has ("auto") and in the namespace-less fallback (uid + Landlock + seccomp).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from advkit import (
    ENV_SECRET,
    ENV_SECRET_NAME,
    FILE_SECRET,
    GRADER_FILES,
    IDENTITY_CELL,
    MARK,
    ROOT,
    LoopbackServers,
    isolation_of,
    jail_uid,
    require_mode,
    sandbox_uid,
    xdist_slot,
)

pytestmark = pytest.mark.slow


def _ns(kind: str) -> str:
    return os.readlink(f"/proc/self/ns/{kind}")


def test_kernel_runs_inside_the_isolation_it_claims(grade_cells, jail_check, jail_mode, short_assignment):
    """execution.json's isolation layers are really in effect inside the kernel."""
    g = grade_cells([IDENTITY_CELL], name=f"identity-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    me = g.record("identity")
    layers = set(isolation_of(g).get("layers", []))
    uid = jail_uid(g.execution)
    assert me["uid"] != 0 and me["euid"] != 0, f"the kernel runs as root: {me}"
    if uid is not None:
        assert me["uid"] == uid, f"the kernel runs as uid {me['uid']}, not the recorded sandbox uid {uid}"
    elif sandbox_uid(xdist_slot()) is not None:
        raise AssertionError(f"sandbox users exist but no uid layer is recorded: {layers}")
    assert int(me["status"]["CapEff"], 16) == 0, f"the kernel has capabilities: {me['status']}"
    assert me["status"]["NoNewPrivs"] == "1", f"no_new_privs is not set: {me['status']}"
    expect_ns = {"pidns": "pid", "netns": "net", "mountns": "mnt", "ipcns": "ipc", "utsns": "uts"}
    for layer, kind in expect_ns.items():
        if layer in layers:
            assert me["ns"][kind] != _ns(kind), (
                f"layer {layer} is recorded but the kernel shares the grader's {kind} namespace"
            )
    if "seccomp" in layers:
        assert me["status"]["Seccomp"] == "2", f"seccomp is recorded but not in effect: {me['status']}"
    rl = me["rlimits"]
    if "cgroup_memory" in layers:  # the tree's memory is the cgroup's; RLIMIT_AS would count address space
        assert rl["AS"][1] == -1, f"RLIMIT_AS is set beside the cgroup's memory limit: {rl['AS']}"
        assert rl["DATA"][1] == short_assignment.limits.memory_mb * 1024 * 1024, f"RLIMIT_DATA: {rl['DATA']}"
        assert me["ns"]["cgroup"] != _ns("cgroup") or "bwrap" not in layers, "the jail sees the grader's cgroups"
    else:
        assert rl["AS"][1] == short_assignment.limits.memory_mb * 1024 * 1024, f"RLIMIT_AS: {rl['AS']}"
    assert 0 < rl["FSIZE"][1] <= 1 << 30, f"RLIMIT_FSIZE is unbounded or huge: {rl['FSIZE']}"
    assert rl["CORE"][1] == 0 and 0 < rl["NOFILE"][1] <= 4096, f"rlimits: {rl}"
    if uid is not None and "cgroup_pids" not in layers:
        assert 0 < rl["NPROC"][1] <= 1024, f"RLIMIT_NPROC is not bounded for the sandbox uid: {rl['NPROC']}"


def _reader_cell(targets: list[str], listings: list[str]) -> str:
    return f"""\
import os
seen, listed = {{}}, {{}}
for p in {targets!r}:
    try:
        with open(p, "rb") as f:
            seen[p] = f.read(4096).decode("utf-8", "replace")
    except BaseException as e:
        seen[p] = "ERR " + type(e).__name__
for d in {listings!r}:
    try:
        listed[d] = sorted(os.listdir(d))[:300]
    except BaseException as e:
        listed[d] = "ERR " + type(e).__name__
try:
    import autograder
    grader_module = repr(getattr(autograder, "__file__", "?"))
except BaseException as e:
    grader_module = "ERR " + type(e).__name__
_record("reads", {{"files": seen, "listings": listed, "import_autograder": grader_module}})
"""


def test_grader_files_and_host_secrets_are_unreadable(grade_cells, jail_check, jail_mode, canary_dir):
    """The rubric, tolerances, reference solution, grading code, /root and /etc/shadow stay out of reach."""
    reference = sorted(str(p) for p in (ROOT / "reference").rglob("*") if p.is_file())[:20]
    grading = sorted(str(p) for p in (ROOT / "assignments").rglob("grading/*.py"))[:20]
    targets = (
        [str(p) for p in GRADER_FILES]
        + reference
        + grading
        + [
            str(ROOT / "autograder" / "sandbox" / "jail.py"),
            str(ROOT / "pyproject.toml"),
            str(canary_dir / "secret.txt"),
            str(canary_dir / "root_only.txt"),
            "/etc/shadow",
            "/root/.bashrc",
            "/root/.profile",
            "/proc/1/environ",
        ]
    )
    listings = [str(ROOT), str(ROOT / "reference"), str(ROOT / "assignments"), "/root", str(canary_dir)]
    g = grade_cells([_reader_cell(targets, listings)], name=f"reader-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    reads = g.record("reads")
    readable = {p: v[:60] for p, v in reads["files"].items() if not v.startswith("ERR ")}
    assert not readable, f"the kernel could read grader or host files: {sorted(readable)}"
    listed = reads["listings"]
    for d in (str(ROOT / "reference"), str(ROOT / "assignments"), str(canary_dir)):
        assert isinstance(listed[d], str), f"the kernel could list {d}: {listed[d]}"
    # The interpreter may be bound at its real path (e.g. ROOT/.venv, /root/.pyenv): nothing else.
    interpreter = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    for d in (str(ROOT), "/root"):
        if isinstance(listed[d], list):
            extra = [n for n in listed[d] if not any(i == Path(d, n) or Path(d, n) in i.parents for i in interpreter)]
            assert not extra, f"the kernel sees {d}/{{{', '.join(extra)}}} beyond the interpreter it needs"
    assert reads["import_autograder"].startswith("ERR"), (
        f"the grader's own package is importable in the kernel: {reads['import_autograder']}"
    )
    for text in reads["files"].values():
        assert FILE_SECRET not in text


PROBE_SCAN = r"""
import os, time
found, visited = [], 0
skip = {"/proc", "/sys", "/dev", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"}
def scan(d, depth):
    global visited
    if depth > 5 or visited > 20000 or d in skip:
        return
    try:
        entries = list(os.scandir(d))
    except OSError:
        return
    for e in entries:
        visited += 1
        if "probe" in e.name.lower() or e.name.endswith(".npz"):
            found.append(e.path)
        if e.is_dir(follow_symlinks=False) and "site-packages" not in e.path:
            scan(e.path, depth + 1)
scan("/", 0)
# Under the fallback jail (no mount namespace) Landlock hides "/": scan what the kernel can list
# (its working and run folders), and look where the grader keeps the probe's files, beside the run
# folder that TMPDIR names.
tmp = os.environ.get("TMPDIR", "")
for root in (os.getcwd(), os.path.dirname(tmp)):
    if root and root != "/":
        scan(root, 1)
beside = os.path.join(os.path.dirname(os.path.dirname(tmp)), "probe") if tmp else ""
def listing(d):
    try:
        return sorted(os.listdir(d))
    except OSError:
        return False
_record("probe_scan", {"found": found, "visited": visited, "probe_dir": listing("/probe") or listing(beside)})
"""


def test_probe_inputs_are_absent_while_the_students_cells_run(grade_cells, jail_check, jail_mode):
    """The grader's probe cases and inputs appear only after the student's cells have finished."""
    g = grade_cells([PROBE_SCAN], name=f"probe-scan-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    scan = g.record("probe_scan")
    assert scan["visited"] > 10, f"the scan saw almost nothing, so it proves nothing: {scan}"
    leaked = [p for p in scan["found"] if "probe_cases" in p or "probe_inputs" in p]
    assert not leaked, f"probe inputs are visible during the student's cells: {leaked}"
    assert not scan["probe_dir"], f"/probe holds files during the student's cells: {scan['probe_dir']}"


ENV_DUMP = r"""
import os
procs = {}
try:
    pids = os.listdir("/proc")
except OSError:  # the fallback's Landlock rules: of /proc only the kernel's own entries
    pids = [str(os.getpid()), str(os.getppid()), "1"]
for pid in pids:
    if pid.isdigit():
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    procs[pid + "/" + what] = f.read(1 << 16).decode("utf-8", "replace")
            except OSError:
                pass
_record("env", {"environ": dict(os.environ), "procs": procs})
"""


def test_grader_environment_never_reaches_the_kernel(grade_cells, jail_check, jail_mode):
    """A canary variable of the grader's environment is absent from the kernel and every /proc it sees."""
    assert os.environ[ENV_SECRET_NAME] == ENV_SECRET
    g = grade_cells([ENV_DUMP], name=f"env-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    raw = (g.workspace / "env.rec.json").read_text()
    assert ENV_SECRET not in raw, "the grader's environment canary reached the kernel (environ or /proc)"
    env = g.record("env")["environ"]
    assert env, "the kernel recorded no environment at all: the dump did not run"
    inherited = sorted(
        k
        for k, v in env.items()
        if os.environ.get(k) == v
        and len(v) > 3
        and k
        not in (
            "LANG",
            "LC_ALL",
            "TERM",
            "SHLVL",
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "PYTHONDONTWRITEBYTECODE",
            "MPLBACKEND",
        )
    )
    assert not inherited, f"the kernel inherited the grader's variables {inherited}"


# ----------------------------------------------------------------------------- network
@pytest.fixture
def loopback_servers():
    servers = LoopbackServers()
    yield servers
    servers.close()


def _network_cell(targets: dict) -> str:
    return f"""\
import socket
targets = {targets!r}
families = {{"tcp4": (socket.AF_INET, socket.SOCK_STREAM), "tcp6": (socket.AF_INET6, socket.SOCK_STREAM),
            "udp4": (socket.AF_INET, socket.SOCK_DGRAM), "unix_abstract": (socket.AF_UNIX, socket.SOCK_STREAM),
            "unix_path": (socket.AF_UNIX, socket.SOCK_STREAM)}}
outcome = {{}}
for name, addr in targets.items():
    fam, kind = families[name]
    if isinstance(addr, list):
        addr = tuple(addr)
    if name == "unix_abstract":
        addr = chr(0) + addr
    try:
        s = socket.socket(fam, kind)
        s.settimeout(2)
        if kind == socket.SOCK_DGRAM:
            s.sendto(MARK.encode(), addr)
            outcome[name] = "sent (UDP)"
        else:
            s.connect(addr)
            s.sendall(MARK.encode())
            outcome[name] = "CONNECTED"
        s.close()
    except BaseException as e:
        outcome[name] = "ERR " + type(e).__name__ + ": " + str(e)[:80]
_record("network", outcome)
"""


def test_loopback_servers_of_the_grader_are_unreachable(grade_cells, jail_check, jail_mode, loopback_servers):
    """TCP/UDP on 127.0.0.1 and ::1, abstract and world-writable Unix sockets of the host: no contact."""
    targets = {k: (list(v) if isinstance(v, tuple) else v) for k, v in loopback_servers.targets.items()}
    g = grade_cells([_network_cell(targets)], name=f"network-{jail_mode}")
    time.sleep(0.5)  # let the listener threads drain anything that did arrive
    require_mode(g, jail_mode)
    jail_check(g)
    outcome = g.record("network")
    assert set(outcome) == set(targets), f"the notebook did not try every target: {outcome}"
    assert not loopback_servers.received, (
        f"the jailed kernel reached the grader's loopback servers: {loopback_servers.received}; tries: {outcome}"
    )
    connected = {k: v for k, v in outcome.items() if v == "CONNECTED"}
    assert not connected, f"connections succeeded (to the jail's own loopback?): {connected}"
    assert MARK not in g.student_text()
