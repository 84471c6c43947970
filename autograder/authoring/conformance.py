"""The checks every assignment gets for free, in the manner of scikit-learn's ``check_estimator``:
one list of check functions (:data:`CHECKS`), each taking a :class:`Lesson` and raising
:class:`ConformanceFailure` with the reason. ``autograder check-assignment ID`` runs them on one
lesson (:func:`run_checks`); the pytest conformance suite (tests/conformance/) runs each one as a
test of its own, per lesson and per check.

No check names a lesson. What each lesson states lives in its own folders:
``reference/<id>/expected_examples.toml`` (every example's grade), the rubric, the tolerances.
A :class:`Lesson` grades its examples once, as one batch (``-j 2``), the first time a check asks
(:attr:`Lesson.graded`), and the checks read those grades: one grading per example per lesson.
The checks that grade (:attr:`Check.graded`) need a kernel and take minutes; the others take
seconds (``check-assignment --quick`` runs only those).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator

from ..assignment import Assignment

UNTOUCHED_MAX_SHARE = 0.20  # the untouched template keeps at most this share of the points
TABLE_FILE = "expected_examples.toml"


class ConformanceFailure(AssertionError):
    """A lesson breaks a conformance check; the message says which lesson, what and how to fix it.
    An ``AssertionError``, so a test calling a check fails (rather than errors) with the reason."""


def require(condition: object, reason: str) -> None:
    """Raise :class:`ConformanceFailure` with ``reason`` unless ``condition`` holds (an ``assert``
    that ``python -O`` cannot remove)."""
    if not condition:
        raise ConformanceFailure(reason)


@dataclass(frozen=True)
class Graded:
    row: dict[str, Any]
    grade: dict[str, Any]
    results: dict[str, Any]
    measurements: dict[str, Any]
    execution: dict[str, Any]


def read_graded(folder: Path, row: dict[str, Any]) -> Graded:
    """One example's files in a batch's output ``folder`` (its own sub-folder), as :class:`Graded`."""

    def read(name: str) -> dict[str, Any]:
        path = folder / name
        return json.loads(path.read_text()) if path.is_file() else {}

    return Graded(row, read("grade.json"), read("results.json"), read("measurements.json"), read("execution.json"))


@dataclass
class Lesson:
    """One assignment under a project root, with its examples graded lazily, once."""

    root: Path
    id: str
    workdir: Path  # where the batch and the zip go (a temporary folder)
    _graded: dict[str, Graded] | None = field(default=None, repr=False)

    @cached_property
    def assignment(self) -> Assignment:
        from ..assignment import load_assignment

        return load_assignment(self.id, self.root)

    @property
    def examples(self) -> Path:
        return self.root / "assignments" / self.id / "examples"

    @property
    def table_path(self) -> Path:
        return self.root / "reference" / self.id / TABLE_FILE

    @cached_property
    def table(self) -> dict[str, dict[str, Any]]:
        require(
            self.table_path.is_file(), f"{self.id}: no {self.table_path.relative_to(self.root)} (every example's grade)"
        )
        return tomllib.loads(self.table_path.read_text(encoding="utf-8"))

    @property
    def graded(self) -> dict[str, Graded]:
        """Every example (file name → its grade, results and measurements), graded as one batch."""
        if self._graded is None:
            from ..batch import run_batch

            out = self.workdir / "batch"
            summary = run_batch(self.examples, out, assignment=self.assignment, jobs=2, progress=False)
            self._graded = {f"{row['name']}.ipynb": read_graded(out / row["name"], row) for row in summary.rows}
        return self._graded

    def grade_of(self, name: str) -> Graded:
        graded = self.graded
        require(name in graded, f"{self.id}: examples/{name} was not graded (examples: {sorted(graded)})")
        g = graded[name]
        require(g.grade.get("checks"), f"{self.id}/{name}: no grade ({g.row.get('status')}: {g.row.get('reason')})")
        return g


# ── the checks ────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Check:
    """A conformance check: ``fn(lesson)`` raises :class:`ConformanceFailure` with the reason."""

    fn: Callable[[Lesson], None]
    graded: bool  # grades the examples (a kernel, minutes)

    @property
    def name(self) -> str:  # check_tolerances_are_calibrated_and_current
        return self.fn.__name__

    @property
    def short(self) -> str:  # tolerances_are_calibrated_and_current
        return self.name.removeprefix("check_")

    def __call__(self, lesson: Lesson) -> None:
        self.fn(lesson)


CHECKS: list[Check] = []


def check(*, graded: bool = False) -> Callable[[Callable[[Lesson], None]], Callable[[Lesson], None]]:
    def register(fn: Callable[[Lesson], None]) -> Callable[[Lesson], None]:
        CHECKS.append(Check(fn, graded))
        return fn

    return register


@check()
def check_built_files_are_up_to_date(lesson: Lesson) -> None:
    from .build import stale_files

    stale = stale_files(lesson.assignment)
    require(not stale, f"{lesson.id}: out of date: {stale}; run `autograder build {lesson.id}`")


@check()
def check_rubric_texts_render(lesson: Lesson) -> None:
    """Every message and hint of the rubric renders (no lone brace, no unknown format), and every
    placeholder names a field of the part, a tolerance the rubric names, or a core measurement; a
    lesson's own measurement paths are checked against a real run by ``build --check``."""
    from .build import rubric_text_problems

    a = lesson.assignment
    problems = rubric_text_problems(a.rubric(), None, a.rubric_path)
    require(not problems, "; ".join(map(str, problems)))


