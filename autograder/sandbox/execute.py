"""Run one submission in the jail, cell by cell, then the probe; return the execution.json record.

Nothing a notebook can do raises out of :func:`run_submission`: unreadable files, cell errors,
timeouts, a dead kernel and hostile code all become a status with a reason. Time is bounded
three ways: nbclient's per-cell timeout (the notebook deadline included), an ``asyncio``
deadline around the whole run, and a watchdog thread that SIGKILLs the jail's process if the
event loop itself stops making progress. Afterwards the kernel is shut down and every process
of the sandbox uid is reaped before the record is returned.

Per run the grader makes a run folder (:mod:`.runfolder`: the sockets, the jail's
``sitecustomize``, the pre-probe snapshot; the kernel's own stdout and stderr go to a drained
pipe, never to a file), joins the jail to a cgroup of the slot where it may (:mod:`.cgroups`),
and removes both afterwards. The probe (:mod:`.probe_run`) sends hidden inputs one case at a
time, and what the grader reads back from the working directory is what it held before the
first one (:mod:`.snapshot`).

What the kernel may write in total is capped (:mod:`.workspace`): the workspace is a capped
tmpfs (mounted here unless the caller prepared it) or watched by a :class:`DiskWatchdog`.
A kernel message the client cannot even parse (the kernel holds the session key and can send
anything) ends the run as ``kernel_died``: it is the notebook's doing, not the grader's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from jupyter_core.utils import ensure_async
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from .. import proc_info, tree_walk
from ..limits import ExecutionLimits
from ..errors import AutograderError
from ..probe_format import ProbeCase, case_bytes
from ..jail import cgroups, jail, uid_sweep
from ..jail.disk_watchdog import SHM_DIR, DiskWatchdog, Held
from ..jail.procs import Watchdog, stop_jail
from ..jail.users import chown_tree_top, claim_slot, reap_user, require_reachable
from ..kernel_template.template import KernelTemplate, kernel_builder, unavailable_reason
from ..kernel_template.template_slot import SlotTemplate
from ..statuses import CellStatus, ProbeStatus, RunStatus
from ..notebook_reader import PARSE_TIMEOUT_S, CodeCell, UnreadableNotebook, load_notebook, stripped_notebook
from . import snapshot
from .kernel import SEND_TIMEOUT_MS, SOCKET_LIMITS, CappedNotebookClient, JailedKernelClient, JailedKernelManager
from .probe_run import HARNESS_BUGS, ProbeRun, probe_budget_s
from .record import CellRecord, Outcome, build_record, reply_to_cell
from .runfolder import KernelOutput, make_run_folder
from .workspace import (
    RUNDIR_BYTES,
    RUNDIR_INODES,
    WORKSPACE_INODES,
    capped_mount,
    mounted_cap,
    prepared_workspace,
    workspace_cap_bytes,
)

STARTUP_TIMEOUT_S = 60.0
RECOVER_GRACE_S = 5.0  # after an interrupt, how long the kernel gets to answer again
SHUTDOWN_S = 10.0
MiB = 1024 * 1024


@dataclass(frozen=True)
class ProbeSpec:
    """What the probe calls: ``cases`` in order, ``functions`` reported defined/missing/not callable."""

    cases: list[ProbeCase]
    functions: list[str]
    results_variable: str = "RESULTS"


def detect_isolation(unsafe_no_sandbox: bool = False) -> dict:
    """The isolation a run would get here: ``{"mode", "layers", "warnings"}`` (raises if none and not unsafe)."""
    return jail.choose_isolation(unsafe_no_sandbox, slot=0).record()


def run_submission(
    notebook: Path,
    workspace: Path,
    *,
    limits: ExecutionLimits,
    probe: ProbeSpec | None,
    unsafe_no_sandbox: bool = False,
    slot: int = 0,
    on_kernel_started: Callable[[], None] | None = None,
    on_snapshot: SnapshotCallback | None = None,
    on_run_discarded: Callable[[], None] | None = None,
    template: SlotTemplate | None = None,
) -> dict:
    """Execute ``notebook`` jailed with ``workspace`` as its working directory; return execution.json.

    ``template``: the slot's kernel template (:mod:`.template_slot`). The kernel is a child of it
    when the isolation here allows (:func:`.template.unavailable_reason`) and it runs, else a fresh
    kernel; execution.json's ``kernel`` says which, and ``kernel_reason`` why a fresh one although a
    template was given. A template that dies during the run is not the notebook's doing: the run is
    done again from an empty working directory (with the template restarted, or fresh).

    Both callbacks run in the thread of the kernel's event loop: keep them short (start a thread).

    ``on_kernel_started()``: once the kernel's process has started, before its first cell: the
    grader's own warm-ups wait for it, so that they do not delay the kernel's start.
    ``on_snapshot(folder)``: once the working directory is frozen before the probe (the grader's
    copy in ``folder``, which the workspace is restored from when the jail is gone), so that the
    grader may read it while the probe runs. It may return a function that waits until it is done
    with ``folder``; the run calls it before removing the folder.
    ``on_run_discarded()``: a run is being done again (its template died): whatever the callbacks
    made of the discarded run (a measurement of its snapshot) must be dropped, since the run done
    again may never reach its own snapshot.
    """
    hooks = _Hooks(on_kernel_started, on_snapshot, discarded=on_run_discarded)
    with claim_slot(slot) as free_slot, prepared_workspace(Path(workspace), limits, keep=True):
        return _run_in_slot(
            Path(notebook), Path(workspace), limits, probe, unsafe_no_sandbox, free_slot, hooks, template
        )


SnapshotCallback = Callable[[Path], "Callable[[], None] | None"]


@dataclass
class _Hooks:
    kernel_started: Callable[[], None] | None = None
    snapshot: SnapshotCallback | None = None
    snapshot_done: Callable[[], None] | None = None  # what ``snapshot`` returned
    discarded: Callable[[], None] | None = None  # the run so far is thrown away and done again


def _run_in_slot(
    notebook: Path,
    workspace: Path,
    limits: ExecutionLimits,
    probe: ProbeSpec | None,
    unsafe_no_sandbox: bool,
    slot: int,
    hooks: _Hooks | None = None,
    template: SlotTemplate | None = None,
) -> dict:
    started = time.monotonic()
    iso = jail.choose_isolation(unsafe_no_sandbox, slot)
    workspace = workspace.absolute()
    workspace.mkdir(parents=True, exist_ok=True)
    if any(workspace.iterdir()):
        raise AutograderError(f"workspace {workspace} is not empty; the kernel must start in an empty folder")
    try:  # under the notebook's deadline: in a limited child process (a 30 MB notebook took minutes)
        loaded = load_notebook(notebook, timeout_s=min(PARSE_TIMEOUT_S, float(limits.notebook_timeout_s)))
    except UnreadableNotebook as e:
        return build_record(Outcome(RunStatus.UNREADABLE, str(e)), [], iso.record(), started, probe=ProbeStatus.NOT_RUN)
    cells = loaded.cells
    shape: dict[str, Any] = {
        "cells_in_notebook": loaded.total,
        "language": loaded.language,  # + errors placed by cell and line
        "sources": [c.source for c in cells],
        "names": list(probe.functions) if probe else [],
    }
    hooks = hooks or _Hooks()
    kernel_template, kernel_reason = _kernel_template(template, iso)
    run = _Run(iso, cells, workspace, limits, probe, slot, hooks=hooks, template=kernel_template)
    outcome = run.execute()
    if template is not None and kernel_template is not None and template.died(kernel_template):
        lost = "the kernel template died during the first run (not the notebook's doing), so it ran again"
        tree_walk.empty_folder(workspace)
        hooks.snapshot_done = None  # the first run called it when it removed its snapshot
        if hooks.discarded is not None:
            hooks.discarded()
        iso = jail.choose_isolation(unsafe_no_sandbox, slot)
        kernel_template, why = _kernel_template(template, iso)
        kernel_reason = f"{lost}; {why}" if why else f"{lost} in a restarted template"
        run = _Run(iso, cells, workspace, limits, probe, slot, hooks=hooks, template=kernel_template)
        outcome = run.execute()
    if outcome.status == RunStatus.TIMEOUT:
        outcome.cpu_denied_share = run.cpu_denied_share
    if run.leftover_pids:
        iso.warnings.append(f"{len(run.leftover_pids)} sandbox processes survived the reaper: {run.leftover_pids[:10]}")
    iso.warnings.extend(run.warnings)
    return build_record(
        outcome,
        run.cell_records(),
        iso.record(),
        started,
        probe=run.probe_status,
        output_truncated=run.output_truncated,
        kernel="template" if kernel_template is not None else "fresh",
        kernel_reason=kernel_reason,
        **shape,
    )


def _kernel_template(template: SlotTemplate | None, iso: jail.Isolation) -> tuple[KernelTemplate | None, str | None]:
    """The running template a run's kernel comes from, or None and why not (None when none was asked for)."""
    if template is None:
        return None, None
    why = unavailable_reason(iso)
    if why is not None:
        return None, why
    return template.acquire()


