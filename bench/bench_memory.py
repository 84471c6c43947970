"""Peak memory per submission in flight: the grader's own processes and the student's kernel.

:class:`TreeSampler` samples a process tree every ``interval_s`` with psutil and sorts each
process into

- ``kernel``: an ``ipykernel_launcher`` process and everything it started (in the jail it runs as
  the sandbox uid ``autograder-sb<slot>``; otter's kernel runs as the grader's own user);
- ``jail``: ``bwrap`` / ``setpriv`` between the grader and the kernel;
- ``grader``: everything else (the CLI or batch parent, its workers, the ONNX measuring child).

It records the peak of the summed RSS per kind (a concurrent peak) and each process's own
high-water mark (``VmHWM``, exact even between samples). RSS counts shared pages once per process:
libraries, and the pages a forked batch worker still shares with its parent, so RSS sums are upper
bounds. With ``pss_every=k`` it also reads ``Pss`` (proportional set size, shared pages split
between their users; the sum is what the tree really occupies) every k-th sample. That costs ~10 ms
per process, so the timed batch runs of ``bench_otter`` sample RSS only.

The benchmark (``run``), interleaved per round, all with RSS and PSS: one reference notebook by
``autograder grade`` and by ``otter run``; then a class of a few submissions by
``autograder batch -j 2`` and by two ``otter run`` at a time.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from .common import MiB, example, interleaved, log, median, run_child, tool

GOAL_MB = 500.0
KINDS = ("grader", "jail", "kernel")


def _proc_field_kb(pid: int, file: str, key: str) -> int:
    """``key``'s value (kB) in /proc/<pid>/<file> in bytes, or 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler:
    """Samples ``pid``'s process tree (``include_root``: the root itself too) in a thread until ``stop()``."""

    def __init__(self, pid: int, *, include_root: bool = True, interval_s: float = 0.2, pss_every: int = 0) -> None:
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(pid)
        self.include_root = include_root
        self.interval_s = interval_s
        self.pss_every = pss_every
        self.peak = {k: 0 for k in KINDS}
        self.peak_pss = {k: 0 for k in KINDS}
        self.peak_total = self.peak_pss_total = 0
        self.peak_kernels_at_once = 0
        self.hwm: dict[int, tuple[str, int, str]] = {}     # pid → (kind, VmHWM bytes, user)
        self.samples = self.pss_samples = 0
        self._kinds: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)
        self._thread.start()

    def _procs(self) -> list[Any]:
        try:
            kids = self.root.children(recursive=True)
        except self._psutil.Error:
            return []
        return ([self.root] if self.include_root else []) + kids

    def _kind(self, proc: Any, parents: dict[int, int]) -> str:
        if proc.pid in self._kinds:
            return self._kinds[proc.pid]
        try:
            name = proc.name()
            cmd = " ".join(proc.cmdline())
        except self._psutil.Error:
            return "grader"
        if name in ("bwrap", "setpriv"):
            return "jail"    # its argv names the kernel; not cached: setpriv execs into it
        if "ipykernel_launcher" in cmd or self._kinds.get(parents.get(proc.pid, -1)) == "kernel":
            self._kinds[proc.pid] = "kernel"  # a kernel, or anything a kernel started: the student's
            return "kernel"
        return "grader"      # not cached: a forked worker may still exec

    def sample(self) -> None:
        procs = self._procs()
        parents = {}
        for p in procs:
            try:
                parents[p.pid] = p.ppid()
            except self._psutil.Error:
                pass
        with_pss = self.pss_every > 0 and self.samples % self.pss_every == 0
        totals = {k: 0 for k in KINDS}
        pss = {k: 0 for k in KINDS}
        kinds: dict[int, str] = {}
        for p in sorted(procs, key=lambda p: p.pid):  # parents usually have lower pids
            try:
                rss = p.memory_info().rss
                user = p.username()
            except self._psutil.Error:
                continue
            kind = kinds[p.pid] = self._kind(p, parents)
            totals[kind] += rss
            if with_pss:
                pss[kind] += _proc_field_kb(p.pid, "smaps_rollup", "Pss:")
            hwm = _proc_field_kb(p.pid, "status", "VmHWM:")
            old = self.hwm.get(p.pid, (kind, 0, user))
            self.hwm[p.pid] = (kind, max(old[1], hwm, rss), user)
        kernels = sum(1 for pid, k in kinds.items() if k == "kernel" and kinds.get(parents.get(pid, -1)) != "kernel")
        for k in KINDS:
            self.peak[k] = max(self.peak[k], totals[k])
            self.peak_pss[k] = max(self.peak_pss[k], pss[k])
        self.peak_total = max(self.peak_total, sum(totals.values()))
        self.peak_pss_total = max(self.peak_pss_total, sum(pss.values()))
        self.peak_kernels_at_once = max(self.peak_kernels_at_once, kernels)
        self.samples += 1
        self.pss_samples += with_pss

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the summary in bytes: peaks per kind (RSS, PSS), per-process high-water marks."""
        self._stop.set()
        self._thread.join(5)
        kernel_hwm = [h for kind, h, _ in self.hwm.values() if kind == "kernel"]
        grader_hwm = [h for kind, h, _ in self.hwm.values() if kind == "grader"]
        return {
            "peak_total": self.peak_total, "peak_grader": self.peak["grader"], "peak_jail": self.peak["jail"],
            "peak_kernel": self.peak["kernel"], "kernels_at_once": self.peak_kernels_at_once,
            "pss_total": self.peak_pss_total if self.pss_samples else None,
            "pss_grader": self.peak_pss["grader"] if self.pss_samples else None,
            "pss_kernel": self.peak_pss["kernel"] if self.pss_samples else None,
            "kernel_hwm_max": max(kernel_hwm, default=0), "grader_hwm_max": max(grader_hwm, default=0),
            "kernel_users": sorted({u for kind, _, u in self.hwm.values() if kind == "kernel"}),
            "processes": len(self.hwm), "samples": self.samples, "pss_samples": self.pss_samples,
            "interval_s": self.interval_s,
        }


def children_sampler(interval_s: float = 0.2, pss_every: int = 0) -> TreeSampler:
    """A sampler of this process's children (not of the benchmark itself): what we start."""
    return TreeSampler(os.getpid(), include_root=False, interval_s=interval_s, pss_every=pss_every)


