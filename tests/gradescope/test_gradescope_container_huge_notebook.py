"""``run_autograder`` in the simulated Gradescope container at its defaults (768 MB, 0.5 CPU) with a
60 MB notebook of nested empty lists, and one just under the size cap: the notebook is read only
by the bounded reader's child, so the container is not OOM-killed, the student gets a zero with a
reason, and the grader's own process (``autograder.cli gradescope run``, watched from the host
through ``/proc``: its ``VmHWM`` high-water mark) stays under 300 MB. Before, ``json.loads`` in
that process took the whole container down (exit 137) and the student got the placeholder."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from autograder.notebook_reader.reader import MAX_NOTEBOOK_BYTES
from autograder.gradescope.sim.simulate import GRADESCOPE_CPUS, GRADESCOPE_MEMORY_MB, run_in_image

pytestmark = pytest.mark.slow
ASSIGNMENT = "07-quantization"
GRADER_PEAK_MB = 300
GRADER_CMDLINE = b"autograder.cli\0gradescope\0run\0"


class GraderPeak:
    """The largest ``VmHWM`` seen of any process running ``autograder.cli gradescope run``."""

    def __init__(self) -> None:
        self.kb, self.seen, self._stop = 0, set(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "GraderPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    if GRADER_CMDLINE not in Path(f"/proc/{pid}/cmdline").read_bytes():
                        continue
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.kb = max(self.kb, int(line.split()[1]))
                        self.seen.add(pid)
            time.sleep(0.05)


def _nested_lists(path: Path, size: int) -> Path:
    body = b"[" + b"[]," * ((size - 4) // 3)
    path.write_bytes(body + b" " * (size - 3 - len(body)) + b"[]]")
    return path


@pytest.mark.parametrize(
    "size, reason",
    [
        (60 * 1024 * 1024, f"more than the {MAX_NOTEBOOK_BYTES:,} allowed"),
        (MAX_NOTEBOOK_BYTES - 4096, "JSON lists"),
    ],
)
def test_a_huge_notebook_is_a_zero_with_a_reason_and_the_container_survives(
    gradescope_image, results_validator, world_readable_tmp, size, reason
):
    submission = world_readable_tmp / "submission"
    submission.mkdir()
    _nested_lists(submission / f"{ASSIGNMENT}.ipynb", size)
    with GraderPeak() as peak:
        sim = run_in_image(
            gradescope_image, submission, memory_mb=GRADESCOPE_MEMORY_MB, cpus=GRADESCOPE_CPUS, timeout_s=600
        )
    assert sim.results is not None, f"no results.json; exit {sim.returncode}:\n{sim.stdout[-3000:]}"
    results_validator(sim.results)
    assert sim.results["score"] == 0 and reason in sim.results["output"], sim.results["output"][:2000]
    assert "Grading did not finish" not in sim.results["output"], "the placeholder: the grader was killed"
    assert sim.stats.oom_kills == 0 and not sim.timed_out, sim.summary()
    assert peak.seen, "the grader's process was never seen: the watch is broken"
    assert peak.kb / 1024 < GRADER_PEAK_MB, f"the grader held {peak.kb / 1024:.0f} MB"
