"""Assignment 07's trusted grading code: the probe's hidden cases and the measurements.

The core calls it through the interface of autograder/grading_plugin.py: ``probe_cases()`` (what
the probe calls in the kernel), ``measure(ctx)`` (the ``functions``, ``models`` and ``reported``
sections of measurements.json), and the optional ``prepare``, ``measure_artifacts`` (the models,
measured while the probe runs), ``calibration_samples`` and ``leaderboard``. Everything here runs
in the grader, outside the jail, and reads the submission only as data.
"""

from __future__ import annotations

from typing import Any

from . import data
from .functions import measure_functions, warm_references
from .figure import figure_section
from .functions import probe_cases as probe_cases
from .models import measure_models
from .reported import measure_reported

# The Gradescope leaderboard ranks the smallest int8 model that kept its accuracy: the model of
# each of these checks, when the check's "accuracy drop" part passed.
LEADERBOARD_MODELS = {"dynamic_model": "int8_dynamic", "static_model": "int8_qdq"}
LEADERBOARD_PART = "accuracy drop"


def prepare(assignment) -> None:
    """Build the public and hidden data sets and the reference answers' sessions ahead of time (the
    pipeline calls this in a background thread while the kernel runs, so measuring starts warm)."""
    data.public_split()
    data.hidden_split(assignment)
    warm_references()


def measure_artifacts(ctx) -> dict[str, Any]:
    """The three models measured (the ``models`` section, and each model's worker run for the
    figure): the pipeline calls this while the probe runs, on the working directory frozen before it."""
    runs: dict[str, Any] = {}
    models = measure_models(ctx.assignment, ctx.workspace, runs=runs, children=getattr(ctx, "children", None))
    return {"models": models, "runs": runs}


def measure(ctx) -> dict[str, Any]:
    """The ``functions``, ``models``, ``reported`` and ``figure`` sections of measurements.json."""
    early = getattr(ctx, "early", None) or measure_artifacts(ctx)
    models, runs = early["models"], early["runs"]
    return {
        "functions": measure_functions(ctx.cases, ctx.probe),
        "models": models,
        "reported": measure_reported(
            ctx.assignment, ctx.workspace, ctx.probe.reported, ctx.probe.reported_error, models
        ),
        "figure": figure_section(runs, models, data.public_split()),
    }


def calibration_samples(ctx) -> list[dict[str, Any]]:
    """One more sample of every ``models.*`` measurement per calibration run: the run's artifacts
    measured on the hidden split of another secret (``calibrate`` makes one current for this
    call), so each model tolerance sees two hidden test sets."""
    return [{"models": measure_models(ctx.assignment, ctx.workspace)}]


def leaderboard(grade: dict[str, Any], measurements: dict[str, Any]) -> list[dict[str, Any]]:
    """ "Smallest int8 model (KB)" among the int8 models that kept their accuracy, and its accuracy."""
    passed = {
        (c.get("id"), p.get("name")) for c in grade.get("checks", []) for p in c.get("parts", []) if p.get("passed")
    }
    models = measurements.get("models") if isinstance(measurements.get("models"), dict) else {}
    kept = []
    for check, name in LEADERBOARD_MODELS.items():
        model = models.get(name)
        if (check, LEADERBOARD_PART) in passed and isinstance(model, dict) and isinstance(model.get("size_bytes"), int):
            kept.append((model["size_bytes"], name, model.get("accuracy")))
    if not kept:
        return []
    size, _name, accuracy = min(kept)
    entries: list[dict[str, Any]] = [
        {"name": "Smallest int8 model (KB)", "value": round(size / 1024, 1), "order": "asc"}
    ]
    if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool):
        entries.append({"name": "int8 accuracy", "value": round(float(accuracy), 4)})
    return entries