def per_in_flight(memory: dict[str, Any] | None, jobs: int) -> dict[str, float | None] | None:
    """MB per submission in flight from a sampled run with ``jobs`` submissions at once."""
    if not memory or not memory.get("samples"):
        return None
    n = max(1, jobs)

    def mb(key: str) -> float | None:
        return None if memory.get(key) is None else memory[key] / n / MiB

    return {"total_mb": mb("peak_total"), "grader_mb": mb("peak_grader"), "kernel_mb": mb("peak_kernel"),
            "pss_total_mb": mb("pss_total"), "pss_grader_mb": mb("pss_grader"), "pss_kernel_mb": mb("pss_kernel"),
            "kernel_hwm_mb": memory["kernel_hwm_max"] / MiB, "grader_hwm_mb": memory["grader_hwm_max"] / MiB,
            "kernel_users": memory.get("kernel_users", [])}


# ── the benchmark ────────────────────────────────────────────────────────────────────────────

PSS_EVERY = 3   # with 0.2 s samples: PSS every 0.6 s


def run(cfg: dict[str, Any], *, otter_zip: Path | None, workdir: Path) -> dict[str, Any]:
    """Single notebook (grade CLI vs otter run), then a small class (-j 2 vs otter ×2), all sampled."""
    from .bench_otter import autograder_batch, make_submissions, otter_batch

    notebook = example(cfg.get("memory_notebook", "reference"))
    rounds = int(cfg.get("memory_rounds", 2))
    timeout = float(cfg.get("timeout_s", 900))
    sampler = lambda pid: TreeSampler(pid, pss_every=PSS_EVERY)  # noqa: E731
    variants = {"autograder grade": lambda r: _grade_cli(notebook, workdir, r, timeout, sampler)}
    if otter_zip is not None:
        variants["otter run"] = lambda r: _otter_run(notebook, otter_zip, workdir, r, timeout, sampler)
    raw = {k: [per_in_flight(m, 1) for m in v] for k, v in
           interleaved(variants, rounds, log=log, label="memory ").items()}

    class_size = int(cfg.get("memory_class_size", 4))
    if class_size:
        subs = workdir / "memory-class"
        notebooks = make_submissions(subs, class_size, cfg.get("memory_class_examples"))
        pair = {"autograder batch -j 2": lambda r: per_in_flight(autograder_batch(
                    subs, workdir / f"memory-batch-{r}", 2, timeout * class_size, sampler=sampler)["memory"], 2)}
        if otter_zip is not None:
            pair["otter run ×2"] = lambda r: per_in_flight(otter_batch(
                notebooks, otter_zip, workdir / f"memory-otter-{r}", 2, timeout, pss_every=PSS_EVERY)["memory"], 2)
        raw.update(interleaved(pair, int(cfg.get("memory_class_rounds", 1)), log=log, label="memory "))
    return {"notebook": notebook.name, "rounds": rounds, "class_size": class_size,
            "class_rounds": int(cfg.get("memory_class_rounds", 1)),
            "variants": {name: summarize(runs) for name, runs in raw.items()}}


