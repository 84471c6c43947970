"""The Dask engine: ``--scheduler tcp://HOST:PORT`` (a running cluster) or ``--scheduler local:N``.

- ``local:N`` starts a ``distributed.LocalCluster`` of N single-threaded worker processes on
  127.0.0.1 (dashboard on loopback, an ephemeral port), closed with the batch.
- Every worker gets the ``GraderPlugin``: it gives each of the worker's threads a sandbox slot
  (from the worker's name when it is a number, so workers of one machine start apart; ``claim_slot``
  then takes the machine-wide lock, so two jails never share a uid), keeps the worker's temporary
  folders in ``$TMPDIR/autograder-dw-<pid>`` (removed with it; a killed worker's is removed by the
  next job or worker on that machine), and loads the assignment from the worker's own installation.
- The plugin prepares every worker as the local pool prepares its processes, whether ``local:N``
  started it or it belongs to a running cluster: its grades measure at most cores // (worker
  threads of its machine) models at a time (``executor.share_measuring_cores``), and Dask's own
  periodic work that grading does not use is stopped or slowed (``quiet_worker``: the profiler that
  samples a running task's stack every 10 ms, the 20 ms event-loop tick, the 500 ms system monitor).
  Left at Dask's defaults they cost a two-worker ``local:2`` about 0.13 of a core, all batch long.
  A ``local:N`` cluster's scheduler and nannies (in the batch's process) get the same settings
  (``QUIET_CONFIG``). A closing worker's process ends at once after the plugin's cleanups, without
  the interpreter's teardown, as the local pool's forked workers do (``_exit_at_once``).
- Before the first job, every connected worker's package versions and assignment fingerprint are
  compared with the client's (``client.run``); each job carries them too, so a worker that joins
  later and differs refuses it. Either way the batch stops with one clear error.
- Lost workers are Dask's business: a job whose worker died is rerun elsewhere by the scheduler,
  and after ``distributed.scheduler.allowed-failures`` deaths (3 by default) it fails with
  ``KilledWorker``, reported as a final ``WorkerLost`` (the submission is ``worker_lost``).
- A job without a reply after ``wall_limit_s`` (a hung worker) is cancelled, its worker restarted
  when a nanny watches it, and reported as a (non-final) ``WorkerLost``: retried alone.
- The cluster is watched every ``WORKERS_CHECK_S``: a worker that leaves or joins is one line
  (``progress.note``). With no worker at all, the batch says so and waits ``NO_WORKERS_S`` for one;
  then every submission in flight or still queued ends as a final ``WorkerLost`` (``worker_lost``,
  which a re-run grades again) instead of waiting forever.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..assignment import Assignment, load_assignment
from ..environment import environment_versions
from ..errors import AutograderError
from .. import proc_info
from .executor import WorkerLost, share_measuring_cores
from .progress import note
from .worker import FATAL_MISMATCH, Job, Reply, WorkerMismatchError, grade_job, mismatch

if TYPE_CHECKING:  # distributed itself is the [dask] extra's, imported when a batch uses it
    import distributed

PLUGIN_NAME = "autograder-grader"
TMP_PREFIX = "autograder-dw-"  # + the worker's pid: its temporary folder
CONNECT_TIMEOUT_S = 30
WORKERS_TIMEOUT_S = 120  # for the first worker to join the scheduler
CAPACITY_REFRESH_S = 5.0
WORKERS_CHECK_S = 5.0  # how often the cluster's workers are looked at (who left, who joined)
NO_WORKERS_S = 120.0  # with no worker at all this long, the submissions left are worker_lost
ABANDONED_CAPACITY = 1_000_000  # no worker for NO_WORKERS_S: send every job left, to end them together
OVERDUE_CHECK_S = 5.0  # how often jobs in flight are checked against the wall-time limit
# One job per worker thread: a job queued behind another on a worker that dies counts that death
# too (Dask's rule: every task processing there turns suspicious), so none waits on a worker.
JOBS_PER_THREAD = 1
# Dask's periodic bookkeeping, slowed or off for a grading cluster: with the defaults, the servers of
# an idle ``local:2`` (scheduler, two nannies, two workers) took 0.11 s of CPU per second, 0.13 with
# a job on each worker, against 0.01 with these (measured here, 2 cores). A grade's worker thread
# waits on its kernel most of the time; nothing here is read by the batch.
QUIET_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,  # a sample of each running task's stack every 10 ms
    "distributed.admin.tick.interval": "1s",  # every server's event-loop responsiveness probe: 20 ms
    "distributed.admin.system-monitor.interval": "5s",  # every server's psutil readings: 500 ms
    "distributed.worker.memory.monitor-interval": "1s",  # a nanny's (or worker's) memory check: 100 ms
}
# each worker's periodic callback → the QUIET_CONFIG key of its slowest interval
QUIET_CALLBACKS = {
    "tick": "distributed.admin.tick.interval",
    "monitor": "distributed.admin.system-monitor.interval",
    "memory_monitor": "distributed.worker.memory.monitor-interval",
}
PROFILER_CALLBACKS = ("profile", "profile-cycle")


class ClusterError(AutograderError):
    """The Dask cluster cannot be used as asked (bad address, unreachable, no worker, not installed)."""


def parse_scheduler(spec: str) -> tuple[str, int | str]:
    """``("local", N)`` or ``("address", "tcp://HOST:PORT")``; ClusterError for anything else."""
    spec = spec.strip()
    if spec.startswith("local:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise ClusterError(f"--scheduler {spec!r}: local:N needs a number of workers N >= 1, e.g. local:2")
        return "local", int(n)
    if "://" in spec and spec.split("://", 1)[1]:
        problem = address_problem(spec)
        if problem:  # a malformed address is the command's mistake: no hint about a running scheduler
            raise ClusterError(f"--scheduler {spec!r} is not a Dask scheduler's address: {problem}")
        return "address", spec
    raise ClusterError(f"--scheduler {spec!r} is neither tcp://HOST:PORT (a Dask scheduler) nor local:N")


DASK_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")


def address_problem(spec: str) -> str | None:
    """What is wrong with a ``PROTOCOL://HOST:PORT`` scheduler address, as written; None when nothing."""
    parts = urllib.parse.urlsplit(spec)
    if parts.scheme not in DASK_PROTOCOLS:
        return f"{parts.scheme or '(none)'}:// is not a protocol Dask speaks ({', '.join(DASK_PROTOCOLS)})"
    try:
        port = parts.port
    except ValueError:
        return "its port must be a number from 1 to 65535 (a scheduler prints its address as tcp://HOST:8786)"
    if not parts.hostname:
        return "it names no host"
    if port == 0 or parts.path not in ("", "/") or parts.query or parts.fragment:
        return "it must be PROTOCOL://HOST:PORT and nothing more, e.g. tcp://10.0.0.5:8786"
    return None


