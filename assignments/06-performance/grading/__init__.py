"""Assignment 06's trusted grading code (the interface: autograder/grading_plugin.py).

``probe_cases()``: ``top_ops`` on hidden ONNX Runtime profiles (``profiles.py``), ``make_session``
on the notebook's own model with several thread counts (``sessions.py``). ``measure(ctx)``: the
``functions`` section (``top_ops`` against the reference's reading of each profile), ``sessions``
(the thread count each returned session asked for), the
``profile`` section (``artifacts/profile.json`` the notebook saved, ``saved_profile.py``: an ONNX
Runtime profile of the contract's model, of the timing batch, with the intra-op thread count
``make_session`` was asked for) and ``reported`` (``RESULTS`` judged as the notebook's own
measurements, ``reported.py``). ``measure_artifacts`` reads the profile beside the probe (it reads
only that file); ``prepare`` times the contract model while the kernel runs. No
``calibration_samples`` and no leaderboard.
"""

from __future__ import annotations

from typing import Any

from autograder.lesson import measure_functions

from . import data as data
from . import profiles, sessions
from .reported import grader_timings, measure_reported
from .model import TOP_K
from .saved_profile import PATH, measure_saved_profile


def probe_cases() -> list:
    return profiles.probe_cases() + [profiles.own_case(PATH, TOP_K)] + sessions.probe_cases()


def prepare(assignment) -> None:
    grader_timings(assignment.model_policy)


def measure_artifacts(ctx) -> dict[str, Any]:
    return measure_saved_profile(ctx.workspace)


def measure(ctx) -> dict[str, Any]:
    profile = ctx.early if ctx.early is not None else measure_saved_profile(ctx.workspace)
    return {
        "functions": measure_functions(
            [c for c in ctx.cases if c.function == profiles.FUNCTION and c.group != profiles.OWN_GROUP],
            ctx.probe,
            {profiles.FUNCTION: profiles.expect_top_ops},
        ),
        "sessions": sessions.measure_sessions(ctx.cases, ctx.probe),
        "profile": profile,
        "reported": measure_reported(
            ctx.probe.reported,
            ctx.probe.reported_error,
            ctx.workspace,
            ctx.assignment.model_policy,
            profile,
            ctx.probe.cases.get(profiles.OWN_CASE),
        ),
    }