@check()
def check_table_lists_exactly_the_examples(lesson: Lesson) -> None:
    names = sorted(p.name for p in lesson.examples.glob("*.ipynb"))
    require(
        sorted(lesson.table) == names,
        f"{lesson.id}: {TABLE_FILE} lists {sorted(lesson.table)}, examples/ holds {names}",
    )
    require(
        {"reference.ipynb", "untouched.ipynb"} <= set(names),
        f"{lesson.id}: reference.ipynb and untouched.ipynb are required",
    )
    check_ids = {c["id"] for c in lesson.assignment.rubric()["checks"]}
    mistakes = {name: row["loses"] for name, row in lesson.table.items() if "loses" in row}
    require(mistakes, f'{lesson.id}: a table without an example mistake (`loses = "check"`) tests nothing')
    unknown = {n: c for n, c in mistakes.items() if c not in check_ids}
    require(not unknown, f"{lesson.id}: mistakes lose at checks the rubric does not have: {unknown}")


@check()
def check_gamed_examples_declare_their_maximum(lesson: Lesson) -> None:
    """The gaming suite: a row ``gamed = true`` is a notebook that seeks points without the work
    (constants or the README's values in ``RESULTS``, a comparison that echoes what it should be
    compared with, only the cells that print); it states its ``max_score`` and nothing a mistake
    states, and :func:`problems` fails the lesson when it scores more. A lesson that reports numbers
    (``[probe] results_variable``) declares at least one."""
    stated = {"loses", "full_marks", "scores", "score"}
    gamed = {name: row for name, row in lesson.table.items() if row.get("gamed")}
    malformed = {
        name: sorted(set(row) & stated) or "no max_score"
        for name, row in gamed.items()
        if not isinstance(row.get("max_score"), int) or set(row) & stated
    }
    require(not malformed, f"{lesson.id}: gamed rows state a max_score and nothing else: {malformed}")
    if "results_variable" in lesson.assignment.config.get("probe", {}):
        require(
            gamed,
            f"{lesson.id}: reports numbers but {TABLE_FILE} declares no gamed example (`gamed = true`, `max_score = N`)",
        )


@check()
def check_reference_and_untouched_are_the_shipped_notebooks(lesson: Lesson) -> None:
    import nbformat

    def sources(path: Path) -> list[str]:
        return [c.source for c in nbformat.read(path, as_version=4).cells]

    a = lesson.assignment
    require(
        sources(lesson.examples / "untouched.ipynb") == sources(a.notebook),
        f"{lesson.id}: examples/untouched.ipynb is not the student notebook",
    )
    require(
        sources(lesson.examples / "reference.ipynb") == sources(a.reference_folder / "solution.ipynb"),
        f"{lesson.id}: examples/reference.ipynb is not reference/{lesson.id}/solution.ipynb",
    )


