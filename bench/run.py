"""Run the benchmarks and regenerate bench/RESULTS.md (``make bench``).

    .venv/bin/python bench/run.py                      # everything, ~20 min on 2 idle cores
    .venv/bin/python bench/run.py --quick              # a smoke run, ~3 min; writes to a temp file
    .venv/bin/python bench/run.py --only overhead,rescore --rounds 5
    .venv/bin/python bench/run.py --render-only raw.json   # rewrite RESULTS.md from a saved run

Benchmarks: ``overhead`` (grade vs bare nbclient), ``batch`` (20 submissions, -j 1 / -j 2 vs otter
run one / two at a time), ``rescore`` (100 stored submissions), ``memory`` (peak per submission in
flight), ``dask`` (``--scheduler local:2`` vs ``-j 2`` on one class; per-task overhead of the
scheduler path on 1,000 submissions with no execution), ``gradescope`` (the reference and the slowest
legal notebook in the simulated Gradescope container, at 768 MB / 0.5 CPU and at the recommended
settings), ``cpu`` (the CPU budget per stage of a ``-j 1`` batch of examples: the jailed kernel's
start, cells and probe, the measuring children, the grader's warm-ups, picture and reports, the
batch's integrity report and summary). See bench/README.md for what each figure means.

    .venv/bin/python bench/run.py --only dask --splice   # rerun one benchmark, replace its section in RESULTS.md
    .venv/bin/python bench/run.py --only cpu --splice    # the CPU budget per stage alone (~5 min)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (make bench): import the package ``bench`` from the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import (
    bench_cpu_budget,
    bench_dask,
    bench_gradescope,
    bench_memory,
    bench_otter,
    bench_overhead,
    bench_rescore,
)  # noqa: E402
from bench.common import ROOT, isolation_summary, load_average, log, machine_facts, read_json, write_json  # noqa: E402
from bench.report_md import all_goals, render, splice  # noqa: E402

BENCHMARKS = ("overhead", "batch", "rescore", "memory", "dask", "gradescope", "cpu")
DEFAULT_OUTPUT = ROOT / "bench" / "RESULTS.md"

FULL: dict[str, Any] = {
    "mode": "full",
    "overhead_notebooks": ["reference", "untouched", "quantize_no_saturation"],
    "overhead_rounds": 3,
    "overhead_cli": True,
    "batch_size": 20,
    "batch_rounds": 2,
    "batch_examples": None,
    # after round 1, repeat only the runs the goals compare (otter ×1 and default-thread ×2 are context)
    "batch_repeat_configs": ["autograder -j 1", "autograder -j 2", "otter ×2, 1 thread", "bare ×2, 1 thread"],
    "rescore_size": 100,
    "rescore_rounds": 5,
    "memory_notebook": "reference",
    "memory_rounds": 2,
    "memory_class_size": 4,
    "memory_class_examples": ["reference"],
    "memory_class_rounds": 1,
    "timeout_s": 900,
    "batch_timeout_s": 3600,
    "dask_class_size": 12,
    "dask_rounds": 3,
    "dask_examples": None,
    "dask_overhead_tasks": 1000,
    "dask_overhead_rounds": 3,
    "gradescope_rounds": 3,
    "gradescope_slow_rounds": 1,
    "cpu_examples": list(bench_cpu_budget.DEFAULT_EXAMPLES),
    "cpu_rounds": 3,
}
QUICK: dict[str, Any] = {
    **FULL,
    "mode": "quick",
    "overhead_notebooks": ["untouched"],
    "overhead_rounds": 1,
    "overhead_cli": True,
    "batch_size": 4,
    "batch_rounds": 1,
    "batch_examples": ["untouched"],
    "batch_repeat_configs": None,
    "rescore_size": 100,
    "rescore_rounds": 2,
    "memory_notebook": "untouched",
    "memory_rounds": 1,
    "memory_class_size": 2,
    "memory_class_examples": ["untouched"],
    "dask_class_size": 4,
    "dask_rounds": 1,
    "dask_examples": ["untouched"],
    "dask_overhead_tasks": 100,
    "dask_overhead_rounds": 1,
    "gradescope_rounds": 1,
    "gradescope_slow_rounds": 0,
    "cpu_examples": ["untouched"],
    "cpu_rounds": 1,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Figures are medians over repeated, interleaved runs; see bench/README.md.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: one quick notebook, batches of 4, one round; output to a temp file by default",
    )
    p.add_argument(
        "--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {', '.join(BENCHMARKS)} (default: all)"
    )
    p.add_argument("--rounds", type=int, help="rounds (repeats) of the overhead and memory benchmarks")
    p.add_argument(
        "--batch-rounds",
        type=int,
        help="rounds of the batch runs (default 2: all five runs once, then the three the goals compare)",
    )
    p.add_argument("--batch-size", type=int, help="submissions per batch (default 20)")
    p.add_argument("--rescore-rounds", type=int, help="rounds of the rescore benchmark (default 5)")
    p.add_argument("--cpu-rounds", type=int, help="rounds of the CPU budget's -j 1 batch (default 3)")
    p.add_argument("--dask-rounds", type=int, help="rounds of the Dask benchmark's class on both engines (default 3)")
    p.add_argument(
        "--dask-overhead-rounds", type=int, help="rounds of the Dask benchmark's 1,000 no-execution tasks (default 3)"
    )
    p.add_argument(
        "--cpu-assignment",
        help="the lesson of the CPU budget's batch (default 07-quantization, RESULTS.md's; another one "
        "belongs in its own --output)",
    )
    p.add_argument(
        "--cpu-fresh-kernels",
        action="store_true",
        help="the CPU budget's batch with a fresh kernel per submission (default: the kernel template)",
    )
    p.add_argument("--cpu-examples", help="comma-separated example names of the CPU budget's batch")
    p.add_argument("--notebooks", help="comma-separated example names for the overhead benchmark")
    p.add_argument("--no-cli", action="store_true", help="overhead: skip the `autograder grade` CLI variant")
    p.add_argument(
        "--output",
        type=Path,
        help=f"the Markdown to write (default {DEFAULT_OUTPUT.relative_to(ROOT)}; "
        "with --quick a file in the temp folder)",
    )
    p.add_argument("--json", type=Path, help="also save the raw results here (to re-render with --render-only)")
    p.add_argument("--workdir", type=Path, help="scratch folder (default: a new temp folder, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (batch outputs, otter results)")
    p.add_argument("--render-only", type=Path, metavar="RAW_JSON", help="only rewrite the Markdown from saved results")
    p.add_argument(
        "--splice",
        action="store_true",
        help="replace only the sections (and goal rows) of the benchmarks run in the existing Markdown, "
        "keeping the others as they are (for one benchmark rerun after a full run)",
    )
    return p.parse_args(argv)


def config_from(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(QUICK if args.quick else FULL)
    only = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in only if b not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"bench/run.py: unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}")
    cfg["only"] = only
    if args.rounds:
        cfg["overhead_rounds"] = cfg["memory_rounds"] = args.rounds
    if args.batch_rounds:
        cfg["batch_rounds"] = args.batch_rounds
    if args.batch_size:
        cfg["batch_size"] = args.batch_size
    if args.rescore_rounds:
        cfg["rescore_rounds"] = args.rescore_rounds
    if args.cpu_rounds:
        cfg["cpu_rounds"] = args.cpu_rounds
    if args.dask_rounds:
        cfg["dask_rounds"] = args.dask_rounds
    if args.dask_overhead_rounds:
        cfg["dask_overhead_rounds"] = args.dask_overhead_rounds
    if args.cpu_assignment:
        cfg["cpu_assignment"] = args.cpu_assignment
        if not args.cpu_examples:
            cfg["cpu_examples"] = None  # that lesson's default examples
    if args.cpu_fresh_kernels:
        cfg["cpu_fresh_kernels"] = True
    if args.cpu_examples:
        cfg["cpu_examples"] = [n.strip() for n in args.cpu_examples.split(",") if n.strip()]
    if args.notebooks:
        cfg["overhead_notebooks"] = [n.strip() for n in args.notebooks.split(",") if n.strip()]
    if args.no_cli:
        cfg["overhead_cli"] = False
    return cfg


def run_all(cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Every chosen benchmark in turn; one failing is a note in RESULTS.md, never an abort."""
    started = time.monotonic()
    data: dict[str, Any] = {"config": cfg, "machine": machine_facts(), "isolation": isolation_summary(), "notes": []}
    only = cfg["only"]
    otter = None
    if "batch" in only or "memory" in only:
        otter = _guarded(data, "otter assign", lambda: bench_otter.build_otter_assignment(workdir))
        if otter:
            log(f"otter assign: {otter['zip']} ({otter['change']})")
            data["notes"].append(
                f"otter-grader: the autograder zip was built by `otter assign` on a copy of the "
                f"master with one change: {otter['change']}."
            )
    if "overhead" in only:
        data["overhead"] = _guarded(data, "overhead", lambda: bench_overhead.run(cfg, workdir=workdir))
    if "batch" in only:
        data["batch"] = _guarded(data, "batch", lambda: bench_otter.run(cfg, workdir=workdir, otter=otter))
    if "rescore" in only:
        source = Path(data["batch"]["last_out"]) if data.get("batch") else None
        data["rescore"] = _guarded(data, "rescore", lambda: bench_rescore.run(cfg, workdir=workdir, source=source))
    if "dask" in only:
        data["dask"] = _guarded(data, "dask", lambda: bench_dask.run(cfg, workdir=workdir))
    if "memory" in only:
        zip_path = Path(otter["zip"]) if otter else None
        data["memory"] = _guarded(data, "memory", lambda: bench_memory.run(cfg, otter_zip=zip_path, workdir=workdir))
    if "gradescope" in only:
        data["gradescope"] = _guarded(data, "gradescope", lambda: bench_gradescope.run(cfg, workdir=workdir))
    if "cpu" in only:
        data["cpu"] = _guarded(data, "cpu", lambda: bench_cpu_budget.run(cfg, workdir=workdir))
    data["machine"]["load_average_end"] = load_average()
    data["elapsed_s"] = time.monotonic() - started
    data["goals"] = all_goals(data)
    return data


