"""The limits of one submission, as a value: ``ExecutionLimits`` (``[execution]`` in assignment.toml).

A module of values at the bottom of the import graph (standard library only): the jail, the
kernel and the workspace take their limits from here without importing what loads an assignment
and its grading plugin (:mod:`autograder.assignment`, which builds one from the validated
``[execution]`` table, ``autograder/schemas/assignment.schema.json``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecutionLimits:
    """Time and resource limits for one submission, from ``[execution]`` in assignment.toml."""

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 600.0
    memory_mb: int = 4096
    output_cap_kb: int = 1024
    workspace_mb: int = 256  # total size of the working directory (a capped tmpfs, or a watchdog)
