"""Assignment 06's trusted grading code (the interface: autograder/grading_plugin.py).

``probe_cases()``: ``top_ops`` on hidden ONNX Runtime profiles and on the notebook's own
(``profiles.py``), ``make_session`` on the notebook's own model with several thread counts
(``sessions.py``), ``latency_table`` on the notebook's own model paired with the probe's own timer
(``latency.py``). ``measure(ctx)``: the ``functions`` section (``top_ops`` against the
reference's reading of each hidden profile), ``sessions`` (the thread count each returned session
asked for), ``latency_table`` (its shape and its timing against the probe's), ``profile``
(``artifacts/profile.json``, ``saved_profile.py``: an ONNX Runtime profile of the contract's model,
of the timing batch) and ``reported`` (``RESULTS`` judged as the
notebook's own measurements, ``reported.py``). ``measure_artifacts`` reads the profile beside the
probe (it reads only that file); ``prepare`` builds the contract's model while the kernel runs. No
``calibration_samples`` and no leaderboard.
"""

from __future__ import annotations

from typing import Any

from autograder.lesson import measure_functions

from . import data as data
from . import latency, model, profiles, sessions
from .model import TOP_K
from .reported import measure_reported
from .saved_profile import PATH, measure_saved_profile


def probe_cases() -> list:
    return profiles.probe_cases() + [profiles.own_case(PATH, TOP_K)] + sessions.probe_cases() + latency.probe_cases()


def prepare(assignment) -> None:
    """Build the contract's model and public data while the kernel runs (deployment data only)."""
    data.public_split()
    model.node_names()


def measure_artifacts(ctx) -> dict[str, Any]:
    return measure_saved_profile(ctx.workspace)


def measure(ctx) -> dict[str, Any]:
    profile = ctx.early if ctx.early is not None else measure_saved_profile(ctx.workspace)
    rerun = latency.measure_latency_table(ctx.probe)
    return {
        "functions": measure_functions(
            [c for c in ctx.cases if c.function == profiles.FUNCTION and c.group != profiles.OWN_GROUP],
            ctx.probe,
            {profiles.FUNCTION: profiles.expect_top_ops},
        ),
        "sessions": sessions.measure_sessions(ctx.cases, ctx.probe),
        "latency_table": rerun,
        "profile": profile,
        "reported": measure_reported(
            ctx.probe.reported,
            ctx.probe.reported_error,
            ctx.workspace,
            profile,
            rerun,
            ctx.probe.cases.get(profiles.OWN_CASE),
        ),
    }
