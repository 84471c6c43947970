"""Rescoring a graded class of 100 submissions from their stored measurements (no notebook runs).

The 100 are made from a finished batch (the batch benchmark's last ``-j 2`` output, or a small
batch graded here when that benchmark did not run): its submission folders are copied under new
names until there are 100, and ``batch.json`` lists the copies. Then, interleaved per round:

- ``cli``: ``autograder rescore DIR`` (a new process: start-up, imports, 100 re-judgements,
  gradebook.csv and summary.html);
- ``in-process``: ``autograder.batch.rescore(DIR)`` in the benchmark's process (through
  ``bench_batch.time_rescore``, which makes any attempt to execute a notebook raise).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .common import interleaved, log, run_child, spread, tool
from .format import SECTION_TITLES, fmt_s, goal, goal_lines

GOAL_SECONDS = 5.0


def replicate_batch(src: Path, dest: Path, n: int) -> int:
    """A batch folder ``dest`` of ``n`` graded submissions copied from the finished batch ``src``."""
    from .bench_batch import stored_class

    shutil.rmtree(dest, ignore_errors=True)
    stored_class(src, dest, n)
    return len(json.loads((dest / "batch.json").read_text())["submissions"])


def small_batch(workdir: Path, timeout_s: float) -> Path:
    """A finished batch of two quick submissions, for when the batch benchmark did not run."""
    from .bench_otter import autograder_batch, make_submissions

    subs = workdir / "rescore-submissions"
    make_submissions(subs, 2, ["untouched"])
    out = workdir / "rescore-source"
    res = autograder_batch(subs, out, 2, timeout_s)
    if res["seconds"] is None:
        raise RuntimeError("the small batch for the rescore benchmark failed; see the log above")
    return out


def run(cfg: dict[str, Any], *, workdir: Path, source: Path | None) -> dict[str, Any]:
    n = int(cfg.get("rescore_size", 100))
    rounds = int(cfg.get("rescore_rounds", 5))
    if source is None or not (source / "batch.json").is_file():
        log("rescore: no finished batch to copy; grading two quick submissions first")
        source = small_batch(workdir, float(cfg.get("batch_timeout_s", 3600)))
    dest = workdir / f"rescore-{n}"
    copied = replicate_batch(source, dest, n)
    cli_ok = run_child([tool("autograder"), "rescore", "--help"], timeout_s=60).ok

    def cli(_r: int) -> float | None:
        res = run_child([tool("autograder"), "rescore", str(dest)], timeout_s=600)
        if not res.ok:
            log(f"rescore: autograder rescore exited {res.returncode}: {res.stderr[-600:]}")
        return res.seconds if res.ok else None

    def in_process(_r: int) -> float:
        from .bench_batch import time_rescore  # batch.rescore, with execution made to raise if attempted

        return time_rescore(dest, 1)[0]

    variants = {"in-process": in_process}
    if cli_ok:
        variants = {"cli": cli, **variants}
    raw = interleaved(variants, rounds, log=log, label="rescore ")
    profile = profile_rescore(dest) if cfg.get("rescore_profile", True) else None
    gradebook_rows = (
        max(0, len((dest / "gradebook.csv").read_text().splitlines()) - 1)
        if (dest / "gradebook.csv").is_file()
        else None
    )
    return {
        "size": copied,
        "rounds": rounds,
        "source": str(source),
        "cli_available": cli_ok,
        "seconds": {k: spread(v) for k, v in raw.items()},
        "gradebook_rows": gradebook_rows,
        "profile": profile,
    }


# (label, module path fragment, function name): disjoint parts of a rescore, summed from cProfile
PROFILE_PARTS = (
    ("fsync of every written file", "~", "<built-in method posix.fsync>"),
    ("TOML parsing (rubric, tolerances)", "tomllib", "loads"),
    ("JSON encoding", "json/encoder", "encode"),
    ("atomic renames", "~", "<built-in method posix.replace>"),
    ("judging", "autograder/judge.py", "judge"),
    ("summary.html (with its charts)", "autograder/report/summary.py", "write_summary"),
    ("integrity report (fingerprints, pairs)", "autograder/report/integrity.py", "integrity_report"),
)


def profile_rescore(dest: Path) -> dict[str, Any]:
    """One more in-process rescore under cProfile (not timed with the others): where its time goes."""
    import cProfile
    import pstats

    from autograder.batch import rescore

    prof = cProfile.Profile()
    prof.enable()
    rescore(dest)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, func) → (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    parts = {}
    for label, where, func in PROFILE_PARTS:
        hits = [(v[1], v[3]) for (file, _line, name), v in stats.items() if name == func and where in file]
        parts[label] = {"seconds": sum(h[1] for h in hits), "calls": sum(h[0] for h in hits)}
    return {"total_s": total, "parts": parts}


def headline(result: dict[str, Any]) -> tuple[str, float | None]:
    secs = result["seconds"]
    key = "cli" if "cli" in secs else "in-process"
    return key, secs[key]["median"]


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    key, value = headline(result)
    subject = (
        "`autograder rescore` of 100 submissions < 5 s"
        if key == "cli"
        else "`batch.rescore` (in-process; the CLI has no rescore command yet) of 100 submissions < 5 s"
    )
    return [goal(subject, value, GOAL_SECONDS, "s", lower_is_better=True, fix=fix_text(result))]


def fix_text(result: dict[str, Any]) -> str:
    prof = result.get("profile") or {}
    parts = prof.get("parts") or {}
    if not parts:
        return "profile a rescore (the judge, the file writes, summary.html) and remove per-submission repeats"
    top = sorted(parts.items(), key=lambda kv: -kv[1]["seconds"])[:3]
    where = ", ".join(f"{label} {p['seconds']:.2f} s ({p['calls']} calls)" for label, p in top)
    cures = []
    names = [label for label, _ in top]
    if any(n.startswith("TOML") for n in names):
        cures.append("parse the rubric and tolerances once per rescore instead of once per submission")
    if any(n.startswith("fsync") for n in names):
        cures.append("fsync once at the end (or per submission folder) instead of for every file")
    if any(n.startswith("summary") for n in names):
        cures.append("draw summary.html's plots once, without matplotlib's start-up on the critical path")
    if any(n.startswith("JSON") or n.startswith("judging") for n in names):
        cures.append("re-judge in a small process pool (the submissions are independent)")
    return (
        f"in a profiled rescore ({prof.get('total_s', 0):.2f} s under the profiler) the largest parts are "
        f"{where}; " + "; ".join(cures or ["remove the per-submission repeats the profile shows"])
    )


def section(result: dict[str, Any] | None) -> list[str]:
    lines = [SECTION_TITLES[2], ""]
    if not result:
        return lines + ["Not run.", ""]
    lines += [
        f"{result['size']} stored submissions (copies of a graded batch's folders), re-judged from their "
        f"measurements.json with nothing executed; {result['rounds']} interleaved round(s). Each run rewrites "
        "every results.json, feedback.md and grade.json, then gradebook.csv "
        f"({result['gradebook_rows']} rows) and summary.html.",
        "",
        "| how | median | min | max | runs (s) |",
        "|---|---:|---:|---:|---|",
    ]
    labels = {"cli": "`autograder rescore DIR` (new process)", "in-process": "`autograder.batch.rescore(DIR)`"}
    for key, s in result["seconds"].items():
        lines.append(
            f"| {labels.get(key, key)} | {fmt_s(s['median'])} | {fmt_s(s['min'])} | {fmt_s(s['max'])} | {s['values']} |"
        )
    if not result.get("cli_available"):
        lines += [
            "",
            "`autograder rescore` is not a command of the CLI in this build, so only the in-process "
            "figure was measured.",
        ]
    prof = result.get("profile") or {}
    if prof.get("parts"):
        lines += [
            "",
            f"Where a rescore's time goes (one more in-process run under cProfile, "
            f"{prof['total_s']:.2f} s with the profiler's own cost):",
            "",
            "| part | seconds | calls |",
            "|---|---:|---:|",
        ]
        for label, p in sorted(prof["parts"].items(), key=lambda kv: -kv[1]["seconds"]):
            lines.append(f"| {label} | {p['seconds']:.2f} | {p['calls']} |")
    return lines + [""] + goal_lines(goals(result)) + [""]
