"""Dask distributed against the local pool, on the same machine.

1. **Same class, two engines.** ``dask_class_size`` (12) distinct notebooks (the examples, cycled,
   each made unique: nothing comes from the cache) are graded per round once with ``-j 2`` and
   once with ``--scheduler local:2`` (a LocalCluster of two single-threaded worker processes,
   started and closed inside the timed run), in alternating order. Reported: median wall times and
   the paired median ratio t(local:2) / t(-j 2). Goal: at most 10 % slower. The CPU seconds of each
   run by process (client, workers, kernels, measuring children; ``bench_dask_cpu.py``) and their
   paired ratio say where the difference goes.
2. **Per-task overhead of the scheduler path.** ``dask_overhead_tasks`` (1,000) distinct tiny
   notebooks whose execution is replaced by a copy of stored stage files (a cached submission's
   ``execution.json`` and ``measurements.json``): each task still goes client → scheduler →
   worker (bytes in), is judged and reported there, comes back as bytes and is written, cached
   and stamped by the client. The same 1,000 are graded on a running two-worker LocalCluster
   (``--scheduler tcp://…``; the cluster's start is not counted) and with ``-j 2``, interleaved.
   Reported: wall time per task on each engine, their paired difference (what the scheduler path
   adds per task: the goal, at most 20 ms), and the client process's CPU time per task (the client
   and, for a LocalCluster, the scheduler share that process).
3. A paragraph estimating 10,000 submissions on 50 workers from those figures.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .bench_dask_cpu import INTERVAL_S, ROLES, ProcessCpu
from .common import ASSIGNMENT_ID, EXAMPLES, ROOT, interleaved, log, paired_diffs, paired_ratios, read_json, spread
from .format import fmt_s, goal, goal_lines

TITLE = "## 5 · Dask distributed vs the local pool"
GOAL_SLOWDOWN = 1.10
GOAL_TASK_MS = 20.0
STUB_ENV = "AUTOGRADER_BENCH_STORED_STAGES"  # folder of the stage files the stub copies
STUB_PRELOAD = Path(__file__).resolve().parent / "dask_stub_preload.py"


def run(cfg: dict[str, Any], *, workdir: Path) -> dict[str, Any]:
    from autograder.assignment import load_assignment

    assignment = load_assignment(ASSIGNMENT_ID, ROOT)
    data: dict[str, Any] = {"class": _class_speed(cfg, workdir, assignment)}
    data["overhead"] = _task_overhead(cfg, workdir, assignment, data["class"]["last_out"])
    return data


# ── 1. the same class on both engines ───────────────────────────────────────────────────────


def _class_speed(cfg: dict[str, Any], workdir: Path, assignment: Any) -> dict[str, Any]:
    from autograder.batch import run_batch
    from autograder.grade_options import GradeOptions

    # as `autograder batch` grades on both engines: kernels from the slot's template where it holds
    options = GradeOptions(kernel_template=True)

    from .bench_batch import make_class

    n, rounds = int(cfg.get("dask_class_size", 12)), int(cfg.get("dask_rounds", 2))
    src = workdir / "dask-class"
    shutil.rmtree(src, ignore_errors=True)
    examples = EXAMPLES
    if cfg.get("dask_examples"):
        examples = workdir / "dask-examples"
        shutil.rmtree(examples, ignore_errors=True)
        examples.mkdir(parents=True)
        for name in cfg["dask_examples"]:
            shutil.copyfile(EXAMPLES / f"{name}.ipynb", examples / f"{name}.ipynb")
    make_class(src, n, examples)
    outs: dict[str, Path] = {}

    def one(label: str, **how: Any):
        def go(r: int) -> dict[str, Any]:
            out = workdir / f"dask-class-{label.replace(' ', '_').replace(':', '')}-{r}"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            with ProcessCpu() as cpu:
                summary = run_batch(
                    src, out, assignment=assignment, use_cache=False, progress=False, options=options, **how
                )
            seconds = time.perf_counter() - t0
            outs[label] = out
            kernels: dict[str, int] = {}
            for ex in out.glob("*/execution.json"):
                kind = str((read_json(ex) or {}).get("kernel"))
                kernels[kind] = kernels.get(kind, 0) + 1
            return {
                "kernels": kernels,
                "seconds": seconds,
                "cpu": cpu.seconds,
                "executed": summary.executed,
                "statuses": summary.status_counts(),
                "scores": [r["score"] for r in summary.rows],
            }

        return go

    results = interleaved(
        {"-j 2": one("-j 2", jobs=2), "--scheduler local:2": one("local:2", scheduler="local:2")},
        rounds,
        log=log,
        label="dask class: ",
    )
    local = [r["seconds"] for r in results["-j 2"]]
    dask = [r["seconds"] for r in results["--scheduler local:2"]]
    same = all(a["scores"] == b["scores"] for a, b in zip(results["-j 2"], results["--scheduler local:2"]))
    cpu = {
        engine: {role: spread([r["cpu"][role] / n for r in results[engine]]) for role in (*ROLES, "all")}
        for engine in ("-j 2", "--scheduler local:2")
    }
    return {
        "size": n,
        "rounds": rounds,
        "local_s": spread(local),
        "dask_s": spread(dask),
        "ratio": spread(paired_ratios(dask, local)),
        "cpu_per_submission": cpu,
        "cpu_ratio": spread(
            paired_ratios(
                [r["cpu"]["all"] for r in results["--scheduler local:2"]], [r["cpu"]["all"] for r in results["-j 2"]]
            )
        ),
        "same_scores": same,
        "kernels": {engine: results[engine][-1].get("kernels") for engine in ("-j 2", "--scheduler local:2")},
        "statuses": results["--scheduler local:2"][-1]["statuses"],
        "last_out": str(outs.get("-j 2", "")),
    }


# ── 2. per-task overhead on cached submissions ──────────────────────────────────────────────


def _task_overhead(cfg: dict[str, Any], workdir: Path, assignment: Any, graded: str) -> dict[str, Any]:
    import dask
    import distributed

    import autograder.pipeline
    from autograder.batch import run_batch

    n, rounds = int(cfg.get("dask_overhead_tasks", 1000)), int(cfg.get("dask_overhead_rounds", 3))
    stored = workdir / "dask-stored-stages"
    _store_stages(Path(graded), stored)
    src = workdir / "dask-tiny"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    for i in range(n):
        (src / f"t{i:05d}.ipynb").write_text(
            json.dumps(
                {
                    "nbformat": 4,
                    "nbformat_minor": 5,
                    "metadata": {},
                    "cells": [
                        {
                            "cell_type": "code",
                            "metadata": {},
                            "source": f"x = {i}",
                            "outputs": [],
                            "execution_count": None,
                            "id": "c0",
                        }
                    ],
                }
            )
        )
    os.environ[STUB_ENV] = str(stored)
    real = autograder.pipeline.execute_and_measure
    autograder.pipeline.execute_and_measure = stored_stages_stub(stored)  # the local pool's forks inherit it
    try:
        with dask.config.set({"distributed.worker.preload": [str(STUB_PRELOAD)]}):
            cluster = distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
            )
        try:

            def one(label: str, **how: Any):
                def go(r: int) -> dict[str, float]:
                    out = workdir / f"dask-tiny-{label}-{r}"
                    shutil.rmtree(out, ignore_errors=True)
                    cpu0, t0 = time.process_time(), time.perf_counter()
                    summary = run_batch(src, out, assignment=assignment, progress=False, **how)
                    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                    if summary.executed != n:
                        raise RuntimeError(f"{label}: {summary.executed} of {n} went to a worker")
                    shutil.rmtree(out, ignore_errors=True)
                    return {"seconds": seconds, "cpu": cpu}

                return go

            results = interleaved(
                {"dask": one("dask", scheduler=cluster.scheduler_address), "local": one("local", jobs=2)},
                rounds,
                log=log,
                label="dask overhead: ",
            )
        finally:
            cluster.close()
    finally:
        autograder.pipeline.execute_and_measure = real
        os.environ.pop(STUB_ENV, None)
    dask_s = [r["seconds"] for r in results["dask"]]
    local_s = [r["seconds"] for r in results["local"]]
    return {
        "tasks": n,
        "rounds": rounds,
        "dask_ms": spread([s / n * 1000 for s in dask_s]),
        "local_ms": spread([s / n * 1000 for s in local_s]),
        "diff_ms": spread([d / n * 1000 for d in paired_diffs(dask_s, local_s)]),
        "client_cpu_ms": spread([r["cpu"] / n * 1000 for r in results["dask"]]),
    }


def _store_stages(graded: Path, dest: Path) -> None:
    """The execution.json and measurements.json of one graded (completed) submission of ``graded``."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for sub in sorted(p for p in graded.iterdir() if (p / "measurements.json").is_file()):
        if json.loads((sub / "execution.json").read_text()).get("status") == "completed":
            for name in ("execution.json", "measurements.json"):
                shutil.copyfile(sub / name, dest / name)
            return
    raise RuntimeError(f"no completed submission in {graded} to replay")


