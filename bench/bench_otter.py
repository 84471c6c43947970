"""Batches of N distinct submissions: ``autograder batch -j 1 / -j 2`` vs ``otter run`` one / two at a time.

- The otter equivalent of the assignment is built from a COPY of the otter-assign master
  (``reference/07-quantization/master.ipynb``) with one change, ``generate: false`` →
  ``generate: true``: the master deliberately asks ``otter assign`` for no autograder zip (this
  harness grades the assignment), and ``otter run`` needs that zip. Nothing else is changed.
- The submissions are the assignment's example notebooks, cycled to N, each with one appended
  Markdown cell naming it (``bench_batch.make_class``): every notebook is distinct, so the
  execution cache (which never runs an identical notebook twice) has nothing to skip.
- ``otter run`` has no batch mode without Docker: "one at a time" is one ``otter run`` process
  after another, "two at a time" two such processes side by side (two threads feeding them).
- The four runs (autograder -j 1, otter ×1, autograder -j 2, otter ×2) are interleaved in each
  round, the order flipping from round to round; every process tree is sampled for memory.
"""

from __future__ import annotations

import functools
import json
import queue
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .common import (
    ASSIGNMENT_ID,
    EXAMPLES,
    MASTER,
    THREAD_VARS,
    log,
    median,
    paired_ratios,
    read_json,
    round_order,
    run_child,
    spread,
    tool,
)
from .format import SECTION_TITLES, fmt_s, fmt_x, goal, goal_lines
from .memory_sampling import TreeSampler, children_sampler, per_in_flight
from .memory_sampling import summarize as memory_summary

GOAL_VS_OTTER = 1.3  # -j 2 at least 1.3× faster than otter two at a time
GOAL_SCALING = 1.9  # -j 2 at least 1.9× faster than -j 1
GOAL_VS_BARE = 1.0  # -j 2 no slower than bare nbclient two at a time (one BLAS thread)
GENERATE_RE = re.compile(r"^generate:\s*false\b", re.MULTILINE)


# ── the otter assignment ─────────────────────────────────────────────────────────────────────


def build_otter_assignment(workdir: Path, *, timeout_s: float = 300) -> dict[str, Any]:
    """``otter assign`` on a copy of the master with ``generate: true``; the autograder zip's path."""
    folder = workdir / "otter-assign"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    nb = json.loads(MASTER.read_text())
    config = nb["cells"][0]
    source = "".join(config["source"]) if isinstance(config["source"], list) else config["source"]
    if config.get("cell_type") != "raw" or "# ASSIGNMENT CONFIG" not in source:
        raise RuntimeError(f"{MASTER}: the first cell is not otter's raw '# ASSIGNMENT CONFIG' cell")
    patched, count = GENERATE_RE.subn("generate: true", source)
    change = "generate: false → generate: true" if count else "none (the master already generates the zip)"
    config["source"] = patched
    (folder / "master.ipynb").write_text(json.dumps(nb, indent=1))
    res = run_child(
        [tool("otter"), "assign", "--no-run-tests", "master.ipynb", "dist"], cwd=folder, timeout_s=timeout_s
    )
    if not res.ok:  # older otter has no --no-run-tests; the master says run_tests: false anyway
        res = run_child([tool("otter"), "assign", "master.ipynb", "dist"], cwd=folder, timeout_s=timeout_s)
    zips = sorted((folder / "dist" / "autograder").glob("*.zip"))
    if not res.ok or not zips:
        raise RuntimeError(f"otter assign failed (exit {res.returncode}): {(res.stderr or res.stdout)[-1500:]}")
    return {
        "zip": str(zips[-1]),
        "seconds": res.seconds,
        "change": change,
        "tests": sorted(p.stem for p in (folder / "dist" / "autograder" / "tests").glob("*.py")),
    }


# ── the submissions ──────────────────────────────────────────────────────────────────────────


