"""Batch grading: how much -j 2 gains over -j 1 on a class, and how fast a rescore of 100 submissions is.

1. A class of ``--n`` (20) submissions: the assignment's example notebooks, cycled, each copy made
   unique by an appended Markdown cell (so the cache never hits: every notebook is executed).
   Each round grades the whole class once with ``-j 1`` and once with ``-j 2``, into fresh folders
   with no cache, in alternating order (j1 j2, j2 j1, …). Reported: median wall time of each and
   the paired median ratio t(-j 1) / t(-j 2) (ideal on 2 free cores: 2.0×).
2. ``--rescore-n`` (100) stored submissions, copied from the graded class, rescored
   ``--rescore-rounds`` (5) times with nothing executed (execution raises if attempted).
   Reported: median wall time and time per submission.

Run: ``.venv/bin/python bench/bench_batch.py [--n 20] [--rounds 1] [--json out.json]``.
Slow (the -j 1 pass alone is n × ~15 s); not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT_ID = "07-quantization"


def make_class(src: Path, n: int, examples: Path) -> list[str]:
    """``n`` distinct notebooks in ``src`` from the examples, cycled; returns the example behind each."""
    notebooks = sorted(examples.glob("*.ipynb"))
    if not notebooks:
        sys.exit(f"no example notebooks in {examples}")
    src.mkdir(parents=True)
    origins = []
    for i in range(n):
        nb_path = notebooks[i % len(notebooks)]
        nb = json.loads(nb_path.read_text())
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": f"bench copy {i}", "id": f"bench{i}"})
        (src / f"s{i:03d}_{nb_path.stem}.ipynb").write_text(json.dumps(nb))
        origins.append(nb_path.name)
    return origins


def time_batch(src: Path, out: Path, assignment: Any, jobs: int) -> tuple[float, dict[str, int]]:
    from autograder.batch import run_batch

    started = time.perf_counter()
    summary = run_batch(src, out, assignment=assignment, jobs=jobs, use_cache=False, progress=False)
    elapsed = time.perf_counter() - started
    if summary.executed != len(summary.rows):
        sys.exit(f"-j {jobs}: executed {summary.executed} of {len(summary.rows)} (expected all)")
    return elapsed, summary.status_counts()


def stored_class(graded: Path, target: Path, n: int) -> Path:
    """A batch folder of ``n`` submissions copied (cycled) from the graded batch ``graded``."""
    from autograder.batch import read_batch_file

    batch = read_batch_file(graded)
    assert batch is not None, f"{graded} is not a batch folder"
    subs = batch["submissions"]
    target.mkdir(parents=True)
    copies = []
    for i in range(n):
        task = dict(subs[i % len(subs)])
        name = f"r{i:03d}_{task['name']}"
        shutil.copytree(graded / task["name"], target / name)
        copies.append({**task, "name": name, "out_dir": str(target / name)})
    (target / "batch.json").write_text(json.dumps({**batch, "submissions": copies}, indent=1))
    return target


def time_rescore(out: Path, rounds: int) -> list[float]:
    import autograder.pipeline
    from autograder.batch import rescore

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("rescore tried to execute a notebook")

    saved = autograder.pipeline.execute_and_measure
    autograder.pipeline.execute_and_measure = refuse
    try:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            summary = rescore(out)
            times.append(time.perf_counter() - started)
            assert summary.graded == sum(1 for r in summary.rows if r["status"] != "grader_error")
        return times
    finally:
        autograder.pipeline.execute_and_measure = saved


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="submissions in the class (default 20)")
    ap.add_argument("--jobs", type=int, default=2, help="the parallel side (default 2)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of (-j 1, -j N) (default 1)")
    ap.add_argument("--rescore-n", type=int, default=100, help="stored submissions to rescore (default 100)")
    ap.add_argument("--rescore-rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)

    from autograder.assignment import load_assignment
    from autograder.environment import environment_versions

    assignment = load_assignment(ASSIGNMENT_ID)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        origins = make_class(work / "class", args.n, assignment.folder / "examples")
        times: dict[int, list[float]] = {1: [], args.jobs: []}
        statuses: dict[str, int] = {}
        last_graded = None
        for r in range(args.rounds):
            order = [1, args.jobs] if r % 2 == 0 else [args.jobs, 1]
            for jobs in order:
                out = work / f"round{r}-j{jobs}"
                elapsed, statuses = time_batch(work / "class", out, assignment, jobs)
                times[jobs].append(elapsed)
                print(f"round {r}: -j {jobs}: {elapsed:.1f} s  {statuses}", flush=True)
                last_graded = out
        ratios = [a / b for a, b in zip(times[1], times[args.jobs])]
        assert last_graded is not None
        rescore_times = time_rescore(stored_class(last_graded, work / "stored", args.rescore_n), args.rescore_rounds)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "submissions": args.n,
        "examples_used": sorted(set(origins)),
        "statuses": statuses,
        "j1_s": times[1],
        f"j{args.jobs}_s": times[args.jobs],
        "j1_median_s": statistics.median(times[1]),
        f"j{args.jobs}_median_s": statistics.median(times[args.jobs]),
        "speedup_median": statistics.median(ratios),
        "speedup_rounds": ratios,
        "rescore_submissions": args.rescore_n,
        "rescore_s": rescore_times,
        "rescore_median_s": statistics.median(rescore_times),
        "rescore_per_submission_ms": 1000 * statistics.median(rescore_times) / args.rescore_n,
        "cpu_count": os.cpu_count(),
        "environment": environment_versions(),
    }
    print(
        f"\nbatch of {args.n} submissions ({len(result['examples_used'])} distinct examples, "
        f"{result['cpu_count']} cores, {args.rounds} round(s)):"
    )
    print(f"  -j 1      median {result['j1_median_s']:.1f} s   ({result['j1_median_s'] / args.n:.1f} s per submission)")
    print(f"  -j {args.jobs}      median {result[f'j{args.jobs}_median_s']:.1f} s")
    print(
        f"  speed-up  {result['speedup_median']:.2f}x  (paired median of t(-j 1) / t(-j {args.jobs}); ideal {args.jobs:.1f}x)"
    )
    print(f"rescore of {args.rescore_n} stored submissions ({args.rescore_rounds} rounds, nothing executed):")
    print(
        f"  median {result['rescore_median_s']:.2f} s   ({result['rescore_per_submission_ms']:.1f} ms per submission)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