def wall_limit_s(assignment: Assignment) -> float:
    """How long one job may go without a reply: the notebook's own limit twice over (the probe and
    a queued job ahead of it on the worker), plus ten minutes for the kernel start and measuring."""
    return 2 * float(assignment.limits.notebook_timeout_s) + 600.0


# ── on the worker ───────────────────────────────────────────────────────────────────────────

try:
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPluginBase
except ImportError:  # without the [dask] extra; DaskExecutor then says how to install it
    _WorkerPluginBase = object  # type: ignore[assignment,misc]


class GraderPlugin(_WorkerPluginBase):
    """Per-worker state: sandbox slots for its threads, a temporary folder, loaded assignments."""

    idempotent = True  # one per worker, shared by the batches that use it; never torn down under one

    def __init__(self, root: str | None = None) -> None:
        self.root = root  # the assignments' project root; None: the worker's own ($AUTOGRADER_ROOT or checkout)

    async def setup(self, worker: Any) -> None:
        quiet_worker(worker)
        self.measure_jobs = share_measuring_cores(await _threads_on_host(worker))
        self.slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        nthreads = max(1, int(worker.state.nthreads))
        first = int(worker.name) * nthreads if str(worker.name).isdigit() else 0
        for slot in range(first, first + nthreads):
            self.slots.put(slot)
        # jailed workspaces live here, on a short path (the kernel's ipc sockets must fit in 108
        # bytes); a killed worker's folder is removed by the next worker that starts on the machine
        base = Path(tempfile.gettempdir())
        base = base.parent if base.name.startswith(TMP_PREFIX) else base
        _sweep_dead_workers(base)
        self.tmp = base / f"{TMP_PREFIX}{os.getpid()}"
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(mode=0o711)
        os.chmod(self.tmp, 0o711)  # traversable by the sandbox uids
        tempfile.tempdir = str(self.tmp)
        self.assignments: dict[str, tuple[Assignment, str]] = {}
        self.lock = threading.Lock()

    def teardown(self, worker: Any) -> None:
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)
        # The worker is closing and its process ends next. A spawned process tears its interpreter
        # down, and once it has graded (scikit-learn, ONNX Runtime, kernels' zmq sockets) that took
        # over 4 s here: the nanny gave up and killed it, at the end of every local:N batch. The
        # local pool's forked workers end with os._exit; this one does too, after its cleanups.
        atexit.register(_exit_at_once)

    def assignment(self, assignment_id: str) -> tuple[Assignment, str]:
        """The assignment and the fingerprint of the code loaded for it (loaded once per worker)."""
        with self.lock:
            if assignment_id not in self.assignments:
                a = load_assignment(assignment_id, Path(self.root) if self.root else None)
                self.assignments[assignment_id] = (a, a.fingerprint())
            return self.assignments[assignment_id]


