"""``autograder calibrate ID``: derive ``tolerances.toml`` from runs of the reference solution.

Nothing in tolerances.toml is typed by hand. For each run ``i`` the reference solution
(``reference/<id>/solution.ipynb``) gets one injected cell after its parameter cell that sets
each parameter of ``calibration.toml``'s ``[parameters]`` to ``value + i`` (new seeds; without
the table every run is the unchanged solution), and goes through the real pipeline, jail included
(``pipeline.execute_and_measure``): the measurements are exactly what a student's notebook would
get. The assignment's optional ``calibration_samples(ctx)`` hook (autograder/grading_plugin.py)
may then add more samples from the same run, e.g. its artifacts measured on the hidden data seed
``[hidden] first_extra_seed + i``; a tolerance whose measure path starts with a section of such a
sample gets it as well (lesson 07: every ``models.*`` tolerance sees two hidden test sets per run).

Which tolerances, from which measurements and in which direction comes from the rubric: every
part with ``tolerance = "key"`` names its ``measure`` path and its ``op``. How a worst case
becomes a bound (margins, granularity steps) is stated in ``reference/<id>/calibration.toml``;
without that file the defaults hold (margin 2, no steps, no parameters, extra seeds from 10000).
Each tolerance is written as ``{value = …, worst = …, rule = "…", …}`` (the judge reads
``value``), with a ``[provenance]`` table: runs, seeds, versions, date, margins, command.

Finally every run is judged with the new tolerances: a reference run that loses points is
reported (a structural part failing for some seed means the rubric, not the tolerance, is wrong).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import math
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nbformat

from ..assignment import Assignment, load_toml
from ..errors import AssignmentError
from ..grading_plugin import CalibrationContext

CALIBRATION_FILE = "calibration.toml"
SOLUTION_FILE = "solution.ipynb"
DEFAULT_FIRST_EXTRA_SEED = 10_000
SIGNIFICANT_DIGITS = 4
_UPPER_OPS = ("<=", "<")
_LOWER_OPS = (">=", ">")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Spec:
    """How one tolerance is derived: from which measurement, in which direction, with what margin."""

    key: str
    measure: str
    direction: str               # "upper" | "lower"
    margin: float
    step_from: str | None = None  # the measurement whose observed values reveal the granularity
    step: float | None = None     # or the granularity itself, when it is known (1 / number of rows)


# ── what to derive ────────────────────────────────────────────────────────────────────────────

def tolerance_specs(rubric: dict[str, Any], config: dict[str, Any]) -> list[Spec]:
    """One spec per distinct tolerance key of the rubric."""
    default = float(config.get("margin", 2.0))
    margins, steps = config.get("margins", {}), config.get("steps", {})
    specs: dict[str, Spec] = {}
    for check in rubric.get("checks", []):
        for part in check.get("parts", []):
            key = part.get("tolerance")
            if not key:
                continue
            op = part.get("op")
            if op not in _UPPER_OPS + _LOWER_OPS:
                raise AssignmentError(f"rubric part '{part.get('name')}': a tolerance needs an ordering op, not {op!r}")
            step = steps.get(key)
            if step is not None and (isinstance(step, bool) or not isinstance(step, (str, int, float))):
                raise AssignmentError(f"{CALIBRATION_FILE} [steps] '{key}': a measurement path or a number, not {step!r}")
            spec = Spec(key, part["measure"], "upper" if op in _UPPER_OPS else "lower",
                        float(margins.get(key, default)), step if isinstance(step, str) else None,
                        float(step) if isinstance(step, (int, float)) else None)
            if key in specs and specs[key] != spec:
                raise AssignmentError(f"tolerance '{key}' is used by parts with different measures or directions")
            specs[key] = spec
    unknown = sorted((set(margins) | set(steps)) - set(specs))
    if unknown:
        raise AssignmentError(f"{CALIBRATION_FILE} names tolerances the rubric does not use: {', '.join(unknown)}")
    return sorted(specs.values(), key=lambda s: s.key)


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (keys may contain dots; longest key first), or None."""
    from ..judge import lookup as judge_lookup

    value, reason = judge_lookup(data, path)
    return None if reason is not None else value


# ── running the reference ─────────────────────────────────────────────────────────────────────

def inject_parameters(nb: nbformat.NotebookNode, values: dict[str, int]) -> nbformat.NotebookNode:
    """A copy of ``nb`` with a cell setting ``values`` right after its parameter cell."""
    nb = copy.deepcopy(nb)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        pattern = re.compile(rf"^\s*{re.escape(next(iter(values)))}\s*=", re.M)
        tagged = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and pattern.search(c.source)]
    if not tagged:
        raise AssignmentError(f"the reference has no parameter cell setting {', '.join(values)}")
    source = "# injected by `autograder calibrate`\n" + "\n".join(f"{k} = {v!r}" for k, v in values.items())
    nb.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(source))
    return nb