@check()
def check_tolerances_are_calibrated_and_current(lesson: Lesson) -> None:
    """Every tolerance the rubric names is calibrated, from the part's current measure path and
    direction, with calibration.toml's current margins, by the stated rule, and no other is left."""
    from ..judge import lookup, validate_rubric
    from ..tolerances import PROVENANCE, flat_values
    from .calibrate import load_calibration_config, round_outward, tolerance_specs

    a = lesson.assignment
    require(
        a.tolerances_path.is_file(),
        f"{lesson.id}: {a.tolerances_path.relative_to(lesson.root)} is missing: run `autograder calibrate {lesson.id}`",
    )
    tolerances = a.tolerances()
    config = load_calibration_config(a)
    specs = tolerance_specs(a.rubric(), config)
    calibrated = set(flat_values(tolerances))
    require(
        calibrated == {s.key for s in specs},
        f"{lesson.id}: tolerances.toml holds {sorted(calibrated)}, the "
        f"rubric names {sorted(s.key for s in specs)}: run `autograder calibrate {lesson.id}`",
    )
    validate_rubric(a.rubric(), tolerances)
    if not specs:
        return
    prov = tolerances.get(PROVENANCE, {})
    require(
        str(prov.get("command", "")).startswith(f"autograder calibrate {lesson.id} "),
        f"{lesson.id}: {prov.get('command')!r}",
    )
    require(
        prov.get("runs", 0) >= 1 and prov.get("reference_scores") == [100.0] * prov["runs"],
        f"{lesson.id}: a calibration run of the reference lost points: {prov.get('reference_scores')}",
    )
    require(
        prov.get("margin") == float(config.get("margin", 2.0))
        and prov.get("margins", {}) == {k: float(v) for k, v in config.get("margins", {}).items()},
        f"{lesson.id}: calibration.toml changed since: run `autograder calibrate {lesson.id}`",
    )
    for spec in specs:
        entry, _ = lookup(tolerances, spec.key)
        require(isinstance(entry, dict), f"{lesson.id}: {spec.key} has no recorded worst case and rule")
        assert isinstance(entry, dict)  # for mypy: require raised otherwise
        require(
            entry.get("measure") == spec.measure,
            f"{lesson.id}: {spec.key} was calibrated on {entry.get('measure')}, the rubric now measures {spec.measure}",
        )
        rule = str(entry.get("rule", ""))
        if rule.startswith("worst count"):
            require(spec.direction == "lower" and entry["value"] == entry["worst"], f"{lesson.id}: {spec.key}: {entry}")
            continue
        step = float(rule.split("step ", 1)[1].split(")", 1)[0]) if "step " in rule else 0.0
        if spec.direction == "upper":
            expected = round_outward((entry["worst"] + step) * spec.margin, "upper")
        else:
            expected = max(0.0, round_outward(1 - ((1 - entry["worst"]) + step) * spec.margin, "lower"))
        require(
            rule.endswith(f"× {spec.margin:g}") and entry["value"] == expected,
            f"{lesson.id}: {spec.key} = {entry['value']} does not follow from worst {entry['worst']} by {rule!r}",
        )


@check()
def check_probe_cases_come_from_the_deployment_secret(lesson: Lesson) -> None:
    """The probe's cases are a function of the hidden-data secret: the same secret gives the same
    cases, another secret other ones (a lesson whose cases a notebook could know in advance can be
    answered by a lookup table). A lesson without probe cases has nothing to hide here."""
    import hashlib

    import numpy as np

    from .. import hidden_secret
    from ..hidden_secret import HiddenSecret

    def digest() -> str:
        h = hashlib.sha256()
        for case in lesson.assignment.grading.probe_cases():
            h.update(case.id.encode())
            for key in [*range(len(case.args)), *sorted(case.kwargs)]:
                value = case.raw(key)
                if isinstance(value, np.ndarray):  # every element (repr would elide a large array's middle)
                    h.update(f"{value.dtype}{value.shape}".encode() + np.ascontiguousarray(value).tobytes())
                else:
                    h.update(value if isinstance(value, bytes) else repr(value).encode())
        return h.hexdigest()

    one, two = HiddenSecret(bytes(range(32))), HiddenSecret(bytes(range(1, 33)))
    seen = []
    for secret in (one, HiddenSecret(bytes(one.key)), two):
        with hidden_secret.using(secret):
            seen.append(digest())
    if not lesson.assignment.grading.probe_cases():
        return
    require(seen[0] == seen[1], f"{lesson.id}: the same secret gave other probe cases (they must be reproducible)")
    require(
        seen[0] != seen[2],
        f"{lesson.id}: another hidden-data secret gave the same probe cases: draw them from a stream of "
        "autograder.hidden_secret (docs/ADDING-AN-ASSIGNMENT.md), never from a fixed seed",
    )


