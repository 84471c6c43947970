"""Hostile notebooks that try to exhaust the grader: time (loops, sleeps, SIGINT ignored), memory,
processes, disk, a daemon that outlives the kernel, and floods of output.

Every bomb is bounded by the notebook itself (count, size, time), so a hole costs this machine
seconds and a few GB at most, never more. Each test asserts the jail's answer (timeout status,
MemoryError, EAGAIN, EFBIG/ENOSPC), a bounded wall time, a produced grade, and no process left.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil
import pytest

from advkit import MARK, SHORT_LIMITS, Graded, disk_usage, grade_in_child, hole, jail_uid, leftover_processes

pytestmark = pytest.mark.slow

CELL_S = SHORT_LIMITS["cell_timeout_s"]
NOTEBOOK_S = SHORT_LIMITS["notebook_timeout_s"]
CORRECT_DEQUANTIZE = """\
import numpy as np
def dequantize(q, scale, zero_point):
    q = np.asarray(q)
    return ((q.astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)).astype(np.float32)
"""


def _cell_status(g: Graded, index: int) -> str:
    return next((c["status"] for c in g.execution.get("cells", []) if c["index"] == index), "absent")


# ----------------------------------------------------------------------------- time
HANGS = {
    # name: (source, interruptible: later cells still run after the interrupt)
    "busy_loop": ("while True:\n    pass", True),
    "sleep_forever": ("import time\ntime.sleep(10**6)", True),
    "sigint_ignored": ("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", False),
    "keyboardinterrupt_swallowed": (
        "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except KeyboardInterrupt:\n        pass",
        False,
    ),
    "blocked_in_select": (
        "import select, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\n"
        "select.select([], [], [], 10**6)",
        False,
    ),
}


HANG_CELL_S, HANG_NOTEBOOK_S = 3, 10


@pytest.mark.parametrize("hang", sorted(HANGS))
def test_hanging_cell_times_out_and_the_grade_is_produced(grade_cells, jail_check, baseline, limited, hang):
    """A hanging cell is stopped at the cell limit; uninterruptible ones end the run, the grade still comes."""
    source, interruptible = HANGS[hang]
    g = grade_cells(
        [source, CORRECT_DEQUANTIZE],
        name=f"hang-{hang}",
        assignment=limited(cell_timeout_s=HANG_CELL_S, notebook_timeout_s=HANG_NOTEBOOK_S),
    )
    jail_check(g, gains_allowed=("dequantize",))
    assert g.execution["status"] == "timeout", g.execution_brief()
    assert _cell_status(g, 1) == "timeout", f"the hanging cell is recorded as {_cell_status(g, 1)}"
    later = _cell_status(g, 2)
    if interruptible:
        assert later == "ok", f"an interrupted cell should not cost the later cells: cell 2 is {later}"
    else:
        assert later == "not_run", f"cell 2 after an unstoppable cell: {later}"
        assert g.score("dequantize") <= baseline.score("dequantize"), "points for a cell that never ran"


def test_notebook_deadline_stops_many_slow_cells(grade_cells, jail_check, limited):
    """Cells each under the cell limit but together over the notebook limit: stopped at the deadline."""
    slow = "import time\ntime.sleep(2.5)"
    g = grade_cells([slow] * 8, name="deadline", assignment=limited(cell_timeout_s=4, notebook_timeout_s=6))
    jail_check(g)
    assert g.execution["status"] == "timeout", g.execution_brief()
    statuses = [c["status"] for c in g.execution["cells"]]
    assert "not_run" in statuses, f"all cells ran past the 6 s notebook limit: {statuses}"
    assert "timeout" not in statuses[: statuses.index("not_run") - 1], f"a cell hit its own limit: {statuses}"
    assert "reached its 6 s limit" in g.execution["reason"], f"not the notebook's limit: {g.execution_brief()}"


def test_background_thread_spinning_through_the_probe(grade_cells, jail_check):
    """A CPU-burning thread left running does not stop the probe or the shutdown."""
    spin = "import threading\ndef _spin():\n    while True:\n        pass\nthreading.Thread(target=_spin, daemon=False).start()"
    g = grade_cells([CORRECT_DEQUANTIZE, spin], name="spinner")
    jail_check(g, gains_allowed=("dequantize",))
    assert g.execution["status"] == "completed" and g.execution["probe"] == "completed", g.execution_brief()
    assert g.score("dequantize") > 0, "the probe ran but the correct dequantize earned nothing"


# ----------------------------------------------------------------------------- memory, processes, disk
MEMORY_BOMB = r"""
chunks, total, error = [], 0, None
try:
    while total < (8 << 30):
        chunks.append(bytearray(256 << 20))  # zero-filled: the pages are really used
        total += 256 << 20
        _record("memory", {"allocated": total, "error": None})
except MemoryError as e:
    error = "MemoryError"