Run = tuple[dict[str, Any], list[dict[str, Any]]]   # (measurements.json, calibration_samples)


def run_reference(assignment: Assignment, nb: nbformat.NotebookNode, workdir: Path, run: int, extra_seed: int,
                  unsafe_no_sandbox: bool) -> Run:
    """(measurements.json of one run, the assignment's extra samples of that run)."""
    from ..pipeline import execute_and_measure

    notebook = workdir / "reference.ipynb"
    nbformat.write(nb, notebook)
    out, workspace = workdir / "out", workdir / "workspace"
    out.mkdir()
    measurements = execute_and_measure(notebook, assignment, out, workspace, unsafe_no_sandbox=unsafe_no_sandbox)
    ctx = CalibrationContext(assignment=assignment, workspace=workspace, run=run, hidden_seed=extra_seed,
                             measurements=measurements)
    return measurements, assignment.grading.calibration_samples(ctx)


def samples_for(path: str, runs: list[Run]) -> list[Any]:
    """Every run's value at ``path``, and every extra sample's whose sections hold the path's first key."""
    values = []
    section = path.split(".", 1)[0]
    for main, extras in runs:
        values.append(lookup(main, path))
        values.extend(lookup(extra, path) for extra in extras if section in extra)
    missing = sum(v is None for v in values)
    if missing:
        raise AssignmentError(f"the reference solution has no measurement {path} in {missing} of "
                              f"{len(values)} samples: fix the reference before calibrating")
    return values


# ── deriving ──────────────────────────────────────────────────────────────────────────────────

def step_of(values: list[float]) -> float:
    """The granularity of a measurement: the largest step of which every observed value is a
    whole multiple, to 1e-9 (accuracies on 500 test points give 0.002). 0 when all values are 0."""
    ticks = [round(abs(float(v)) * 1e9) for v in values]
    step = 0
    for t in ticks:
        step = math.gcd(step, t)
    return step / 1e9


def round_outward(x: float, direction: str) -> float:
    """``x`` to SIGNIFICANT_DIGITS digits, rounded away from the samples (never tighter)."""
    if x == 0 or not math.isfinite(x):
        return x
    exponent = math.floor(math.log10(abs(x))) - SIGNIFICANT_DIGITS + 1
    scaled = round(x / 10 ** exponent, 9)
    scaled = math.ceil(scaled) if direction == "upper" else math.floor(scaled)
    return float(f"{scaled}e{exponent}")   # exact decimal digits, so the TOML shows e.g. 0.984


