"""A CPU budget per stage: where the CPU seconds of a batch go, per submission and per batch.

CPU time (user + system), not wall time: what a stage costs whatever else the machine is doing,
so the figures hold on a shared machine and add up. A batch of the lesson's example notebooks is
graded by the real ``run_batch`` with ``-j 1`` (one forked worker, the real jail, kernels and
measuring children), ``rounds`` times, each time as distinct copies with no cache; the figures are
medians over the rounds, per example. Nothing in ``autograder/`` is changed: the benchmark's own
process patches a few of its functions (inherited by the forked worker) to take readings at
each stage boundary (:func:`instrumented`):

- **the jailed kernel**: its command joins a counting cgroup of its own (:mod:`.cpu_accounting`)
  before it execs bwrap, so every process of the jail is counted, and read live: before the first
  cell (*start*: the interpreter, ipykernel, the jail's start), around each cell (*import cells*,
  the cells that hold only ``import`` statements, and the *other cells*), around the probe, and
  once the jail is gone (*shutdown*, the rest);
- **each measuring child**: a counting cgroup per child, read when it gets its first job (*start-up
  and imports*, paid ahead while the notebook runs) and when it is closed (*jobs*: every model of the
  submission it measured; an unused child has only its start-up);
- **the grader's process**: ``getrusage(RUSAGE_SELF)`` at each of ``grade_notebook``'s stage marks
  (setup, execute, measure, judge + report), split further by per-thread CPU (``time.thread_time``):
  the trusted warm-ups thread, the thread starting the measuring children, the thread measuring the
  models beside the probe, the event loop's share of the probe, the judge, and the picture;
- **other child processes** of the grader (the notebook's parse in a limited child, …): the
  grading process runs in a counting cgroup of its own per submission; what it counts beyond
  ``RUSAGE_SELF`` is its other children;
- **the check**: ``getrusage(RUSAGE_SELF + RUSAGE_CHILDREN)`` over the grade (every process, once
  reaped) against kernel + grader from the cgroups: two independent countings of the same CPU.

Per batch, in the batch's own process: the integrity report (``class_integrity``, whose readers are
child processes) and the summary (``write_summary``), and the rest of the batch's processes (the
pool's worker start, dispatch, the gradebook).

Needs root and cgroups (cgroup v1 ``cpuacct`` or cgroup v2); elsewhere it says why and measures
nothing. Run alone: ``.venv/bin/python bench/run.py --only cpu --splice`` (see bench/README.md).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from . import cpu_accounting
from .common import ASSIGNMENT_ID, ROOT, log, median, spread
from .cpu_accounting import CpuGroup, children_seconds, self_seconds

TITLE = "## 7 · CPU budget per stage"
DEFAULT_EXAMPLES = ("reference", "untouched", "quantize_no_saturation", "static_per_tensor")
# another lesson's budget (``--cpu-assignment``, optional: RESULTS.md's section is lesson 07's)
OTHER_EXAMPLES = {"05-graph-optimization": ("reference", "untouched", "latency_in_seconds")}

# (row key, label, who pays it) in the table's order; the kernel's rows add up to its total, the
# grader's rows to its own (process + measuring children + other children)
KERNEL_ROWS = (
    ("kernel_start", "kernel: start (interpreter, ipykernel, the jail's start-up)"),
    ("kernel_import_cells", "kernel: import-only cells"),
    ("kernel_cells", "kernel: the student's other cells"),
    ("kernel_probe", "kernel: the probe (hidden cases)"),
    ("kernel_shutdown", "kernel: shutdown and the rest"),
)
GRADER_ROWS = (
    ("setup", "grader: setup (workspace)"),
    ("execute_rest", "grader: running the jail (jail set-up, nbclient, snapshot, reaping)"),
    ("probe_loop", "grader: the probe (its side: sending, reading back)"),
    ("warm_ups", "grader: warm-up of the assignment (`prepare`: data sets, imports)"),
    ("figure_warm_up", "grader: warm-up of the picture (matplotlib)"),
    ("start_children", "grader: starting the measuring children"),
    ("beside_probe", "grader: measuring the models beside the probe (own CPU)"),
    ("other_threads", "grader: other threads"),
    ("measure", "grader: measure after the kernel"),
    ("judge", "grader: judge"),
    ("picture", "grader: the picture (SVG + PNG)"),
    ("reports", "grader: reports (feedback.md, feedback.html, results.json)"),
    ("children_startup", "measuring children: start-up and imports"),
    ("children_jobs", "measuring children: their jobs (check, run, compare)"),
    ("other_children", "other child processes (notebook parse, …; their rusage)"),
    ("kernel_template", "kernel template: its own CPU (its start, once per slot: paid in the grade that starts it)"),
)
TOTAL_ROWS = (
    ("kernel_total", "**jailed kernel, total**"),
    ("grader_total", "**grader, total** (process + measuring children + other children)"),
    ("sum", "kernel + grader"),
    ("total", "all processes of the grade (its cgroup, independent)"),
)
BATCH_ROWS = (
    ("integrity", "integrity report (`class_integrity`, with its reader children)"),
    ("summary", "summary page (`write_summary`)"),
    ("batch_rest", "the rest of the batch (pool worker's start, dispatch, cache, gradebook)"),
    ("submissions", "the submissions (sum of their totals)"),
    ("batch_total", "**the whole batch** (its cgroup: every process of the batch)"),
)
THREAD_ROWS = {
    "autograder-warm-ups": "warm_ups",
    "autograder-warm-workers": "start_children",
    "autograder-measure-artifacts": "beside_probe",
}


# ── one submission's readings ────────────────────────────────────────────────────────────────


@dataclass
class Readings:
    """Everything read while one submission was graded (in the grading process)."""

    name: str
    kernel: CpuGroup | None = None
    process: CpuGroup | None = None
    marks: list[tuple[str, float]] = field(default_factory=list)  # (stage, RUSAGE_SELF) at each mark
    threads: dict[str, float] = field(default_factory=dict)
    cells: dict[str, float] = field(default_factory=lambda: {"import": 0.0, "other": 0.0})
    first_cell_kernel: float | None = None
    last_cell_kernel: float | None = None
    probe_kernel: float = 0.0
    probe_loop: float = 0.0
    judge: float = 0.0
    picture: float = 0.0
    figure_warm_up: float = 0.0
    template: float = 0.0  # the slot's kernel template's own CPU during this grade (its start, once per slot)
    children: list[dict[str, Any]] = field(default_factory=list)  # per measuring child: startup, job, used
    live_children: dict[str, tuple[CpuGroup, list[float]]] = field(default_factory=dict)
    hooks_missing: list[str] = field(default_factory=list)

    def add_thread(self, name: str, seconds: float) -> None:
        key = THREAD_ROWS.get(name, "other_threads")
        self.threads[key] = self.threads.get(key, 0.0) + seconds

    def kernel_s(self) -> float:
        return self.kernel.seconds() if self.kernel is not None else 0.0


_current: Readings | None = None
_record_dir: Path | None = None
_batch: dict[str, float] = {}
_batch_group: CpuGroup | None = None  # the batch's process and everything under it


def is_import_only(source: str) -> bool:
    """True when a cell's code is nothing but ``import`` statements (a docstring or comments may stand beside)."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return False
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    rest = [
        s
        for s in body
        if not isinstance(s, (ast.Import, ast.ImportFrom))
        and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return bool(imports) and not rest


def budget_of(r: Readings, other_children_s: float) -> dict[str, Any]:
    """The rows of one submission (CPU seconds) from its readings; ``other_children_s``: what the
    grading process's reaped children used (``RUSAGE_CHILDREN``; the jailed trees' CPU does not
    reach it, since their processes are killed inside their namespaces, not waited for)."""
    own = dict(zip([m[0] for m in r.marks], [b - a for (_, a), (_, b) in zip(r.marks, r.marks[1:])]))
    threads = dict(r.threads)
    kernel = r.kernel_s()
    start = r.first_cell_kernel if r.first_cell_kernel is not None else None
    rows: dict[str, float | None] = {
        "kernel_start": start,
        "kernel_import_cells": r.cells["import"] if start is not None else None,
        "kernel_cells": r.cells["other"] if start is not None else None,
        "kernel_probe": r.probe_kernel if start is not None else None,
    }
    rows["kernel_shutdown"] = (kernel - sum(v for v in rows.values() if v is not None)) if start is not None else None
    execute = own.get("execute", 0.0)
    thread_sum = sum(threads.get(k, 0.0) for k in ("warm_ups", "start_children", "beside_probe", "other_threads"))
    judge_stage = own.get("judge", 0.0)
    self_total = r.marks[-1][1] - r.marks[0][1] if len(r.marks) > 1 else 0.0
    total = r.process.seconds() if r.process is not None else None  # everything, the kernel's included
    startup = sum(c["startup"] for c in r.children)
    jobs = sum(c["job"] for c in r.children)
    warm_ups = threads.get("warm_ups", 0.0)
    rows.update(
        {
            "setup": own.get("setup"),
            "execute_rest": execute - thread_sum - r.probe_loop,
            "probe_loop": r.probe_loop,
            "warm_ups": warm_ups - r.figure_warm_up,
            "figure_warm_up": r.figure_warm_up,
            "start_children": threads.get("start_children", 0.0),
            "beside_probe": threads.get("beside_probe", 0.0),
            "other_threads": threads.get("other_threads", 0.0),
            "measure": own.get("measure"),
            "judge": r.judge,
            "picture": r.picture,
            "reports": judge_stage - r.judge - r.picture,
            "children_startup": startup,
            "children_jobs": jobs,
            "other_children": other_children_s,
            "kernel_template": r.template,
        }
    )
    grader = self_total + startup + jobs + other_children_s + r.template
    rows.update(
        {
            "kernel_total": kernel if r.kernel is not None else None,
            "grader_total": grader,
            "sum": None if r.kernel is None else kernel + grader,
            "total": total,
        }
    )
    return {"name": r.name, "rows": rows, "children": r.children, "hooks_missing": r.hooks_missing}


# ── the hooks (patches inside the benchmark's process) ───────────────────────────────────────


class _CountedThread(threading.Thread):
    """A thread whose CPU time is added to the submission being graded, by its name."""

    def run(self) -> None:
        t0 = time.thread_time()
        try:
            super().run()
        finally:
            if _current is not None:
                _current.add_thread(self.name, time.thread_time() - t0)


class _ThreadingShim:
    """``threading`` as a module sees it, but with :class:`_CountedThread` as its ``Thread``."""

    Thread = _CountedThread

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


@contextlib.contextmanager
def _patched(patches: list[tuple[Any, str, Any]]) -> Iterator[list[str]]:
    """Set each ``(owner, name, make)`` to ``make(original)``; yields the names that were missing."""
    saved, missing = [], []
    for owner, name, make in patches:
        original = getattr(owner, name, None)
        if original is None:
            where = (
                getattr(owner, "__module__", "") + "." + getattr(owner, "__qualname__", "")
                if isinstance(owner, type)
                else getattr(owner, "__name__", "autograder.sandbox.execute.<a class>")
            )
            missing.append(f"{where}.{name}")
            continue
        saved.append((owner, name, original))
        setattr(owner, name, make(original))
    try:
        yield missing
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def _time_thread(field_name: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                if _current is not None:
                    setattr(_current, field_name, getattr(_current, field_name) + time.thread_time() - t0)

        return wrapper

    return make


def _grade_notebook(original: Any) -> Any:
    def wrapper(notebook: Any, assignment: Any, out_dir: Any, **kwargs: Any) -> Any:
        global _current
        r = Readings(Path(notebook).stem)
        r.hooks_missing = list(_missing)
        hierarchy, _ = cpu_accounting.available()
        if hierarchy is not None:  # the kernel's and the children's groups under the grade's: all counted
            try:
                r.process = CpuGroup("grade", under=_batch_group) if _batch_group else CpuGroup("grade", hierarchy)
                r.kernel = CpuGroup("kernel", under=r.process)
                r.process.enter()
            except OSError as e:  # graded all the same; its cgroup rows are then missing
                r.hooks_missing.append(f"a counting cgroup ({e})")
                for group in (r.kernel, r.process):
                    if group is not None:
                        group.remove(timeout_s=0)
                r.kernel = r.process = None
        caller = kwargs.pop("on_stage", None)

        def on_stage(name: str) -> None:
            r.marks.append((name, self_seconds()))
            if caller is not None:
                caller(name)

        _current = r
        children0 = children_seconds()
        r.marks.append(("setup", self_seconds()))
        try:
            return original(notebook, assignment, out_dir, on_stage=on_stage, **kwargs)
        finally:
            r.marks.append(("end", self_seconds()))
            r.template = _templates_cpu_delta()
            other_children = children_seconds() - children0
            for label, (group, _) in list(r.live_children.items()):  # never closed: count what it used
                r.children.append({"startup": group.seconds(), "job": 0.0, "used": False, "jobs": 0})
                group.remove()
                r.live_children.pop(label)
            result = budget_of(r, other_children)
            _current = None
            if r.process is not None:
                r.process.leave()
            for group in (r.kernel, r.process):
                if group is not None:
                    group.remove()
            if _record_dir is not None:
                (_record_dir / f"{os.getpid()}-{time.monotonic_ns()}.json").write_text(json.dumps(result))

    return wrapper


_template_cpu: dict[tuple[int, float], float] = {}  # (pid, start time) → its own CPU s at the last reading


def _templates_cpu_delta() -> float:
    """The CPU this process's kernel templates used since the last call: their own (user + system,
    across their re-exec), not their children's, whose kernels count in each grade's kernel group."""
    import psutil

    from autograder.kernel_template import template_slot

    delta = 0.0
    for pid in template_slot.running_pids():
        try:
            proc = psutil.Process(pid)
            key, times = (pid, proc.create_time()), proc.cpu_times()
        except psutil.Error:
            continue
        now = times.user + times.system
        delta += now - _template_cpu.get(key, 0.0)
        _template_cpu[key] = now
        if _batch_group is not None:  # it outlives the grade that started it: out of that grade's group
            with contextlib.suppress(OSError):
                _batch_group.procs.write_text(str(pid))
    return delta


def _kernel_command(original: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        argv, env = original(*args, **kwargs)
        if _current is not None and _current.kernel is not None:
            argv = cpu_accounting.join_prefix(_current.kernel) + list(argv)
        return argv, env

    return wrapper


def _child_request(original: Any) -> Any:
    """A kernel template's child joins the counting cgroup after the slot's (as ``_kernel_command``
    makes a fresh kernel do): the child writes itself into every ``cgroup_procs`` file in order."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        request = original(*args, **kwargs)
        if _current is not None and _current.kernel is not None:
            request["cgroup_procs"] = [*request.get("cgroup_procs", []), str(_current.kernel.procs)]
        return request

    return wrapper


def _jailed_command(original: Any) -> Any:
    def wrapper(cmd: list[str], job_dir: Path, env: dict[str, str]) -> Any:
        jailed = original(cmd, job_dir, env)
        r = _current
        hierarchy, _ = cpu_accounting.available()
        if jailed is None or r is None or hierarchy is None:
            return jailed  # unjailed: the child is counted with the grader's other children
        try:
            group = CpuGroup("measure", under=r.process) if r.process is not None else CpuGroup("measure", hierarchy)
        except OSError:
            return jailed  # counted with the grader's other children
        r.live_children[str(job_dir)] = (group, [])
        return cpu_accounting.join_prefix(group) + list(jailed)

    return wrapper


def _worker_run(original: Any) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        entry = _current.live_children.get(str(self.job_dir)) if _current is not None else None
        if entry is not None:
            entry[1].append(entry[0].seconds())  # before each job: the first is its start-up and imports
        return original(self, *args, **kwargs)

    return wrapper


def _worker_close(original: Any) -> Any:
    def wrapper(self: Any) -> Any:
        try:
            return original(self)
        finally:
            r = _current
            entry = r.live_children.pop(str(self.job_dir), None) if r is not None else None
            if entry is not None:
                group, before = entry
                used = group.seconds()
                startup = before[0] if before else used
                r.children.append(
                    {"startup": startup, "job": used - startup, "used": bool(before), "jobs": len(before)}
                )
                group.remove()

    return wrapper


def _run_cell(original: Any) -> Any:
    async def wrapper(self: Any, client: Any, pos: int, budget_s: float) -> Any:
        r = _current
        before = r.kernel_s() if r is not None else 0.0
        if r is not None and r.first_cell_kernel is None:
            r.first_cell_kernel = before
        try:
            return await original(self, client, pos, budget_s)
        finally:
            if r is not None:
                try:
                    source = client.nb.cells[pos].source
                except (AttributeError, IndexError):
                    source = ""
                r.cells["import" if is_import_only(source) else "other"] += r.kernel_s() - before

    return wrapper


def _probe_run(original: Any) -> Any:
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        r = _current
        kernel0, loop0 = (r.kernel_s() if r is not None else 0.0), time.thread_time()
        try:
            return await original(self, *args, **kwargs)
        finally:
            if r is not None:
                r.probe_kernel += r.kernel_s() - kernel0
                r.probe_loop += time.thread_time() - loop0

    return wrapper


def _batch_part(key: str) -> Callable[[Any], Any]:
    """Around a per-batch step in the batch's own process: its CPU and its children's."""

    def make(original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = self_seconds() + children_seconds()
            try:
                return original(*args, **kwargs)
            finally:
                _batch[key] = _batch.get(key, 0.0) + self_seconds() + children_seconds() - t0

        return wrapper

    return make


_missing: list[str] = []


@contextlib.contextmanager
def instrumented(record_dir: Path) -> Iterator[list[str]]:
    """The hooks, for the block: each graded submission writes its budget as JSON into ``record_dir``
    (a forked batch worker inherits them). Yields the functions that were not found (their rows are
    then missing: see :data:`HOOKS_WANTED`)."""
    global _record_dir
    from autograder import pipeline
    from autograder.measure import warm_pool, worker_process
    from autograder.report import figure, integrity, summary
    from autograder.jail import jail
    from autograder.kernel_template import template
    from autograder.sandbox import execute

    patches = [
        (pipeline, "grade_notebook", _grade_notebook),
        (jail, "kernel_command", _kernel_command),
        (template, "child_request", _child_request),
        (worker_process, "_jailed_command", _jailed_command),
        (worker_process.WorkerProcess, "run", _worker_run),
        (worker_process.WorkerProcess, "close", _worker_close),
        (getattr(execute, "_Run", None), "_execute", _run_cell),
        (getattr(execute, "ProbeRun", None), "run", _probe_run),
        (pipeline, "threading", lambda _: _ThreadingShim()),
        (warm_pool, "threading", lambda _: _ThreadingShim()),
        (pipeline, "judge", _time_thread("judge")),
        (pipeline, "_draw_pictures", _time_thread("picture")),
        (figure, "warm_up", _time_thread("figure_warm_up")),
        (integrity, "class_integrity", _batch_part("integrity")),
        (summary, "write_summary", _batch_part("summary")),
    ]
    _record_dir = record_dir
    with _patched(patches) as missing:
        _missing[:] = missing
        try:
            yield missing
        finally:
            _record_dir = None
            _missing.clear()


# The hooks in autograder/ that would make these patches unnecessary (bench/README.md lists them).
HOOKS_WANTED = (
    "`run_submission(..., on_cell=(index, phase))` called before and after each cell and around the probe, "
    "instead of patching `_Run._execute` and `ProbeRun.run`",
    "the slot cgroup's CPU counter in execution.json (`cpuacct.usage` / `cpu.stat`), read before the cgroup "
    "is removed, instead of a counting cgroup joined by patching `jail.kernel_command`",
    "each measuring child's CPU (`os.wait4`'s rusage when it is reaped, split at its `go`) in "
    "`WorkerRun`, instead of a counting cgroup per child",
    "the grader's per-thread CPU (warm-ups, starting the children, models beside the probe) in grade.json's "
    "`timings`, instead of a `threading` shim in `pipeline` and `warm_pool`",
)


# ── the run ──────────────────────────────────────────────────────────────────────────────────


def make_class(folder: Path, examples: list[str], round_index: int, assignment_id: str = ASSIGNMENT_ID) -> None:
    """One distinct copy of each example (a Markdown cell naming the round): nothing is ever cached."""
    folder.mkdir(parents=True)
    for i, name in enumerate(examples):
        nb = json.loads((ROOT / "assignments" / assignment_id / "examples" / f"{name}.ipynb").read_text())
        nb["cells"].append(
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": f"cpu budget round {round_index}",
                "id": f"cpubudget{round_index}",
            }
        )
        # the batch grades in name order: the first one of a round pays the worker's first imports,
        # so the order turns from one round to the next
        position = (i - round_index) % len(examples)
        (folder / f"r{round_index}p{position:02d}_{name}.ipynb").write_text(json.dumps(nb))


def batch_once(
    assignment: Any, examples: list[str], round_index: int, workdir: Path, kernel_template: bool = True
) -> dict[str, Any]:
    """One ``run_batch -j 1`` of the examples, instrumented; the per-submission and per-batch budgets.
    ``kernel_template``: as ``autograder batch`` (kernels from the slot's template where it holds),
    False as ``--fresh-kernels``."""
    from autograder.batch import run_batch
    from autograder.grade_options import GradeOptions

    base = workdir / f"cpu-budget-{round_index}"
    src, out, records = base / "class", base / "out", base / "records"
    make_class(src, examples, round_index, assignment.id)
    records.mkdir()
    _batch.clear()
    global _batch_group
    group = _batch_group = CpuGroup("batch")
    group.enter()
    try:
        with instrumented(records) as missing:
            summary = run_batch(
                src,
                out,
                assignment=assignment,
                options=GradeOptions(kernel_template=kernel_template),
                jobs=1,
                use_cache=False,
                progress=False,
            )
        batch_total = group.seconds()
    finally:
        from autograder.kernel_template import template_slot

        template_slot.close_all()  # a template kept by this process would keep the batch's group busy
        _batch_group = None
        group.leave()
        group.remove()
    subs = [json.loads(p.read_text()) for p in sorted(records.glob("*.json"))]
    for s in subs:
        s["example"] = s["name"].split("_", 1)[1] if "_" in s["name"] else s["name"]
    sub_total = sum(s["rows"]["total"] or 0.0 for s in subs)
    batch = {
        "integrity": _batch.get("integrity"),
        "summary": _batch.get("summary"),
        "submissions": sub_total,
        "batch_total": batch_total,
    }
    batch["batch_rest"] = batch_total - sub_total - (batch["integrity"] or 0.0) - (batch["summary"] or 0.0)
    statuses = summary.status_counts()
    shutil.rmtree(base, ignore_errors=True)
    return {"submissions": subs, "batch": batch, "statuses": statuses, "hooks_missing": missing}


def run(cfg: dict[str, Any], *, workdir: Path) -> dict[str, Any]:
    from autograder.assignment import load_assignment
    from autograder.sandbox import detect_isolation

    hierarchy, why = cpu_accounting.available()
    if hierarchy is None:  # said in the section, not a failure of the benchmarks (as a non-root run)
        log(f"cpu budget: not measured: {why}")
        return {"unavailable": why}
    assignment_id = cfg.get("cpu_assignment") or ASSIGNMENT_ID
    assignment = load_assignment(assignment_id)
    defaults = DEFAULT_EXAMPLES if assignment_id == ASSIGNMENT_ID else OTHER_EXAMPLES.get(assignment_id, ("reference",))
    examples = list(cfg.get("cpu_examples") or defaults)
    rounds = int(cfg.get("cpu_rounds", 3))
    runs = []
    for r in range(rounds):
        t0 = time.monotonic()
        runs.append(batch_once(assignment, examples, r, workdir, kernel_template=not cfg.get("cpu_fresh_kernels")))
        log(f"cpu budget: round {r + 1}/{rounds}: {len(examples)} submissions in {time.monotonic() - t0:.0f} s")
    result = summarize(
        runs, examples, hierarchy_version=hierarchy.version, isolation=detect_isolation(False).get("mode")
    )
    return {**result, "assignment": assignment_id, "kernels": "fresh" if cfg.get("cpu_fresh_kernels") else "template"}


def summarize(
    runs: list[dict[str, Any]],
    examples: list[str],
    *,
    hierarchy_version: int | None = None,
    isolation: str | None = None,
) -> dict[str, Any]:
    """Medians over the rounds: per example and row, per batch row, and over every submission."""
    keys = [k for k, _ in KERNEL_ROWS + GRADER_ROWS + TOTAL_ROWS]
    per_example: dict[str, dict[str, Any]] = {}
    for ex in examples:
        subs = [s for run_ in runs for s in run_["submissions"] if s["example"] == ex]
        per_example[ex] = {k: spread([s["rows"].get(k) for s in subs]) for k in keys}
        per_example[ex]["children"] = [
            [round(c["startup"], 3), round(c["job"], 3), c.get("jobs", int(c["used"]))]
            for c in (subs[0]["children"] if subs else [])
        ]
    every = [s for run_ in runs for s in run_["submissions"]]
    overall = {k: spread([s["rows"].get(k) for s in every]) for k in keys}
    batch = {k: spread([run_["batch"].get(k) for run_ in runs]) for k, _ in BATCH_ROWS}
    missing = sorted(
        {m for run_ in runs for m in run_.get("hooks_missing", [])}
        | {m for s in every for m in s.get("hooks_missing", [])}
    )
    return {
        "rounds": len(runs),
        "examples": examples,
        "per_example": per_example,
        "overall": overall,
        "batch": batch,
        "statuses": [run_["statuses"] for run_ in runs],
        "hooks_missing": missing,
        "cgroup_version": hierarchy_version,
        "isolation": isolation,
        "children_per_submission": median([len(s["children"]) for s in every]),
    }


# ── the section ──────────────────────────────────────────────────────────────────────────────


def _c(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


CURES = {
    "kernel_start": "a warm kernel template per slot (the zygote) pays the interpreter and ipykernel once per slot",
    "kernel_import_cells": "a template that has imported the lesson's libraries makes the import cells nearly free",
    "children_startup": "a measuring template (a pre-imported process forking a child per submission) pays ONNX "
    "Runtime's import once per slot; a submission's models already share as few children as the cores allow",
    "children_jobs": "fewer or smaller runs of the models (the picture's grid, the hidden set's size)",
    "warm_ups": "the assignment's data sets and imports loaded once per worker, not once per submission",
    "figure_warm_up": "matplotlib imported and warmed once per worker, not once per submission",
    "beside_probe": "the reference answers' sessions and data made once per worker",
    "measure": "the assignment's own work after the kernel (functions, RESULTS): the reference's sessions made "
    "once per worker",
    "picture": "the picture drawn once, only in the format each report needs",
    "reports": "the reports' templates compiled once per worker",
    "execute_rest": "the jail's set-up and the kernel client's polling (fewer wake-ups while cells run)",
    "other_children": "the notebook's parse in a limited child: a warm parser per worker",
}


def dominant(result: dict[str, Any]) -> tuple[str, str, float | None]:
    """The grader's row with the largest median CPU over every submission, its label and seconds."""
    labels = dict(GRADER_ROWS)
    values = {k: result["overall"][k]["median"] for k in labels if result["overall"].get(k)}
    values = {k: v for k, v in values.items() if v is not None}
    if not values:
        return "", "", None
    top = max(values, key=lambda k: values[k])
    return top, labels[top], values[top]


def section(result: dict[str, Any] | None, machine: dict[str, Any] | None = None) -> list[str]:
    lines = [TITLE, ""]
    if not result:
        return lines + ["Not run.", ""]
    if result.get("unavailable"):
        return lines + [f"Not measured on this machine: {result['unavailable']}.", ""]
    ex = result["examples"]
    load = (machine or {}).get("load_average_start")
    lines += [
        f"CPU seconds (user + system), not wall time: `run_batch -j 1` of {len(ex)} example notebooks"
        f"{' of ' + result['assignment'] if result.get('assignment', ASSIGNMENT_ID) != ASSIGNMENT_ID else ''}, "
        f"{result['rounds']} round(s) of distinct copies with no cache; medians over the rounds. The jailed "
        f"kernel and each measuring child are counted by a cgroup of their own (cgroup v"
        f"{result.get('cgroup_version')}), the grader's process by `getrusage` at its stage marks and by "
        f"per-thread CPU; jail `{result.get('isolation')}`"
        + (
            "; kernels from the slot's kernel template (the batch's default: its one start per slot is in "
            "the whole batch's row, not the submissions')"
            if result.get("kernels") == "template"
            else "; a fresh kernel per submission (`--fresh-kernels`)"
        )
        + ". CPU time barely depends on what else the machine "
        "runs, so these figures compare across runs"
        + (f" (this one at load {load}: the wall times of the other sections would not)" if load else "")
        + ". How each row is read: [README.md](README.md#7--cpu-budget-per-stage-bench_cpu_budgetpy).",
        "",
    ]
    head = "| stage (CPU s per submission) | " + " | ".join(f"`{e}`" for e in ex) + " | all |"
    lines += [head, "|---|" + "---:|" * (len(ex) + 1)]
    for key, label in KERNEL_ROWS + GRADER_ROWS + TOTAL_ROWS:
        cells = [_c(result["per_example"][e][key]["median"]) for e in ex] + [_c(result["overall"][key]["median"])]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Per batch of {len(ex)} (medians over the rounds, CPU s):",
        "",
        "| per batch | CPU s |",
        "|---|---:|",
    ]
    for key, label in BATCH_ROWS:
        lines.append(f"| {label} | {_c(result['batch'][key]['median'])} |")
    kernel = result["overall"]["kernel_total"]["median"]
    grader = result["overall"]["grader_total"]["median"]
    top, label, seconds = dominant(result)
    lines += [""]
    if kernel is not None and grader is not None:
        ratio = f" ({grader / kernel:.2f}× the notebook's own work)" if kernel else ""
        lines.append(
            f"- Per submission the grader's own CPU is {grader:.2f} s against the jailed kernel's "
            f"{kernel:.2f} s{ratio}."
        )
    if top:
        lines.append(
            f"- The largest part of the grader's own CPU: *{label}*, {seconds:.2f} s per submission. What "
            f"would move it: {CURES.get(top, 'see the rows above')}."
        )
    start = result["overall"]["kernel_start"]["median"]
    imports = result["overall"]["kernel_import_cells"]["median"]
    if start is not None and imports is not None:
        lines.append(
            f"- The kernel's start and its import cells, from the slot's kernel template: {start + imports:.2f} s of "
            "CPU per submission (a fresh kernel's, `--cpu-fresh-kernels`, is what the template saves)."
            if result.get("kernels") == "template"
            else f"- A warm kernel template would save at most the kernel's start and its import cells: "
            f"{start + imports:.2f} s of CPU per submission."
        )
    first = []  # a grader's row that one round of an example paid far more than the others
    for key, label in GRADER_ROWS:
        worst = max(
            (
                (v["max"] - v["median"], v["median"], v["max"])
                for e in ex
                if (v := result["per_example"][e][key])["max"] is not None and v["median"] is not None
            ),
            default=None,
        )
        if worst is not None and worst[0] > 0.3:
            first.append((label, worst[1], worst[2]))
    if first:
        lines.append(
            "- Paid by the first submission a worker grades (the worker's first imports), hidden by the "
            "medians: " + "; ".join(f"*{label}* up to {mx:.2f} s (median {md:.2f} s)" for label, md, mx in first) + "."
        )
    per_child = {e: result["per_example"][e]["children"] for e in ex}
    unused = {e: [c[0] for c in children if not c[2]] for e, children in per_child.items()}  # c[2]: its jobs
    if any(unused.values()):
        lines.append(
            "- Measuring children started ahead and never given a job (the notebook wrote no such model), "
            "their start-up spent for nothing: "
            + "; ".join(f"`{e}` {len(u)} ({sum(u):.2f} s)" for e, u in unused.items() if u)
            + ". Starting them once the models exist, or from a template, would save it."
        )
    lines.append(
        "- Each measuring child, `(start-up, jobs, number of jobs)` (CPU s, CPU s, count), from one round: "
        + "; ".join(f"`{e}` {c}" for e, c in per_child.items())
        + "."
    )
    if result.get("hooks_missing"):
        lines.append(
            "- **Not measured** (a patched function of the grader was not found, or a counting cgroup could "
            "not be made; their rows are missing or hold the rest): "
            + ", ".join(f"`{m}`" for m in result["hooks_missing"])
            + "."
        )
    lines.append("- Statuses per round: " + "; ".join(str(s) for s in result["statuses"]) + ".")
    return lines + [""]


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """No goal of its own: the budget explains the other sections' goals."""
    return []
