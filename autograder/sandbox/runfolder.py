"""The grader's per-run folder, the kernel's own output, and the sweep of what dead graders left.

Per run the grader makes ``/tmp/autograder-run-<grader pid>-XXXX/`` (mode 711): ``run/`` (the
sandbox uid's: connection file, ipc sockets, the fallback's ``TMPDIR``; a capped tmpfs as root),
``site/`` (read-only in the jail: its ``sitecustomize.py``) and ``snapshot/`` (the grader's own:
the working directory as it was before the probe). It is removed afterwards, unless
``AUTOGRADER_KEEP_RUNDIR=1`` (for debugging).

What the kernel writes to its original stdout and stderr (``os.write(1, ...)``, a C library's
prints) goes into a pipe that a thread of the grader drains (:class:`KernelOutput`): only the
last few KB are kept, for the reason of a kernel that failed to start; nothing lands on the
host's disk, however much is written.

A grader killed with SIGKILL cannot clean up: :func:`sweep_stale` removes ``autograder-run-<pid>-*``
and ``autograder-ws-<pid>-*`` folders whose grader process is gone (after the stale tmpfs mounts
inside them were unmounted), checking liveness by pid; a live grader's folders are never touched.
"""

from __future__ import annotations

import os
import re
import select
import stat
import tempfile
import threading
from pathlib import Path

from .. import proc_info
from ..tree_walk import remove_tree
from .workspace import sweep_stale_mounts

RUN_PREFIX = "autograder-run-"
WORKSPACE_PREFIX = "autograder-ws-"  # the pipeline's temporary workspaces
_STALE = re.compile(r"^autograder-(?:run|ws)-(\d+)-")
TAIL_BYTES = 4096


def make_run_folder() -> Path:
    """A fresh run folder named after this grader process (mode 711: the sandbox uid may pass)."""
    sweep_stale()
    base = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
    os.chmod(base, 0o711)
    return base


def make_workspace_folder() -> Path:
    """A fresh temporary folder for a workspace, named after this grader process (mode 711)."""
    base = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-"))
    os.chmod(base, 0o711)
    return base


def sweep_stale(folder: Path | None = None) -> list[Path]:
    """Remove run and workspace folders of grader processes that no longer exist (only folders
    owned by this grader's uid); returns them."""
    folder = Path(folder or tempfile.gettempdir())
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    stale = []
    for entry in entries:
        m = _STALE.match(entry.name)
        if not m:
            continue
        pid = int(m.group(1))
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if pid == os.getpid() or proc_info.pid_exists(pid) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        stale.append(Path(entry.path))
    if stale:
        sweep_stale_mounts()  # their tmpfs mounts first (the removal never crosses into a mount)
        for path in stale:
            remove_tree(path, ignore_errors=True)
    return stale


class KernelOutput:
    """A pipe for the kernel's stdout and stderr, drained by a thread that keeps only the tail."""

    def __init__(self, keep: int = TAIL_BYTES) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.keep = keep
        self.total = 0
        self._tail = b""
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True, name="autograder-kernel-output")
        self._thread.start()

    def child_fd(self) -> int:
        """The write end, for the kernel's stdout/stderr (close it here once the kernel started)."""
        return self.write_fd

    def started(self) -> None:
        """The kernel has its copy of the write end: drop ours, so EOF comes when the jail is gone."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _drain(self) -> None:
        while not self._done.is_set():
            try:
                ready, _, _ = select.select([self.read_fd], [], [], 0.2)
                if not ready:
                    continue
                chunk = os.read(self.read_fd, 65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            with self._lock:
                self.total += len(chunk)
                self._tail = (self._tail + chunk)[-self.keep :]

    def tail(self, n: int = 1500) -> str:
        with self._lock:
            data = self._tail[-n:]
        return data.decode("utf-8", "replace").strip() or "(empty)"

    def close(self) -> None:
        self._done.set()
        self.started()
        self._thread.join(timeout=2)
        try:
            os.close(self.read_fd)
        except OSError:
            pass
