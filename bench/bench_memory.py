"""Peak memory per submission in flight: the grader's own processes and the student's kernel.

The sampling itself (:class:`~bench.memory_sampling.TreeSampler`: grader, jail and kernel, RSS
and PSS) is in :mod:`bench.memory_sampling`.

The benchmark (``run``), interleaved per round, all with RSS and PSS: one reference notebook by
``autograder grade`` and by ``otter run``; then a class of a few submissions by
``autograder batch -j 2`` and by two ``otter run`` at a time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .bench_otter import autograder_batch, make_submissions, otter_batch
from .common import ASSIGNMENT_ID, example, interleaved, log, run_child, tool
from .format import SECTION_TITLES, fmt_mb, goal, goal_lines
from .memory_sampling import TreeSampler, per_in_flight, summarize

GOAL_MB = 500.0


# ── the benchmark ────────────────────────────────────────────────────────────────────────────

PSS_EVERY = 3  # with 0.2 s samples: PSS every 0.6 s


def run(cfg: dict[str, Any], *, otter_zip: Path | None, workdir: Path) -> dict[str, Any]:
    """Single notebook (grade CLI vs otter run), then a small class (-j 2 vs otter ×2), all sampled."""
    notebook = example(cfg.get("memory_notebook", "reference"))
    rounds = int(cfg.get("memory_rounds", 2))
    timeout = float(cfg.get("timeout_s", 900))
    sampler = lambda pid: TreeSampler(pid, pss_every=PSS_EVERY)  # noqa: E731
    variants = {"autograder grade": lambda r: _grade_cli(notebook, workdir, r, timeout, sampler)}
    if otter_zip is not None:
        variants["otter run"] = lambda r: _otter_run(notebook, otter_zip, workdir, r, timeout, sampler)
    raw = {
        k: [per_in_flight(m, 1) for m in v] for k, v in interleaved(variants, rounds, log=log, label="memory ").items()
    }

    class_size = int(cfg.get("memory_class_size", 4))
    if class_size:
        subs = workdir / "memory-class"
        notebooks = make_submissions(subs, class_size, cfg.get("memory_class_examples"))
        pair = {
            "autograder batch -j 2": lambda r: per_in_flight(
                autograder_batch(subs, workdir / f"memory-batch-{r}", 2, timeout * class_size, sampler=sampler)[
                    "memory"
                ],
                2,
            )
        }
        if otter_zip is not None:
            pair["otter run ×2"] = lambda r: per_in_flight(
                otter_batch(notebooks, otter_zip, workdir / f"memory-otter-{r}", 2, timeout, pss_every=PSS_EVERY)[
                    "memory"
                ],
                2,
            )
        raw.update(interleaved(pair, int(cfg.get("memory_class_rounds", 1)), log=log, label="memory "))
    return {
        "notebook": notebook.name,
        "rounds": rounds,
        "class_size": class_size,
        "class_rounds": int(cfg.get("memory_class_rounds", 1)),
        "variants": {name: summarize(runs) for name, runs in raw.items()},
    }


def _grade_cli(notebook: Path, workdir: Path, r: int, timeout: float, sampler: Any) -> dict[str, Any] | None:
    out = Path(tempfile.mkdtemp(prefix=f"mem-grade-{r}-", dir=workdir))
    res = run_child(
        [tool("autograder"), "grade", str(notebook), "--out", str(out), "-a", ASSIGNMENT_ID],
        timeout_s=timeout,
        sampler_factory=sampler,
    )
    if not res.ok:
        log(f"memory: autograder grade failed ({res.returncode}): {res.stderr[-400:]}")
        return None
    return res.memory


def _otter_run(
    notebook: Path, otter_zip: Path, workdir: Path, r: int, timeout: float, sampler: Any
) -> dict[str, Any] | None:
    out = Path(tempfile.mkdtemp(prefix=f"mem-otter-{r}-", dir=workdir))
    res = run_child(
        [tool("otter"), "run", "--no-logo", "-a", str(otter_zip), "-o", str(out), str(notebook)],
        timeout_s=timeout,
        sampler_factory=sampler,
        cwd=out,
    )
    if not res.ok:
        log(f"memory: otter run failed ({res.returncode}): {res.stderr[-400:]}")
        return None
    return res.memory


# ── the report ───────────────────────────────────────────────────────────────────────────────

FIX = (
    "the kernel's share (importing scikit-learn, ONNX Runtime and skl2onnx, training the MLP) is the "
    "student's and any grader pays it; the grader's own share shrinks with lazy imports in the CLI and "
    "the batch parent, and a smaller ONNX measuring child"
)


def goal_figure(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> tuple[float | None, str]:
    """The worst autograder figure per submission in flight: PSS of the memory runs, else RSS."""
    pss = [
        v["pss_total_mb"]
        for k, v in ((result or {}).get("variants") or {}).items()
        if k.startswith("autograder") and v.get("pss_total_mb") is not None
    ]
    if pss:
        return max(pss), "PSS"
    rss = [
        v["total_mb"]
        for k, v in ((result or {}).get("variants") or {}).items()
        if k.startswith("autograder") and v.get("total_mb") is not None
    ]
    rss += [
        f["total_mb"]
        for k, f in ((batch or {}).get("memory_per_in_flight") or {}).items()
        if f and k.startswith("autograder") and f.get("total_mb") is not None
    ]
    return (max(rss), "RSS") if rss else (None, "")


def goals(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> list[dict[str, Any]]:
    value, how = goal_figure(result, batch)
    return [
        goal(
            f"peak memory per submission in flight ≤ {GOAL_MB:.0f} MB (grader + kernel, {how or 'RSS'}, worst run)",
            value,
            GOAL_MB,
            "MB",
            lower_is_better=True,
            fix=FIX,
        )
    ]


def _table(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| run | per submission in flight: PSS | of which grader | of which kernel | RSS (upper bound) "
        "| of which grader | of which kernel | largest kernel (HWM) | largest grader process (HWM) "
        "| kernel runs as |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, v in rows.items():
        if not v:
            continue
        lines.append(
            f"| {name} | {fmt_mb(v.get('pss_total_mb'))} | {fmt_mb(v.get('pss_grader_mb'))} | "
            f"{fmt_mb(v.get('pss_kernel_mb'))} | {fmt_mb(v.get('total_mb'))} | {fmt_mb(v.get('grader_mb'))} | "
            f"{fmt_mb(v.get('kernel_mb'))} | {fmt_mb(v.get('kernel_hwm_mb'))} | "
            f"{fmt_mb(v.get('grader_hwm_mb'))} | {', '.join(v.get('kernel_users') or []) or '–'} |"
        )
    return lines


def section(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> list[str]:
    """RESULTS.md lines for the memory benchmark (and the batch runs' per-in-flight figures)."""
    lines = [SECTION_TITLES[3], ""]
    flight = (batch or {}).get("memory_per_in_flight") or {}
    if not result and not flight:
        return lines + ["Not run.", ""]
    lines += [
        "Process trees sampled every 0.2 s with psutil; each figure is the peak of the tree's sum divided by "
        "the submissions graded at once. *PSS* splits shared pages between the processes that share them "
        "(what the tree really occupies; read every 0.6 s); *RSS* counts them in every process (libraries, "
        "pages a forked batch worker shares with its parent), an upper bound. *grader* = the grading "
        "processes (CLI or batch parent, workers, the ONNX measuring child); *kernel* = the student's "
        "ipykernel and its children (bwrap/setpriv, a few MB, are in the total only). *HWM* = the largest "
        "single process's own peak RSS (VmHWM, exact between samples).",
        "",
    ]
    if result:
        lines += [
            f"Memory runs: `{result['notebook']}` by `autograder grade` (CLI) and `otter run`, "
            f"{result['rounds']} interleaved round(s); then {result['class_size']} distinct submissions by "
            f"`autograder batch -j 2` and by two `otter run` at a time, {result['class_rounds']} round(s). "
            "Medians:",
            "",
        ]
        lines += _table(result["variants"]) + [""]
    if flight:
        lines += ["The timed batch runs of section 2 (RSS only: reading PSS would slow the timed runs):", ""]
        lines += _table(flight) + [""]
    return lines + goal_lines(goals(result, batch)) + [""]
