"""Disk the kernel counts: files a notebook creates, ``posix_fallocate``s and unlinks while it
keeps them open (or mapped) are in no folder, yet they fill the disk as long as they are held.

Where the grader may not mount a capped tmpfs (Gradescope's container: no ``CAP_SYS_ADMIN``),
the workspace watchdog once listed folders only: 1,518 MB were held for 5 s past the 256 MB cap,
status ``completed``. It now also counts what the jail's processes hold open or mapped after
deleting it (``autograder/jail/disk_watchdog.py``), and stops the kernel with the same reason
as any other write past the cap.

Bounded: a 64 MB cap, 200 MB held (four 50 MB files), a 30 s sleep that only a watchdog ends
early. Here the grader runs without ``CAP_SYS_ADMIN`` and ``CAP_SYS_PTRACE`` (as in Docker) in a
private mount namespace, under the forced fallback; inside the simulated Gradescope container
(tests/gradescope/test_gradescope_container_adversarial.py runs this file there) it runs as is.
"""

from __future__ import annotations

import pytest

from advkit import can_unshare_mounts, grade_in_child, isolation_of
from autograder.tree_walk import remove_tree

pytestmark = pytest.mark.slow

CAP_MB, FILES, EACH_MB = 64, 4, 50
HOLD = r"""
import mmap, os, time
held = []
for i in range({files}):
    name = "held%d.bin" % i
    fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, {each} << 20)
    os.unlink(name)
    if "{how}" == "mapped":
        held.append(mmap.mmap(fd, {each} << 20))
        os.close(fd)
    else:
        held.append(fd)
_record("held", {{"files": len(held)}})
time.sleep(30)
"""
# Docker's capabilities lack these: no tmpfs can be mounted, and /proc of the sandbox uid's
# processes is read with that uid's file-system ids (the watchdog's thread takes them).
AS_IN_DOCKER = 'set -- setpriv --bounding-set=-sys_admin,-sys_ptrace --inh-caps=-sys_admin,-sys_ptrace -- "$@"\n'


@pytest.mark.kernel
@pytest.mark.parametrize("how", ["open", "mapped"])
def test_deleted_files_held_past_the_cap_stop_the_kernel(tmp_path, results_validator, how):
    cell = HOLD.format(files=FILES, each=EACH_MB, how=how)
    limits = {"workspace_mb": CAP_MB}
    if can_unshare_mounts():
        g, _ = grade_in_child(
            tmp_path,
            [cell],
            cell_s=60,
            notebook_s=90,
            timeout_s=300,
            limits=limits,
            jail_mode="fallback",
            setup=AS_IN_DOCKER,
        )
    else:  # Gradescope's container: no CAP_SYS_ADMIN already, the fallback is the only jail
        g, _ = grade_in_child(tmp_path, [cell], cell_s=60, notebook_s=90, timeout_s=300, limits=limits)
    try:
        results_validator(g.results)
        iso = isolation_of(g)
        assert iso.get("mode") == "fallback" and "workspace_watchdog" in iso.get("layers", []), iso
        assert g.execution["status"] == "kernel_died", g.execution_brief()
        reason = g.execution["reason"]
        assert "deleted but still open" in reason and f"more than its {CAP_MB} MB" in reason, reason
        assert "deleted but still open" in g.student_text(), "the student is not told why"
    finally:
        remove_tree(g.workspace.parent, ignore_errors=True)
