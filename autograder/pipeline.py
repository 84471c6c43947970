"""Grade one notebook: execute (jailed) → measure → judge → report.

``grade_notebook`` leaves a valid ``results.json`` in ``out_dir``: a zero-score placeholder is
written first, and the real one replaces it atomically at the end. A broken or hostile submission
is a graded outcome; only a bug of the harness itself raises (after writing a failure result that
says so). An interrupted grade (Ctrl-C, SIGTERM, a batch stopping its workers) leaves nothing: the
placeholder and every file of that grade are removed as the interruption unwinds, so no zero
stands for a grade that never happened (Gradescope's front end keeps its own placeholder).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Callable

from . import hidden_secret
from .assignment import Assignment
from .errors import SandboxUnavailableError
from .grade_options import GradeOptions
from .statuses import ProbeStatus, RunStatus
from .judge import judge
from .measure_context import ArtifactContext, MeasureContext
from .measure.warm_pool import MeasuringChildren, measure_jobs, warm_workers
from .probe_format import read_probe_result
from .report.feedback import feedback_markdown
from .report.feedback_html import write_feedback_html
from .report.figure import SVG_DPI, cache_pictures, figure_problem, figure_section, no_picture_to_show
from .report.gradescope_figure import PNG_DPI
from .report.gradescope_results import failure_results_json, results_json
from .safe_files import write_atomic, write_json_atomic as _write_json
from .tolerances import public_tolerances_record, tolerances_record, version_drift

EXECUTION_FILE = "execution.json"
MEASUREMENTS_FILE = "measurements.json"
GRADE_FILE = "grade.json"
RESULTS_FILE = "results.json"
FEEDBACK_FILE = "feedback.md"
FEEDBACK_HTML_FILE = "feedback.html"
GRADE_FILES = (EXECUTION_FILE, MEASUREMENTS_FILE, GRADE_FILE, RESULTS_FILE, FEEDBACK_FILE, FEEDBACK_HTML_FILE)
# the reports a grade writes (results.json always); a front end that keeps only some passes ``reports``
REPORT_FILES = (RESULTS_FILE, FEEDBACK_FILE, FEEDBACK_HTML_FILE)
# the picture in each report that shows it (feedback.md has none): drawn only for the reports written
PICTURE_FORMATS = {FEEDBACK_HTML_FILE: ("svg", SVG_DPI), RESULTS_FILE: ("png", PNG_DPI)}

StageCallback = Callable[[str], None]


NOT_RUN_STATUSES = (RunStatus.UNREADABLE, RunStatus.STARTUP_FAILED, RunStatus.SANDBOX_ERROR)


def _execution_summary(execution: dict[str, Any]) -> dict[str, Any]:
    """execution.json without the per-cell list, plus ``completed`` and ``ran``.

    ``ran`` is ``{"error": reason}`` when no cell could run at all (not a notebook, the kernel
    never started, no code cell in it), so that checks about how the cells ran fail with that reason instead of
    passing vacuously ("no cell raised an error").
    """
    summary = {k: v for k, v in execution.items() if k != "cells"}
    summary["completed"] = execution.get("status") == RunStatus.COMPLETED
    status = execution.get("status")
    summary["ran"] = (
        {"error": execution.get("reason") or f"the notebook did not run ({status})"}
        if status in NOT_RUN_STATUSES
        else True
    )
    if status == RunStatus.COMPLETED and execution.get("cells_total") == 0:  # no code, no credit
        summary["ran"] = {"error": "the notebook has no code cell, so nothing ran"}
    return summary


def picture_formats(reports: Collection[str]) -> list[tuple[str, int]]:
    """The ``(format, dpi)`` of the picture in each of ``reports`` that shows one."""
    return [fmt for report, fmt in PICTURE_FORMATS.items() if report in reports]


def _start_warm_ups(
    assignment: Assignment, start_when: threading.Event, pictures: Sequence[tuple[str, int]] = ()
) -> threading.Thread:
    """Once ``start_when`` is set (the kernel has been launched), run in a background thread what
    the later stages would otherwise wait for, while the grader is idle, and that this process has
    not done yet (:mod:`.warm_ups`: once per process, not once per submission): the assignment's
    optional ``prepare(assignment)`` (trusted warm-up: data sets, imports), then the report's
    drawing library in the formats of ``pictures``. A failure there is not fatal: ``measure`` and
    the report redo whatever they need."""
    from .warm_ups import warm_up

    def run() -> None:
        start_when.wait()
        try:
            warm_up(assignment, [fmt for fmt, _ in pictures])
        except Exception:  # noqa: BLE001 - the stage that needs it recomputes and reports for real
            pass

    thread = threading.Thread(target=run, name="autograder-warm-ups", daemon=True)
    thread.start()
    return thread


class _EarlyMeasure:
    """The assignment's ``measure_artifacts(ctx)``, run in a thread on the frozen working directory
    while the probe runs (:func:`autograder.sandbox.run_submission`'s ``on_snapshot``)."""

    def __init__(self, assignment: Assignment, children: MeasuringChildren) -> None:
        self.assignment = assignment
        self.children = children
        self.thread: threading.Thread | None = None
        self.value: Any = None
        self.seconds: float | None = None

    def start(self, folder: Path) -> Callable[[], None]:
        def run() -> None:
            began = time.monotonic()
            measure = self.assignment.grading.measure_artifacts  # optional: None when the lesson has none
            try:
                self.value = (
                    None if measure is None else measure(ArtifactContext(self.assignment, folder, self.children))
                )
            except Exception:  # noqa: BLE001 - measure() then does this part itself, and reports for real
                self.value = None
            self.seconds = round(time.monotonic() - began, 3)

        self.thread = threading.Thread(target=run, name="autograder-measure-artifacts", daemon=True)
        self.thread.start()
        return self.join

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def discard(self) -> None:
        """The run it measured is done again: its measurement is not the run that counts."""
        self.join()
        self.thread, self.value, self.seconds = None, None, None


def execute_and_measure(
    notebook: Path,
    assignment: Assignment,
    out_dir: Path,
    workspace: Path,
    *,
    unsafe_no_sandbox: bool = False,
    slot: int = 0,
    on_stage: StageCallback | None = None,
    timings: dict[str, float] | None = None,
    pictures: Sequence[tuple[str, int]] = (),
    kernel_template: bool = False,
    submission_key: str | None = None,
) -> dict[str, Any]:
    """Stages 1 and 2: run the notebook in the jail, then measure; writes and returns measurements.

    The whole of it runs with the submission's key current (:func:`hidden_secret.submission`): the
    inputs the student's functions receive are drawn for this submission (the key of its code
    cells, :func:`hidden_secret.notebook_submission_key`, unless ``submission_key`` is given:
    ``calibrate`` draws a fresh one per run), the same for the cases sent, the warm-ups beside
    the kernel and the measurements after it.

    ``kernel_template``: start the kernel from the slot's kernel template where it can hold
    (:mod:`autograder.kernel_template.template_slot`; also when ``AUTOGRADER_KERNEL_TEMPLATE=1``).

    ``timings`` receives ``measure_artifacts_s``: how long ``measure_artifacts`` ran beside the probe.
    ``pictures``: the formats the reports will draw the picture in, warmed up beside the kernel
    (none for a caller that writes no report: ``calibrate``, the build)."""
    key = submission_key or hidden_secret.notebook_submission_key(Path(notebook))
    with hidden_secret.submission(key):
        return _execute_and_measure(
            notebook,
            assignment,
            out_dir,
            workspace,
            unsafe_no_sandbox=unsafe_no_sandbox,
            slot=slot,
            on_stage=on_stage,
            timings=timings,
            pictures=pictures,
            kernel_template=kernel_template,
        )


def _execute_and_measure(
    notebook: Path,
    assignment: Assignment,
    out_dir: Path,
    workspace: Path,
    *,
    unsafe_no_sandbox: bool,
    slot: int,
    on_stage: StageCallback | None,
    timings: dict[str, float] | None,
    pictures: Sequence[tuple[str, int]],
    kernel_template: bool,
) -> dict[str, Any]:
    from .sandbox import ProbeSpec, kernel_template_for, run_submission

    stage = on_stage or (lambda _name: None)
    cases = assignment.grading.probe_cases()
    probe_cfg = assignment.config.get("probe", {})
    spec = ProbeSpec(
        cases=cases, functions=list(probe_cfg.get("functions", [])), results_variable=assignment.results_variable
    )
    stage("execute")
    # once the kernel is launched, the submission's first measuring child starts, warm by the time
    # the cells have run, and the trusted warm-ups run beside the kernel; the submission's models
    # are measured by at most as many children as models are measured at the same time
    kernel_started, warm_up_now = threading.Event(), threading.Event()

    def started() -> None:
        kernel_started.set()
        warm_up_now.set()

    most = min(len(assignment.artifacts), measure_jobs())
    with warm_workers(most, assignment.model_policy.limits, start_when=kernel_started) as children:
        # the models are measured while the probe runs, from the working directory frozen before it
        early = _EarlyMeasure(assignment, children) if assignment.grading.measure_artifacts is not None else None
        warm = _start_warm_ups(assignment, warm_up_now, pictures)
        execution = run_submission(
            notebook,
            workspace,
            limits=assignment.limits,
            probe=spec,
            unsafe_no_sandbox=unsafe_no_sandbox,
            slot=slot,
            on_kernel_started=started,
            on_snapshot=early.start if early is not None else None,
            on_run_discarded=early.discard if early is not None else None,
            template=kernel_template_for(slot, assignment, kernel_template),
        )
        warm_up_now.set()  # a kernel that never started: measuring may still need the warm-ups
        warm.join()
        if early is not None:
            early.join()
            if timings is not None and early.seconds is not None:
                timings["measure_artifacts_s"] = early.seconds
        _write_json(out_dir / EXECUTION_FILE, execution)
        stage("measure")
        probe = read_probe_result(workspace, cases, execution.get("probe") == ProbeStatus.COMPLETED)
        ctx = MeasureContext(
            assignment=assignment,
            workspace=workspace,
            cases=cases,
            probe=probe,
            execution=execution,
            early=early.value if early is not None else None,
            children=children,
        )
        sections = assignment.grading.measure(ctx)
    measurements = {
        "schema": 1,
        "assignment": {
            "id": assignment.id,
            "version": assignment.version,
            "fingerprint": assignment.fingerprint(),
            "hidden_secret": hidden_secret.fingerprint(),
            "submission_key": hidden_secret.current_submission(),
        },
        "environment": assignment.environment(),
        "execution": _execution_summary(execution),
        **sections,
    }
    _write_json(out_dir / MEASUREMENTS_FILE, measurements)
    return measurements


def rejudge(
    out_dir: Path,
    assignment: Assignment,
    *,
    options: GradeOptions = GradeOptions(),
    execution_time: float | None = None,
    timings: dict[str, float] | None = None,
    reports: Collection[str] = REPORT_FILES,
) -> dict[str, Any]:
    """Stages 3 and 4 from a stored ``measurements.json``: no notebook is executed; judged with
    ``options``' tolerances and rubric. ``reports``: which of :data:`REPORT_FILES` to write
    (results.json always); the picture is drawn only in the formats those show.

    ``grade_notebook`` also judges from the file it just wrote, not from the dict in memory, so
    a first grade and any later ``rescore`` judge exactly the same (JSON-normalised) data.
    """
    judging = time.monotonic()
    measurements = json.loads((out_dir / MEASUREMENTS_FILE).read_text())
    limits = assignment.tolerances(options.tolerances)
    grade = judge(assignment.rubric(options.rubric), limits, measurements)
    if execution_time is None:
        execution_time = measurements.get("execution", {}).get("duration_s")
    # for the instructor: which tolerances judged, and whether the versions still match theirs
    grade["tolerances"] = tolerances_record(assignment.tolerances_path, options.tolerances, limits)
    grade["version_drift"] = version_drift(limits, measurements.get("environment"))
    if timings is not None:  # where a first grade's time went (a rescore has none)
        grade["timings"] = {**timings, "judge_s": round(time.monotonic() - judging, 3)}
    _write_json(out_dir / GRADE_FILE, grade)
    reporting = time.monotonic()
    feedback = feedback_markdown(grade, measurements)
    if FEEDBACK_FILE in reports:
        write_atomic(out_dir / FEEDBACK_FILE, feedback)
    # + the picture, or why there is none (unless nothing could be graded: the short form says why)
    picture = None if no_picture_to_show(grade, measurements) else measurements
    _draw_pictures(picture, out_dir, picture_formats({RESULTS_FILE, *reports}))
    if FEEDBACK_HTML_FILE in reports:
        write_feedback_html(out_dir, feedback, picture, FEEDBACK_HTML_FILE, grade=grade)
    # results.json reaches the student: the tolerance files by name and hash, not by the grader's path
    extra = {"tolerances": public_tolerances_record(grade["tolerances"]), "version_drift": grade["version_drift"]}
    _write_json(
        out_dir / RESULTS_FILE,
        results_json(grade, measurements, execution_time=execution_time, extra=extra, figure_cache=out_dir),
    )
    if timings is not None:  # the reports' time too, once they are written
        grade["timings"]["report_s"] = round(time.monotonic() - reporting, 3)
        _write_json(out_dir / GRADE_FILE, grade)
    return grade


def _draw_pictures(measurements: dict[str, Any] | None, out_dir: Path, formats: Sequence[tuple[str, int]]) -> None:
    """The picture of a figure section drawn once, saved in each of ``formats`` (those of the
    reports written: :data:`PICTURE_FORMATS`) into ``out_dir``, where the reports read it; a
    picture that cannot be drawn is left to the reports, which say why."""
    section = figure_section(measurements)
    if section is None or figure_problem(section) is not None or not formats:
        return
    try:
        cache_pictures(section, out_dir, formats)
    except Exception:  # noqa: BLE001 - each report draws it on its own and says why it failed
        pass


def _stage_seconds(marks: list[tuple[str, float]]) -> dict[str, float]:
    """``{"setup_s", "execute_s", "measure_s"}`` from the stage marks (each stage runs until the
    next one starts; ``rejudge`` adds ``judge_s`` and ``report_s``; ``measure_artifacts_s``, when
    present, ran inside "execute", beside the probe): "setup" is the workspace before the jail,
    "execute" the jailed run with the probe, "measure" the trusted measurements (the measuring
    children included)."""
    return {f"{name}_s": round(end - start, 3) for (name, start), (_, end) in zip(marks, marks[1:]) if name != "judge"}


def _remove_unfinished(out_dir: Path, kept: set[str], created: bool) -> None:
    """After an interruption: remove the placeholder and every file this grade wrote (anything in
    ``out_dir`` but ``kept``, the names that were there before it), and ``out_dir`` if it made it."""
    try:
        for path in out_dir.iterdir():
            if path.name not in kept and (path.is_file() or path.is_symlink()):
                path.unlink(missing_ok=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
    except OSError:
        pass


def grade_notebook(
    notebook: Path,
    assignment: Assignment,
    out_dir: Path,
    *,
    options: GradeOptions = GradeOptions(),
    workspace: Path | None = None,
    slot: int = 0,
    on_stage: StageCallback | None = None,
    reports: Collection[str] = REPORT_FILES,
) -> dict[str, Any]:
    """Grade ``notebook`` into ``out_dir`` as ``options`` say; returns the grade (grade.json's content).

    ``workspace``: keep the jailed working directory there for inspection (it must be empty or
    absent); by default a temporary one is used and removed. ``slot``: the sandbox slot this
    process holds (a batch worker's); ``on_stage``: called with each stage's name as it starts;
    ``reports``: the reports to write (:func:`rejudge`), all of them by default.
    """
    from .sandbox import make_workspace_folder, prepared_workspace  # nbclient and the jail: loaded only to execute
    from .tree_walk import remove_tree  # the student's tree: any depth, no link followed

    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in GRADE_FILES:
        if stale != RESULTS_FILE:
            (out_dir / stale).unlink(missing_ok=True)
    kept = {p.name for p in out_dir.iterdir()} - {RESULTS_FILE}
    started = time.monotonic()
    marks: list[tuple[str, float]] = [("setup", started)]

    def stage(name: str) -> None:
        marks.append((name, time.monotonic()))
        if on_stage:
            on_stage(name)

    tmp = None
    overlapped: dict[str, float] = {}
    try:
        # while grading runs: a zero that says so (a grader killed outright leaves this one)
        _write_json(
            out_dir / RESULTS_FILE,
            failure_results_json(
                "Grading did not finish. If this message stays, the grader itself failed; course staff can see why."
            ),
        )
        if workspace is None:
            tmp = make_workspace_folder()  # mode 711: the jail's uid passes through (fallback); swept if we die
            workspace = tmp / "work"
        workspace = Path(workspace)
        # a size-capped tmpfs while the kernel writes and the measurement reads (when root);
        # a workspace the caller keeps is copied back out of it
        with prepared_workspace(workspace, assignment.limits, keep=tmp is None):
            execute_and_measure(
                Path(notebook),
                assignment,
                out_dir,
                workspace,
                unsafe_no_sandbox=options.unsafe_no_sandbox,
                slot=slot,
                on_stage=stage,
                timings=overlapped,
                pictures=picture_formats({RESULTS_FILE, *reports}),
                kernel_template=options.kernel_template,
            )
        stage("judge")
        return rejudge(
            out_dir,
            assignment,
            options=options,
            execution_time=time.monotonic() - started,
            timings={**_stage_seconds(marks), **overlapped},
            reports=reports,
        )
    except SandboxUnavailableError as e:
        _write_json(
            out_dir / RESULTS_FILE,
            failure_results_json(f"The grader refused to run the notebook without isolation: {e}"),
        )
        raise
    except Exception as e:
        _write_json(
            out_dir / RESULTS_FILE,
            failure_results_json(
                "The grader itself failed while grading this notebook; this is not a problem with your "
                f"work, and course staff can see the error ({type(e).__name__})."
            ),
        )
        raise
    except BaseException:  # interrupted: KeyboardInterrupt (Ctrl-C, or SIGTERM in the CLI), a batch stopping
        _remove_unfinished(out_dir, kept, created)
        raise
    finally:
        if tmp is not None:
            remove_tree(tmp, ignore_errors=True)
