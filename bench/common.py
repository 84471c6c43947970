"""Shared pieces of the benchmarks: paths, machine facts, interleaved rounds, medians, child processes.

Every comparison in ``bench/`` is measured in the same run, interleaved: each round runs every
variant once on the same notebook, and the order flips from one round to the next (A B, B A, …)
so neither side always runs first (a warm page cache, a CPU-frequency drift or a neighbour's job
then hits both sides alike). Figures are medians over the rounds; differences and ratios are
computed per round (paired) and then their median is taken.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

# the BLAS thread variables the jail sets to 1 (and the "1 thread" comparisons with it)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT_ID = "07-quantization"
EXAMPLES = ROOT / "assignments" / ASSIGNMENT_ID / "examples"
MASTER = ROOT / "reference" / ASSIGNMENT_ID / "master.ipynb"
BIN = Path(sys.executable).parent  # the venv's bin: autograder and otter live beside python
GiB = 1024**3
MiB = 1024**2


# ── statistics ───────────────────────────────────────────────────────────────────────────────


def median(values: Sequence[float]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def spread(values: Sequence[float]) -> dict[str, Any]:
    """``{"median", "min", "max", "n", "values"}`` of ``values`` (seconds, bytes, ratios…)."""
    vals = [float(v) for v in values if v is not None]
    return {
        "median": median(vals),
        "min": min(vals) if vals else None,
        "max": max(vals) if vals else None,
        "n": len(vals),
        "values": [round(v, 4) for v in vals],
    }


def paired_diffs(a: Sequence[float | None], b: Sequence[float | None]) -> list[float]:
    """``a_i - b_i`` for every round where both sides have a value."""
    return [x - y for x, y in zip(a, b) if x is not None and y is not None]


def paired_ratios(a: Sequence[float | None], b: Sequence[float | None]) -> list[float]:
    """``a_i / b_i`` for every round where both sides have a value (and ``b_i`` is not 0)."""
    return [x / y for x, y in zip(a, b) if x is not None and y]


# ── interleaving ─────────────────────────────────────────────────────────────────────────────


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """The variants' order in round ``round_index``: as given in even rounds, reversed in odd ones."""
    names = list(names)
    return names if round_index % 2 == 0 else names[::-1]


def interleaved(
    variants: dict[str, Callable[[int], Any]], rounds: int, *, log: Callable[[str], None] | None = None, label: str = ""
) -> dict[str, list[Any]]:
    """Run every variant once per round, order flipping each round; ``{name: [result per round]}``.

    A variant is ``fn(round_index) -> result``; its results come back in round order.
    """
    results: dict[str, list[Any]] = {name: [] for name in variants}
    for r in range(rounds):
        for name in round_order(list(variants), r):
            t0 = time.perf_counter()
            results[name].append(variants[name](r))
            if log:
                log(f"{label}round {r + 1}/{rounds} {name}: {time.perf_counter() - t0:.1f} s")
    return results


# ── child processes ──────────────────────────────────────────────────────────────────────────


@dataclass
class ChildResult:
    argv: list[str]
    returncode: int | None  # None: killed by our timeout
    seconds: float
    stdout: str
    stderr: str
    memory: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_child(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    sampler_factory: Any = None,
    env: dict[str, str] | None = None,
) -> ChildResult:
    """Run ``argv`` in a new session, timed; on timeout its process group (ours) is killed.

    ``sampler_factory(pid)`` (e.g. ``bench_memory.TreeSampler``) samples the child's process tree
    while it runs; its ``stop()`` summary lands in ``memory``.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    sampler = sampler_factory(proc.pid) if sampler_factory else None
    try:
        out, err = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        code = None
    seconds = time.perf_counter() - t0
    memory = sampler.stop() if sampler else None
    return ChildResult(argv, code, seconds, out[-20000:], err[-20000:], memory)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, the process group of a child we started (start_new_session=True)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


def tool(name: str) -> str:
    """The venv's console script ``name`` (autograder, otter), else the one on PATH."""
    candidate = BIN / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed in {BIN} nor on PATH; hint: make setup")
    return found


# ── machine facts ────────────────────────────────────────────────────────────────────────────


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - a missing fact is reported as unknown
        return None


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


def machine_facts() -> dict[str, Any]:
    """Cores, memory, CPU model, OS, versions, date and load: the header of RESULTS.md."""
    from autograder.environment import environment_versions

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions = dict(environment_versions())
    versions["otter-grader"] = package_version("otter-grader")
    versions["psutil"] = package_version("psutil")
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "cpu_model": cpu_model(),
        "memory_bytes": memory_total_bytes(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": versions,
        "git": git_commit(),
        "uid": os.geteuid(),
        "load_average_start": load_average(),
    }


def isolation_summary() -> dict[str, Any]:
    """The jail a grade gets on this machine (mode and layers), or why none."""
    try:
        from autograder.sandbox import detect_isolation

        return detect_isolation(False)
    except Exception as e:  # noqa: BLE001 - reported, not fatal: the benchmarks say what they measured
        return {"mode": "unavailable", "layers": [], "warnings": [f"{type(e).__name__}: {e}"]}


# ── misc ─────────────────────────────────────────────────────────────────────────────────────


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def example(name: str) -> Path:
    path = EXAMPLES / (name if name.endswith(".ipynb") else name + ".ipynb")
    if not path.is_file():
        raise FileNotFoundError(f"example submission {path} is missing; hint: autograder build {ASSIGNMENT_ID}")
    return path
