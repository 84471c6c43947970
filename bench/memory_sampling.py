"""Sampling the memory of process trees (the batch and memory benchmarks use it).

:class:`TreeSampler` samples a process tree every ``interval_s`` with psutil and sorts each
process into

- ``kernel``: an ``ipykernel_launcher`` process, any process of a sandbox uid
  ``autograder-sb<slot>`` (a kernel template's child runs the kernel in-process), and everything
  they started (otter's kernel runs as the grader's own user);
- ``jail``: ``bwrap`` / ``setpriv`` between the grader and the kernel;
- ``grader``: everything else (the CLI or batch parent, its workers, the ONNX measuring child).

It records the peak of the summed RSS per kind (a concurrent peak) and each process's own
high-water mark (``VmHWM``, exact even between samples). RSS counts shared pages once per process:
libraries, and the pages a forked batch worker still shares with its parent, so RSS sums are upper
bounds. With ``pss_every=k`` it also reads ``Pss`` (proportional set size, shared pages split
between their users; the sum is what the tree really occupies) every k-th sample. That costs ~10 ms
per process, so the timed batch runs of ``bench_otter`` sample RSS only.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from autograder.jail.users import USER_PREFIX as SANDBOX_USER_PREFIX  # the jail's slot users

from .common import MiB, median

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
        self.hwm: dict[int, tuple[str, int, str]] = {}  # pid → (kind, VmHWM bytes, user)
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
            user = proc.username()
        except (self._psutil.Error, KeyError):
            return "grader"
        if name in ("bwrap", "setpriv"):
            return "jail"  # its argv names the kernel; not cached: setpriv execs into it
        # a kernel template's child runs the kernel in-process (no ipykernel_launcher in its argv),
        # as the slot's sandbox uid once it has dropped root
        in_sandbox = user.startswith(SANDBOX_USER_PREFIX)
        if in_sandbox or "ipykernel_launcher" in cmd or self._kinds.get(parents.get(proc.pid, -1)) == "kernel":
            self._kinds[proc.pid] = "kernel"  # a kernel, or anything a kernel started: the student's
            return "kernel"
        return "grader"  # not cached: a forked worker may still exec

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
            "peak_total": self.peak_total,
            "peak_grader": self.peak["grader"],
            "peak_jail": self.peak["jail"],
            "peak_kernel": self.peak["kernel"],
            "kernels_at_once": self.peak_kernels_at_once,
            "pss_total": self.peak_pss_total if self.pss_samples else None,
            "pss_grader": self.peak_pss["grader"] if self.pss_samples else None,
            "pss_kernel": self.peak_pss["kernel"] if self.pss_samples else None,
            "kernel_hwm_max": max(kernel_hwm, default=0),
            "grader_hwm_max": max(grader_hwm, default=0),
            "kernel_users": sorted({u for kind, _, u in self.hwm.values() if kind == "kernel"}),
            "processes": len(self.hwm),
            "samples": self.samples,
            "pss_samples": self.pss_samples,
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

    return {
        "total_mb": mb("peak_total"),
        "grader_mb": mb("peak_grader"),
        "kernel_mb": mb("peak_kernel"),
        "pss_total_mb": mb("pss_total"),
        "pss_grader_mb": mb("pss_grader"),
        "pss_kernel_mb": mb("pss_kernel"),
        "kernel_hwm_mb": memory["kernel_hwm_max"] / MiB,
        "grader_hwm_mb": memory["grader_hwm_max"] / MiB,
        "kernel_users": memory.get("kernel_users", []),
    }


def summarize(runs: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Medians over the rounds of each per-in-flight figure."""
    ok = [r for r in runs if r]
    keys = (
        "total_mb",
        "grader_mb",
        "kernel_mb",
        "pss_total_mb",
        "pss_grader_mb",
        "pss_kernel_mb",
        "kernel_hwm_mb",
        "grader_hwm_mb",
    )
    out: dict[str, Any] = {k: median([r[k] for r in ok if r.get(k) is not None]) for k in keys}
    out["kernel_users"] = sorted({u for r in ok for u in r.get("kernel_users", [])})
    out["rounds"] = len(ok)
    return out