def make_submissions(dest: Path, n: int, names: list[str] | None = None) -> list[Path]:
    """``n`` distinct notebooks in ``dest``: the examples (or only ``names``) cycled, made unique.

    Uses ``bench_batch.make_class`` (the batch benchmark's class, one Markdown cell appended to
    each copy), so both benchmarks grade the same kind of class.
    """
    from .bench_batch import make_class

    shutil.rmtree(dest, ignore_errors=True)
    examples = EXAMPLES
    if names:
        examples = dest.parent / f"{dest.name}-examples"
        shutil.rmtree(examples, ignore_errors=True)
        examples.mkdir(parents=True)
        for name in names:
            shutil.copyfile(EXAMPLES / f"{name}.ipynb", examples / f"{name}.ipynb")
    make_class(dest, n, examples)
    return sorted(dest.glob("*.ipynb"))


# ── one batch each way ───────────────────────────────────────────────────────────────────────


@functools.lru_cache(maxsize=1)
def _cli_has_batch() -> bool:
    return run_child([tool("autograder"), "batch", "--help"], timeout_s=60).ok


def batch_argv(source: Path, out: Path, jobs: int) -> list[str]:
    """``autograder batch`` when the CLI has it, else the same ``run_batch`` through ``python -c``."""
    if _cli_has_batch():
        return [
            tool("autograder"),
            "batch",
            str(source),
            "--out",
            str(out),
            "-j",
            str(jobs),
            "--no-progress",
            "-a",
            ASSIGNMENT_ID,
        ]
    code = (
        "import sys; from pathlib import Path; from autograder.assignment import load_assignment; "
        "from autograder.batch import run_batch; "
        "run_batch(Path(sys.argv[1]), Path(sys.argv[2]), assignment=load_assignment('07-quantization'), "
        "jobs=int(sys.argv[3]), progress=False)"
    )
    return [sys.executable, "-c", code, str(source), str(out), str(jobs)]


def autograder_batch(source: Path, out: Path, jobs: int, timeout_s: float, *, sampler: Any = None) -> dict[str, Any]:
    """``autograder batch`` of ``source`` into a fresh ``out``; wall time, outcome, sampled memory."""
    shutil.rmtree(out, ignore_errors=True)
    argv = batch_argv(source, out, jobs)
    res = run_child(argv, timeout_s=timeout_s, sampler_factory=sampler or (lambda pid: TreeSampler(pid)))
    subs = [s for s in (read_json(p) for p in sorted(out.glob("*/submission.json"))) if isinstance(s, dict)]
    statuses: dict[str, int] = {}
    for s in subs:
        statuses[str(s.get("status"))] = statuses.get(str(s.get("status")), 0) + 1
    if not res.ok:
        log(f"batch: autograder -j {jobs} exited {res.returncode}: {res.stderr[-800:]}")
    return {
        "seconds": res.seconds if res.ok else None,
        "returncode": res.returncode,
        "jobs": jobs,
        "via": "cli" if argv[0].endswith("autograder") else "python -c run_batch",
        "submissions": len(subs),
        "executed": sum(bool(s.get("executed")) for s in subs),
        "cached": sum(bool(s.get("cached")) for s in subs),
        "statuses": statuses,
        "per_submission_s": median([s.get("duration_s") for s in subs]),
        "scores": [(read_json(p) or {}).get("score") for p in sorted(out.glob("*/grade.json"))],
        "memory": res.memory,
    }


