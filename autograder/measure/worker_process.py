"""The measuring child as a process: started (jailed where bubblewrap works), given one job, reaped.

:func:`start` launches ``python -I -c <bootstrap> PACKAGE_PARENT JOB_DIR`` in a fresh job folder
holding only ``limits.json``; the child (:func:`autograder.measure.model_worker.main`) sets those
limits, imports numpy, onnx and ONNX Runtime, and then waits on its stdin. :meth:`WorkerProcess.run`
writes the job into the folder, sends ``go`` and waits (``LoadLimits.timeout_s``, from the ``go``);
:meth:`WorkerProcess.close` kills an unused child (it read nothing) or reaps a used one, and
removes the folder. A child started ahead of its job is *warm*: its start-up and imports overlap the
notebook's execution (:mod:`.warm_pool`). It has run no untrusted input before its ``go``, and it
runs exactly one job: warm or cold, every model gets a fresh process in a fresh jail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import safe_files
from ..student_text import clean, mask
from ..errors import UnsafeFileError
from ..tree_walk import remove_tree  # the job folder the untrusted child wrote

MiB = 1024 * 1024
GiB = 1024 * MiB
RESULT_MAX_BYTES = 4 * MiB
# Limits the jail's launcher sets for the measuring child (it sets address space, file size,
# CPU and core itself, from LoadLimits); NPROC counts the threads of every measuring child.
WORKER_RLIMITS = {"NOFILE": 256, "NPROC": 512}
LIMITS_FILE = "limits.json"
GO = b"go\n"
CLOSE_WAIT_S = 5.0


@dataclass
class WorkerRun:
    """What the child reported, or why it produced nothing."""

    ok: bool
    reason: str | None = None  # without the "invalid model: " prefix
    result: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    duration_s: float = 0.0


def _short(text: Any, cap: int = 300) -> str:
    return clean(text, cap)


def _child_env(home: str) -> dict[str, str]:
    # Rebuilt from nothing: no ORT_* or PYTHON* variables reach the child.
    return {
        "PATH": os.defpath,
        "HOME": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from autograder.measure.model_worker import main; sys.exit(main(sys.argv[1:]))"
)


def _worker_command(job_dir: Path) -> list[str]:
    # -I: no PYTHON* variables, no user site, no current folder on sys.path; the grader's own
    # package is put first explicitly, so an installed or a source checkout work alike.
    return [sys.executable, "-I", "-c", _BOOTSTRAP, _PACKAGE_PARENT, str(job_dir)]


def _jailed_command(cmd: list[str], job_dir: Path, env: dict[str, str]) -> list[str] | None:
    """``cmd`` inside the measuring jail, or None where there is none (rlimits only, as before)."""
    from ..sandbox import measure_isolation, worker_command

    iso = measure_isolation()
    if iso is None:
        return None
    if iso.user is not None:
        os.chown(job_dir, iso.user.uid, iso.user.gid)  # its only writable folder
    package = str(Path(__file__).resolve().parent.parent)  # autograder/, not the repo around it
    return worker_command(iso, job_dir, [package], cmd, env, WORKER_RLIMITS)


def _output_tail(err) -> str:
    err.seek(max(0, err.seek(0, os.SEEK_END) - 2000))
    lines = err.read().decode("utf-8", "replace").strip().splitlines()
    # ONNX Runtime logs a failed run's message, values included, to this output: masked
    return mask(lines[-1] if lines else "?", 200)


class WorkerProcess:
    """One measuring child, started and waiting for its one job (see the module's docstring)."""

    def __init__(self, limits) -> None:
        self.limits = limits
        self.job_dir = Path(tempfile.mkdtemp(prefix="autograder-model-"))
        (self.job_dir / LIMITS_FILE).write_text(json.dumps(asdict(limits)), encoding="utf-8")
        cmd, env = _worker_command(self.job_dir), _child_env(str(self.job_dir))
        jailed = _jailed_command(cmd, self.job_dir, env)
        self.jailed = jailed is not None
        self._err = tempfile.TemporaryFile()  # unnamed: the child cannot swap it for a FIFO or a link
        try:
            self.proc = subprocess.Popen(
                jailed or cmd,
                cwd=self.job_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=self._err,
                stderr=self._err,
                start_new_session=True,
            )
        except BaseException:
            self._err.close()
            remove_tree(self.job_dir, ignore_errors=True)
            raise
        self.used = False

    def write(self, name: str, data: bytes) -> None:
        """A job file, created new (never through anything the child may have planted)."""
        fd = os.open(self.job_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def run(self) -> WorkerRun:
        """Send ``go`` and wait for the result (the job's files are written already)."""
        self.used = True
        start = time.monotonic()
        try:
            self.proc.stdin.write(GO)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it exited already; its exit status says why
        run = self._result()
        run.duration_s = time.monotonic() - start
        return run

    def _result(self) -> WorkerRun:
        from ..sandbox import stop_jail

        limits = self.limits
        try:
            rc = self.proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            stop_jail(self.proc)
            return WorkerRun(
                False,
                f"checking and running it took longer than the {limits.timeout_s:.0f} s "
                "limit (a hang or a huge computation)",
            )
        last = _output_tail(self._err)
        if self.jailed and rc > 128:  # bwrap reports a child killed by signal N as 128 + N
            rc = 128 - rc
        if rc < 0:
            return WorkerRun(
                False,
                f"it crashed the ONNX checker or ONNX Runtime ({_signal_name(rc)}; "
                f"the memory limit is {limits.memory_bytes // GiB} GiB)",
            )
        job_dir = self.job_dir
        try:
            result = safe_files.load_json(job_dir, "result.json", RESULT_MAX_BYTES)
            if not isinstance(result, dict):
                raise UnsafeFileError("result.json is not an object")
        except UnsafeFileError:
            return WorkerRun(False, f"the model worker stopped (exit {rc}) without a result: {last}")
        if not result.get("ok"):
            return WorkerRun(False, _short(result.get("reason", "unknown reason")), result)
        try:
            outputs = safe_files.load_npz(job_dir, "outputs.npz") if (job_dir / "outputs.npz").exists() else {}
        except UnsafeFileError as e:
            return WorkerRun(False, f"its outputs could not be read back ({_short(e, 200)})", result)
        return WorkerRun(True, None, result, outputs)

    def close(self) -> None:
        """End the child and remove its folder. An unused one saw no job and is killed at once,
        rather than left to finish its imports and exit (about 0.2 s of wall time and 0.3 s of CPU
        each, for every model a notebook did not write)."""
        from ..sandbox import stop_jail

        if not self.used and self.proc.poll() is None:
            if not self.jailed:
                self.proc.kill()
            stop_jail(self.proc)  # jailed: its namespace first, then bwrap, which reaps it
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            stop_jail(self.proc)
        self._err.close()
        remove_tree(self.job_dir, ignore_errors=True)


def start(limits) -> WorkerProcess:
    """A fresh child waiting for its job (``limits``: :class:`.onnx_load.LoadLimits`)."""
    return WorkerProcess(limits)