def stored_stages_stub(stored: Path):
    """``execute_and_measure`` that runs nothing: it copies stored stage files (a cache hit's work)."""

    def execute_and_measure(notebook, assignment, out_dir, workspace, **_: Any) -> dict[str, Any]:
        for name in ("execution.json", "measurements.json"):
            shutil.copyfile(stored / name, Path(out_dir) / name)
        return json.loads((stored / "measurements.json").read_text())

    return execute_and_measure


# ── RESULTS.md ──────────────────────────────────────────────────────────────────────────────


def goals(data: dict[str, Any]) -> list[dict[str, Any]]:
    cls, ovh = data.get("class") or {}, data.get("overhead") or {}
    return [
        goal(
            "`batch --scheduler local:2` vs `-j 2`, same class: at most 10 % slower",
            (cls.get("ratio") or {}).get("median"),
            GOAL_SLOWDOWN,
            "overhead",
            lower_is_better=True,
            fix="the CPU table above says which process holds it. Done: Dask's own periodic work (the "
            "profiler sampling each running job's stack every 10 ms, every server's 20 ms event-loop tick "
            "and 500 ms system monitor: about 0.13 of a core for a two-worker cluster, all batch long) is "
            "off or slowed on every worker and on a `local:N` cluster's scheduler and nannies, and each "
            "worker measures with its share of the cores as `-j N` does (dask_executor.py). Left: the "
            "LocalCluster's cold start (two spawned worker processes importing distributed and the grader, "
            "several seconds of wall time on a busy machine, where the local pool forks warm workers), which "
            "a long-lived cluster (`--scheduler tcp://…`) or a larger class amortises, and the messages",
        ),
        goal(
            "Dask scheduler path: overhead per task over the local pool, 1,000 submissions with no execution: ≤ 20 ms",
            (ovh.get("diff_ms") or {}).get("median"),
            GOAL_TASK_MS,
            "ms",
            lower_is_better=True,
            fix="keep a second job queued on each worker to hide the client → scheduler → worker round trip "
            "(measured once at 2 ms per task over the local pool), at the price of Dask counting a worker's "
            "death against the job queued there too",
        ),
    ]