def otter_batch(
    notebooks: list[Path],
    otter_zip: Path,
    out: Path,
    parallel: int,
    timeout_s: float,
    *,
    pss_every: int = 0,
    one_thread: bool = False,
) -> dict[str, Any]:
    """``otter run`` on every notebook, ``parallel`` processes at a time; wall time and per-notebook facts.

    ``one_thread``: otter (and so its kernel) gets the jail's one-thread BLAS/OpenMP settings.
    """
    env = {**os.environ, **{v: "1" for v in THREAD_VARS}} if one_thread else None
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    todo: queue.Queue[Path] = queue.Queue()
    for nb in notebooks:
        todo.put(nb)
    done: list[dict[str, Any]] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                nb = todo.get_nowait()
            except queue.Empty:
                return
            dest = out / nb.stem
            dest.mkdir()
            res = run_child(
                [tool("otter"), "run", "--no-logo", "-a", str(otter_zip), "-o", str(dest), str(nb)],
                timeout_s=timeout_s,
                cwd=dest,
                env=env,
            )
            score = _otter_score(dest / "results.json")
            with lock:
                done.append({"name": nb.stem, "seconds": res.seconds, "returncode": res.returncode, "score": score})

    sampler = children_sampler(pss_every=pss_every)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, name=f"otter-{i}") for i in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    memory = sampler.stop()
    failed = [d["name"] for d in done if d["returncode"] != 0 or d["score"] is None]
    if failed:
        log(f"batch: otter ×{parallel}: no result for {failed}")
    return {
        "seconds": seconds,
        "jobs": parallel,
        "submissions": len(done),
        "with_results": len(done) - len(failed),
        "failed": failed,
        "per_submission_s": median([d["seconds"] for d in done]),
        "scores": [d["score"] for d in done],
        "memory": memory,
    }


def _otter_score(path: Path) -> float | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return float(sum(t.get("score") or 0 for t in data.get("tests", []) if t.get("score") is not None))


def _bare_worker_ready() -> None:
    """A bare worker's initializer: nbclient and its stack imported once, before any notebook."""
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401


