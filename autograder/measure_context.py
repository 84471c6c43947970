"""What an assignment's ``measure_artifacts(ctx)`` and ``measure(ctx)`` receive (above the assignment and
measure layers: it holds an :class:`Assignment` and the measuring children)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .assignment import Assignment
from .probe_format import ProbeCase, ProbeResult
from .measure.warm_pool import MeasuringChildren


@dataclass
class MeasureContext:
    assignment: Assignment
    workspace: Path  # the submission's working directory (untrusted content; read via safe_files)
    cases: list[ProbeCase]  # the probe cases that were sent to the kernel
    probe: ProbeResult  # what the probe recorded
    execution: dict[str, Any]  # execution.json
    early: Any = None  # what measure_artifacts(ctx) returned while the probe ran (None: not run, or failed)
    children: MeasuringChildren | None = None  # this submission's measuring children (run_model_worker's children=)


@dataclass
class ArtifactContext:
    """What ``measure_artifacts(ctx)`` receives: the working directory as the notebook left it,
    frozen before the probe's first hidden input (the grader's own copy, read while the probe runs)."""

    assignment: Assignment
    workspace: Path  # that copy (untrusted content; read via safe_files); gone once the call returns
    children: MeasuringChildren | None = None  # this submission's measuring children (run_model_worker's children=)