def _kernels_sentence(kernels: dict[str, dict[str, int]] | None) -> str:
    """The sentence counting the kernels each engine got (execution.json's ``kernel``), or nothing."""
    if not kernels:
        return ""
    said = "; ".join(
        f"{engine}: " + ", ".join(f"{kind} {n}" for kind, n in sorted((kinds or {}).items()))
        for engine, kinds in kernels.items()
    )
    return f" Kernels (execution.json's `kernel`, last round): {said}."


def section(data: dict[str, Any] | None) -> list[str]:
    lines = [TITLE, ""]
    if not data:
        return lines + ["Not run.", ""]
    cls, ovh = data.get("class") or {}, data.get("overhead") or {}
    if cls:
        lines += [
            f"{cls['size']} distinct submissions (the examples, cycled, nothing from the cache), graded with `-j 2` and "
            f"with `--scheduler local:2` (the LocalCluster's start and close inside the timed run), "
            f"{cls['rounds']} interleaved round(s). Same scores on both engines: "
            f"{'yes' if cls.get('same_scores') else '**no**'}.{_kernels_sentence(cls.get('kernels'))}",
            "",
            "| engine | median | min | max | runs (s) |",
            "|---|---:|---:|---:|---|",
            _row("`-j 2` (local pool)", cls["local_s"]),
            _row("`--scheduler local:2` (Dask)", cls["dask_s"]),
            "",
            f"Paired ratio t(local:2) / t(-j 2): median {cls['ratio']['median']:.3f}× (runs {cls['ratio']['values']}).",
            "",
        ]
        lines += _cpu_lines(cls)
    if ovh:
        lines += [
            f"{ovh['tasks']:,} distinct tiny submissions whose execution is a copy of stored stage files (what a "
            "cache hit replays): every one travels client → scheduler → worker and back as bytes, is judged "
            "and reported on the worker, then written, cached and stamped by the client. On a running "
            f"two-worker LocalCluster (`--scheduler tcp://…`) and with `-j 2`, {ovh['rounds']} interleaved "
            "round(s); milliseconds of wall time per submission:",
            "",
            "| engine | median | min | max | runs (ms) |",
            "|---|---:|---:|---:|---|",
            _row("Dask scheduler path", ovh["dask_ms"], unit="ms"),
            _row("`-j 2` (local pool)", ovh["local_ms"], unit="ms"),
            _row("difference (paired)", ovh["diff_ms"], unit="ms"),
            _row("client + scheduler CPU per task", ovh["client_cpu_ms"], unit="ms"),
            "",
        ]
    lines += goal_lines(goals(data)) + [""] + estimate(data) + [""]
    return lines


