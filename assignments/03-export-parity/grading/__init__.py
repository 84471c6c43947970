"""Assignment 03's trusted grading code (the interface: autograder/grading_plugin.py).

``probe_cases()``: parity_report on the grader's inputs, then sklearn_probabilities on X_test.
``measure(ctx)``: the ``functions``, ``models``, ``parity`` and ``reported`` sections. ``prepare``
builds the public data and fits the contract's pipeline (the reference of parity) while the
kernel runs. No ``calibration_samples`` and no leaderboard.
"""

from __future__ import annotations

from typing import Any

from . import data
from .functions import measure_functions, parity_arithmetic
from .functions import probe_cases as probe_cases
from .parity import measure_model, measure_parity, measure_reported


def prepare(assignment) -> None:
    # the hidden parity sets are the submission's (drawn with its probe cases), not the deployment's
    data.public_split()
    data.contract_test_probabilities()


def measure(ctx) -> dict[str, Any]:
    model, run = measure_model(ctx.assignment, ctx.workspace, ctx.children)
    parity = measure_parity(ctx.cases, ctx.probe, model, run, parity_arithmetic(ctx.cases, ctx.probe))
    return {
        "functions": measure_functions(ctx.cases, ctx.probe),
        "models": {"pipeline": model},
        "parity": parity,
        "reported": measure_reported(ctx.probe.reported, ctx.probe.reported_error, parity),
    }
