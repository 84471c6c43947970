"""The kernel template (zygote), grader side: a slot's template process, a child's request, the kernel command.

A batch uses it by default (``--fresh-kernels``: not); ``grade`` and Gradescope only when
:func:`enabled` (``AUTOGRADER_KERNEL_TEMPLATE=1``). :mod:`.template_slot` keeps one per (slot,
lesson) and :func:`~.execute.run_submission` decides per run. SECURITY.md ("The kernel template
(zygote)") has the design and its invariants.

- :class:`KernelTemplate` starts ``template_process.py serve`` as root with a minimal environment
  (no variable of the grader's) and the lesson's modules, waits for it to say it is ready (one
  thread, its descriptors), and ends it by pid.
- :func:`child_request` is what a child needs to enter its jail: the same root as bwrap's
  (:mod:`.jail`'s folders, devices, tmpfs sizes, environment, rlimits; confine's seccomp), the
  slot uid and cgroup, and the connection file (or, for the bench and the tests, code to run).
- :func:`kernel_command` is the kernel command that reaches it (``template_launcher.py``), and
  :func:`kernel_builder` the ``command_builder`` of :class:`~.kernel.JailedKernelManager` that
  makes it (what ``execute.py`` passes instead of ``jail.kernel_command``).
- :func:`unavailable_reason` says why a run must use a fresh kernel instead (no root, no bwrap
  mode: the fallback jail of Gradescope's container, no sandbox uid).
"""

from __future__ import annotations

import ast
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..limits import ExecutionLimits
from ..jail import jail, jail_site
from ..jail.cgroups import SlotCgroup
from ..jail.users import SandboxUser

SWITCH = "AUTOGRADER_KERNEL_TEMPLATE"
PROCESS_SCRIPT = Path(__file__).with_name("template_process.py")
LAUNCHER_SCRIPT = Path(__file__).with_name("template_launcher.py")
READY_TIMEOUT_S = 120.0
# ipykernel's kernel app and what its start imports (debugpy, IPython's shell, history, completer):
# imported in the template, they leave the child's kernel start at about 0.1 s of its own
KERNEL_MODULES = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "IPython.core.history",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.extensions.storemagic",
    "tornado.platform.asyncio",
)
DEVICE_LINKS: tuple[tuple[str, str], ...] = (
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
)
DEVICE_LINKS += (("/dev/stderr", "/proc/self/fd/2"),)


def enabled() -> bool:
    """True only when the operator forces the template on every front end (``AUTOGRADER_KERNEL_TEMPLATE=1``)."""
    return os.environ.get(SWITCH, "").strip() == "1"


def unavailable_reason(iso: jail.Isolation) -> str | None:
    """Why a run in ``iso`` cannot use a template (None when it can): it needs what bwrap mode has as root."""
    if os.geteuid() != 0:
        return "the kernel template needs a root grader (mounts and the slot uid)"
    if iso.mode != "bwrap":
        return f"the kernel template needs namespaces (isolation mode {iso.mode})"
    if iso.user is None:
        return "the kernel template needs a sandbox uid"
    return None


def import_only_modules(sources: list[str]) -> list[str]:
    """The modules named by the cells that hold only ``import`` statements, in order, plus
    ipykernel's (:data:`KERNEL_MODULES`): what a template imports, and nothing else. ``sources`` are
    the lesson's own notebook's cells (the reference solution's or the template's), never a
    submission's: a template imports no module a student named. Relative imports are left out."""
    names: list[str] = []
    for source in sources:
        try:
            body = ast.parse(source).body
        except SyntaxError:
            continue
        code = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if not code or not all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in code):
            continue
        for s in code:
            if isinstance(s, ast.Import):
                names += [a.name for a in s.names]
            elif isinstance(s, ast.ImportFrom) and s.module and not s.level:
                names.append(s.module)
    return list(dict.fromkeys([*names, *KERNEL_MODULES]))