def _guarded(data: dict[str, Any], name: str, fn: Any) -> Any:
    log(f"{name}: start")
    t0 = time.monotonic()
    load_before = load_average()
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - reported in RESULTS.md, the other benchmarks still run
        traceback.print_exc()
        data["notes"].append(f"**{name} failed**: {type(e).__name__}: {str(e)[:600]}")
        data.setdefault("failed", []).append(name)
        return None
    seconds = time.monotonic() - t0
    data.setdefault("phases", {})[name] = {
        "seconds": round(seconds, 1),
        "load_before": load_before,
        "load_after": load_average(),
    }
    log(f"{name}: done in {seconds:.0f} s")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        data = read_json(args.render_only)
        if not isinstance(data, dict):
            raise SystemExit(f"bench/run.py: {args.render_only} is not a saved results file")
        output = args.output or DEFAULT_OUTPUT
        output.write_text(splice(output.read_text(), data) if args.splice and output.is_file() else render(data))
        log(f"wrote {output}")
        return 0
    cfg = config_from(args)
    output = args.output or (
        Path(tempfile.gettempdir()) / "autograder-bench-quick.md" if args.quick else DEFAULT_OUTPUT
    )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="autograder-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    workdir = workdir.resolve()
    log(f"mode {cfg['mode']}, benchmarks {', '.join(cfg['only'])}, scratch folder {workdir}")
    try:
        data = run_all(cfg, workdir)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    write_json(args.json or (Path(tempfile.gettempdir()) / "autograder-bench-raw.json"), data)
    if args.splice and output.is_file():
        output.write_text(splice(output.read_text(), data))
    else:
        output.write_text(render(data))
    log(f"wrote {output} (raw results: {args.json or Path(tempfile.gettempdir()) / 'autograder-bench-raw.json'})")
    for g in data["goals"]:
        verdict = "not measured" if g["met"] is None else "met" if g["met"] else "MISSED"
        log(f"goal {verdict}: {g['subject']} (measured {g['measured']}, target {g['target']})")
    return 1 if data.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
