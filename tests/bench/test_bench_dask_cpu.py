"""The Dask benchmark's CPU by process: each kind of process lands in its row, and the section shows them.

Real processes that burn a known amount of CPU (no timing is asserted: CPU seconds, with a wide
margin below what each burns)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time

import pytest

from bench import bench_dask
from bench.bench_dask_cpu import ROLES, ProcessCpu
from bench.common import spread

BURN_S = 0.6
BURN = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {BURN_S}: pass\n"


def _burn() -> None:
    exec(BURN)


@pytest.mark.parametrize(
    "role, start",
    [
        # a forked pool worker runs our own command line
        ("workers", lambda: multiprocessing.get_context("fork").Process(target=_burn)),
        # a Dask worker is spawned by its nanny
        ("workers", lambda: subprocess.Popen([sys.executable, "-c", BURN, "spawn_main"])),
        ("kernels", lambda: subprocess.Popen([sys.executable, "-c", BURN, "-m", "ipykernel_launcher"])),
        (
            "measuring children",
            lambda: subprocess.Popen([sys.executable, "-c", BURN, "autograder.measure.model_worker"]),
        ),
        ("other", lambda: subprocess.Popen([sys.executable, "-c", BURN])),
    ],
)
@pytest.mark.kernel  # starts jailed children (tests/needs.py)
def test_each_process_is_counted_in_its_row(role, start):
    with ProcessCpu() as cpu:
        proc = start()
        if isinstance(proc, multiprocessing.process.BaseProcess):
            proc.start()
            proc.join()
        else:
            proc.wait()
        time.sleep(0.05)  # let the CPU readings settle (no figure depends on this)
    assert cpu.seconds[role] >= BURN_S / 2, cpu.seconds
    assert all(cpu.seconds[r] < BURN_S / 2 for r in ROLES if r not in (role, "client")), cpu.seconds
    assert cpu.seconds["all"] == pytest.approx(sum(cpu.seconds[r] for r in ROLES), abs=0.02)


def test_the_client_is_the_batchs_own_process_without_the_sampler():
    with ProcessCpu() as cpu:
        _burn()
    assert cpu.seconds["client"] >= BURN_S * 0.9
    # other processes of this test process (an earlier test's leftovers under xdist) may tick a little
    assert all(cpu.seconds[r] < BURN_S / 2 for r in ROLES if r != "client"), cpu.seconds


def test_the_section_shows_cpu_by_process_and_its_paired_ratio():
    per = {role: spread([1.0]) for role in (*ROLES, "all")}
    more = {**per, "workers": spread([1.5]), "all": spread([5.5])}
    data = {
        "class": {
            "size": 6,
            "rounds": 1,
            "local_s": spread([60.0]),
            "dask_s": spread([62.0]),
            "ratio": spread([1.03]),
            "same_scores": True,
            "statuses": {"ok": 6},
            "cpu_per_submission": {"-j 2": per, "--scheduler local:2": more},
            "cpu_ratio": spread([1.1]),
        }
    }
    text = "\n".join(bench_dask.section(data))
    assert "| workers | 1.00 | 1.50 | +0.50 |" in text
    assert "Paired ratio of CPU, local:2 / -j 2: median 1.100×" in text
    without = "\n".join(bench_dask.section({"class": {k: v for k, v in data["class"].items() if "cpu" not in k}}))
    assert "CPU seconds per submission" not in without, "an older run's numbers render as before"