def _run_async(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside an event loop
        return pool.submit(asyncio.run, coro).result()


@dataclass
class _Run:
    iso: jail.Isolation
    cells: list[CodeCell]
    workspace: Path
    limits: ExecutionLimits
    probe: ProbeSpec | None
    slot: int = 0
    hooks: _Hooks = field(default_factory=_Hooks)
    records: dict[int, CellRecord] = field(default_factory=dict)
    probe_status: str = ProbeStatus.NOT_RUN
    output_truncated: bool = False
    leftover_pids: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    km: JailedKernelManager | None = None
    base: Path | None = None
    disk_watchdog: DiskWatchdog | None = None
    cgroup: cgroups.SlotCgroup | None = None
    kernel_output: KernelOutput | None = None
    pre_probe: snapshot.Snapshot | None = None
    refused: str | None = None  # why the working directory could not be taken before the probe
    probe_run: ProbeRun | None = None
    mounts: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    template: KernelTemplate | None = None  # the kernel is a child of it; None: a fresh jailed kernel
    cpu_denied_share: float | None = None  # at the last timeout (Outcome.cpu_denied_share)

    def execute(self) -> Outcome:
        """Run the notebook (then the probe) and clean up; a failure of our own jail is the outcome."""
        try:
            return _run_async(self.main())
        except Exception as e:  # noqa: BLE001 - a failure of our own jail, reported not raised
            return Outcome(
                RunStatus.SANDBOX_ERROR, f"the grader could not run the sandbox: {type(e).__name__}: {e}"[:500]
            )
        finally:
            self.cleanup()

    # ------------------------------------------------------------ setup
    def _prepare(self) -> tuple[Path, Path]:
        self.base = make_run_folder()  # mode 711: the sandbox uid may pass through, not list
        rundir, site_dir = self.base / "run", jail.write_site(self.base / "site")
        rundir.mkdir(mode=0o700)
        owner = (self.iso.user.uid, self.iso.user.gid) if self.iso.user else None
        rundir_capped = self.mounts.enter_context(capped_mount(rundir, "run", RUNDIR_BYTES, RUNDIR_INODES, owner))
        self._cap_writable_places(rundir, rundir_capped)
        if self.iso.mode != "bwrap":
            (rundir / "tmp").mkdir(mode=0o700)
        if self.iso.mode == "fallback" and self.iso.user is not None:
            require_reachable(self.workspace.parent, self.iso.user)  # no mount namespace: real paths
        if self.iso.user is not None:
            for d in (self.workspace, rundir) + ((rundir / "tmp",) if self.iso.mode != "bwrap" else ()):
                chown_tree_top(d, self.iso.user)
            reap_user(self.iso.user)  # a leftover of an earlier run would count against NPROC
            uid_sweep.sweep(self.iso.user)  # and what a killed grader's run of this uid left
        if self.iso.mode != "none":
            self.cgroup, why = self.mounts.enter_context(
                cgroups.slot_cgroup(self.slot, int(self.limits.memory_mb) * 1024 * 1024)
            )
            if self.cgroup is not None:
                self.iso.layers += self.cgroup.layers()
            elif self.iso.user is not None:
                self.iso.warnings.append(
                    f"no cgroup budget for the jail ({why}); rlimits only: RLIMIT_AS per "
                    "process, RLIMIT_NPROC per uid, no CPU share"
                )
        self.kernel_output = KernelOutput()
        return rundir, site_dir

    def _cap_writable_places(self, rundir: Path, rundir_capped: bool) -> None:
        """Record the workspace's cap; watch what no tmpfs caps (the watchdog starts with the kernel)."""
        watched: list = []
        if mounted_cap(self.workspace) is not None:
            self.iso.layers.append("workspace_tmpfs")
        else:
            self.iso.layers.append("workspace_watchdog")
            watched.append(
                ("its working directory", self.workspace, workspace_cap_bytes(self.limits), WORKSPACE_INODES, None)
            )
        if not rundir_capped:
            watched.append(("the run folder", rundir, RUNDIR_BYTES, RUNDIR_INODES, None))
        if self.iso.mode == "fallback" and self.iso.user is not None:  # the host's /dev/shm is shared
            watched.append(("/dev/shm", Path(SHM_DIR), RUNDIR_BYTES, RUNDIR_INODES, self.iso.user.uid))
        held = None
        if watched and watched[0][1] == self.workspace:  # what no listing shows counts against its cap too
            owner = (self.iso.user.uid, self.iso.user.gid) if self.iso.user else None
            held = Held(workspace_cap_bytes(self.limits), owner, self.workspace)
        if watched:
            self.disk_watchdog = DiskWatchdog(watched, lambda: self.km.kernel_pid if self.km else None, held=held)

    # ------------------------------------------------------------ main
    async def main(self) -> Outcome:
        rundir, site_dir = self._prepare()
        out = self.kernel_output
        assert out is not None  # _prepare made it

        def build(kernel_argv: list[str]) -> list[str]:
            if self.template is not None:
                assert self.iso.user is not None  # unavailable_reason: a template needs a sandbox uid
                return kernel_builder(
                    self.template, self.iso.user, self.limits, self.workspace, rundir, site_dir, self.cgroup
                )(kernel_argv)
            return jail.kernel_command(
                self.iso, self.limits, self.workspace, rundir, site_dir, kernel_argv, cgroup=self.cgroup
            )[0]

        owner = (self.iso.user.uid, self.iso.user.gid) if self.iso.user else None
        self.km = km = JailedKernelManager(command_builder=build, rundir=rundir, owner=owner)
        client = CappedNotebookClient(
            stripped_notebook(self.cells),
            km=km,
            kernel_name="autograder",
            allow_errors=True,
            interrupt_on_timeout=False,
            startup_timeout=int(STARTUP_TIMEOUT_S),
            iopub_timeout=2,
            shell_timeout_interval=1,
            skip_cells_with_tag="\x00never",
            record_timing=False,
            output_cap_bytes=int(self.limits.output_cap_kb) * 1024,
            shutdown_kernel="immediate",
        )
        probe_s = (
            probe_budget_s(self.limits, len(self.probe.cases), sum(map(case_bytes, self.probe.cases)))
            if self.probe
            else 0.0
        )
        total_s = STARTUP_TIMEOUT_S + float(self.limits.notebook_timeout_s) + probe_s + RECOVER_GRACE_S + 10
        watchdog = Watchdog(total_s + 5, lambda: km.kernel_pid)
        watchdog.start()
        if self.disk_watchdog is not None:
            self.disk_watchdog.start()
        try:
            try:  # not nbclient's setup_kernel(): it would take over SIGINT/SIGTERM and register atexit hooks
                try:
                    await client.async_start_new_kernel(
                        cwd=str(self.workspace),
                        env={"PATH": "/usr/bin:/bin"},
                        stdout=out.child_fd(),
                        stderr=out.child_fd(),
                    )
                finally:
                    out.started()
                if self.hooks.kernel_started is not None:
                    self.hooks.kernel_started()
                await client.async_start_new_kernel_client()
            except Exception as e:  # noqa: BLE001 - any startup failure is this run's outcome
                return Outcome(
                    RunStatus.STARTUP_FAILED,
                    "the Python kernel could not be started in the sandbox: "
                    f"{type(e).__name__}: {str(e)[:200]}; kernel output: {out.tail()}",
                )
            return await asyncio.wait_for(self._cells_then_probe(client), total_s)
        except asyncio.TimeoutError:
            self._note_starvation()
            return Outcome(
                RunStatus.TIMEOUT,
                f"the notebook ran longer than its {self.limits.notebook_timeout_s:g} s limit "
                "and its kernel was stopped",
            )
        finally:
            if self.probe_status == ProbeStatus.NOT_RUN:  # else: set before the probe, which says nothing back
                self.output_truncated = client.output_truncated
            await self._shutdown(client)
            watchdog.done.set()
            if self.disk_watchdog is not None:
                self.disk_watchdog.done.set()

    async def _cells_then_probe(self, client: CappedNotebookClient) -> Outcome:
        outcome = await self._run_cells(client)
        if outcome.kernel_usable and self.probe is not None:
            self.output_truncated = client.output_truncated
            self.probe_run = probe = ProbeRun(
                self.probe.cases,
                self.probe.functions,
                self.probe.results_variable,
                self.limits,
                out_dir=jail.HOME_IN_JAIL if self.iso.mode == "bwrap" else str(self.workspace),
                workspace=self.workspace,
            )
            self.probe_status = ProbeStatus.FAILED
            self.probe_status = await probe.run(
                lambda source, budget: self._execute_extra(client, source, budget), self._take_snapshot
            )
            if self.refused:
                return Outcome(
                    RunStatus.KERNEL_DIED,
                    f"{self.refused}, so the grader stopped the kernel before calling its functions",
                    kernel_usable=False,
                )
        return outcome

    def _take_snapshot(self) -> bool:
        """The working directory and RESULTS as they are now, before any hidden input is sent; False
        (no hidden input may be sent) when the working directory is past the walker's limits."""
        assert self.base is not None
        try:
            self.pre_probe = snapshot.take(self.workspace, self.base / "snapshot", workspace_cap_bytes(self.limits))
        except tree_walk.TreeLimitError as e:
            self.refused = e.sentence
            return False
        if self.hooks.snapshot is not None:
            self.hooks.snapshot_done = self.hooks.snapshot(self.pre_probe.folder)
        return True

    async def _execute_extra(self, client: CappedNotebookClient, source: str, budget_s: float) -> dict:
        """Run one cell of the grader's (the probe's): its execute_reply content.

        Straight on the shell channel, silent, without waiting for its output on iopub: a notebook
        that flooded its output may have lost the iopub connection, and nbclient would then wait
        ``iopub_timeout`` for each of the probe's cells. TimeoutError past ``budget_s``;
        DeadKernelError when the kernel is gone.
        """
        kc = _jailed(client)
        if kc is None:
            raise DeadKernelError("no kernel client")
        msg_id = kc.execute(source, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
        end = time.monotonic() + budget_s
        while (left := end - time.monotonic()) > 0:
            try:
                msg = await kc.get_shell_msg(timeout=min(left, 1.0))
            except queue.Empty:
                if not self._kernel_alive():
                    raise DeadKernelError("the kernel died during the probe") from None
                continue
            if (msg.get("parent_header") or {}).get("msg_id") == msg_id:
                return msg.get("content") or {}
        raise TimeoutError(f"the probe's cell took longer than {budget_s:.0f} s")

    async def _execute(self, client: CappedNotebookClient, pos: int, budget_s: float) -> dict | None:
        """Run code cell ``pos`` of the client's notebook; the execute_reply content (None if skipped)."""
        replies: list[dict] = []
        client.on_cell_executed = lambda **kw: replies.append(kw.get("execute_reply") or {})
        client.timeout_func = lambda cell: budget_s  # type: ignore[assignment]  # nbclient's stub says int; its timeouts are seconds as float
        try:
            await client.async_execute_cell(client.nb.cells[pos], pos, execution_count=pos + 1)
        finally:
            if (kc := _jailed(client)) is not None and kc.iopub_dropped() and self._kernel_alive():
                client.output_truncated = True  # an oversized output message was refused
        return (replies[-1].get("content") or {}) if replies else None

    async def _run_cells(self, client: CappedNotebookClient) -> Outcome:
        limits = self.limits
        deadline = time.monotonic() + float(limits.notebook_timeout_s)
        timed_out: list[str] = []
        for pos, cell in enumerate(self.cells):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._note_starvation()
                return Outcome(
                    RunStatus.TIMEOUT,
                    f"the notebook reached its {limits.notebook_timeout_s:g} s limit before "
                    f"{cell.where}; later cells did not run",
                    kernel_usable=False,
                )
            budget = min(float(limits.cell_timeout_s), remaining)
            t0 = time.monotonic()
            try:
                content = await self._execute(client, pos, budget)
            except CellTimeoutError:
                self.records[cell.index] = CellRecord(
                    cell.index, CellStatus.TIMEOUT, time.monotonic() - t0, number=cell.number
                )
                self._note_starvation()  # before the interrupt: the tree that ran into the limit
                if (kc := _jailed(client)) is not None and kc.dropped("shell"):  # nothing will answer any more
                    return Outcome(
                        RunStatus.TIMEOUT,
                        f"{cell.where} answered with a message larger than the grader "
                        f"accepts ({SOCKET_LIMITS['shell'][0] // MiB} MB, e.g. a huge exception message), so "
                        "its connection was dropped and it ran into the cell limit; later cells did not run",
                        kernel_usable=False,
                    )
                by_deadline = budget < float(limits.cell_timeout_s)
                if by_deadline or not await self._recover(client, min(RECOVER_GRACE_S, deadline - time.monotonic())):
                    why = (
                        f"the notebook reached its {limits.notebook_timeout_s:g} s limit in {cell.where}"
                        if by_deadline
                        else f"{cell.where} exceeded the {limits.cell_timeout_s:g} s cell limit and did not stop "
                        "when interrupted"
                    )
                    return Outcome(RunStatus.TIMEOUT, why + "; later cells did not run", kernel_usable=False)
                timed_out.append(cell.where)
                continue
            except DeadKernelError:
                self.records[cell.index] = CellRecord(
                    cell.index,
                    CellStatus.ERROR,
                    time.monotonic() - t0,
                    "DeadKernelError",
                    "the kernel died while this cell ran (os._exit, a crash, or a signal)",
                    "",
                    number=cell.number,
                )
                return Outcome(RunStatus.KERNEL_DIED, self._death_reason(cell.where), kernel_usable=False)
            except HARNESS_BUGS:
                raise
            except Exception as e:  # noqa: BLE001 - raised while handling what the kernel sent
                why = _malformed(e)
                self.records[cell.index] = CellRecord(
                    cell.index,
                    CellStatus.ERROR,
                    time.monotonic() - t0,
                    "MalformedKernelMessage",
                    why,
                    "",
                    number=cell.number,
                )
                return Outcome(
                    RunStatus.KERNEL_DIED,
                    f"{why} while running {cell.where}; later cells did not run",
                    kernel_usable=False,
                )
            self.records[cell.index] = reply_to_cell(cell.index, content, time.monotonic() - t0, number=cell.number)
        if timed_out:
            listed = "; ".join(timed_out[:5]) + (f" and {len(timed_out) - 5} more" if len(timed_out) > 5 else "")
            verb = "was" if len(timed_out) == 1 else "were"
            return Outcome(
                RunStatus.TIMEOUT,
                f"{listed} exceeded the {limits.cell_timeout_s:g} s cell limit and {verb} "
                "interrupted; the other cells ran",
            )
        return Outcome(RunStatus.COMPLETED, None)

    def _note_starvation(self) -> None:
        """How much of the CPU the kernel's processes wanted they spent waiting for one, so far."""
        pid = self.km.kernel_pid if self.km else None
        if pid is None:
            return
        cpu, wait = proc_info.cpu_and_wait_of_tree(pid)
        if cpu + wait > 0:
            self.cpu_denied_share = round(wait / (cpu + wait), 3)

    async def _recover(self, client: CappedNotebookClient, grace_s: float) -> bool:
        """Interrupt the kernel after a cell timeout; True when it answers again within ``grace_s``.

        Bounded: each send gives up after the sockets' ``SNDTIMEO`` (a dropped connection would
        block it forever), and the whole exchange after ``grace_s`` plus that.
        """
        kc, km = _jailed(client), self.km
        if grace_s <= 0 or kc is None or km is None:
            return False

        async def interrupt_and_ping() -> bool:
            await km.interrupt_kernel()
            msg_id = kc.execute("", store_history=False, silent=True, stop_on_error=False)
            end = time.monotonic() + grace_s
            while (left := end - time.monotonic()) > 0:
                msg = await kc.get_shell_msg(timeout=left)
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return True
            return False

        try:
            return await asyncio.wait_for(interrupt_and_ping(), grace_s + 2 * SEND_TIMEOUT_MS / 1000)
        except Exception:  # noqa: BLE001 - Empty, zmq.Again, dead kernel, malformed reply: not recovered
            return False

    # ------------------------------------------------------------ teardown
    async def _shutdown(self, client: CappedNotebookClient) -> None:
        km = self.km
        if km is None:
            return
        proc = getattr(km.provisioner, "process", None) if km.provisioner else None
        if proc is not None:
            await asyncio.to_thread(stop_jail, proc)
        try:
            if km.has_kernel:
                await asyncio.wait_for(km.shutdown_kernel(now=True), SHUTDOWN_S)
        except Exception:  # noqa: BLE001 - stop_jail already ended the processes
            pass
        try:
            if client.kc is not None:
                client.kc.stop_channels()  # synchronous in jupyter_client 8
            await ensure_async(km.cleanup_resources())
        except Exception:  # noqa: BLE001
            pass

    def cleanup(self) -> None:
        if self.iso.user is not None:
            self.leftover_pids = reap_user(self.iso.user)
            # the next run's sandbox uid (the same one, in a batch) must not enter this workspace
            os.chown(self.workspace, os.geteuid(), os.getegid(), follow_symlinks=False)
            os.chmod(self.workspace, 0o700)
        if self.disk_watchdog is not None:
            self.disk_watchdog.done.set()
        self.mounts.close()  # the run folder's tmpfs and the cgroup, once nothing uses them
        if self.cgroup is not None:
            self.warnings += self.cgroup.warnings
        if self.iso.user is not None:  # nothing passes to the next run of this uid (SysV IPC, shared folders)
            self.warnings += uid_sweep.sweep(self.iso.user).warnings
        if self.kernel_output is not None:
            self.kernel_output.close()
        if self.pre_probe is not None:  # the jail is gone: the workspace as it was before the probe
            probe = self.probe_run if self.probe_status == ProbeStatus.COMPLETED else None
            snapshot.restore(
                self.pre_probe,
                self.workspace,
                (probe.report, probe.outputs) if probe else None,
                workspace_cap_bytes(self.limits),
            )
        if self.hooks.snapshot_done is not None:  # whoever reads the snapshot is done with it
            self.hooks.snapshot_done()
        if self.base is not None:
            if not os.environ.get("AUTOGRADER_KEEP_RUNDIR"):
                tree_walk.remove_tree(self.base, ignore_errors=True)

    def _kernel_alive(self) -> bool:
        proc = getattr(self.km.provisioner, "process", None) if self.km and self.km.provisioner else None
        return proc is not None and proc.poll() is None

    def _death_reason(self, where: str) -> str:
        dog = self.disk_watchdog
        if dog is not None and dog.fired:
            return (
                f"the notebook wrote {dog.fired} while running {where}; its kernel was stopped and "
                "later cells did not run"
            )
        if self.cgroup is not None and self.cgroup.oom_kills():
            return (
                f"the notebook used more than its {self.limits.memory_mb:g} MB of memory while running "
                f"{where}, and the kernel was stopped ({self._exit_status()[0]}); later cells did not run"
            )
        status, signum = self._exit_status()
        if signum is not None and signum != signal.SIGKILL:  # SIGKILL: what the memory limit sends
            return (
                f"the kernel was ended by signal {signum} ({signal.Signals(signum).name}) while running "
                f"{where} ({status}): the notebook's code, or a library it called, sent that signal to its own "
                "process; later cells did not run"
            )
        return (
            f"the kernel died while running {where} ({status}; os._exit, a crash or "
            "running out of memory); later cells did not run"
        )

    def _exit_status(self) -> tuple[str, int | None]:
        """How the jail's process ended, and the signal that ended it (a shell or bwrap reports a
        child killed by signal N as exit code 128 + N)."""
        proc = getattr(self.km.provisioner, "process", None) if self.km and self.km.provisioner else None
        code = proc.poll() if proc is not None else None
        if code is None:
            return "exit status unknown", None
        signum = -code if code < 0 else code - 128 if 128 < code < 128 + signal.NSIG else None
        if signum is not None and signum not in set(signal.Signals):
            signum = None
        if code < 0:
            return f"killed by signal {-code}", signum
        return (f"exit code {code}" + (f", signal {signum}" if signum is not None else "")), signum

    def cell_records(self) -> list[CellRecord]:
        return [
            self.records.get(c.index) or CellRecord(c.index, CellStatus.NOT_RUN, 0.0, number=c.number)
            for c in self.cells
        ]


def _malformed(e: Exception) -> str:
    detail = " ".join(f"{type(e).__name__}: {e}".split())[:200]
    return f"the kernel sent a malformed message or broke its connection with the grader ({detail})"


def _jailed(client: CappedNotebookClient) -> JailedKernelClient | None:
    """The notebook client's kernel client: a ``JailedKernelClient`` (``JailedKernelManager``'s
    ``client_factory``), with the dropped-connection checks nbclient's type does not know."""
    return cast("JailedKernelClient | None", client.kc)