@check()
def check_gradescope_zip_builds(lesson: Lesson) -> None:
    from ..gradescope.build import build_zip

    report = build_zip(lesson.id, lesson.workdir / "autograder.zip", root=lesson.root)
    for needed in (
        f"assignments/{lesson.id}/assignment.toml",
        f"assignments/{lesson.id}/rubric.toml",
        f"assignments/{lesson.id}/grading/__init__.py",
        f"reference/{lesson.id}/tolerances.toml",
        "gradescope.json",
        "run_autograder",
        "setup.sh",
    ):
        require(needed in report.entries, f"{lesson.id}: the zip lacks {needed}")
    leaked = [e for e in report.entries if "/examples/" in e or e.endswith(("solution.ipynb", "master.ipynb"))]
    require(not leaked, f"{lesson.id}: the zip ships {leaked}")


@check(graded=True)
def check_reference_gets_full_marks(lesson: Lesson) -> None:
    g = lesson.grade_of("reference.ipynb")
    failed = {
        c["id"]: [p["message"] or p["reason"] for p in c["parts"] if not p["passed"]]
        for c in g.grade["checks"]
        if not c["passed"]
    }
    require(g.grade["score"] == g.grade["max_score"] > 0, f"{lesson.id}: the reference lost points: {failed}")
    require(g.results.get("score") == g.grade["score"], f"{lesson.id}: results.json says {g.results.get('score')}")
    require_gradescope_results(g.results, f"{lesson.id}/reference.ipynb")


@check(graded=True)
def check_untouched_template_scores_low(lesson: Lesson) -> None:
    g = lesson.grade_of("untouched.ipynb")
    cap = UNTOUCHED_MAX_SHARE * g.grade["max_score"]
    require(
        g.grade["score"] <= cap,
        f"{lesson.id}: the untouched template scores {g.grade['score']} of "
        f"{g.grade['max_score']}, above {UNTOUCHED_MAX_SHARE:.0%}",
    )
    require_gradescope_results(g.results, f"{lesson.id}/untouched.ipynb")
    silent = [
        f"{c['id']}: {p['name']}"
        for c in g.grade["checks"]
        for p in c["parts"]
        if not p["passed"] and not (p["message"] or p["reason"])
    ]
    require(not silent, f"{lesson.id}: failed parts without a message for the student: {silent}")


@check(graded=True)
def check_each_example_gets_the_grade_its_table_states(lesson: Lesson) -> None:
    wrong = {name: problems(row, lesson.grade_of(name).grade) for name, row in sorted(lesson.table.items())}
    wrong = {name: p for name, p in wrong.items() if p}
    require(not wrong, f"{lesson.id}: examples graded otherwise than {TABLE_FILE} states: {wrong}")


@check(graded=True)
def check_every_rubric_path_is_measured_on_the_reference(lesson: Lesson) -> None:
    from .build import rubric_paths_missing, rubric_text_problems

    a = lesson.assignment
    measurements = lesson.grade_of("reference.ipynb").measurements
    missing: list[object] = [*rubric_paths_missing(a.rubric(), measurements, a.rubric_path)]
    missing += rubric_text_problems(a.rubric(), measurements, a.rubric_path)
    require(not missing, "\n".join(map(str, missing)))


@check(graded=True)
def check_stage_files_fit_the_shipped_schemas(lesson: Lesson) -> None:
    """Every example's real execution.json, measurements.json and grade.json, and the lesson's rubric
    and tolerances, fit the stage contracts in autograder/schemas/."""
    from ..contracts import first_problem, validate

    wrong = {}
    for name in sorted(lesson.table):
        g = lesson.grade_of(name)
        for kind in ("execution", "measurements", "grade"):
            problem = first_problem(kind, getattr(g, kind))
            if problem:
                wrong[f"{name}: {kind}.json"] = problem
    require(not wrong, f"{lesson.id}: stage files that do not fit their schema: {wrong}")
    validate("rubric", lesson.assignment.rubric(), f"{lesson.id}/rubric.toml")
    validate("tolerances", lesson.assignment.tolerances(), f"{lesson.id}/tolerances.toml")


