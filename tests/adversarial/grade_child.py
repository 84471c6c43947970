"""Grade one notebook in a fresh process and report that process's own peak memory.

``python grade_child.py NOTEBOOK OUT WORKSPACE SLOT CELL_TIMEOUT_S NOTEBOOK_TIMEOUT_S [LIMITS_JSON]``
prints one JSON line ``{"maxrss_kb": ..., "score": ...}`` (LIMITS_JSON: more ``[execution]`` limits). Used by the output-flood tests: the grader's
memory must not follow what the kernel prints. ``VmHWM`` of /proc/self/status counts this process
only (the kernel and the ONNX child are other processes); ``ru_maxrss`` would not: Linux keeps the
spawning test worker's peak across exec.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path


def peak_kb() -> int:
    """This process's own peak resident memory in kB (VmHWM: the high-water mark of its own address
    space, not one inherited across exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def main(argv: list[str]) -> int:
    from autograder.assignment import Assignment, load_assignment
    from autograder.pipeline import grade_notebook

    notebook, out, workspace, slot, cell_s, nb_s = argv[1:7]
    extra = json.loads(argv[7]) if len(argv) > 7 else {}
    base = load_assignment("07-quantization")
    config = copy.deepcopy(base.config)
    config["execution"] = {
        **config.get("execution", {}),
        "cell_timeout_s": float(cell_s),
        "notebook_timeout_s": float(nb_s),
        **extra,
    }
    assignment = Assignment(id=base.id, folder=base.folder, reference_folder=base.reference_folder, config=config)
    from autograder.errors import SandboxUnavailableError

    try:
        grade = grade_notebook(Path(notebook), assignment, Path(out), workspace=Path(workspace), slot=int(slot))
    except SandboxUnavailableError as e:  # the caller skips: this machine has no such jail
        print(json.dumps({"unavailable": str(e)}))
        return 0
    print(json.dumps({"maxrss_kb": peak_kb(), "score": grade["score"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
