"""While the student's code runs, no grader process is visible to it through /proc.

The red team's attack: the grader measures the student's ONNX models on the hidden rows in
measuring children that run while the probe still runs in the kernel (``pipeline._EarlyMeasure``).
A thread of the kernel polled ``/proc/<child>/stat`` (the child's RSS, about 11 bits per pulse,
for a model whose side branch allocates memory sized by a hidden input) and carried the value out.
The fallback jail has no PID namespace, so only its Landlock rules (``jail.landlock_rules``: of
/proc only the kernel's own entries and ``/proc/cpuinfo``) stand between the kernel and every
process of the machine; bwrap and the kernel template have a PID namespace.

Here the reference solution of lesson 07 (whose models the grader measures during the probe)
runs after a cell that starts a thread which, until the kernel dies, lists ``/proc`` and stats
every pid near its own, reading ``stat``, ``status`` and ``cmdline`` of each it can. Beside the
grading, the test keeps a root process with a marked command line alive and watches, as root,
the thread's record (a file in the working directory, replaced whole each round: the grader
restores the folder after the probe) and the grader's measuring children. The thread must have
scanned while a measuring child was alive, and must have read nothing but its own process, the
processes it started and its own ancestors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from advkit import ASSIGNMENT_ID, ROOT, TOKEN, require_mode
from test_adv_fallback_layers import confined  # noqa: F401 - the fixture: confine as the slot's sandbox uid
from autograder import safe_files
from autograder.assignment import load_assignment

pytestmark = pytest.mark.slow

RECORD = "procwatch.json"
SPAN = 30_000  # pids stat'ed on each side of the kernel's own (the whole range where pid_max is 32768)
MEASURING = "autograder.measure.model_worker"  # in every measuring child's command line
SENTINEL_MARK = f"adv-proc-sentinel-{TOKEN}"

WATCH_CELL = f"""
import json as _pj, os as _po, threading as _pt, time as _ptime

def _pw_read(path, limit=4096):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None