def summarize(runs: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Medians over the rounds of each per-in-flight figure."""
    ok = [r for r in runs if r]
    keys = ("total_mb", "grader_mb", "kernel_mb", "pss_total_mb", "pss_grader_mb", "pss_kernel_mb",
            "kernel_hwm_mb", "grader_hwm_mb")
    out: dict[str, Any] = {k: median([r[k] for r in ok if r.get(k) is not None]) for k in keys}
    out["kernel_users"] = sorted({u for r in ok for u in r.get("kernel_users", [])})
    out["rounds"] = len(ok)
    return out


def _grade_cli(notebook: Path, workdir: Path, r: int, timeout: float, sampler: Any) -> dict[str, Any] | None:
    out = Path(tempfile.mkdtemp(prefix=f"mem-grade-{r}-", dir=workdir))
    res = run_child([tool("autograder"), "grade", str(notebook), "--out", str(out)], timeout_s=timeout,
                    sampler_factory=sampler)
    if not res.ok:
        log(f"memory: autograder grade failed ({res.returncode}): {res.stderr[-400:]}")
        return None
    return res.memory


def _otter_run(notebook: Path, otter_zip: Path, workdir: Path, r: int, timeout: float,
               sampler: Any) -> dict[str, Any] | None:
    out = Path(tempfile.mkdtemp(prefix=f"mem-otter-{r}-", dir=workdir))
    res = run_child([tool("otter"), "run", "--no-logo", "-a", str(otter_zip), "-o", str(out), str(notebook)],
                    timeout_s=timeout, sampler_factory=sampler, cwd=out)
    if not res.ok:
        log(f"memory: otter run failed ({res.returncode}): {res.stderr[-400:]}")
        return None
    return res.memory


# ── the report ───────────────────────────────────────────────────────────────────────────────

FIX = ("the kernel's share (importing scikit-learn, ONNX Runtime and skl2onnx, training the MLP) is the "
       "student's and any grader pays it; the grader's own share shrinks with lazy imports in the CLI and "
       "the batch parent, and a smaller ONNX measuring child")


def goal_figure(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> tuple[float | None, str]:
    """The worst autograder figure per submission in flight: PSS of the memory runs, else RSS."""
    pss = [v["pss_total_mb"] for k, v in ((result or {}).get("variants") or {}).items()
           if k.startswith("autograder") and v.get("pss_total_mb") is not None]
    if pss:
        return max(pss), "PSS"
    rss = [v["total_mb"] for k, v in ((result or {}).get("variants") or {}).items()
           if k.startswith("autograder") and v.get("total_mb") is not None]
    rss += [f["total_mb"] for k, f in ((batch or {}).get("memory_per_in_flight") or {}).items()
            if f and k.startswith("autograder") and f.get("total_mb") is not None]
    return (max(rss), "RSS") if rss else (None, "")


def goals(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> list[dict[str, Any]]:
    from .report_md import goal

    value, how = goal_figure(result, batch)
    return [goal(f"peak memory per submission in flight ≤ {GOAL_MB:.0f} MB (grader + kernel, {how or 'RSS'}, "
                 "worst run)", value, GOAL_MB, "MB", lower_is_better=True, fix=FIX)]


def _table(rows: dict[str, dict[str, Any]]) -> list[str]:
    from .report_md import fmt_mb

    lines = ["| run | per submission in flight: PSS | of which grader | of which kernel | RSS (upper bound) "
             "| of which grader | of which kernel | largest kernel (HWM) | largest grader process (HWM) "
             "| kernel runs as |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, v in rows.items():
        if not v:
            continue
        lines.append(f"| {name} | {fmt_mb(v.get('pss_total_mb'))} | {fmt_mb(v.get('pss_grader_mb'))} | "
                     f"{fmt_mb(v.get('pss_kernel_mb'))} | {fmt_mb(v.get('total_mb'))} | {fmt_mb(v.get('grader_mb'))} | "
                     f"{fmt_mb(v.get('kernel_mb'))} | {fmt_mb(v.get('kernel_hwm_mb'))} | "
                     f"{fmt_mb(v.get('grader_hwm_mb'))} | {', '.join(v.get('kernel_users') or []) or '–'} |")
    return lines


def section(result: dict[str, Any] | None, batch: dict[str, Any] | None) -> list[str]:
    """RESULTS.md lines for the memory benchmark (and the batch runs' per-in-flight figures)."""
    from .report_md import SECTION_TITLES, goal_lines

    lines = [SECTION_TITLES[3], ""]
    flight = (batch or {}).get("memory_per_in_flight") or {}
    if not result and not flight:
        return lines + ["Not run.", ""]
    lines += ["Process trees sampled every 0.2 s with psutil; each figure is the peak of the tree's sum divided by "
              "the submissions graded at once. *PSS* splits shared pages between the processes that share them "
              "(what the tree really occupies; read every 0.6 s); *RSS* counts them in every process (libraries, "
              "pages a forked batch worker shares with its parent), an upper bound. *grader* = the grading "
              "processes (CLI or batch parent, workers, the ONNX measuring child); *kernel* = the student's "
              "ipykernel and its children (bwrap/setpriv, a few MB, are in the total only). *HWM* = the largest "
              "single process's own peak RSS (VmHWM, exact between samples).", ""]
    if result:
        lines += [f"Memory runs: `{result['notebook']}` by `autograder grade` (CLI) and `otter run`, "
                  f"{result['rounds']} interleaved round(s); then {result['class_size']} distinct submissions by "
                  f"`autograder batch -j 2` and by two `otter run` at a time, {result['class_rounds']} round(s). "
                  "Medians:", ""]
        lines += _table(result["variants"]) + [""]
    if flight:
        lines += ["The timed batch runs of section 2 (RSS only: reading PSS would slow the timed runs):", ""]
        lines += _table(flight) + [""]
    return lines + goal_lines(goals(result, batch)) + [""]