def estimate(data: dict[str, Any]) -> list[str]:
    """The 10,000-submissions-on-50-workers paragraph, from the measured figures."""
    cls, ovh = data.get("class") or {}, data.get("overhead") or {}
    dask_s = (cls.get("dask_s") or {}).get("median")
    task_ms = (ovh.get("dask_ms") or {}).get("median")
    cpu_ms = (ovh.get("client_cpu_ms") or {}).get("median")
    if not (dask_s and cls.get("size") and task_ms and cpu_ms):
        return []
    per_sub = dask_s * 2 / cls["size"]  # seconds of one worker per submission (2 workers)
    grade_min = 10_000 * per_sub / 50 / 60
    client_min = 10_000 * cpu_ms / 1000 / 60
    return [
        "**Estimate: 10,000 submissions on 50 workers.** Here one single-threaded worker spends "
        f"{per_sub:.1f} s per submission (the class above: {dask_s:.0f} s for {cls['size']} on 2 workers, "
        "start-up included, on a busy 2-core machine). Fifty such workers grade 10,000 in about "
        f"10,000 × {per_sub:.1f} s / 50 ≈ {grade_min:.0f} min. The client and scheduler cost "
        f"{cpu_ms:.1f} ms of CPU per submission ({client_min:.1f} min for 10,000), spread over the run: at "
        f"50 workers finishing one submission every {per_sub / 50 * 1000:.0f} ms between them, the client "
        f"is busy {cpu_ms / (per_sub / 50 * 1000) * 100:.0f} % of the time, so it is not the bottleneck "
        f"until about {per_sub * 1000 / cpu_ms:,.0f} workers. With no execution at all (a regrade "
        f"answered from a shared cache) the scheduler path's {task_ms:.1f} ms per submission on 2 workers "
        "bounds the rate at the client's. What the figures leave out: the time and cores each node "
        "needs to start its workers (seconds, once), the network between the client and a remote "
        "scheduler (the stage files, ~100 KB per submission back), and the timeouts and kernel deaths "
        "that are regraded alone at the end of the batch: one per machine at a time, each up to the "
        "notebook's limit, so with 25 two-worker nodes and 1 % of the class timing out (100 "
        "regrades of up to 8 min) that tail adds up to 100 / 25 × 8 ≈ 32 min."
    ]


def _cpu_lines(cls: dict[str, Any]) -> list[str]:
    """CPU seconds per submission by process, both engines (medians over the rounds)."""
    cpu, ratio = cls.get("cpu_per_submission"), cls.get("cpu_ratio")
    if not cpu or not ratio:
        return []
    local, dask = cpu["-j 2"], cpu["--scheduler local:2"]
    rows = [
        f"| {role} | {local[role]['median']:.2f} | {dask[role]['median']:.2f} | "
        f"{dask[role]['median'] - local[role]['median']:+.2f} |"
        for role in (*ROLES, "all")
    ]
    return [
        "CPU seconds per submission by process (psutil, sampled every "
        f"{INTERVAL_S:g} s; medians over the rounds; the client is the batch's process, which under "
        "`local:2` also holds Dask's scheduler and nannies):",
        "",
        "| process | `-j 2` | `local:2` | difference |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"Paired ratio of CPU, local:2 / -j 2: median {ratio['median']:.3f}× (runs {ratio['values']}).",
        "",
    ]


def _row(label: str, s: dict[str, Any], unit: str = "s") -> str:
    if unit == "ms":
        f = lambda v: "–" if v is None else f"{v:.1f} ms"  # noqa: E731
        return f"| {label} | {f(s['median'])} | {f(s['min'])} | {f(s['max'])} | {s['values']} |"
    return f"| {label} | {fmt_s(s['median'])} | {fmt_s(s['min'])} | {fmt_s(s['max'])} | {s['values']} |"
