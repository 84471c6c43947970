"""The one /proc reader (autograder/proc_info.py): mountinfo, cgroup membership and the process
table, on fixture text (a table of the lines the kernel writes, and a property over generated
mount points) and on this machine's real /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from autograder import proc_info
from autograder.proc_info import Mount, parse_cgroup_membership, parse_mountinfo, parse_status

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "100"))

# (line, mount point, source, options, optional fields, fstype, super options)
MOUNTINFO_LINES = [
    (
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
        "/mnt2",
        "/dev/root",
        ("rw", "noatime"),
        ("master:1",),
        "ext3",
        ("rw", "errors=continue"),
    ),
    ("22 27 0:21 / /proc rw,relatime - proc proc rw", "/proc", "proc", ("rw", "relatime"), (), "proc", ("rw",)),
    (
        "100 27 0:50 / /tmp/a\\040b\\011c\\012d\\134e rw shared:7 master:3 propagate_from:2 unbindable - tmpfs "
        "autograder-ws-42 rw,size=8192k,nr_inodes=20000",
        "/tmp/a b\tc\nd\\e",
        "autograder-ws-42",
        ("rw",),
        ("shared:7", "master:3", "propagate_from:2", "unbindable"),
        "tmpfs",
        ("rw", "size=8192k", "nr_inodes=20000"),
    ),
    (
        "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup "
        "rw,cpu,cpuacct",
        "/sys/fs/cgroup/cpu,cpuacct",
        "cgroup",
        ("ro", "nosuid", "nodev", "noexec", "relatime"),
        ("shared:11",),
        "cgroup",
        ("rw", "cpu", "cpuacct"),
    ),
    (
        "31 25 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
        "/sys/fs/cgroup",
        "cgroup2",
        ("rw", "nosuid"),
        (),
        "cgroup2",
        ("rw", "nsdelegate", "memory_recursiveprot"),
    ),
    (
        "40 27 0:60 / /home/x\\040y rw - fuse.sshfs me@host:/a\\040b rw,user_id=0",
        "/home/x y",
        "me@host:/a b",
        ("rw",),
        (),
        "fuse.sshfs",
        ("rw", "user_id=0"),
    ),
    ("41 27 0:61 / /odd\rname rw - tmpfs none rw", "/odd\rname", "none", ("rw",), (), "tmpfs", ("rw",)),
]
MALFORMED = [
    "",
    "garbage",
    "36 35 98:0 /mnt1 /mnt2 rw",
    "x 35 98:0 / /a rw - tmpfs none rw",
    "36 35 98:0 / /a rw - tmpfs",
]


@pytest.mark.parametrize("line, point, source, options, optional, fstype, super_options", MOUNTINFO_LINES)
def test_a_mountinfo_line_is_parsed_field_by_field(line, point, source, options, optional, fstype, super_options):
    for text in (line, line.encode()):
        (m,) = parse_mountinfo(text)
        assert (m.point, m.source, m.options, m.optional, m.fstype, m.super_options) == (
            point,
            source,
            options,
            optional,
            fstype,
            super_options,
        )
        assert m.writable == ("rw" in options)


def test_malformed_lines_are_skipped_and_the_others_kept():
    good = [line for line, *_ in MOUNTINFO_LINES]
    mixed = "\n".join(x for pair in zip(MALFORMED, good) for x in pair) + "\n"
    assert [m.point for m in parse_mountinfo(mixed)] == [p for _, p, *_ in MOUNTINFO_LINES[: len(MALFORMED)]]


def _escape(raw: bytes) -> bytes:
    """What the kernel writes for a path in mountinfo (fs/proc_namespace.c: mangle " \\t\\n\\\\")."""
    return b"".join(b"\\%03o" % c if c in b" \t\n\\" else bytes([c]) for c in raw)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    point=st.binary(min_size=1, max_size=60).filter(lambda b: b"\0" not in b).map(lambda b: b"/" + b),
    source=st.binary(min_size=1, max_size=30).filter(lambda b: b"\0" not in b),
    optional=st.lists(st.sampled_from([b"shared:1", b"master:22", b"propagate_from:3", b"unbindable"]), max_size=3),
)
def test_any_mount_point_and_source_read_back_as_written(point, source, optional):
    line = b" ".join(
        [b"7 1 0:5 /", _escape(point), b"rw,nosuid", *optional, b"-", b"tmpfs", _escape(source), b"rw,size=64k"]
    )
    (m,) = parse_mountinfo(b"1 0 0:1 / / rw - ext4 /dev/sda1 rw\n" + line + b"\n")[1:]
    assert (m.point, m.source, m.optional) == (
        os.fsdecode(point),
        os.fsdecode(source),
        tuple(o.decode() for o in optional),
    )


def test_v1_controllers_map_to_their_mounts_and_mount_flags_are_no_controllers():
    table = parse_mountinfo(
        "\n".join(
            [
                "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw shared:11 - cgroup cgroup rw,cpu,cpuacct",
                "32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
                "33 25 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd",
                "34 25 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,clone_children,release_agent=/x,pids",
                "35 25 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate",
                "36 25 0:32 / /other/memory rw - cgroup cgroup rw,memory",
            ]
        )
    )
    found = {c: m.point for c, m in proc_info.cgroup_v1_mounts(table).items()}
    assert found == {
        "cpu": "/sys/fs/cgroup/cpu,cpuacct",
        "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
        "memory": "/sys/fs/cgroup/memory",
        "name=systemd": "/sys/fs/cgroup/systemd",
        "pids": "/sys/fs/cgroup/pids",
    }


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "12:memory:/user.slice\n11:cpu,cpuacct:/a/b\n1:name=systemd:/init.scope\n0::/v2/path\n",
            {"memory": "/user.slice", "cpu": "/a/b", "cpuacct": "/a/b", "name=systemd": "/init.scope", "": "/v2/path"},
        ),
        ("0::/\n", {"": "/"}),
        ("0::/a:b:c\n", {"": "/a:b:c"}),  # a path may hold colons
        ("garbage\n4:pids:/x\n", {"pids": "/x"}),
        ("", {}),
    ],
)
def test_cgroup_membership_per_controller(text, expected):
    assert parse_cgroup_membership(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            b"Name:\tsh\nState:\tS (sleeping)\nTgid:\t9\nPid:\t9\nPPid:\t1\nUid:\t1000\t1001\t1002\t1003\n",
            (1, "S", (1000, 1001, 1002, 1003)),
        ),
        (b"Name:\tweird: name\nState:\tZ (zombie)\nPPid:\t77\nUid:\t0\t0\t0\t0\n", (77, "Z", (0, 0, 0, 0))),
        (b"Name:\tx\nState:\tR (running)\nUid:\t0\t0\t0\t0\n", None),  # no PPid
        (b"", None),
    ],
)
def test_a_status_text_gives_parent_state_and_uids(text, expected):
    p = parse_status(9, text)
    assert (None if p is None else (p.ppid, p.state, p.uids)) == expected


# ── the real /proc ────────────────────────────────────────────────────────────────────────────


def test_the_real_mount_table_cgroups_and_this_process():
    table = proc_info.mounts()
    assert table and all(isinstance(m, Mount) for m in table)
    assert any(m.point == "/proc" and m.fstype == "proc" for m in table)
    assert proc_info.own_cgroups(), "every Linux process is in some cgroup"
    me = proc_info.process(os.getpid())
    assert me is not None and me.ppid == os.getppid() and me.uids[:3] == os.getresuid()
    assert os.getpid() in proc_info.pids_of_uid(os.getuid())
    assert proc_info.is_running(os.getpid()) and proc_info.pid_exists(os.getpid())


def test_a_process_tree_its_children_and_a_zombie():
    top = subprocess.Popen(["/bin/sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(proc_info.children_of(top.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = proc_info.children_of(top.pid)
        assert len(children) == 2
        assert sorted(proc_info.descendants(top.pid)) == sorted([top.pid, *children])
        assert top.pid in proc_info.children_of(os.getpid())
    finally:
        os.killpg(top.pid, signal.SIGKILL)  # the group this test started
    deadline = time.monotonic() + 120
    while proc_info.process(top.pid).state != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc_info.pid_exists(top.pid) and not proc_info.is_running(top.pid), "a zombie exists but does not run"
    top.wait(timeout=60)
    assert proc_info.process(top.pid) is None or proc_info.process(top.pid).ppid != os.getpid()


@pytest.mark.root
def test_a_real_mount_point_with_a_space_tab_and_backslash(tmp_path):
    """Inside a private mount namespace (nothing is left mounted), a tmpfs on a folder whose name
    needs escaping is found at its real name."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and util-linux's unshare")
    folder = tmp_path / "a b\tc\\d"
    folder.mkdir()
    code = (
        "import sys; from autograder import proc_info; import ctypes, os; "
        "libc = ctypes.CDLL(None, use_errno=True); "
        "assert libc.mount(b'autograder-test', os.fsencode(sys.argv[1]), b'tmpfs', 0, b'size=64k') == 0, "
        "os.strerror(ctypes.get_errno()); "
        "print([m.source for m in proc_info.mounts() if m.point == sys.argv[1]])"
    )
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", code, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
        pytest.skip(f"mount namespaces are blocked here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['autograder-test']"


def test_cpu_and_wait_of_a_tree_count_its_children_threads():
    """A child that spins for a while: its CPU time shows in its parent's tree (every thread of
    every process below ``pid``), and both numbers are non-negative; a pid that is gone is (0, 0)."""
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\ninput()"
    child = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE)
    try:
        cpu = wait = 0
        for _ in range(600):  # until the child has spun its 0.3 s of CPU (bounded: 60 s)
            cpu, wait = proc_info.cpu_and_wait_of_tree(os.getpid())
            own, _ = proc_info.cpu_and_wait_of_tree(child.pid)
            if own >= 250_000_000:
                break
            time.sleep(0.1)
        assert own >= 250_000_000, own
        assert cpu >= own and wait >= 0
    finally:
        child.communicate(b"\n", timeout=60)
    assert proc_info.cpu_and_wait_of_tree(child.pid) == (0, 0)