def require_gradescope_results(results: dict[str, Any], where: str) -> None:
    """``results`` follows Gradescope's documented format (the package's schema
    ``gradescope_results``, autograder/schemas/)."""
    import jsonschema

    from .. import contracts

    schema = contracts.schema("gradescope_results")
    errors = [
        f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(results)
    ]
    require(not errors, f"{where}: results.json violates Gradescope's format: " + "; ".join(errors[:5]))


# ── a table's row against a grade ─────────────────────────────────────────────────────────────


def problems(expected: dict[str, Any], grade: dict[str, Any]) -> list[str]:
    """How ``grade`` differs from a row of a lesson's table (empty: as expected). A row states
    ``full_marks``, a ``max_score`` (a gamed example: it must earn no more), the one check a mistake
    ``loses`` at, the ``parts`` that fail, the total ``score`` or every check's ``scores``; a point
    lost anywhere else is a problem."""
    scores = {c["id"]: c["score"] for c in grade["checks"]}
    maxima = {c["id"]: c["max_score"] for c in grade["checks"]}
    lost = {cid for cid in scores if scores[cid] < maxima[cid]}
    details = {
        c["id"]: [p["message"] or p["reason"] for p in c["parts"] if not p["passed"]]
        for c in grade["checks"]
        if c["id"] in lost
    }
    out = []
    if expected.get("full_marks") and (lost or grade["score"] != grade["max_score"]):
        out.append(f"expected full marks, lost points at {details}")
    if "max_score" in expected and not grade["score"] <= expected["max_score"]:
        out.append(f"expected at most {expected['max_score']}, got {grade['score']}")
    if "loses" in expected and lost != {expected["loses"]}:
        out.append(f"lost points at {details}, expected only at {expected['loses']}")
    if "parts" in expected:
        failed = sorted(p["name"] for c in grade["checks"] for p in c["parts"] if not p["passed"])
        if failed != sorted(expected["parts"]):
            out.append(f"failed parts {failed}, expected {sorted(expected['parts'])}")
    if "score" in expected and grade["score"] != expected["score"]:
        out.append(f"score {grade['score']}, expected {expected['score']}")
    if "scores" in expected and scores != expected["scores"]:
        out.append(f"scores {scores}, expected {expected['scores']}")
    return out


# ── applying them ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Outcome:
    """One check applied to one lesson: ``reason`` is None when it passed."""

    check: Check
    reason: str | None

    @property
    def passed(self) -> bool:
        return self.reason is None

    def line(self) -> str:
        """One line for the terminal: ``passed  <check>`` or ``FAILED  <check>: <reason>``."""
        if self.reason is None:
            return f"passed  {self.check.short}"
        return f"FAILED  {self.check.short}: {' '.join(self.reason.split())}"


def selected(*, quick: bool = False) -> list[Check]:
    """The checks to run: all, or with ``quick`` only those that grade nothing (seconds, no kernel)."""
    return [c for c in CHECKS if not (quick and c.graded)]


def run_checks(lesson: Lesson, checks: list[Check] | None = None) -> Iterator[Outcome]:
    """Each check applied to ``lesson``, in order, as it finishes. A check that fails for another
    reason (an ``AutograderError`` of the lesson's files: a rubric that does not load) fails with
    that reason; anything else is a bug of the check and propagates."""
    from ..errors import AutograderError

    for c in CHECKS if checks is None else checks:
        try:
            c(lesson)
        except (AssertionError, AutograderError) as e:
            yield Outcome(c, str(e) or type(e).__name__)
        else:
            yield Outcome(c, None)


def failures(lesson: Lesson, checks: list[Check] | None = None) -> dict[str, str]:
    """Every check applied to ``lesson``: check name → why it failed (empty: the lesson conforms)."""
    return {o.check.name: o.reason for o in run_checks(lesson, checks) if o.reason is not None}
