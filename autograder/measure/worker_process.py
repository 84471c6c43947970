"""The measuring child as a process: started (jailed where bubblewrap works), given jobs, reaped.

:func:`start` launches ``python -I -c <bootstrap> PACKAGE_PARENT JOB_DIR`` in a fresh job folder
holding only ``limits.json``; the child (:func:`autograder.measure.model_worker.main`) sets those
limits, imports numpy, onnx and ONNX Runtime, and then waits on its stdin. :meth:`WorkerProcess.run`
is one job: it empties the folder of the previous job's files, writes this job's (created new,
through the folder's descriptor, never through anything the child may have planted), sends ``go``
and waits for the child's ``done`` line (``LoadLimits.timeout_s`` per job, from its ``go``), then
reads the result back as an untrusted file. :meth:`WorkerProcess.close` kills the child (unused,
it read nothing; used, it has nothing left to do) and removes the folder. A child started ahead of
its first job is *warm*: its start-up and imports overlap the notebook's execution
(:mod:`.warm_pool`).

**Several models of one submission, never two submissions.** A child has read nothing untrusted
before its first ``go``. It may then measure several models, one after another, but only models
of the same submission (:class:`.warm_pool.MeasuringChildren` hands a child only to jobs of the
submission it belongs to, and closes it with that submission's measuring). A model that subverts
its child (a memory-safety bug of the checker or of ONNX Runtime) can then forge only the later
measurements of the same student's own models, which it could as well have shaped by writing those
models itself; it never reaches another student's measurement or the grader's own models (the
grader's reference models and re-timings run in fresh children of their own). A job that ends
without a clean result (a crash, a timeout, a failure of the worker itself, an unreadable result)
retires the child (:attr:`WorkerProcess.reusable` is False): the submission's remaining models go
to a fresh child, so one hostile model costs the student only its own measurement.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
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
    from ..jail import measure_isolation, worker_command

    iso = measure_isolation()
    if iso is None:
        return None
    if iso.user is not None:
        os.chown(job_dir, iso.user.uid, iso.user.gid)  # its only writable folder
    package = str(Path(__file__).resolve().parent.parent)  # autograder/, not the repo around it
    return worker_command(iso, job_dir, [package], cmd, env, WORKER_RLIMITS)


def _output_tail(err, since: int = 0) -> str:
    """The last line the child wrote after offset ``since`` (this job's output), masked."""
    err.seek(max(since, err.seek(0, os.SEEK_END) - 2000))
    lines = err.read().decode("utf-8", "replace").strip().splitlines()
    # ONNX Runtime logs a failed run's message, values included, to this output: masked
    return mask(lines[-1] if lines else "?", 200)


class WorkerProcess:
    """One measuring child, started and waiting for its jobs (see the module's docstring)."""

    def __init__(self, limits) -> None:
        self.limits = limits
        self.job_dir = Path(tempfile.mkdtemp(prefix="autograder-model-"))
        (self.job_dir / LIMITS_FILE).write_text(json.dumps(asdict(limits)), encoding="utf-8")
        cmd, env = _worker_command(self.job_dir), _child_env(str(self.job_dir))
        jailed = _jailed_command(cmd, self.job_dir, env)
        self.jailed = jailed is not None
        self._dir_fd = os.open(self.job_dir, os.O_RDONLY | os.O_DIRECTORY)  # before the child can touch it
        self._err = tempfile.TemporaryFile()  # unnamed: the child cannot swap it for a FIFO or a link
        try:
            self.proc = subprocess.Popen(
                jailed or cmd,
                cwd=self.job_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,  # its answers (``done``) only: the child sends the rest to stderr
                stderr=self._err,
                start_new_session=True,
            )
        except BaseException:
            self._err.close()
            os.close(self._dir_fd)
            remove_tree(self.job_dir, ignore_errors=True)
            raise
        self._closed = False
        self.jobs = 0  # jobs given so far
        self.reusable = True  # may take the next job of the same submission (False once one failed)

    @property
    def used(self) -> bool:
        return self.jobs > 0

    def _clear(self) -> None:
        """Remove everything the previous job left in the folder (limits.json stays)."""
        for name in os.listdir(self._dir_fd):
            if name != LIMITS_FILE:
                remove_tree(self.job_dir / name, ignore_errors=True)

    def _write(self, name: str, data: bytes) -> None:
        """A job file, created new in the folder (never through anything the child may have planted)."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self._dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def run(self, files: Mapping[str, bytes]) -> WorkerRun:
        """One job: ``files`` (``job.json`` among them) written into the folder, ``go`` sent, the
        result read back. Sets :attr:`reusable`: True only when the child answered with a result
        that ended cleanly (measured, or refused by the checker or by ONNX Runtime's loader)."""
        self.reusable = False
        if self.jobs:
            self._clear()
        self.jobs += 1
        start = time.monotonic()
        try:
            for name, data in files.items():
                self._write(name, data)
        except OSError as e:  # only a child that an earlier model of the same submission took over
            self.kill()
            return WorkerRun(
                False, f"its measuring child was tampered with before this job (by an earlier model): {e.strerror}"
            )
        self._err.seek(0, os.SEEK_END)
        err_from = self._err.tell()
        try:
            stdin = self.proc.stdin  # a pipe: started with stdin=PIPE
            if stdin is not None:
                stdin.write(GO)
                stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it exited already; its exit status says why
        answered = self._wait_answer(start + float(self.limits.timeout_s))
        run = self._result(answered, start, err_from)
        run.duration_s = time.monotonic() - start
        self.reusable = answered is True and (run.ok or run.result.get("stage") in ("check", "session"))
        return run

    def _wait_answer(self, deadline: float) -> bool | None:
        """True once the child answers ``done``; False when it closed its answers (it is exiting);
        None at the deadline."""
        if self.proc.stdout is None:  # started with stdout=PIPE: never
            return False
        fd = self.proc.stdout.fileno()
        pending = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            *lines, pending = (pending + chunk).split(b"\n")
            if any(line.strip() == b"done" for line in lines):
                return True
            pending = pending[-64:]  # a line that never ends is not an answer

    def kill(self) -> None:
        """Kill the child (and its jail) now, if it still runs; :meth:`close` then cleans up."""
        from ..jail import stop_jail

        if self.proc.poll() is None:
            if not self.jailed:
                self.proc.kill()
            stop_jail(self.proc)  # jailed: its namespace first, then bwrap, which reaps it

    def _result(self, answered: bool | None, start: float, err_from: int) -> WorkerRun:
        limits = self.limits
        timeout = WorkerRun(
            False,
            f"checking and running it took longer than the {limits.timeout_s:.0f} s "
            "limit (a hang or a huge computation)",
        )
        if answered is None:
            self.kill()
            return timeout
        if answered is False:  # no answer: it is exiting, its status says why
            try:
                rc = self.proc.wait(timeout=max(0.0, start + float(limits.timeout_s) - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                return timeout
            if self.jailed and rc > 128:  # bwrap reports a child killed by signal N as 128 + N
                rc = 128 - rc
            if rc < 0:
                return WorkerRun(
                    False,
                    f"it crashed the ONNX checker or ONNX Runtime ({_signal_name(rc)}; "
                    f"the memory limit is {limits.memory_bytes // GiB} GiB)",
                )
            without = f"the model worker stopped (exit {rc}) without a result"
        else:
            without = "the model worker answered without a result"
        job_dir = self.job_dir
        try:
            result = safe_files.load_json(job_dir, "result.json", RESULT_MAX_BYTES)
            if not isinstance(result, dict):
                raise UnsafeFileError("result.json is not an object")
        except UnsafeFileError:
            return WorkerRun(False, f"{without}: {_output_tail(self._err, err_from)}")
        if not result.get("ok"):
            return WorkerRun(False, _short(result.get("reason", "unknown reason")), result)
        try:
            outputs = safe_files.load_npz(job_dir, "outputs.npz") if (job_dir / "outputs.npz").exists() else {}
        except UnsafeFileError as e:
            return WorkerRun(False, f"its outputs could not be read back ({_short(e, 200)})", result)
        return WorkerRun(True, None, result, outputs)

    def close(self) -> None:
        """End the child and remove its folder. It is killed: an unused one saw no job (rather than
        left to finish its imports and exit: about 0.2 s of wall time and 0.3 s of CPU each), a used
        one has nothing left to do."""
        from ..jail import stop_jail

        if self._closed:
            return
        self._closed = True
        self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe and not pipe.closed:
                    pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            stop_jail(self.proc)
        self._err.close()
        try:
            os.close(self._dir_fd)
        except OSError:
            pass
        remove_tree(self.job_dir, ignore_errors=True)


def start(limits) -> WorkerProcess:
    """A fresh child waiting for its first job (``limits``: :class:`.onnx_load.LoadLimits`)."""
    return WorkerProcess(limits)
