"""Shared pieces of the hostile-submission suite (tests/adversarial): constants, the graded
result, notebook building, and the invariant checks the fixtures in conftest.py apply.

Every hostile notebook runs only inside the jail (the real pipeline, the real kernel), bounded in
count, size and time. The test process only reads what the jail left behind, through
``safe_files`` (the notebook may have planted symlinks).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
from namespacekit import reachable_interpreter

from autograder import safe_files
from autograder.errors import UnsafeFileError

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT_ID = "07-quantization"
TOKEN = secrets.token_hex(6)
ENV_SECRET_NAME = "AUTOGRADER_TEST_SECRET"
ENV_SECRET = f"env-secret-{TOKEN}"
FILE_SECRET = f"file-secret-{TOKEN}"
# What hostile notebooks write wherever they try to forge something. Built by concatenation in
# the notebooks, so the literal never appears in a cell's source (nor in a traceback of it).
MARK = f"adv-forged-{TOKEN}"
MARK_SOURCE = f'MARK = "adv" + "-forged-" + "{TOKEN}"'

# Short limits: a hostile notebook needs seconds, not the assignment's minutes.
SHORT_LIMITS = {"cell_timeout_s": 5, "notebook_timeout_s": 20}

# Files of the repo a notebook must never read or change (checked by content and owner).
GRADER_FILES = [
    ROOT / "assignments" / ASSIGNMENT_ID / "rubric.toml",
    ROOT / "assignments" / ASSIGNMENT_ID / "assignment.toml",
    ROOT / "reference" / ASSIGNMENT_ID / "tolerances.toml",
]

# Wrong but well-shaped implementations: the probe gets arrays of the right shapes and dtypes.
WRONG_FUNCTIONS = """\
import numpy as np
def quantize(x, scale, zero_point, dtype=np.int8):
    return np.zeros(np.shape(x), dtype=dtype)
def dequantize(q, scale, zero_point):
    return np.zeros(np.shape(q), dtype=np.float32)
def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    return (np.float32(1.0), 0)
"""


# Holes this suite found that are still open (SECURITY.md, "Open holes"); none is, today. A new
# one's test is marked ``@hole("H9")``, xfail(strict=True): when its fix lands the test passes,
# strict xfail turns that into a failure, and the entry (and the marker) must be removed.
HOLES: dict[str, str] = {
    "H19": (
        "fallback without mounts (Gradescope's container): the workspace watchdog polls every 0.5 s, and "
        "fallocate writes 2 GB past the 256 MB cap before it fires (SECURITY.md, H19)"
    ),
}


def hole(key: str):
    """The xfail marker of an open hole."""
    return pytest.mark.xfail(strict=True, reason=HOLES[key])


PRELUDE = '''\
import json as _json, os as _os
{mark}
def _record(name, value):
    """Leave what this cell saw in the workspace for the test to read back."""
    with open(name + ".rec.json", "w") as _f:
        _json.dump(value, _f, default=repr)
'''


# ----------------------------------------------------------------------------- the session
SLOT_BASE = 8  # slots 0.. are what `grade` (slot 0) and `batch -j N` use; stay clear of them


def xdist_slot() -> int:
    """One sandbox slot (uid) per xdist worker, so parallel workers never share (and reap) a uid."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = "".join(ch for ch in worker if ch.isdigit())
    return SLOT_BASE + int(digits or 0)


def sandbox_uid(slot: int) -> int | None:
    try:
        return pwd.getpwnam(f"autograder-sb{slot}").pw_uid
    except KeyError:
        return None


def sandbox_uids() -> set[int]:
    return {p.pw_uid for p in pwd.getpwall() if p.pw_name.startswith("autograder-sb")}