def bare_batch(notebooks: list[Path], out: Path, parallel: int, timeout_s: float) -> dict[str, Any]:
    """Plain nbclient on every notebook, ``parallel`` at a time: the floor a grading harness is held to.

    ``parallel`` long-lived worker processes (forked from this one, nbclient imported once in each)
    take the notebooks from one queue; each runs ``bench_overhead.bare_execute`` with one BLAS thread
    (what the jail gives the autograder's kernels): a fresh kernel, the cells, nothing else (no jail,
    no probe, no measuring, no report). The workers' start is inside the timed run, as the batch's is.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from .bench_overhead import bare_execute

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sampler = children_sampler()
    t0 = time.perf_counter()
    with ProcessPoolExecutor(
        parallel, mp_context=multiprocessing.get_context("fork"), initializer=_bare_worker_ready
    ) as pool:
        futures = [pool.submit(bare_execute, nb, int(timeout_s), out, one_thread=True) for nb in notebooks]
        done = []
        for nb, fut in zip(notebooks, futures):
            try:
                done.append({"name": nb.stem, **fut.result()})
            except Exception as exc:  # noqa: BLE001 - a notebook nbclient could not run: said, not fatal
                done.append({"name": nb.stem, "seconds": None, "error": f"{type(exc).__name__}: {exc}"})
    seconds = time.perf_counter() - t0
    memory = sampler.stop()
    failed = [d["name"] for d in done if d.get("seconds") is None]
    if failed:
        log(f"batch: bare ×{parallel}: nbclient failed on {failed}")
    return {
        "seconds": seconds if not failed else None,
        "jobs": parallel,
        "submissions": len(done),
        "with_results": len(done) - len(failed),
        "failed": failed,
        "per_submission_s": median([d["seconds"] for d in done]),
        "memory": memory,
    }


# ── the benchmark ────────────────────────────────────────────────────────────────────────────

# name → (tool, submissions at once, one BLAS thread); the goals compare "autograder -j 2" with otter ×2
CONFIGS = {
    "autograder -j 1": ("autograder", 1, False),
    "otter ×1": ("otter", 1, False),
    "autograder -j 2": ("autograder", 2, False),
    "otter ×2": ("otter", 2, False),
    "otter ×2, 1 thread": ("otter", 2, True),
    "bare ×2, 1 thread": ("bare", 2, True),
}


def run(cfg: dict[str, Any], *, workdir: Path, otter: dict[str, Any] | None) -> dict[str, Any]:
    n = int(cfg.get("batch_size", 20))
    rounds = int(cfg.get("batch_rounds", 1))
    timeout = float(cfg.get("batch_timeout_s", 3600))
    nb_timeout = float(cfg.get("timeout_s", 900))
    subs_dir = workdir / "batch-submissions"
    notebooks = make_submissions(subs_dir, n, cfg.get("batch_examples"))
    wanted = cfg.get("batch_configs") or list(CONFIGS)
    configs = [c for c in wanted if otter or CONFIGS[c][0] != "otter"]

    def one(config: str, r: int) -> dict[str, Any]:
        kind, jobs, one_thread = CONFIGS[config]
        folder = workdir / f"batch-{kind}-{jobs}{'-1t' if one_thread else ''}-r{r}"
        if kind == "autograder":
            return autograder_batch(subs_dir, folder, jobs, timeout)
        if kind == "bare":
            return bare_batch(notebooks, folder, jobs, nb_timeout)
        return otter_batch(notebooks, Path(otter["zip"]), folder, jobs, nb_timeout, one_thread=one_thread)

    repeat = [c for c in (cfg.get("batch_repeat_configs") or configs) if c in configs]
    raw: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in round_order(configs if r == 0 else repeat, r):
            res = one(config, r)
            raw[config].append(res)
            log(
                f"batch: round {r + 1}/{rounds} {config}: "
                + (f"{res['seconds']:.1f} s" if res["seconds"] is not None else "failed")
            )
    return summarize(
        raw,
        n=n,
        rounds=rounds,
        otter=otter,
        last_out=str(workdir / f"batch-autograder-2-r{rounds - 1}"),
        examples=sorted({p.stem.split("_", 1)[1] for p in notebooks}),
    )


def summarize(
    raw: dict[str, list[dict[str, Any]]],
    *,
    n: int,
    rounds: int,
    otter: dict[str, Any] | None,
    last_out: str,
    examples: list[str],
) -> dict[str, Any]:
    secs = {c: [r["seconds"] for r in runs] for c, runs in raw.items()}
    out: dict[str, Any] = {
        "size": n,
        "rounds": rounds,
        "rounds_per_config": {c: len(r) for c, r in raw.items()},
        "otter": otter,
        "last_out": last_out,
        "examples": examples,
        "configs": {},
        "ratios": {},
        "memory_per_in_flight": {},
    }
    for c, runs in raw.items():
        jobs = CONFIGS[c][1]
        flights = [per_in_flight(r.get("memory"), jobs) for r in runs]
        out["configs"][c] = {
            "wall_s": spread(secs[c]),
            "per_submission_s": median([r["per_submission_s"] for r in runs]),
            "throughput_per_min": median([n / r["seconds"] * 60 for r in runs if r["seconds"]]),
            "runs": [{k: v for k, v in r.items() if k != "memory"} for r in runs],
        }
        if any(flights):
            out["memory_per_in_flight"][c] = memory_summary(flights)
    pairs = {
        "otter ×1 / autograder -j 1": ("otter ×1", "autograder -j 1"),
        "otter ×2 / autograder -j 2": ("otter ×2", "autograder -j 2"),
        "otter ×2, 1 thread / autograder -j 2": ("otter ×2, 1 thread", "autograder -j 2"),
        "autograder -j 1 / autograder -j 2": ("autograder -j 1", "autograder -j 2"),
        "otter ×1 / otter ×2": ("otter ×1", "otter ×2"),
        "otter ×2 / otter ×2, 1 thread": ("otter ×2", "otter ×2, 1 thread"),
        "autograder -j 2 / bare ×2, 1 thread": ("autograder -j 2", "bare ×2, 1 thread"),
    }
    for label, (a, b) in pairs.items():
        if a in secs and b in secs:
            out["ratios"][label] = spread(paired_ratios(secs[a], secs[b]))
    return out


def _ratio(result: dict[str, Any], label: str) -> float | None:
    r = result.get("ratios", {}).get(label)
    return r["median"] if r else None


def _per_submission(result: dict[str, Any], config: str) -> float | None:
    return ((result.get("configs") or {}).get(config) or {}).get("per_submission_s")


def otter_rival(result: dict[str, Any]) -> str:
    """The otter run the goal compares with: two at a time with one BLAS thread when measured (the fair one)."""
    return "otter ×2, 1 thread" if "otter ×2, 1 thread" in (result.get("configs") or {}) else "otter ×2"


def _per_submission_words(result: dict[str, Any], config: str, rival: str) -> str:
    ours, theirs = _per_submission(result, config), _per_submission(result, rival)
    return (
        f"one submission took {ours:.1f} s with two in flight, against {theirs:.1f} s for {rival}; "
        if ours and theirs
        else ""
    )


def fix_vs_otter(result: dict[str, Any]) -> str:
    return _per_submission_words(result, "autograder -j 2", otter_rival(result)) + (
        "section 7's CPU budget gives the CPU of each of the grader's stages; the kernel template already takes "
        "the kernel's start and imports off every submission but the first of each slot, whose template start "
        "(bench_kernel_template.py) is paid once per slot while the other slot grades"
    )


def fix_vs_bare(result: dict[str, Any]) -> str:
    return _per_submission_words(result, "autograder -j 2", "bare ×2, 1 thread") + (
        "the kernel template saves the kernel's start and imports that bare pays, and the grader's own work (the "
        "probe, the measuring children and their jobs, the picture, the reports) adds what bare does not: section "
        "7's CPU budget gives each stage's share, the largest decides"
    )


def fix_scaling(result: dict[str, Any]) -> str:
    one, two = _per_submission(result, "autograder -j 1"), _per_submission(result, "autograder -j 2")
    slow = (
        f"with two in flight each submission took {two / one:.2f}× as long as alone ({one:.1f} s → {two:.1f} s): "
        if one and two
        else ""
    )
    return (
        slow + "at -j 1 the kernel runs on one core while the grader's own work for it (warm-ups, the three "
        "measuring children, the picture) and anything else on the machine use the second, so one submission "
        "at a time already takes more than one core; -j 2 on 2 cores cannot double that. More cores than "
        "jobs closes it; on this machine the ceiling is 2 cores over the CPU a submission takes"
    )


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    rival = otter_rival(result)
    subject = (
        "`batch -j 2` vs otter two at a time"
        + (", both with one BLAS thread" if "1 thread" in rival else "")
        + f": speed-up ≥ {GOAL_VS_OTTER}×"
    )
    return [
        goal(
            subject,
            _ratio(result, f"{rival} / autograder -j 2"),
            GOAL_VS_OTTER,
            "×",
            lower_is_better=False,
            fix=fix_vs_otter(result),
        ),
        goal(
            f"`batch -j 2` vs bare nbclient two at a time, one BLAS thread: ≤ {GOAL_VS_BARE:.1f}× its time",
            _ratio(result, "autograder -j 2 / bare ×2, 1 thread"),
            GOAL_VS_BARE,
            "×",
            lower_is_better=True,
            fix=fix_vs_bare(result),
        ),
        goal(
            f"`batch -j 2` vs `-j 1`: speed-up ≥ {GOAL_SCALING}×",
            _ratio(result, "autograder -j 1 / autograder -j 2"),
            GOAL_SCALING,
            "×",
            lower_is_better=False,
            fix=fix_scaling(result),
        ),
    ]


def section(result: dict[str, Any] | None) -> list[str]:
    lines = [SECTION_TITLES[1], ""]
    if not result:
        return lines + ["Not run.", ""]
    otter = result.get("otter") or {}
    lines += [
        f"{result['size']} distinct submissions (the example notebooks {', '.join(f'`{e}`' for e in result['examples'])} "
        "cycled, each with an appended Markdown cell so the execution cache runs every one), "
        f"{result['rounds']} interleaved round(s)"
        + (
            " (after the first, only the runs the goals compare: "
            + ", ".join(c for c, k in result["rounds_per_config"].items() if k > 1)
            + ")"
            if len(set((result.get("rounds_per_config") or {}).values())) > 1
            else ""
        )
        + ". *autograder -j N* = `autograder batch SUBS --out DIR -j N` "
        "(a fresh output folder and cache each time); *otter ×N* = `otter run -a <zip> -o DIR NB` per "
        "notebook, N processes at a time (otter has no batch mode without Docker); *otter ×2, 1 thread* = "
        "the same with `OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1` in otter's environment, "
        "which its kernel inherits: the jail sets these for the autograder's kernels, and two default kernels, "
        "each starting one BLAS thread per core, oversubscribe a 2-core machine. The goal compares with the faster, "
        "one-thread otter when it ran. *bare ×2, 1 thread* = plain nbclient (`NotebookClient(nb, "
        'kernel_name="python3", allow_errors=True)`, one BLAS thread) in two worker processes that '
        "imported nbclient once, two notebooks at a time: a fresh kernel and the cells, nothing else, the floor.",
        "",
    ]
    if otter:
        lines += [
            f"otter assignment: `otter assign` on a copy of `reference/07-quantization/master.ipynb` with one "
            f"change, {otter.get('change')} (the master asks for no zip because this harness grades it); "
            f"built in {fmt_s(otter.get('seconds'))}, tests {', '.join(otter.get('tests', []))}.",
            "",
        ]
    via = sorted(
        {
            r.get("via")
            for c, v in result["configs"].items()
            if c.startswith("autograder")
            for r in v["runs"]
            if r.get("via")
        }
    )
    if via and via != ["cli"]:
        lines += [
            "The CLI of this build has no `batch` command, so the autograder runs called the same "
            "`autograder.batch.run_batch` through `python -c` (a new process, like the CLI).",
            "",
        ]
    lines += [
        "| run | wall time (median) | per submission | submissions / min | runs (s) | outcome |",
        "|---|---:|---:|---:|---|---|",
    ]
    for c, v in result["configs"].items():
        last = v["runs"][-1] if v["runs"] else {}
        if c.startswith("autograder"):
            outcome = f"{last.get('executed')} executed, {last.get('cached')} cached; " + ", ".join(
                f"{k} {n}" for k, n in sorted((last.get("statuses") or {}).items())
            )
        else:
            outcome = f"{last.get('with_results')}/{last.get('submissions')} " + (
                "ran" if c.startswith("bare") else "with results.json"
            )
        tput = v["throughput_per_min"]
        lines.append(
            f"| {c} | {fmt_s(v['wall_s']['median'])} | {fmt_s(v['per_submission_s'])} | "
            f"{'–' if tput is None else f'{tput:.1f}'} | {v['wall_s']['values']} | {outcome} |"
        )
    lines += ["", "| ratio (paired per round) | median | per round |", "|---|---:|---|"]
    for label, r in result["ratios"].items():
        lines.append(f"| {label} | {fmt_x(r['median'])} | {r['values']} |")
    lines += [
        "",
        "Speed-ups above 1 mean the first-named run took longer. The autograder does more per notebook "
        "than otter: it jails the kernel, calls the student's functions on its own probe cases and "
        "re-measures the three ONNX models on hidden data in a separate process; otter only runs the "
        "notebook's own test cells inside the student's kernel.",
        "",
    ]
    return lines + goal_lines(goals(result)) + [""]