def _exit_at_once() -> None:
    """The last exit handler (registered last, run first): flush the logs, end the process now."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing left to flush
            pass
    os._exit(0)


def quiet_worker(worker: Any) -> None:
    """Stop the worker's task profiler and slow its periodic checks to ``QUIET_CONFIG``'s intervals
    (never faster than they are). Callbacks not started yet (a worker joining: plugins are set up
    before its callbacks start) start at the new intervals; the profiler's are removed."""
    from dask.utils import parse_timedelta

    for name in PROFILER_CALLBACKS:
        callback = worker.periodic_callbacks.pop(name, None)
        if callback is not None:
            callback.stop()
    for name, key in QUIET_CALLBACKS.items():
        callback = worker.periodic_callbacks.get(name)
        if callback is not None:
            callback.callback_time = max(callback.callback_time, parse_timedelta(QUIET_CONFIG[key]) * 1000)


async def _threads_on_host(worker: Any) -> int:
    """Worker threads on this worker's machine, its own included, as the scheduler knows them."""
    own = max(1, int(worker.state.nthreads))
    try:
        from distributed.comm import get_address_host

        info = await worker.scheduler.identity()
        host = get_address_host(worker.address)
        others = sum(
            int(w.get("nthreads") or 0)
            for address, w in (info.get("workers") or {}).items()
            if w.get("host") == host and address != worker.address
        )
    except Exception:  # noqa: BLE001 - the scheduler unreachable at this moment: this worker alone
        return own
    return own + others