@dataclass
class Graded:
    """One hostile notebook after grading: the grader's files and the jail's workspace."""

    name: str
    grade: dict[str, Any]
    out: Path
    workspace: Path
    ended: float | None = None  # time.time() when the grading returned
    results: dict[str, Any] = field(default_factory=dict)
    feedback: str = ""
    execution: dict[str, Any] = field(default_factory=dict)
    measurements: dict[str, Any] = field(default_factory=dict)

    def score(self, check_id: str) -> float:
        return next(c["score"] for c in self.grade["checks"] if c["id"] == check_id)

    def scores(self) -> dict[str, float]:
        return {c["id"]: c["score"] for c in self.grade["checks"]}

    def record(self, name: str) -> Any:
        """What the notebook recorded with ``_record(name, ...)``, read without following links."""
        try:
            return safe_files.load_json(self.workspace, f"{name}.rec.json")
        except UnsafeFileError as e:
            raise AssertionError(
                f"{self.name}: the notebook's record '{name}' is unreadable: {e}; execution: {self.execution_brief()}"
            ) from None

    def has_record(self, name: str) -> bool:
        return safe_files.exists_regular(self.workspace, f"{name}.rec.json")

    def execution_brief(self) -> str:
        e = self.execution
        return (
            f"status={e.get('status')} reason={e.get('reason')!r} cells_run={e.get('cells_run')}/"
            f"{e.get('cells_total')} probe={e.get('probe')} first_error={e.get('first_error')}"
        )

    def student_text(self) -> str:
        """Everything a student sees: results.json's outputs and names, and feedback.md."""
        parts = [str(self.results.get("output", "")), self.feedback]
        for t in self.results.get("tests", []):
            parts += [str(t.get("name", "")), str(t.get("output", ""))]
        return "\n".join(parts)


def build_notebook(cells: list[str | dict], *, metadata: dict | None = None, prelude: bool = True):
    """An nbformat v4 notebook; a cell is its source, or a dict with ``source`` and cell metadata."""
    nb = nbformat.v4.new_notebook()
    if prelude:
        nb.cells.append(nbformat.v4.new_code_cell(PRELUDE.format(mark=MARK_SOURCE)))
    for cell in cells:
        if isinstance(cell, dict):
            c = nbformat.v4.new_code_cell(cell["source"])
            c.metadata.update(cell.get("metadata", {}))
        else:
            c = nbformat.v4.new_code_cell(cell)
        nb.cells.append(c)
    if metadata:
        nb.metadata.update(metadata)
    return nb


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else {}


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (no links followed): type, mode, owner, size, mtime, content hash."""
    snap: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            digest = ""
            if stat.S_ISREG(st.st_mode) and st.st_size < (1 << 20):
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            snap[str(p.relative_to(root))] = (
                stat.S_IFMT(st.st_mode),
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                st.st_gid,
                st.st_size,
                st.st_mtime_ns,
                digest,
            )
    st = root.lstat()
    snap["."] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return snap


def grader_files_state() -> dict[str, tuple]:
    state = {}
    for p in GRADER_FILES:
        if p.exists():
            st = p.lstat()
            state[str(p)] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), MARK in p.read_text(errors="replace"))
    return state


def jail_uid(execution: dict) -> int | None:
    """The sandbox uid a run used, from execution.json's layers (``uid:autograder-sb9``)."""
    for layer in (execution.get("isolation") or {}).get("layers", []):
        if layer.startswith("uid:"):
            try:
                return pwd.getpwnam(layer[4:]).pw_uid
            except KeyError:
                return None
    return None


