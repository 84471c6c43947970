"""Hostile notebooks that try to kill the grader, or die in every way a kernel can.

The signals are sent from inside the jail only, and only when the kernel is not root: there
``kill(-1)`` reaches nothing but the jail's own pid namespace / sandbox uid. A root-owned sentinel
process started by the test must survive, and so must the grader (this test process): it goes on
to produce a grade.
"""

from __future__ import annotations

import subprocess

import psutil
import pytest

from advkit import require_mode

pytestmark = pytest.mark.slow

GUARD = """\
import os, signal
if os.getuid() == 0 or os.geteuid() == 0:
    _record("attack", "refused: the kernel runs as root, so the jail is broken")
    raise SystemExit("kernel runs as root")
"""

ATTACKS = {
    "kill_parent": "_record('attack', 'sent')\nos.kill(os.getppid(), signal.SIGKILL)",
    "kill_jpy_parent": (
        "pid = int(os.environ.get('JPY_PARENT_PID', '0') or 0)\n"
        "_record('attack', 'sent to %d' % pid if pid else 'no JPY_PARENT_PID')\n"
        "if pid:\n    os.kill(pid, signal.SIGKILL)"
    ),
    "kill_init": "_record('attack', 'sent')\nfor s in (signal.SIGTERM, signal.SIGKILL):\n    try:\n"
    "        os.kill(1, s)\n    except OSError:\n        pass",
    "kill_everything": "_record('attack', 'sent')\nos.kill(-1, signal.SIGKILL)",
    "kill_process_group": "_record('attack', 'sent')\nos.killpg(0, signal.SIGKILL)",
    "kill_every_visible_pid": (
        "_record('attack', 'sent')\nfor p in os.listdir('/proc'):\n"
        "    if p.isdigit() and int(p) != os.getpid():\n        try:\n"
        "            os.kill(int(p), signal.SIGKILL)\n        except OSError:\n            pass\n"
        "os.kill(os.getpid(), signal.SIGKILL)"
    ),
}


@pytest.fixture
def sentinel():
    """A root-owned process of the test: nothing from inside the jail may signal it."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_killing_the_grader_from_the_jail_fails(grade_cells, jail_check, jail_mode, sentinel, attack):
    g = grade_cells([GUARD + ATTACKS[attack], "x = 2"], name=f"kill-{attack}-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    assert str(g.record("attack")).startswith(("sent", "no JPY")), g.record("attack")
    assert sentinel.poll() is None, f"the root-owned sentinel (pid {sentinel.pid}) was killed from the jail"
    assert psutil.Process().is_running()
    assert g.execution["status"] in ("completed", "kernel_died"), g.execution_brief()


DEATHS = {
    # name: (source, status, later cells run)
    "os_exit": ("import os\nos._exit(0)", "kernel_died", False),
    "sys_exit": ("import sys\nsys.exit(1)", "completed", True),
    "exit_builtin": ("exit()", "completed", True),
    "segfault": ("import ctypes\nctypes.string_at(0)", "kernel_died", False),
    "abort": ("import os\nos.abort()", "kernel_died", False),
    "sigkill_self": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "kernel_died", False),
}


@pytest.mark.parametrize("death", sorted(DEATHS))
def test_kernel_death_is_a_graded_outcome(grade_cells, jail_check, death):
    """os._exit, sys.exit, exit(), a segfault, abort, SIGKILL: recorded, graded, no core file."""
    source, status, later_runs = DEATHS[death]
    g = grade_cells([source, "_record('after', True)"], name=f"death-{death}")
    jail_check(g)
    assert g.execution["status"] == status, g.execution_brief()
    assert g.has_record("after") == later_runs, f"cells after a {death}: ran={g.has_record('after')}"
    if status == "kernel_died":
        assert g.execution.get("reason"), "a dead kernel without a reason for the student"
        assert g.execution["probe"] != "completed"
    cores = [p.name for p in g.workspace.iterdir() if p.name.startswith("core")]
    assert not cores, f"core dumps in the workspace: {cores}"