def grade_on_worker(job: Job) -> Reply:
    """The Dask task: grade ``job`` with a slot of this worker's plugin."""
    from distributed import get_worker

    worker = get_worker()
    found = worker.plugins.get(PLUGIN_NAME)
    if found is None:
        return Reply(
            name=job.name, fatal=f"worker {worker.address} has no {PLUGIN_NAME} plugin", fatal_kind=FATAL_MISMATCH
        )
    plugin = cast(GraderPlugin, found)  # registered under PLUGIN_NAME by DaskExecutor only
    try:
        assignment, loaded = plugin.assignment(job.assignment)
    except AutograderError as e:
        return Reply(
            name=job.name, fatal=f"worker {worker.address} cannot load the assignment: {e}", fatal_kind=FATAL_MISMATCH
        )
    _sweep_dead_workers(plugin.tmp.parent)  # a worker of this machine killed since we started
    slot = plugin.slots.get()
    try:
        return grade_job(job, assignment, slot=slot, loaded_fingerprint=loaded)
    finally:
        plugin.slots.put(slot)


def check_worker(
    assignment_id: str, fingerprint: str, versions: dict[str, str], root: str | None, dask_worker: Any = None
) -> str | None:
    """Run on every worker before the batch (``client.run``): why it must not grade, or None."""
    try:
        plugin = dask_worker.plugins.get(PLUGIN_NAME) if dask_worker is not None else None
        if plugin is not None:
            assignment, loaded = plugin.assignment(assignment_id)
        else:
            assignment = load_assignment(assignment_id, Path(root) if root else None)
            loaded = assignment.fingerprint()
    except AutograderError as e:
        return f"worker {getattr(dask_worker, 'address', '?')} cannot load assignment '{assignment_id}': {e}"
    return mismatch(
        versions, fingerprint, assignment, where=getattr(dask_worker, "address", None), loaded_fingerprint=loaded
    )


# ── on the client ───────────────────────────────────────────────────────────────────────────