def disk_usage(folder: Path) -> int:
    """Bytes of disk the files under ``folder`` really take (allocated blocks, links not followed)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def leftover_processes(workspace: Path, uid: int | None = None, ended: float | None = None) -> list[str]:
    """Processes of the run's sandbox uid (default: this worker's slot), or working inside the
    workspace (zombies ignored). With ``ended`` (when the grading returned, ``time.time()``), a
    process started after it is not a leftover: slot uids are machine-wide, and another grading
    (another worker, another checkout's suite) may take the slot the moment this one freed it."""
    uid = uid if uid is not None else sandbox_uid(xdist_slot())
    found = []
    for proc in psutil.process_iter(["pid", "uids", "name", "status", "cmdline", "create_time"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if ended is not None and proc.info["create_time"] > ended:
                continue
            if not _runnable_in_the_jail(proc):
                continue
            mine = uid is not None and uid in tuple(proc.info["uids"] or ())
            try:
                inside = str(workspace) in (proc.cwd() or "")
            except (psutil.AccessDenied, psutil.ZombieProcess):
                inside = False
            if mine or inside:
                found.append(
                    f"pid {proc.pid} {proc.info['name']} uids={tuple(proc.info['uids'])} "
                    f"cmd={' '.join(proc.info['cmdline'] or [])[:120]}"
                )
        except psutil.NoSuchProcess:
            continue
    return found


def _runnable_in_the_jail(proc: psutil.Process) -> bool:
    """False when ``proc`` runs a program the jail cannot even see (another checkout's venv,
    another image's interpreter): then it belongs to another grader that shares the machine's
    slot uids, not to this run."""
    from autograder.jail import jail

    try:
        program = (proc.cmdline() or [""])[0]  # as started: a venv's python resolves to its base
    except (psutil.Error, OSError):
        return True
    if not program.startswith("/"):
        return True
    visible = {*jail.SYSTEM_DIRS, *jail.interpreter_paths()}
    visible |= {os.path.realpath(v) for v in visible}
    return any(program == v or program.startswith(v.rstrip("/") + "/") for v in visible)


def student_visible(g: Graded) -> str:
    """results.json, feedback.md and feedback.html, with Markdown/HTML escaping undone (an escaped
    secret is still one)."""
    texts = [json.dumps(g.results, ensure_ascii=False), g.feedback]
    html = g.out / "feedback.html"
    if html.is_file():
        texts.append(html.read_text(errors="replace"))
    whole = "\n".join(texts)
    whole = re.sub(r"\\(.)", r"\1", whole.replace("\\\\", "\\"))
    for entity, ch in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&"), ("&#x27;", "'")):
        whole = whole.replace(entity, ch)
    return whole


def leaks(g: Graded) -> list[str]:
    """Secrets or grader paths in what the student sees."""
    problems = []
    whole = json.dumps(g.results) + g.feedback
    for secret, what in ((ENV_SECRET, "the environment canary"), (FILE_SECRET, "the file canary")):
        if secret in whole:
            problems.append(f"{what} appears in results.json/feedback.md")
    student = g.student_text()
    for secret in grader_only_strings():
        if secret in whole:
            problems.append(
                f"a grader-only value from tolerances.toml ({secret[:12]}…) appears in results.json/feedback.md"
            )
    for path in (str(ROOT), str(g.out)):
        if path in student:
            problems.append(f"the grader's path {path} appears in results.json/feedback.md")
    return problems


def grader_only_strings() -> list[str]:
    """Values of the grader's files that no student output may contain (the solution's hash)."""
    import re

    tolerances = ROOT / "reference" / ASSIGNMENT_ID / "tolerances.toml"
    text = tolerances.read_text() if tolerances.is_file() else ""
    return re.findall(r'solution_sha256\s*=\s*"([0-9a-f]{16,})"', text)


# ----------------------------------------------------------------------------- whose failure
# A hostile notebook's doing always ends in a status the student reads as their own; the others say
# "a problem on our side" (sandbox_error, startup_failed), or the grader raised (grader_error).
STUDENT_STATUSES = frozenset({"completed", "timeout", "kernel_died", "unreadable"})
GRADER_BLAME = (
    "grader itself failed",
    "a problem on our side",
    "could not run the sandbox",
    "not a judgment of your work",
)


def blamed_on_the_grader(g: Graded) -> list[str]:
    """Why ``g`` reads as the grader's failure rather than the notebook's outcome (empty: it does not)."""
    problems = []
    status = g.execution.get("status")
    if status not in STUDENT_STATUSES:
        problems.append(
            f"execution status {status!r} is not one a student reads as their own "
            f"({', '.join(sorted(STUDENT_STATUSES))}); reason: {str(g.execution.get('reason'))[:300]!r}"
        )
    text = g.student_text().lower()
    problems += [f"the student reads {phrase!r}" for phrase in GRADER_BLAME if phrase in text]
    return problems


def require_student_facing(g: Graded) -> None:
    """The rule every graded hostile notebook keeps (the grading fixtures apply it to each one).

    A fallback forced on a machine where it cannot start a kernel at all skips (the notebook never
    ran: see :func:`require_mode`)."""
    if (
        g.execution.get("status") == "startup_failed"
        and os.environ.get("AUTOGRADER_JAIL", "").strip().lower() == "fallback"
    ):
        pytest.skip("the fallback jail cannot start a kernel on this machine: " + str(g.execution.get("reason"))[:300])
    problems = blamed_on_the_grader(g)
    assert not problems, f"{g.name}: a notebook's doing reported as the grader's failure: " + "; ".join(problems)
    require_kernel_asked(g)


def require_kernel_asked(g: Graded) -> None:
    """With ``AUTOGRADER_KERNEL_TEMPLATE=1`` (``make test-template``) every kernel that could come from
    the template did: the suite then attacks template children, not fresh kernels that a broken
    wiring fell back to. Where the template cannot hold (the fallback jail, no root) it is fresh and says why."""
    from autograder.kernel_template import template

    if not template.enabled() or g.execution.get("status") == "unreadable":
        return
    holds = os.geteuid() == 0 and isolation_of(g).get("mode") == "bwrap"
    kernel, why = g.execution.get("kernel"), g.execution.get("kernel_reason")
    if holds:
        assert kernel == "template", f"{g.name}: AUTOGRADER_KERNEL_TEMPLATE=1 ran a {kernel} kernel ({why})"
    else:
        assert kernel == "fresh" and why, f"{g.name}: no template can hold here, yet kernel={kernel!r} ({why})"


# ----------------------------------------------------------------------------- jail modes
JAIL_MODES = ("auto", "fallback")
KERNEL_KINDS = ("fresh", "template")
# What every adversarial test that starts a kernel runs in, within one pytest run (conftest.py's
# pytest_generate_tests): (jail, kernel, test id). "template" sets AUTOGRADER_KERNEL_TEMPLATE=1, so
# every kernel that can come from the kernel template does (SECURITY.md, "The kernel template").
# The fallback jail never holds a template (its kernels are fresh: test_adv_template_wiring proves
# it says why), so a fallback run with the switch on would repeat the fallback run.
JAIL_RUNS = (("auto", "fresh", "auto"), ("auto", "template", "auto-template"), ("fallback", "fresh", "fallback"))
KERNEL_RUNS = (("fresh", "fresh"), ("template", "template"))  # a test that does not choose its jail
TEMPLATE_MARKER = "kernel_template"  # what `make test-template` selects (-m kernel_template)


def isolation_of(g: Graded) -> dict:
    return g.execution.get("isolation") or {}


def require_mode(g: Graded, jail_mode: str) -> None:
    """The jail asked for ran (a forced fallback that silently became something else is a failure).

    Skips (with the reason) when the forced fallback could not even start a kernel on this
    machine: then the hostile code never ran and the test proves nothing about the fallback.
    """
    iso = isolation_of(g)
    if jail_mode == "fallback":
        assert iso.get("mode") == "fallback", f"AUTOGRADER_JAIL=fallback ran in mode {iso.get('mode')}: {iso}"
        if g.execution.get("status") == "startup_failed":
            pytest.skip(
                "the fallback jail cannot start a kernel on this machine (see "
                "test_adv_fallback_layers.py for the fallback's layers): " + str(g.execution.get("reason"))[:300]
            )
    assert iso.get("mode") in ("bwrap", "fallback"), f"the notebook ran without a jail: {iso}"


# What the kernel sees of itself, for comparing with the isolation execution.json claims.
IDENTITY_CELL = """\
import os, resource
def _ns(kind):
    try:
        return os.readlink("/proc/self/ns/" + kind)
    except OSError as e:
        return "ERR " + type(e).__name__
def _status():
    out = {}
    try:
        for line in open("/proc/self/status"):
            k, _, v = line.partition(":")
            if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp", "Uid", "Gid", "Groups"):
                out[k] = v.strip()
    except OSError as e:
        out["error"] = repr(e)
    return out
_record("identity", {
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
    "ns": {k: _ns(k) for k in ("pid", "net", "mnt", "ipc", "uts", "user", "cgroup")},
    "status": _status(),
    "rlimits": {k: resource.getrlimit(getattr(resource, "RLIMIT_" + k)) for k in ("AS", "DATA", "FSIZE", "NOFILE", "NPROC", "CORE")},
    "hostname": os.uname().nodename,
})
"""


# ----------------------------------------------------------------------------- loopback servers
class LoopbackServers:
    """TCP (127.0.0.1, ::1), UDP (127.0.0.1) and Unix (abstract, pathname) listeners run by the test.

    Any byte or connection they receive during grading is a hole.
    """

    def __init__(self) -> None:
        self.received: list[str] = []
        self.socks: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.targets: dict[str, object] = {}
        self.sockdir = Path(tempfile.mkdtemp(prefix=f"adv-sock-{TOKEN}-"))
        os.chmod(self.sockdir, 0o777)
        self._stop = threading.Event()
        self._add("tcp4", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        if socket.has_ipv6:
            try:
                self._add("tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0))
            except OSError:
                pass
        self._add("udp4", socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self._add("unix_abstract", socket.AF_UNIX, socket.SOCK_STREAM, f"\0adv-{TOKEN}-{os.getpid()}-{id(self)}")
        path = str(self.sockdir / "s")
        self._add("unix_path", socket.AF_UNIX, socket.SOCK_STREAM, path)
        os.chmod(path, 0o777)

    def _add(self, name, family, kind, addr) -> None:
        s = socket.socket(family, kind)
        s.bind(addr)
        if kind == socket.SOCK_STREAM:
            s.listen(8)
        s.settimeout(0.2)
        self.socks.append(s)
        bound = s.getsockname()
        if isinstance(bound, bytes):  # abstract Unix name: sent without its leading NUL
            bound = bound[1:].decode()
        self.targets[name] = bound
        t = threading.Thread(target=self._serve, args=(name, s, kind), daemon=True)
        t.start()
        self.threads.append(t)

    def _serve(self, name, s, kind) -> None:
        while not self._stop.is_set():
            try:
                if kind == socket.SOCK_STREAM:
                    conn, _ = s.accept()
                    conn.settimeout(1)
                    try:
                        data = conn.recv(256)
                    except OSError:
                        data = b""
                    conn.close()
                else:
                    data, _ = s.recvfrom(256)
                self.received.append(f"{name}: {data[:80]!r}")
            except (socket.timeout, OSError):
                continue

    def close(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join(timeout=2)
        for s in self.socks:
            s.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)


# ----------------------------------------------------------------------------- grading in a child
@functools.lru_cache(maxsize=1)
def can_unshare_mounts() -> bool:
    """Whether this process may make a private mount namespace (not in Gradescope's container)."""
    import subprocess

    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def grade_in_child(
    tmp: Path,
    cells: list[str] | None = None,
    *,
    notebook: Path | None = None,
    cell_s: float,
    notebook_s: float,
    timeout_s: float,
    limits: dict | None = None,
    setup: str = "",
    jail_mode: str | None = None,
    env: dict | None = None,
) -> tuple[Graded, int]:
    """Grade in a fresh process (so its peak RSS is the grading's alone); return it and the peak.

    ``notebook`` (a file) or ``cells``; ``limits`` more ``[execution]`` limits; ``setup`` shell lines
    run first in a private mount namespace of the child's own (e.g. bind mounts); ``env`` is added
    to its environment; ``jail_mode`` sets ``AUTOGRADER_JAIL``; for "fallback" that namespace also makes the interpreter reachable
    by the sandbox uid (:func:`reachable_interpreter`), so the fallback can start here.
    """
    import subprocess
    import sys
    import time

    if notebook is None:
        notebook = tmp / "child.ipynb"
        nbformat.write(build_notebook(cells or []), notebook)
    base = Path(tempfile.mkdtemp(prefix=f"adv-{TOKEN}-child-"))
    os.chmod(base, 0o711)
    out, ws = base / "out", base / "ws"
    child = Path(__file__).with_name("grade_child.py")
    argv = [
        sys.executable,
        str(child),
        str(notebook),
        str(out),
        str(ws),
        str(xdist_slot()),
        str(cell_s),
        str(notebook_s),
        json.dumps(limits or {}),
    ]
    env = {**os.environ, **(env or {})}
    if jail_mode:
        env["AUTOGRADER_JAIL"] = jail_mode
    if jail_mode == "fallback" and os.geteuid() == 0:
        hold = base / "hold"
        hold.mkdir()
        setup += reachable_interpreter(hold)
    if setup:
        if not can_unshare_mounts():
            shutil.rmtree(base, ignore_errors=True)
            pytest.skip(
                "this test needs a private mount namespace, and unshare is not permitted here "
                "(Gradescope's container: Docker's seccomp profile denies it)"
            )
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "set -e\n" + setup + 'exec "$@"\n',
            "sh",
            *argv,
        ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=str(ROOT), env=env)
    except subprocess.TimeoutExpired:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"the grader hung: no grade after {timeout_s} s (the notebook's limit is {notebook_s} s)")
    ended = time.time()
    if proc.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise AssertionError(f"the grading process failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if "unavailable" in report:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"no isolation layer on this machine: {report['unavailable']}")
    feedback = out / "feedback.md"
    g = Graded(
        name=notebook.stem,
        grade=read_json(out / "grade.json"),
        out=out,
        workspace=ws,
        ended=ended,
        results=read_json(out / "results.json"),
        feedback=feedback.read_text() if feedback.is_file() else "",
        execution=read_json(out / "execution.json"),
        measurements=read_json(out / "measurements.json"),
    )
    if env.get("AUTOGRADER_JAIL", "").strip().lower() == "fallback" and g.execution.get("status") == "startup_failed":
        pytest.skip("the fallback jail cannot start a kernel on this machine: " + str(g.execution.get("reason"))[:300])
    require_student_facing(g)
    return g, report["maxrss_kb"] * 1024