_record("memory", {"allocated": total, "error": error})
del chunks
"""
# The tested limit must fire first, even on a machine 5x slower than this one: 1.5 GB is reached
# in about a second here, so the cell gets 120 s (not the suite's 5 s).
BOMB_MEMORY_MB = 1536
BOMB_LIMITS = {"cell_timeout_s": 120, "notebook_timeout_s": 240}


def test_memory_bomb_hits_the_memory_limit(grade_cells, jail_check, limited):
    """8 GB in 256 MB steps: the cgroup's memory limit ends the kernel (OOM), unless the process's
    RLIMIT_DATA of the same size raises MemoryError first (which one depends on what else the
    kernel holds); where there is no cgroup, RLIMIT_AS raises MemoryError. Either way no more than
    the limit was ever held."""
    g = grade_cells(
        [MEMORY_BOMB, "x = 1"], name="memory-bomb", assignment=limited(memory_mb=BOMB_MEMORY_MB, **BOMB_LIMITS)
    )
    jail_check(g)
    rec = g.record("memory")
    limit = BOMB_MEMORY_MB << 20
    assert rec["allocated"] <= limit, f"allocated {rec['allocated']:,} bytes past the {limit:,} limit: {rec}"
    if "cgroup_memory" in g.execution["isolation"]["layers"] and g.execution["status"] != "completed":
        assert g.execution["status"] == "kernel_died", g.execution_brief()
        assert f"more than its {BOMB_MEMORY_MB} MB of memory" in g.execution["reason"], g.execution["reason"]
    else:
        assert rec["error"] == "MemoryError", rec
        assert _cell_status(g, 2) == "ok", "the kernel did not survive its MemoryError"


FORK_BOMB = r"""
import os, time
kids, error = [], None
for i in range(500):
    try:
        pid = os.fork()
    except OSError as e:
        error = type(e).__name__ + ": " + str(e)
        break
    if pid == 0:
        try:
            time.sleep(60)
        finally:
            os._exit(0)
    kids.append(pid)
_record("forks", {"forked": len(kids), "error": error})
"""
BOMB_PIDS_MAX = 128  # the cgroup's pids.max for this test: 500 forks must hit it (1024 normally)


def test_fork_bomb_is_stopped_and_every_child_reaped(grade_cells, jail_check, limited, monkeypatch):
    monkeypatch.setattr("autograder.jail.cgroups.PIDS_MAX", BOMB_PIDS_MAX)
    g = grade_cells([FORK_BOMB], name="fork-bomb", assignment=limited(**BOMB_LIMITS))
    jail_check(g)  # includes: no process of the sandbox uid left
    rec = g.record("forks")
    layers = g.execution["isolation"]["layers"]
    cap = BOMB_PIDS_MAX if "cgroup_pids" in layers else 64
    assert rec["forked"] < cap and rec["error"], f"{rec['forked']} forks succeeded, the limit is {cap} ({rec})"


DISK_BOMB = r"""
import os
def fill(folder, files, each):
    written, error = 0, None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:  # not writable at all (the fallback's Landlock on /tmp): on to the next place
        return {"written": 0, "error": type(e).__name__ + ": " + (e.strerror or "")}
    for i in range(files):
        try:
            with open(os.path.join(folder, "fill%03d.bin" % i), "wb") as f:
                os.posix_fallocate(f.fileno(), 0, each)
            written += each
        except OSError as e:
            error = type(e).__name__ + ": " + (e.strerror or "")
            break
    return {"written": written, "error": error}
big = {"written": 0, "error": None}
try:
    with open("one_big.bin", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, 2 << 30)
    big["written"] = 2 << 30
except OSError as e:
    big["error"] = type(e).__name__ + ": " + (e.strerror or "")
os.unlink("one_big.bin")
_record("disk", {"big_file": big, "tmp": fill("/tmp/fill", 32, (64 << 20) - 4096),
                 "cwd": fill("fill", 32, (64 << 20) - 4096)})
"""

MiB = 1 << 20
WORKSPACE_CAP = 1 << 30  # a notebook of this assignment writes ~1 MB; 1 GB is already generous


def test_disk_bomb_is_stopped_in_every_writable_place(grade_cells, jail_check, short_assignment, limited, request):
    """One 2 GB file, then 2 GB in 64 MB files into /tmp and into the working directory."""
    g = grade_cells([DISK_BOMB], name="disk-bomb", assignment=limited(**BOMB_LIMITS))
    try:
        used = disk_usage(g.workspace)
        jail_check(g)
        layers = g.execution["isolation"]["layers"]
        if "workspace_watchdog" in layers:
            request.applymarker(hole("H19"))
        cap = short_assignment.limits.workspace_mb * MiB
        assert used <= min(cap, WORKSPACE_CAP), f"{used / MiB:.0f} MB left in the workspace after grading"
        if "workspace_watchdog" in layers:  # no mount here: the watchdog killed the kernel past the cap
            assert g.execution["status"] == "kernel_died" and "more than its" in g.execution["reason"], (
                g.execution_brief()
            )
            return
        assert "workspace_tmpfs" in layers, f"the workspace's total size is not capped: layers {layers}"
        rec = g.record("disk")
        assert rec["big_file"]["error"], f"a 2 GB file was written: no file size limit ({rec['big_file']})"
        assert rec["tmp"]["written"] <= 128 * MiB, f"/tmp took {rec['tmp']['written'] / MiB:.0f} MB: not capped"
        assert rec["cwd"]["written"] <= cap and "No space left" in str(rec["cwd"]["error"]), (
            f"the working directory took {rec['cwd']['written'] / MiB:.0f} MB, its cap is {cap / MiB:.0f} MB: "
            f"{rec['cwd']}"
        )
    finally:
        shutil.rmtree(g.workspace / "fill", ignore_errors=True)


# ----------------------------------------------------------------------------- a daemon
DAEMON = r"""
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        with open("daemon.pid", "w") as f:
            f.write(str(os.getpid()))
        os.write(w, b"x")
        os.close(w)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", MARK])
    os._exit(0)
