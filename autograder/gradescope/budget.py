"""The Gradescope settings an assignment needs: the autograder timeout and memory, computed from
the grader's hard limits so that a notebook that runs to every one of them still gets a result.

Time: the worst legal notebook takes the kernel's startup limit, the notebook deadline, the
probe's limit and the grader's recovery slack (the bound :mod:`autograder.sandbox.execute` puts
on one execution), then one ONNX measuring child per artifact at its wall-clock limit, then the
grader's own work (measured: see bench/RESULTS.md, "Gradescope container"). A margin on top,
rounded up to whole minutes, is the timeout to set.

Memory: the kernel may use address space up to the assignment's ``memory_mb`` (RLIMIT_AS) and
the grader's own processes add their measured peak; with at least that much, the kernel's own
limit fires (a clean ``MemoryError``) before the container's OOM killer does.

``autograder gradescope build`` prints these numbers, and docs/GRADESCOPE.md's "Settings" line is
this module's :func:`settings_line` (a test keeps them equal).

Every number above follows from the lesson's own limits (``[execution]``, its artifacts, its probe
cases) and the grader's own overhead; none is a measurement of the lesson's reference solution.
Whether a lesson's reference alone fits Gradescope's defaults (768 MB, 0.5 CPU) is therefore not
claimed here: :func:`explain` says so, naming the command that measures it for that lesson
(``gradescope simulate``). Only lesson 07's has been measured (bench/RESULTS.md, "Gradescope
container"), where the grader's constants below come from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..assignment import Assignment
from ..measure.onnx_load import LoadLimits
from ..sandbox import RECOVER_GRACE_S, STARTUP_TIMEOUT_S, probe_budget_s

# The grader's own work around one notebook at Gradescope's 0.5 CPU (interpreter start, hidden
# data, judging, reports, kernel shutdown, reaping): the reference spends ~4 s outside its
# notebook there (bench/RESULTS.md); SHUTDOWN_S and the reaper's 5 s are its worst case.
GRADER_OVERHEAD_S = 45.0
# The peak of the grader's own processes (grader and ONNX measuring child, without the kernel):
# the reference's whole process tree peaked at ~340 MB in a 768 MB container, kernel included.
GRADER_MEMORY_MB = 512
TIME_MARGIN = 0.10  # on the sum of the limits, then rounded up to a whole minute
MEMORY_STEP_MB = 256
GRADESCOPE_MAX_TIMEOUT_S = 40 * 60


@dataclass(frozen=True)
class Budget:
    assignment_id: str
    execution_s: float  # startup + notebook + probe + slack: one execution's hard bound
    measuring_s: float  # one measuring child per artifact, each at its wall-clock limit
    grader_s: float
    timeout_s: int  # what to set: the sum plus the margin, in whole minutes
    kernel_memory_mb: int
    memory_mb: int  # what to set

    @property
    def ceiling_s(self) -> float:
        return self.execution_s + self.measuring_s + self.grader_s

    @property
    def timeout_min(self) -> int:
        return self.timeout_s // 60


def execution_bound_s(assignment: Assignment) -> float:
    """The longest one execution may take: what :mod:`autograder.sandbox.execute` allows."""
    limits = assignment.limits
    probe_s = probe_budget_s(limits, len(assignment.grading.probe_cases()))
    return STARTUP_TIMEOUT_S + float(limits.notebook_timeout_s) + probe_s + RECOVER_GRACE_S + 10


def budget(assignment: Assignment, load_limits: LoadLimits = LoadLimits()) -> Budget:
    execution_s = execution_bound_s(assignment)
    measuring_s = len(assignment.artifacts) * load_limits.timeout_s
    ceiling = execution_s + measuring_s + GRADER_OVERHEAD_S
    timeout_s = int(math.ceil(ceiling * (1 + TIME_MARGIN) / 60) * 60)
    kernel_mb = int(assignment.limits.memory_mb)
    memory_mb = int(math.ceil((kernel_mb + GRADER_MEMORY_MB) / MEMORY_STEP_MB) * MEMORY_STEP_MB)
    return Budget(assignment.id, execution_s, measuring_s, GRADER_OVERHEAD_S, timeout_s, kernel_mb, memory_mb)


def _gb(mb: int) -> str:
    return f"{mb / 1024:g} GB"


def settings_line(b: Budget) -> str:
    """The one line docs/GRADESCOPE.md's "Settings" shows (and ``gradescope build`` prints)."""
    return (
        f"autograder timeout {b.timeout_min} min and memory {_gb(b.memory_mb)} "
        f"(the worst legal notebook needs {b.ceiling_s:.0f} s: {b.execution_s:.0f} s to execute, "
        f"{b.measuring_s:.0f} s to measure its models, {b.grader_s:.0f} s of grading; the kernel may "
        f"use {_gb(b.kernel_memory_mb)})"
    )


def explain(b: Budget) -> list[str]:
    """The lines ``gradescope build`` prints for the instructor."""
    lines = [f"Gradescope settings: {settings_line(b)}."]
    if b.timeout_s > GRADESCOPE_MAX_TIMEOUT_S:
        lines.append(
            f"warning: {b.timeout_min} min is above Gradescope's 40 min maximum: lower the assignment's "
            "notebook_timeout_s"
        )
    lines.append(
        f"These settings follow from the limits of {b.assignment_id}; its reference solution was not run "
        "here, so whether it alone fits Gradescope's defaults (768 MB, 0.5 CPU) is not known: measure it "
        f"with `autograder gradescope simulate <the zip> reference/{b.assignment_id}/solution.ipynb` "
        "(wall time and peak memory)."
    )
    return lines
