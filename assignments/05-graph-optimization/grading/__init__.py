"""Assignment 05's trusted grading code (the interface: autograder/grading_plugin.py).

``probe_cases()``: ``count_ops`` on hidden model files (``count_ops.py``), then the notebook's
``latency_ms`` beside the probe's own timer on a session of each level's saved graph
(``reported.py``). ``measure(ctx)``: the ``functions``, ``models`` and ``reported`` sections
(``RESULTS`` judged against the graphs the notebook saved per level, ``saved_levels.py``, and its
latencies against the notebook's own ``latency_ms``). ``measure_artifacts`` checks the saved model
beside the probe (it reads only that file); ``prepare`` builds the grader's own data while the
kernel runs. No ``calibration_samples`` and no leaderboard.
"""

from __future__ import annotations

from typing import Any

from autograder.lesson import measure_functions

from . import data
from .count_ops import FUNCTION, expect_count_ops
from .count_ops import probe_cases as count_ops_cases
from .optimized import measure_optimized
from .reported import grader_levels, measure_reported, measure_timing, timing_cases
from .saved_levels import measure_saved_levels


def probe_cases() -> list:
    """count_ops's hidden files, then the timing of each level (public data only)."""
    return count_ops_cases() + timing_cases()


def prepare(assignment) -> None:
    data.timing_batch()
    data.hidden_rows()


def measure_artifacts(ctx) -> dict[str, Any]:
    return measure_optimized(ctx.assignment, ctx.workspace, ctx.children)


def measure(ctx) -> dict[str, Any]:
    optimized = ctx.early if ctx.early is not None else measure_optimized(ctx.assignment, ctx.workspace, ctx.children)
    count_ops = [c for c in ctx.cases if c.function == FUNCTION]
    return {
        "functions": measure_functions(count_ops, ctx.probe, {FUNCTION: expect_count_ops}),
        "models": {"optimized": optimized},
        "reported": measure_reported(
            ctx.probe.reported,
            ctx.probe.reported_error,
            ctx.assignment.model_policy,
            measure_saved_levels(
                ctx.assignment, ctx.workspace, grader_levels(ctx.assignment.model_policy), ctx.children
            ),
            measure_timing(ctx.probe),
        ),
    }
