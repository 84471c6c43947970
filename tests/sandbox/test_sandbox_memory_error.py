"""A single allocation larger than the jail's memory budget is a MemoryError in the student's code.

With a cgroup, the tree's memory is the cgroup's and its OOM killer ends the kernel: every cell
after it, and the probe, would not run, so functions defined earlier would score nothing. Beside it
``RLIMIT_DATA`` of the whole budget makes an allocation that could never fit fail in the cell, as
Python does; without a cgroup ``RLIMIT_AS`` does the same. Either way the kernel survives, the cells
after it run, and the cell's error is the student's own.

Real kernels in the real jail. The budget is 1 GB and the allocations 1.6 GB and 8 GB, and the cell
limit 120 s: the memory limit fires first even on a much slower machine.
"""

from __future__ import annotations

import pytest
from sandbox_helpers import worker_slot, write_notebook

from autograder.limits import ExecutionLimits
from autograder.sandbox import run_submission

pytestmark = pytest.mark.slow

LIMITS = ExecutionLimits(cell_timeout_s=120, notebook_timeout_s=300, memory_mb=1024, output_cap_kb=256)

ALLOCATIONS = {
    "np.ones(1_000_000_000)": "8 GB of float64 ones",
    "np.ones(200_000_000)": "1.6 GB: over the 1 GB budget, far under the host's memory",
    "bytearray(3 << 30)": "3 GB of zeroed bytes",
}


@pytest.mark.kernel
@pytest.mark.parametrize("allocation", sorted(ALLOCATIONS))
def test_an_oversized_allocation_raises_memory_error_and_the_kernel_survives(tmp_path, allocation):
    cells = [
        "import numpy as np\ndef quantize(x):\n    return np.rint(x)",
        f"try:\n    big = {allocation}\n    guarded = 'allocated'\nexcept MemoryError:\n    guarded = 'MemoryError'",
        f"unguarded = {allocation}",  # raises: the cell errors, nothing dies
        "open('after.txt', 'w').write(f'{guarded} {quantize(2.5)}')",
    ]
    rec = run_submission(
        write_notebook(tmp_path, cells), tmp_path / "ws", limits=LIMITS, probe=None, slot=worker_slot()
    )
    assert rec["status"] == "completed", rec["reason"]
    assert [c["status"] for c in rec["cells"]] == ["ok", "ok", "error", "ok"], rec["cells"]
    assert rec["cells"][2]["ename"] == "MemoryError", rec["cells"][2]
    assert (tmp_path / "ws" / "after.txt").read_text() == "MemoryError 2.0"
    layers = rec["isolation"]["layers"]
    assert "cgroup_memory" in layers or "rlimits" in layers, layers
