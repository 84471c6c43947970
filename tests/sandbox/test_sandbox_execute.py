"""Real kernels in the real jail: errors, timeouts, dead kernels, ignored metadata, capped output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from nbformat.v4 import new_code_cell, new_raw_cell

from autograder.limits import ExecutionLimits

pytestmark = pytest.mark.slow


def statuses(rec):
    return [(c["index"], c["status"]) for c in rec["cells"]]


def test_clean_run_is_completed(run_cells):
    rec, ws = run_cells([("md", "# intro"), "x = 20", "y = x + 22\nprint(y)", ("md", "end")])
    assert rec["status"] == "completed", rec["reason"]
    assert rec["reason"] is None and rec["first_error"] is None
    assert statuses(rec) == [(1, "ok"), (2, "ok")]
    assert (rec["cells_total"], rec["cells_run"], rec["cells_errored"]) == (2, 2, 0)
    assert rec["probe"] == "not_run"
    assert rec["duration_s"] > 0
    assert sorted(p.name for p in ws.iterdir()) == []


def test_error_is_recorded_and_later_cells_still_run(run_cells):
    rec, ws = run_cells(
        ["a = 1", "raise ValueError('bad \\x1b[31mred\\x1b[0m input')", "open('after.txt', 'w').write(str(a + 1))"]
    )
    assert rec["status"] == "completed"
    assert statuses(rec) == [(0, "ok"), (1, "error"), (2, "ok")]
    err = rec["cells"][1]
    assert err["ename"] == "ValueError"
    assert "bad" in err["evalue"] and "input" in err["evalue"]
    assert "\x1b" not in err["traceback"] and "ValueError" in err["traceback"]
    assert rec["first_error"] == {
        "cell": 1,
        "code_cell": 2,
        "where": "code cell 2 (cell 2 of the notebook)",
        "ename": "ValueError",
        "evalue": err["evalue"],
        "line": 1,
        "summary": f"ValueError: {err['evalue']} (line 1)",
    }  # placed by cell and line
    assert rec["cells_errored"] == 1
    assert (ws / "after.txt").read_text() == "2"


def test_metadata_tags_and_kernelspec_are_ignored(run_cells):
    cells = [
        new_code_cell("open('ran.txt', 'w').write('yes')", metadata={"tags": ["skip-execution"]}),
        new_code_cell("raise RuntimeError('expected?')", metadata={"tags": ["raises-exception"]}),
        "import sys\nopen('exe.txt', 'w').write(sys.executable)",
    ]
    bogus = {"kernelspec": {"name": "no-such-kernel", "display_name": "x", "language": "bash"}}
    rec, ws = run_cells(cells, metadata=bogus)
    assert rec["status"] == "completed", rec["reason"]
    assert statuses(rec) == [(0, "ok"), (1, "error"), (2, "ok")]
    assert (ws / "ran.txt").read_text() == "yes"  # skip-execution did not skip
    assert rec["first_error"]["ename"] == "RuntimeError"  # raises-exception did not hide it
    assert "python" in (ws / "exe.txt").read_text()  # our kernel, not the bogus kernelspec
    assert rec["language"] == "bash"  # named, so the student can be told


def test_cell_timeout_interrupts_and_continues(run_cells):
    limits = ExecutionLimits(cell_timeout_s=2, notebook_timeout_s=30)
    rec, ws = run_cells(
        [("md", "# intro"), new_raw_cell("raw"), "import time\ntime.sleep(60)", "open('next.txt', 'w').write('ran')"],
        limits=limits,
    )
    assert rec["status"] == "timeout"
    assert rec["reason"].startswith(
        "code cell 1 (cell 3 of the notebook) exceeded the 2 s cell limit and was interrupted"
    ), rec["reason"]
    assert statuses(rec) == [(2, "timeout"), (3, "ok")]
    assert rec["cells_in_notebook"] == 4 and rec["cells_total"] == 2
    # not stopped before its limit (a lower bound holds on a loaded host; the reason says which limit)
    assert rec["cells"][0]["duration_s"] > limits.cell_timeout_s - 0.5
    assert (ws / "next.txt").read_text() == "ran"


def test_a_timeout_records_how_starved_the_kernel_was(run_cells):
    """A busy loop into the cell limit: execution.json says which share of the CPU time the kernel
    wanted it spent waiting for a CPU (a batch regrades alone only a starved timeout)."""
    rec, _ = run_cells(["while True:\n    pass"], limits=ExecutionLimits(cell_timeout_s=3, notebook_timeout_s=60))
    assert rec["status"] == "timeout"
    share = rec["cpu_denied_share"]
    assert isinstance(share, float) and 0.0 <= share <= 1.0, rec


def test_a_completed_run_records_no_starvation(run_cells):
    rec, _ = run_cells(["x = 1"])
    assert rec["status"] == "completed" and rec["cpu_denied_share"] is None


def test_loop_ignoring_sigint_is_stopped_by_the_deadline(run_cells):
    limits = ExecutionLimits(cell_timeout_s=2, notebook_timeout_s=3)
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)"
    rec, _ = run_cells([code, "x = 1"], limits=limits)  # the loop never ends: a limit ended the run
    assert rec["status"] == "timeout"
    assert "did not stop" in rec["reason"] or "limit" in rec["reason"]
    assert statuses(rec) == [(0, "timeout"), (1, "not_run")]
    assert rec["probe"] == "not_run"


def test_notebook_deadline_stops_a_sequence_of_slow_cells(run_cells):
    # two 1.2 s cells fit in the 6 s deadline even with seconds of overhead each on a loaded host;
    # eight do not (9.6 s of sleep), and none reaches the 5 s cell limit
    limits = ExecutionLimits(cell_timeout_s=5, notebook_timeout_s=6)
    rec, _ = run_cells(["import time\ntime.sleep(1.2)"] * 8, limits=limits)
    assert rec["status"] == "timeout"
    assert "6 s limit" in rec["reason"]
    got = [c["status"] for c in rec["cells"]]
    assert got[:2] == ["ok", "ok"] and got[-1] == "not_run" and "timeout" in got


def test_os_exit_is_a_dead_kernel(run_cells):
    rec, _ = run_cells(["x = 1", ("md", "## then"), "import os\nos._exit(3)", "y = 2"])
    assert rec["status"] == "kernel_died"
    assert "while running code cell 2 (cell 3 of the notebook)" in rec["reason"] and "exit code 3" in rec["reason"]
    assert statuses(rec) == [(0, "ok"), (2, "error"), (3, "not_run")]
    assert rec["cells"][1]["ename"] == "DeadKernelError" and rec["cells"][1]["code_cell"] == 2
    assert rec["probe"] == "not_run"


def test_sys_exit_is_an_error_not_a_death(run_cells):
    rec, _ = run_cells(["import sys\nsys.exit(0)", "y = 2"])
    assert rec["status"] == "completed"
    assert statuses(rec) == [(0, "error"), (1, "ok")]
    assert rec["cells"][0]["ename"] == "SystemExit"


FLOOD_RUNNER = r"""
import json, resource, sys
from pathlib import Path
from autograder.limits import ExecutionLimits
from autograder.sandbox import run_submission
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rec = run_submission(Path(sys.argv[1]), Path(sys.argv[2]), probe=None, slot=int(sys.argv[3]),
                     limits=ExecutionLimits(cell_timeout_s=60, notebook_timeout_s=120, output_cap_kb=64))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"record": rec, "grown_mb": (after - before) / 1024, "peak_mb": after / 1024}))
