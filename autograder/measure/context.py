"""What an assignment's ``measure(ctx)`` receives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assignment import Assignment
from ..probe_format import ProbeCase, ProbeResult


@dataclass
class MeasureContext:
    assignment: Assignment
    workspace: Path          # the submission's working directory (untrusted content; read via safe_files)
    cases: list[ProbeCase]   # the probe cases that were sent to the kernel
    probe: ProbeResult       # what the probe recorded
    execution: dict[str, Any]  # execution.json