class DaskExecutor:
    """Jobs as Dask futures; completions reach ``wait`` through done-callbacks and a queue."""

    def __init__(self, spec: str, assignment: Assignment) -> None:
        kind, value = parse_scheduler(spec)
        try:
            import dask
            import distributed
        except ImportError:
            raise ClusterError(
                "--scheduler needs Dask distributed: pip install 'autograder[dask]' "
                "(the same pinned versions on the client and every worker)"
            ) from None
        self.spec, self.cluster, self.client = spec, None, None
        self.scratch: Path | None = None
        self.limit_s = wall_limit_s(assignment)
        self.done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.started: dict[str, float] = {}
        self.futures: dict[str, Any] = {}
        self.reported: set[str] = set()
        self._capacity, self._capacity_at = 1, 0.0
        self._hosts: list[str] = []
        self._hosts_at = self._overdue_at = self._workers_at = 0.0
        self._workers: set[str] = set()
        self._none_since: float | None = None  # when the last worker left
        root = str(assignment.folder.parent.parent) if kind == "local" else None
        try:
            if kind == "local":
                self.scratch = Path(tempfile.mkdtemp(prefix="autograder-dask-"))
                os.chmod(self.scratch, 0o711)
                with dask.config.set(QUIET_CONFIG):  # read by the scheduler and nannies here, passed to the workers
                    self.cluster = distributed.LocalCluster(
                        n_workers=int(value),
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address="127.0.0.1:0",
                        worker_dashboard_address="127.0.0.1:0",
                        local_directory=str(self.scratch),
                    )
                self.client = distributed.Client(self.cluster)
            else:
                self.client = distributed.Client(str(value), timeout=CONNECT_TIMEOUT_S)
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
            self.client.register_plugin(GraderPlugin(root), name=PLUGIN_NAME)
            self._check_workers(assignment, root)
            self._workers = self._worker_addresses() or set()
        except BaseException as e:
            self.close()
            if isinstance(e, (AutograderError, KeyboardInterrupt)):
                raise
            raise ClusterError(
                f"cannot use the Dask scheduler {spec}: {type(e).__name__}: {e}".rstrip(": ")
                + ". Hint: is `dask scheduler` running there, with workers started by "
                "`dask worker ADDRESS --nthreads 1`?"
            ) from None

    def _connected(self) -> distributed.Client:
        """The client, while the executor is open (``close`` drops it)."""
        if self.client is None:
            raise ClusterError(f"the Dask client of {self.spec} is closed")
        return self.client

    def _check_workers(self, assignment: Assignment, root: str | None) -> None:
        answers = self._connected().run(
            check_worker, assignment.id, assignment.fingerprint(), dict(environment_versions()), root, on_error="return"
        )
        problems = [
            str(a) if not isinstance(a, BaseException) else f"worker {w}: {type(a).__name__}: {a}"
            for w, a in sorted(answers.items())
            if a is not None
        ]
        if problems:
            raise WorkerMismatchError(
                f"{len(problems)} of {len(answers)} Dask worker(s) cannot grade for this "
                "client:\n  " + "\n  ".join(problems)
            )

    def describe(self) -> str:
        return f"Dask {self.spec} ({sum(self._connected().nthreads().values())} worker thread(s))"

    def capacity(self) -> int:
        if self._abandoned():
            return ABANDONED_CAPACITY
        now = time.monotonic()
        if now - self._capacity_at > CAPACITY_REFRESH_S:
            self._capacity = max(1, JOBS_PER_THREAD * sum(self._connected().nthreads().values()))
            self._capacity_at = now
        return self._capacity

    def hosts(self) -> list[str]:
        now = time.monotonic()
        if now - self._hosts_at > CAPACITY_REFRESH_S:
            workers = self._connected().scheduler_info(n_workers=-1).get("workers", {})
            self._hosts = sorted({str(w.get("host")) for w in workers.values() if w.get("host")})
            self._hosts_at = now
        return self._hosts

    def submit(self, job: Job, *, host: str | None = None) -> Any:
        # a host restriction (not a worker address) still holds when a nanny restarts the worker
        where = {"workers": [host], "allow_other_workers": False} if host else {}
        key = f"autograder-{job.name}-{uuid.uuid4().hex[:12]}"
        future = self._connected().submit(grade_on_worker, job, key=key, pure=False, **where)
        self.started[key] = time.monotonic()
        self.futures[key] = future
        future.add_done_callback(self.done.put)
        return future

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Reply | BaseException]]:
        live = {f.key: f for f in handles}
        out: list[tuple[Any, Reply | BaseException]] = []
        try:
            first = self.done.get(timeout=timeout)
            for future in [first, *_drain(self.done)]:
                if future.key in live and future.key not in self.reported:
                    out.append((future, self._outcome(future)))
        except queue.Empty:
            pass
        if time.monotonic() - self._overdue_at > OVERDUE_CHECK_S:  # even while other jobs keep finishing
            self._overdue_at = time.monotonic()
            answered = {f.key for f, _ in out}
            out += self._overdue({k: f for k, f in live.items() if k not in answered})
        answered = {f.key for f, _ in out}
        out += self._watch_workers({k: f for k, f in live.items() if k not in answered})
        for future, _ in out:
            self.reported.add(future.key)
            self.started.pop(future.key, None)
            self.futures.pop(future.key, None)
        return out

    def _outcome(self, future: Any) -> Reply | BaseException:
        from distributed.scheduler import KilledWorker

        if future.status == "finished":
            try:
                return future.result()
            except BaseException as e:  # noqa: BLE001 - e.g. a reply that cannot be unpickled
                return e
        if future.status == "error":
            error = future.exception()
            if isinstance(error, KilledWorker):
                return WorkerLost(
                    f"the Dask worker grading this notebook died every time it ran it "
                    f"({getattr(error, 'allowed_failures', '?')} retries on other workers; "
                    f"last on {_address(getattr(error, 'last_worker', None))})",
                    final=True,
                )
            return error
        return WorkerLost(f"the Dask scheduler dropped the job ({future.status})")

    def _overdue(self, live: dict[str, Any]) -> list[tuple[Any, Reply | BaseException]]:
        now = time.monotonic()
        late = [f for k, f in live.items() if now - self.started.get(k, now) > self.limit_s]
        if not late:
            return []
        late_keys = {f.key for f in late}
        hung = [w for w, keys in self._connected().processing().items() if late_keys & set(keys)]
        self._connected().cancel(late, reason="no reply within the wall-time limit")
        if hung:
            try:
                self._connected().restart_workers(hung, raise_for_error=False)
            except Exception:  # noqa: BLE001 - best effort: a worker without a nanny stays as it is
                pass
        lost = WorkerLost(f"no reply within the {self.limit_s:g} s wall-time limit of a job (a hung worker)")
        return [(f, lost) for f in late]

    def _worker_addresses(self) -> set[str] | None:
        try:
            return set(self._connected().scheduler_info(n_workers=-1).get("workers", {}))
        except Exception:  # noqa: BLE001 - the scheduler unreachable: its futures fail on their own
            return None

    def _abandoned(self) -> bool:
        return self._none_since is not None and time.monotonic() - self._none_since >= NO_WORKERS_S

    def _watch_workers(self, live: dict[str, Any]) -> list[tuple[Any, Reply | BaseException]]:
        """Say which workers left or joined; with none left for ``NO_WORKERS_S``, end ``live``."""
        now = time.monotonic()
        if now - self._workers_at < WORKERS_CHECK_S and not (self._abandoned() and live):
            return []
        self._workers_at = now
        workers = self._worker_addresses()
        if workers is None:
            return []
        for address in sorted(self._workers - workers):
            note(
                f"Dask worker {address} left the cluster (stopped, killed or lost): "
                + (f"{len(workers)} left; the scheduler sends its jobs to them" if workers else "none left")
            )
        joined = workers - self._workers
        if joined:
            note(f"{len(joined)} Dask worker(s) joined: {len(workers)} now")
        self._workers = workers
        if workers:
            self._none_since = None
            return []
        if self._none_since is None:
            self._none_since = now
            note(
                f"no Dask worker is left: waiting {NO_WORKERS_S:g} s for one to join; then the submissions "
                "still to grade are recorded as worker_lost (run the batch again to grade them)"
            )
        if not self._abandoned() or not live:
            return []
        lost = WorkerLost(
            f"no Dask worker was left to grade this notebook for {NO_WORKERS_S:g} s (the cluster lost "
            "them all); running the batch again grades it",
            final=True,
        )
        try:
            self._connected().cancel(list(live.values()), reason="no Dask worker left")
        except Exception:  # noqa: BLE001 - the scheduler may be gone too
            pass
        return [(f, lost) for f in live.values()]

    def close(self) -> None:
        for closing in (self.client, self.cluster):
            if closing is not None:
                try:
                    closing.close()
                except Exception:  # noqa: BLE001 - closing what may already be gone
                    pass
        self.client = self.cluster = None
        if self.scratch is not None:  # our LocalCluster: its workers are gone, and so must be their folders
            shutil.rmtree(self.scratch, ignore_errors=True)
            _sweep_dead_workers(Path(tempfile.gettempdir()))

    def stop(self) -> None:
        if self.client is not None:
            try:
                self.client.cancel(list(self.futures.values()), reason="the batch was interrupted")
            except Exception:  # noqa: BLE001 - the scheduler may be gone already
                pass
        self.close()


def _sweep_dead_workers(base: Path) -> None:
    """Remove the temporary folders of this machine's Dask workers that died (SIGKILL, OOM)."""
    for folder in base.glob(f"{TMP_PREFIX}*"):
        pid = folder.name[len(TMP_PREFIX) :]
        if pid.isdigit() and not proc_info.is_running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _drain(q: queue.SimpleQueue[Any]) -> list[Any]:
    items = []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


def _address(worker: Any) -> str:
    return str(getattr(worker, "address", worker or "?"))