"""


@pytest.mark.kernel
def test_output_flood_is_capped_and_grader_memory_stays_small(tmp_path):
    """100 MB of prints (50 MB in lines, 50 MB in one write): outputs capped, the grader's peak RSS small."""
    from sandbox_helpers import worker_slot, write_notebook

    nb = write_notebook(
        tmp_path,
        [
            "for i in range(50_000):\n    print('x' * 1000)",
            "import sys\nsys.stdout.write('y' * 50_000_000)\nsys.stdout.flush()",
            "z = 1",
        ],
    )
    proc = subprocess.run(
        [sys.executable, "-c", FLOOD_RUNNER, str(nb), str(tmp_path / "ws"), str(worker_slot())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rec = out["record"]
    assert rec["status"] == "completed", rec["reason"]
    assert statuses(rec) == [(0, "ok"), (1, "ok"), (2, "ok")]
    assert rec["output_truncated"] is True
    assert out["grown_mb"] < 100, f"grader peak RSS grew by {out['grown_mb']:.0f} MB during a 100 MB flood"
    # The stated bound for the whole grader under a flood; the growth bound above is the sharp one.
    assert out["peak_mb"] < 1536, f"grader peak RSS {out['peak_mb']:.0f} MB"


def test_small_output_is_not_truncated(run_cells):
    rec, _ = run_cells(["print('hello')"])
    assert rec["output_truncated"] is False
