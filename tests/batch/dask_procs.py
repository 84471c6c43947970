"""A real Dask cluster for the tests: ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

Everything listens on loopback only, on ephemeral ports (the dashboards too). Every process
started here is recorded by pid, with its children (the nanny's worker process, its kernels), and
``close`` ends them all: SIGTERM, then SIGKILL after a grace period, only those pids. As a second
net, workers give up after ``--death-timeout`` without their scheduler and the scheduler stops
after ``--idle-timeout`` without work, so nothing outlives a crashed test run for long.

Workers can load a ``--preload`` module: ``dask_fake_preload.py`` installs batchkit's fake stages
(driven by the notebook's metadata, logging to ``$AUTOGRADER_FAKE_STAGES_LOG``) in the worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

DASK = Path(sys.executable).parent / "dask"
HERE = Path(__file__).resolve().parent
FAKE_PRELOAD = HERE / "dask_fake_preload.py"
START_TIMEOUT_S = 120.0


class DaskProcs:
    """A scheduler and workers started as subprocesses; ``close()`` always ends every one."""

    def __init__(self, tmp: Path, *, env: dict[str, str] | None = None, allowed_failures: int = 1) -> None:
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **(env or {})}
        self.procs: list[subprocess.Popen] = []
        self.known: set[int] = set()  # every pid seen under our processes (nanny children, kernels)
        self.logs: list[Path] = []
        file = self.tmp / "scheduler.json"
        self._spawn(
            "scheduler",
            [
                str(DASK),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                "127.0.0.1:0",
                "--scheduler-file",
                str(file),
                "--idle-timeout",
                "900",
            ],
            {**self.env, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(allowed_failures)},
        )
        self.address = self._wait_for_file(file)

    def add_worker(self, name: str, *, preload: Path | None = None, env: dict[str, str] | None = None) -> None:
        argv = [
            str(DASK),
            "worker",
            self.address,
            "--nthreads",
            "1",
            "--nworkers",
            "1",
            "--host",
            "127.0.0.1",
            "--no-dashboard",
            "--name",
            name,
            "--local-directory",
            str(self.tmp / f"worker-{name}"),
            "--death-timeout",
            "60",
        ]
        if preload is not None:
            argv += ["--preload", str(preload)]
        self._spawn(f"worker-{name}", argv, {**self.env, **(env or {})})

    def client(self) -> Any:
        from distributed import Client

        return Client(self.address, timeout=30)

    def wait_for_workers(self, n: int) -> dict[str, int]:
        """Block until ``n`` workers are connected; returns {worker address: worker process pid}."""
        with self.client() as client:
            client.wait_for_workers(n, timeout=START_TIMEOUT_S)
            pids = client.run(os.getpid)
        self.known.update(pids.values())
        return pids

    def log_text(self) -> str:
        return "\n".join(f"── {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in self.logs if p.exists())

    def close(self) -> None:
        self._remember_children()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        stragglers = []
        for pid in sorted(self.known):
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    proc.kill()
                    stragglers.append(proc)
            except psutil.Error:
                pass
        psutil.wait_procs(stragglers, timeout=10)
        from autograder.batch.dask_executor import _sweep_dead_workers

        _sweep_dead_workers(Path(tempfile.gettempdir()))  # a worker killed at close had no teardown

    def alive(self) -> list[int]:
        """The pids started here (or under them) that still run."""
        out = []
        for pid in sorted(self.known | {p.pid for p in self.procs}):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                pass
        return out

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = self.tmp / f"{name}.log"
        self.logs.append(log)
        with open(log, "ab") as f:
            proc = subprocess.Popen(
                argv, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.procs.append(proc)
        self.known.add(proc.pid)

    def _remember_children(self) -> None:
        for p in self.procs:
            try:
                self.known.update(c.pid for c in psutil.Process(p.pid).children(recursive=True))
            except psutil.Error:
                pass

    def _wait_for_file(self, file: Path) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                return json.loads(file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                if self.procs[0].poll() is not None:
                    break
                time.sleep(0.2)
        self.close()
        raise RuntimeError(f"the dask scheduler did not start:\n{self.log_text()}")


@contextmanager
def running_workers(tmp: Path, count: int = 2, *, env: dict[str, str] | None = None) -> Iterator[DaskProcs]:
    """A scheduler with ``count`` default workers, all up; on leaving, every process ended (asserted)."""
    procs = DaskProcs(tmp, env=env)
    try:
        for name in range(count):
            procs.add_worker(str(name))
        procs.wait_for_workers(count)
        yield procs
    finally:
        procs.close()
    assert procs.alive() == [], "every scheduler, nanny and worker process ended"
