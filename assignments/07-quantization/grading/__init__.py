"""Assignment 07's trusted grading code: the probe's hidden cases and the measurements.

The core calls exactly two functions: ``probe_cases()`` (what the probe calls in the kernel)
and ``measure(ctx)`` (the assignment's sections of measurements.json). Everything here runs in
the grader, outside the jail, and reads the submission only as data.
"""

from __future__ import annotations

from typing import Any

from . import data
from .functions import measure_functions
from .functions import probe_cases as probe_cases
from .models import measure_models, measure_reported


def prepare(assignment) -> None:
    """Build the public and hidden data sets ahead of time (the pipeline calls this in a
    background thread while the kernel runs, so measuring starts warm)."""
    data.public_split()
    data.hidden_split(assignment)


def measure(ctx) -> dict[str, Any]:
    """The ``functions``, ``models`` and ``reported`` sections of measurements.json."""
    models = measure_models(ctx.assignment, ctx.workspace)
    return {
        "functions": measure_functions(ctx.cases, ctx.probe),
        "models": models,
        "reported": measure_reported(ctx.assignment, ctx.workspace, ctx.probe.reported,
                                     ctx.probe.reported_error, models),
    }