def derive(spec: Spec, samples: list[Any], step: float) -> dict[str, Any]:
    """The tolerance of ``spec`` from its samples, with how it was obtained."""
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in samples):
        raise AssignmentError(f"tolerance '{spec.key}': {spec.measure} is not numeric in every run")
    is_count = all(isinstance(v, int) for v in samples)
    worst = max(samples) if spec.direction == "upper" else min(samples)
    entry: dict[str, Any] = {"measure": spec.measure, "samples": len(samples), "worst": worst,
                             "median": sorted(samples)[len(samples) // 2]}
    if spec.direction == "upper":
        value = round_outward((worst + step) * spec.margin, "upper")
        rule = f"(worst + step {step:g}) × {spec.margin:g}"
    elif is_count:
        value, rule = worst, "worst count (the reference agrees on every case; no margin)"
    else:
        value = max(0.0, round_outward(1.0 - ((1.0 - worst) + step) * spec.margin, "lower"))
        rule = f"1 − ((1 − worst) + step {step:g}) × {spec.margin:g}"
    entry.update(value=value, rule=rule)
    if spec.step_from:
        entry["step_from"] = spec.step_from
    elif spec.step is not None:
        entry["step"] = spec.step
    return {"value": entry.pop("value"), **entry}


def derive_all(specs: list[Spec], runs: list[Run]) -> dict[str, dict[str, Any]]:
    derived = {}
    for spec in specs:
        step = spec.step if spec.step is not None else step_of(samples_for(spec.step_from, runs)) if spec.step_from else 0.0
        derived[spec.key] = derive(spec, samples_for(spec.measure, runs), step)
    return derived


# ── writing ───────────────────────────────────────────────────────────────────────────────────

def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {v!r} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def render_tolerances(derived: dict[str, dict[str, Any]], provenance: dict[str, Any]) -> str:
    """tolerances.toml: a header, [provenance], then one table per check id (nested by dots)."""
    lines = ["# Tolerances of the grader's checks, generated by `autograder calibrate` from runs of the",
             "# reference solution. Do not edit by hand: re-run the command (see README.md and",
             "# calibration.toml next to this file for the rules). The judge reads each key's `value`.",
             "", "[provenance]"]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in provenance.items()]
    tables: dict[str, list[str]] = {}
    for key, entry in sorted(derived.items()):
        table, _, leaf = key.rpartition(".")
        tables.setdefault(table, []).append(f"{_toml_key(leaf)} = {_toml_value(entry)}")
    for table, entries in tables.items():
        header = ".".join(_toml_key(p) for p in table.split(".")) if table else ""
        lines += ["", f"[{header}]"] + entries if header else [""] + entries
    return "\n".join(lines) + "\n"


def provenance(assignment: Assignment, runs: int, params: list[dict[str, int]], hidden_seeds: list[int],
               config: dict[str, Any], solution: Path, duration_s: float, scores: list[float]) -> dict[str, Any]:
    return {
        "command": f"autograder calibrate {assignment.id} --runs {runs}",
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "runs": runs,
        "parameters": {k: [p[k] for p in params] for k in (params[0] if params else {})},
        "hidden_seeds": hidden_seeds,
        "margin": float(config.get("margin", 2.0)),
        "margins": {k: float(v) for k, v in config.get("margins", {}).items()},
        "rules": "upper: (worst + step) × margin, rounded up; lower share: 1 − ((1 − worst) + step) × margin, "
                 "rounded down; lower count: worst (see calibration.toml)",
        "solution_sha256": hashlib.sha256(solution.read_bytes()).hexdigest(),
        "assignment_fingerprint": assignment.fingerprint(),
        "versions": assignment.environment(),
        "duration_s": round(duration_s, 1),
        "reference_scores": scores,
    }


# ── the command ───────────────────────────────────────────────────────────────────────────────

def run_parameters(config: dict[str, Any], i: int) -> dict[str, int]:
    """The parameter cell of run ``i``: each ``[parameters]`` value + i (empty: the solution as it is)."""
    params = config.get("parameters", {})
    if not isinstance(params, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in params.values()):
        raise AssignmentError(f"{CALIBRATION_FILE}: [parameters] maps the notebook's seed names to integers")
    return {str(k): int(v) + i for k, v in params.items()}


def load_calibration_config(assignment: Assignment) -> dict[str, Any]:
    """reference/<id>/calibration.toml, or the defaults when there is none."""
    path = assignment.reference_folder / CALIBRATION_FILE
    return load_toml(path) if path.is_file() else {}


def calibrate(assignment: Assignment, *, runs: int = 10, output: Path | None = None,
              unsafe_no_sandbox: bool = False, progress: Progress | None = None) -> Path:
    """Run the reference ``runs`` times, derive every tolerance, write tolerances.toml; returns its path."""
    from ..judge import judge

    say = progress or (lambda _msg: None)
    if runs < 1:
        raise AssignmentError("calibrate needs at least one run")
    config = load_calibration_config(assignment)
    specs = tolerance_specs(assignment.rubric(), config)
    solution = assignment.reference_folder / SOLUTION_FILE
    if not solution.is_file():
        raise AssignmentError(f"{solution} is missing: run `autograder build {assignment.id}` first")
    base_nb = nbformat.read(solution, as_version=4)
    first_extra = int(config.get("hidden", {}).get("first_extra_seed", DEFAULT_FIRST_EXTRA_SEED))
    data_seed = assignment.config.get("hidden", {}).get("data_seed")
    results, params = [], []
    hidden_seeds = [] if data_seed is None else [int(data_seed)]
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="autograder-calibrate-"))
    try:
        for i in range(runs):
            values = run_parameters(config, i)
            t0 = time.monotonic()
            workdir = tmp / f"run{i}"
            workdir.mkdir()
            nb = inject_parameters(base_nb, values) if values else base_nb
            results.append(run_reference(assignment, nb, workdir, i, first_extra + i, unsafe_no_sandbox))
            params.append(values)
            if results[-1][1]:
                hidden_seeds.append(first_extra + i)
            say(f"run {i + 1}/{runs} {values}: {time.monotonic() - t0:.1f} s")
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    derived = derive_all(specs, results)
    rubric = assignment.rubric()
    scores = [judge(rubric, derived, main)["score"] for main, _ in results]
    for i, score in enumerate(scores):
        if score < 100:
            grade = judge(rubric, derived, results[i][0])
            lost = [f"{c['id']}: {p['name']} ({p['message']})" for c in grade["checks"] for p in c["parts"] if not p["passed"]]
            say(f"warning: reference run {i} {params[i]} scores {score}: " + "; ".join(lost))
    path = Path(output) if output else assignment.tolerances_path
    path.parent.mkdir(parents=True, exist_ok=True)
    prov = provenance(assignment, runs, params, hidden_seeds, config, solution, time.monotonic() - started, scores)
    path.write_text(render_tolerances(derived, prov), encoding="utf-8")
    return path