class KernelTemplate:
    """One slot's template process (as root), listening on ``folder/template.sock``."""

    def __init__(self, folder: Path, modules: list[str]) -> None:
        self.folder = folder
        self.modules = list(modules)
        self.proc: subprocess.Popen | None = None
        self.ready: dict = {}

    @property
    def socket_path(self) -> str:
        return str(self.folder / "template.sock")

    @property
    def root(self) -> str:
        """The empty folder each child mounts its own root on (in its own mount namespace)."""
        return str(self.folder / "root")

    def start(self) -> KernelTemplate:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        Path(self.root).mkdir(mode=0o755, exist_ok=True)
        Path(self.socket_path).unlink(missing_ok=True)  # a dead template's, in our own folder
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        with open(self.folder / "template.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", str(PROCESS_SCRIPT), "serve", self.socket_path, *self.modules],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd="/",
                close_fds=True,
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else b""
        self.proc.stdout.close()
        try:
            self.ready = json.loads(line) if line else {}
        except ValueError:
            self.ready = {}
        if not self.ready.get("ready"):
            log_tail = (self.folder / "template.log").read_bytes()[-2000:].decode(errors="replace")
            self.stop()
            raise RuntimeError(f"the kernel template did not start: {log_tail.strip()}")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Kill the template (our child, by pid) and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> KernelTemplate:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def child_request(
    template: KernelTemplate,
    user: SandboxUser,
    limits: ExecutionLimits,
    workspace: Path,
    rundir: Path,
    site_dir: Path,
    *,
    cgroup: SlotCgroup | None = None,
    connection_file: str | None = None,
    code: str | None = None,
    seccomp: bool = True,
) -> dict:
    """What one child needs to build the same jail as bwrap mode (:func:`jail.bwrap_argv`) and run its kernel."""
    binds: list[list[str]] = []
    symlinks: list[list[str]] = [list(link) for link in DEVICE_LINKS]
    for d in jail.SYSTEM_DIRS:
        if os.path.islink(d):
            symlinks.append([d, os.readlink(d)])
        elif os.path.isdir(d):
            binds.append([d, d, "ro"])
    binds += [[f"/etc/{name}", f"/etc/{name}", "ro"] for name in jail.ETC_FILES]
    binds += [[p, p, "ro"] for p in jail.interpreter_paths()]
    binds += [[p, p, "ro"] for p in jail.READ_ONLY_EXTRA if not p.startswith("/proc/")]  # a fresh /proc has them
    binds += [[d, d, "dev"] for d in jail.DEVICES]
    binds += [
        [str(workspace), jail.HOME_IN_JAIL, "rw"],
        [str(rundir), str(rundir), "rw"],
        [str(site_dir), jail.SITE_IN_JAIL, "ro"],
    ]
    return {
        "root": template.root,
        "tmpfs": [["/tmp", jail.TMPFS_BYTES], ["/dev/shm", jail.TMPFS_BYTES]],
        "symlinks": symlinks,
        "binds": binds,
        "cgroup_procs": cgroup.procs_files() if cgroup is not None else [],
        "uid": user.uid,
        "gid": user.gid,
        "env": jail.minimal_env(jail.HOME_IN_JAIL, "/tmp", jail.SITE_IN_JAIL),
        "cwd": jail.HOME_IN_JAIL,
        "rlimits": jail.rlimits(limits, with_nproc=True, cgroup=cgroup),
        "landlock": None,
        "seccomp": {"block_inet": False} if seccomp else None,
        "threads": jail_site.kernel_threads(),
        "connection_file": connection_file,
        "code": code,
    }


def kernel_builder(
    template: KernelTemplate,
    user: SandboxUser,
    limits: ExecutionLimits,
    workspace: Path,
    rundir: Path,
    site_dir: Path,
    cgroup: SlotCgroup | None = None,
) -> Callable[[list[str]], list[str]]:
    """The ``command_builder`` for :class:`~.kernel.JailedKernelManager`: jupyter_client's kernel
    argv (``... -f CONNECTION_FILE``) becomes the launcher's, for a child of ``template``."""

    def build(kernel_argv: list[str]) -> list[str]:
        connection_file = kernel_argv[kernel_argv.index("-f") + 1]
        request = child_request(
            template, user, limits, workspace, rundir, site_dir, cgroup=cgroup, connection_file=connection_file
        )
        return kernel_command(template, request)

    return build


def kernel_command(template: KernelTemplate, request: dict) -> list[str]:
    """The kernel command (for :class:`~.kernel.JailedKernelManager`'s builder): the launcher."""
    return [sys.executable, "-I", "-S", str(LAUNCHER_SCRIPT), template.socket_path, json.dumps(request)]