def _pw_entry(pid):
    stat, status, cmdline = (_pw_read(f"/proc/{{pid}}/{{n}}") for n in ("stat", "status", "cmdline"))
    if stat is None and status is None and cmdline is None:
        return None
    entry = {{"cmdline": (cmdline or b"").replace(b"\\0", b" ").decode(errors="replace")[:300]}}
    if stat is not None:
        text = stat.decode(errors="replace")
        entry["comm"] = text[text.find("(") + 1 : text.rfind(")")]
        entry["ppid"] = int(text[text.rfind(")") + 2 :].split()[1])
    for line in (status or b"").decode(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key in ("Tgid", "Uid"):
            entry[key.lower()] = int(value.split()[0])
    return entry

def _pw_ancestors(own):
    chain, pid = [own], own
    while pid > 1:
        entry = _pw_entry(pid)
        if entry is None or "ppid" not in entry or entry["ppid"] in chain:
            break
        pid = entry["ppid"]
        chain.append(pid)
    return chain

def _pw_scan():
    own = _po.getpid()
    try:
        pids = {{int(n) for n in _po.listdir("/proc") if n.isdigit()}}
        listed = True
    except OSError:
        pids, listed = set(), False
    for pid in range(max(1, own - {SPAN}), own + {SPAN}):
        try:
            _po.stat(f"/proc/{{pid}}")
        except OSError:
            continue
        pids.add(pid)
    return listed, {{pid: e for pid in sorted(pids) if (e := _pw_entry(pid)) is not None}}

def _pw_watch():
    own, seen, rounds = _po.getpid(), {{}}, []
    while True:
        began = _ptime.time()
        listed, entries = _pw_scan()
        for pid, entry in entries.items():
            seen[str(pid)] = entry
        rounds.append([began, _ptime.time()])
        record = {{"own": own, "ancestors": _pw_ancestors(own), "listed": listed, "seen": seen,
                   "rounds": rounds[-400:], "own_readable": own in entries}}
        with open("{RECORD}.tmp", "w") as f:
            _pj.dump(record, f)
        _po.replace("{RECORD}.tmp", "{RECORD}")
        _ptime.sleep(0.05)

_pt.Thread(target=_pw_watch, name="proc-watch", daemon=True).start()
"""


class Watcher:
    """As root, beside the grading: the kernel thread's record, merged as it is replaced, and the
    grader's measuring children with the times they were seen alive."""

    def __init__(self, name: str) -> None:
        self.pattern = f"adv-{TOKEN}-{name}-*/ws"
        self.seen: dict[str, dict] = {}
        self.rounds: set[tuple[float, float]] = set()
        self.ancestors: set[int] = set()
        self.own: int | None = None
        self.own_readable = False
        self.listed = False
        self.measuring: dict[int, list[float]] = {}  # pid -> times it was seen alive
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(0.1):
            now = time.time()
            for p in psutil.process_iter(["pid", "cmdline"]):
                if MEASURING in " ".join(p.info["cmdline"] or ()) and self._ours(p, me):
                    self.measuring.setdefault(p.info["pid"], []).append(now)
            for ws in Path(tempfile.gettempdir()).glob(self.pattern):
                self._merge(ws)

    @staticmethod
    def _ours(p: psutil.Process, me: int) -> bool:
        """A child of this test's grading (other tests may grade on the same machine)."""
        try:
            return any(q.pid == me for q in p.parents())
        except psutil.Error:
            return False

    def _merge(self, ws: Path) -> None:
        try:
            rec = safe_files.load_json(ws, RECORD)
        except Exception:  # noqa: BLE001 - absent, or being replaced: the next poll reads it
            return
        if not isinstance(rec, dict):
            return
        self.own = rec.get("own", self.own)
        self.ancestors |= set(rec.get("ancestors", []))
        self.own_readable |= bool(rec.get("own_readable"))
        self.listed |= bool(rec.get("listed"))
        self.seen.update(rec.get("seen", {}))
        self.rounds |= {tuple(r) for r in rec.get("rounds", [])}

    def overlapping_rounds(self) -> int:
        """Rounds of the kernel's scan during which a measuring child was seen alive."""
        alive = [t for times in self.measuring.values() for t in times]
        return sum(1 for began, ended in self.rounds if any(began <= t <= ended for t in alive))

    def foreign(self) -> dict[str, dict]:
        """What the kernel read of processes that are neither its own (itself, its threads, the
        children the notebook started, such as matplotlib's ``fc-list``) nor its ancestors."""
        mine = {self.own}
        grew = True
        while grew:  # the kernel's descendants, by the parents the kernel read
            grown = {int(pid) for pid, e in self.seen.items() if e.get("ppid") in mine or e.get("tgid") in mine}
            grew = not grown <= mine
            mine |= grown
        own = mine | self.ancestors
        return {pid: e for pid, e in self.seen.items() if int(pid) not in own}


def described(foreign: dict[str, dict]) -> str:
    """The measuring children first, then by pid."""
    order = sorted(foreign.items(), key=lambda kv: (MEASURING not in kv[1].get("cmdline", ""), int(kv[0])))
    return "\n  ".join(
        f"{pid}: uid {e.get('uid')} {e.get('comm')!r} {e.get('cmdline', '')[:120]!r}" for pid, e in order[:40]
    )


@pytest.fixture
def sentinel():
    """A root process of the test with a marked command line: a grader process the kernel must not see."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", SENTINEL_MARK])
    yield proc
    proc.kill()
    proc.wait()


def watched_solution(folder: Path) -> Path:
    """Lesson 07's reference solution after the watching cell."""
    nb = nbformat.read(ROOT / "reference" / ASSIGNMENT_ID / "solution.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(WATCH_CELL))
    path = folder / "watched.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_kernel_thread_watching_proc_sees_no_grader_process(
    grade_path, jail_check, jail_mode, kernel_kind, sentinel, tmp_path
):
    name = f"proc-watch-{jail_mode}-{kernel_kind}"
    assignment = load_assignment(ASSIGNMENT_ID, root=ROOT)  # its real limits: the whole solution runs
    with Watcher(name) as w:
        g = grade_path(watched_solution(tmp_path), name=name, assignment=assignment)
    require_mode(g, jail_mode)
    jail_check(g, gains_allowed=tuple(g.scores()))
    assert g.execution.get("probe") == "completed", g.execution_brief()
    assert w.rounds and w.own is not None, f"the kernel's thread left no record; {g.execution_brief()}"
    assert w.own_readable, f"the kernel could not read its own /proc entry (the scan is broken): {w.own}"
    assert w.measuring, "no measuring child was seen during the grade: the attack had nothing to watch"
    assert w.overlapping_rounds(), (
        f"no scan of the kernel's ran while a measuring child was alive ({len(w.rounds)} rounds, "
        f"children {sorted(w.measuring)}): the test did not test the attack"
    )
    foreign = w.foreign()
    measuring = [pid for pid, e in foreign.items() if MEASURING in e.get("cmdline", "")]
    assert not foreign, (
        f"the kernel read /proc of {len(foreign)} processes not its own nor its ancestors, "
        f"{len(measuring)} of them measuring children (listed /proc: {w.listed}; "
        f"{w.overlapping_rounds()} rounds beside a measuring child); the first 40:\n  {described(foreign)}"
    )


# ----------------------------------------------------------------------------- the rules alone
PROC_CODE = """
import threading
def attempt(fn):
    try:
        fn()
        return "READ"
    except OSError as e:
        return "ERR " + type(e).__name__
own = os.getpid()
out = {"own stat": attempt(lambda: open(f"/proc/{own}/stat").read()),
       "own maps": attempt(lambda: open("/proc/self/maps").read()),
       "cpuinfo": attempt(lambda: open("/proc/cpuinfo").read())}
t = threading.Thread(target=lambda: out.update({"own thread": attempt(lambda: open("/proc/thread-self/stat").read())}))
t.start()
t.join()
for name, path in (("parent stat", f"/proc/{os.getppid()}/stat"), ("pid 1 cmdline", "/proc/1/cmdline"),
                   ("meminfo", "/proc/meminfo"), ("machine stat", "/proc/stat"), ("loadavg", "/proc/loadavg")):
    out[name] = attempt(lambda: open(path).read())
out["listdir /proc"] = attempt(lambda: os.listdir("/proc"))
out["cpu quota"] = sorted({attempt(lambda: open(p).read()) for p in QUOTA if os.path.exists(p)} or {"READ"})
out["cgroup listing"] = attempt(lambda: os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup") else "ERR PermissionError"
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.write(w, json.dumps([attempt(lambda: open("/proc/self/stat").read()),
                            attempt(lambda: open(f"/proc/{own}/stat").read())]).encode())
    os._exit(0)
os.waitpid(child, 0)
out["child own stat"], out["child kernel stat"] = json.loads(os.read(r, 200))
def link(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
out["pinned"] = [fd for fd in os.listdir("/proc/self/fd") if link(fd) == f"/proc/{own}"]
print(json.dumps(out))
"""


def test_fallback_rules_show_the_kernel_its_own_proc_only(confined):  # noqa: F811 - the imported fixture
    """``jail.landlock_rules`` under confine as the sandbox uid: the kernel and its threads read
    their own entries, the CPUs and the CPU quota (joblib's ``cpu_count``: ``n_jobs=-1`` raised
    ``PermissionError`` before); the grader (its parent), pid 1, the machine's memory and load, the
    listing of /proc and the cgroups' are denied; a child of the kernel reads the kernel's entries, not its
    own (nothing of the grader's either way). The rule's /proc folder stays open in the kernel
    (``confine._landlock_allow``): a dentry the kernel dropped from its cache would come back as
    another inode, which no rule names."""
    from autograder.jail import jail

    out = confined(f"QUOTA = {list(jail.CPU_QUOTA_FILES)!r}\n" + PROC_CODE)
    expected = {
        "own stat": "READ",
        "own maps": "READ",
        "own thread": "READ",
        "cpuinfo": "READ",
        "parent stat": "ERR PermissionError",
        "pid 1 cmdline": "ERR PermissionError",
        "meminfo": "ERR PermissionError",
        "machine stat": "ERR PermissionError",
        "loadavg": "ERR PermissionError",
        "listdir /proc": "ERR PermissionError",
        "cpu quota": ["READ"],
        "cgroup listing": "ERR PermissionError",
        "child own stat": "ERR PermissionError",
        "child kernel stat": "READ",
    }
    assert {k: out[k] for k in expected} == expected, out
    assert len(out["pinned"]) == 1, f"the kernel holds no descriptor of its own /proc folder: {out}"
