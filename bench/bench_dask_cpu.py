"""CPU seconds of a batch by process, for the Dask benchmark: where ``local:2`` spends more than ``-j 2``.

:class:`ProcessCpu` samples the benchmark's process tree with psutil every ``INTERVAL_S`` while a
batch runs and keeps each process's last reading of its own CPU (user + system, children not
included), sorted by role:

- *client*: the batch's process (``RUSAGE_SELF``), less the sampler's own thread. Under
  ``--scheduler local:N`` it also holds Dask's scheduler and the nannies;
- *workers*: the local pool's forked processes, or the Dask worker processes;
- *kernels*: the jailed kernels (``ipykernel`` and what they start);
- *measuring children*: ``autograder.measure.model_worker`` processes;
- *other*: the rest (the jail's launchers, multiprocessing's helpers).

A process's CPU after its last sample (at most ``INTERVAL_S``) is missed, alike on both engines;
short-lived helpers may be missed entirely. Nothing here is asserted: these are readings.
"""

from __future__ import annotations

import resource
import threading
import time
from collections import defaultdict

import psutil

INTERVAL_S = 0.2
ROLES = ("client", "workers", "kernels", "measuring children", "other")


def _role(cmdline: list[str], own: list[str]) -> str:
    text = " ".join(cmdline)
    if "model_worker" in text:
        return "measuring children"
    if "ipykernel" in text:
        return "kernels"
    if cmdline == own or "spawn_main" in text:  # a forked pool worker; a Dask worker, spawned by its nanny
        return "workers"
    return "other"


class ProcessCpu:
    """``with ProcessCpu() as cpu: run_batch(...)``; then ``cpu.seconds``: {role: CPU s}."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.own_cmdline = self.me.cmdline()
        self.last: dict[tuple[int, float], tuple[str, float]] = {}  # (pid, start time) → role, CPU s
        self.seconds: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-process-cpu", daemon=True)
        self._own = 0.0

    def __enter__(self) -> ProcessCpu:
        self._self0 = _self_cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        totals: dict[str, float] = defaultdict(float)
        for role, seconds in self.last.values():
            totals[role] += seconds
        totals["client"] = max(0.0, _self_cpu() - self._self0 - self._own)
        self.seconds = {role: round(totals.get(role, 0.0), 2) for role in ROLES}
        self.seconds["all"] = round(sum(self.seconds[r] for r in ROLES), 2)

    def _loop(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(INTERVAL_S):
            self._sample()
        self._sample()
        self._own = time.thread_time() - started

    def _sample(self) -> None:
        try:
            family = self.me.children(recursive=True)
        except psutil.Error:
            return
        for proc in family:
            try:
                key = (proc.pid, proc.create_time())
                times = proc.cpu_times()
                role = self.last[key][0] if key in self.last else _role(proc.cmdline(), self.own_cmdline)
            except psutil.Error:
                continue
            self.last[key] = (role, times.user + times.system)


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