os.close(w)
os.read(r, 1)
_record("daemon", {"pid": int(open("daemon.pid").read())})
"""


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in arg for arg in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def test_double_forked_daemon_does_not_outlive_the_grading(grade_cells, jail_check):
    g = grade_cells([DAEMON, "import time\ntime.sleep(0.5)"], name="daemon")
    survivors = _processes_with(MARK)
    try:
        jail_check(g)
        pid = g.record("daemon")["pid"]
        assert not survivors, f"the daemon outlived the grading: {[(p.pid, p.uids()) for p in survivors]}"
        if g.execution["isolation"]["mode"] != "bwrap":  # no pid namespace: the pid is the host's
            assert not Path(f"/proc/{pid}").exists() or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        for p in survivors:  # only ever our own test's daemon, found by its unique marker
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass


# ----------------------------------------------------------------------------- output floods
# A flooded grading takes ~15 s here; past this the grader is hung (the child is killed, and the
# jail with it: bwrap --die-with-parent).
# The flood must reach the output cap before any limit, even at 5x slower CPU (Gradescope's 0.5 CPU
# on a busy machine took more than 5 s): its cells get 60 s, the whole notebook 120 s.
FLOOD_CELL_S, FLOOD_NOTEBOOK_S = 60, 120
FLOOD_CHILD_TIMEOUT_S = FLOOD_NOTEBOOK_S + 180


def _grade_in_child(
    tmp: Path, cells: list[str], cell_s: float = FLOOD_CELL_S, notebook_s: float = FLOOD_NOTEBOOK_S
) -> tuple[Graded, int]:
    return grade_in_child(tmp, cells, cell_s=cell_s, notebook_s=notebook_s, timeout_s=FLOOD_CHILD_TIMEOUT_S)


FLOODS = {
    "200MB_stdout_and_stderr": (
        "import sys\nline = 'x' * 65535 + '\\n'\nfor i in range(3200):\n"
        "    (sys.stdout if i % 2 else sys.stderr).write(line)"
    ),
    "one_12MB_message_and_200k_tiny_ones": (
        "from IPython.display import display\n"
        "display({'text/plain': 'y' * (12 << 20)}, raw=True)\n"
        "for i in range(200_000):\n    print(i, flush=True)"
    ),
}
GRADER_RSS_CAP = 500 * MiB  # the grader's own peak, whatever the notebook does


@pytest.mark.kernel
@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_output_flood_keeps_the_grader_small(tmp_path, flood, results_validator):
    g, peak = _grade_in_child(tmp_path, [FLOODS[flood], CORRECT_DEQUANTIZE])
    try:
        results_validator(g.results)
        assert peak < GRADER_RSS_CAP, f"the grader's peak RSS reached {peak / MiB:.0f} MB during {flood}"
        assert g.execution.get("output_truncated"), f"the flood never reached the output cap: {g.execution_brief()}"
        # the flood may cost the iopub connection: the probe must not wait on it (it did, 2 s a cell)
        assert g.execution["probe"] == "completed", g.execution_brief()
        size = (g.out / "results.json").stat().st_size + (g.out / "feedback.md").stat().st_size
        assert size < 1 * MiB, f"results.json + feedback.md are {size / MiB:.1f} MB"
        assert (g.out / "execution.json").stat().st_size < 2 * MiB
        assert not leftover_processes(g.workspace, jail_uid(g.execution), g.ended)
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)


@pytest.mark.kernel
def test_a_reply_too_big_for_the_grader_does_not_hang_it(tmp_path, results_validator):
    """A 20 MB exception message: its execute_reply is over the shell socket's size cap, so the
    grader never gets it; the cell must end at its limit and the grading go on."""
    # the cell ends at its limit (the reply never arrives): the short limits keep this test short
    g, peak = _grade_in_child(
        tmp_path, ["raise ValueError('z' * (20 << 20))", CORRECT_DEQUANTIZE], cell_s=CELL_S, notebook_s=NOTEBOOK_S
    )
    try:
        results_validator(g.results)
        assert peak < GRADER_RSS_CAP, f"the grader's peak RSS reached {peak / MiB:.0f} MB"
        assert g.execution["status"] in ("completed", "timeout"), g.execution_brief()
        statuses = [c["status"] for c in g.execution["cells"]]
        assert "timeout" in statuses, f"the cell did not end at its limit: {statuses} {g.execution_brief()}"
        assert not leftover_processes(g.workspace, jail_uid(g.execution), g.ended)
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)
