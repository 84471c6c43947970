"""What the kernel sends over ZMQ is the notebook's doing: a reply too big to accept (hole H2),
messages the client cannot parse (hole H6), and the client's own exit stays quiet."""

from __future__ import annotations

import subprocess
import sys

import pytest
import zmq

from autograder.limits import ExecutionLimits
from autograder.sandbox import execute, run_submission
from autograder.sandbox.kernel import SEND_TIMEOUT_MS, SOCKET_LIMITS, JailedKernelManager

from sandbox_helpers import FAST, worker_slot, write_notebook
from waiting import returns

SHORT = ExecutionLimits(cell_timeout_s=4, notebook_timeout_s=30, memory_mb=2048, output_cap_kb=256)
BREAK_JSON = (
    "import json\n_dumps = json.dumps\n"
    "json.dumps = lambda o, *a, **k: _dumps({'header': 'forged', 'content': {'status': 'ok'}})"
)


def statuses(rec):
    return [c["status"] for c in rec["cells"]]


def test_every_socket_to_the_kernel_gives_up_a_blocked_send(tmp_path):
    """The manager's control socket and the client's channels all have SNDTIMEO; a send that
    cannot be queued (no peer, full queue) raises zmq.Again instead of blocking for ever."""
    km = JailedKernelManager(command_builder=lambda argv: argv, rundir=tmp_path, owner=None)
    km.write_connection_file()
    kc = km.client()
    kc.context.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing until a peer is connected: none is
    try:
        km._connect_control_socket()
        sockets = {
            "control": km._control_socket,
            "shell": kc.shell_channel.socket,
            "stdin": kc.stdin_channel.socket,
            "iopub": kc.iopub_channel.socket,
        }
        for name, sock in sockets.items():
            assert sock.getsockopt(zmq.SNDTIMEO) == SEND_TIMEOUT_MS, name
            assert sock.getsockopt(zmq.MAXMSGSIZE) == SOCKET_LIMITS[name][0], name
        shell = zmq.Socket.shadow(sockets["shell"].underlying)  # a blocking send, as in the hang of H2
        shell.setsockopt(zmq.SNDTIMEO, 200)
        with pytest.raises(zmq.Again):  # a send without SNDTIMEO would block for ever instead
            returns(lambda: kc.session.send(shell, "execute_request", {"code": ""}), "a blocked send")
    finally:
        kc.stop_channels()
        km._close_control_socket()
        km.cleanup_connection_file()


def test_the_control_socket_does_not_linger_on_requests_to_a_stopped_kernel(tmp_path):
    """jupyter_client queues an interrupt request on the control socket when it shuts a kernel down;
    the grader has stopped the jail by then, so closing must drop it (jupyter_client's linger of
    100 ms made every grade wait that long in zmq's context termination)."""
    km = JailedKernelManager(command_builder=lambda argv: argv, rundir=tmp_path, owner=None)
    km.write_connection_file()
    try:
        km._connect_control_socket()
        assert km._control_socket.getsockopt(zmq.LINGER) == 0
        km.session.send(km._control_socket, "interrupt_request", {})  # queued: no kernel reads it
    finally:
        km._close_control_socket()
        km.context.destroy()
        km.cleanup_connection_file()


@pytest.mark.slow
def test_a_reply_too_big_to_accept_ends_the_run_at_the_cell_limit(run_cells):
    """A 20 MB exception message: the execute_reply is over the shell socket's cap and dropped, and
    the cell limit (4 s) ends the run, not the notebook's (30 s) nor the jail's watchdog."""
    rec, _ = run_cells(["raise ValueError('z' * (20 << 20))", "x = 1"], limits=SHORT)
    assert rec["status"] == "timeout" and "larger than the grader accepts" in rec["reason"], rec["reason"]
    assert "ran into the cell limit" in rec["reason"], rec["reason"]
    assert statuses(rec) == ["timeout", "not_run"]


@pytest.mark.slow
def test_malformed_kernel_messages_are_a_dead_kernel_not_a_grader_failure(run_cells):
    rec, _ = run_cells(["x = 1", BREAK_JSON, "y = 2"])
    assert rec["status"] == "kernel_died", rec["reason"]
    assert "malformed message" in rec["reason"] and "code cell 2 (cell 2 of the notebook)" in rec["reason"]
    assert statuses(rec) == ["ok", "error", "not_run"]
    assert rec["cells"][1]["ename"] == "MalformedKernelMessage"
    assert rec["probe"] == "not_run"


@pytest.mark.slow
def test_malformed_messages_during_the_probe_fail_only_the_probe(run_cells):
    from autograder.sandbox import ProbeSpec

    from autograder.probe_format import ProbeCase

    # the student's function, called by the probe, breaks the kernel's message encoding
    breaker = "def f():\n" + "".join("    " + line + "\n" for line in BREAK_JSON.splitlines()) + "    return 1"
    rec, _ = run_cells(["x = 1", breaker], probe=ProbeSpec(cases=[ProbeCase("c", "f")], functions=["f"]))
    assert rec["status"] == "completed", rec["reason"]
    assert statuses(rec) == ["ok", "ok"]
    assert rec["probe"] == "failed"


@pytest.mark.kernel
def test_a_bug_of_the_harness_is_still_a_sandbox_error(tmp_path, monkeypatch):
    async def buggy(self, client, pos, budget_s):
        return undefined_name  # noqa: F821 - the bug under test

    monkeypatch.setattr(execute._Run, "_execute", buggy)
    nb = write_notebook(tmp_path, ["x = 1"])
    rec = run_submission(nb, tmp_path / "ws", limits=FAST, probe=None, slot=worker_slot())
    assert rec["status"] == "sandbox_error" and "NameError" in rec["reason"], rec["reason"]


def test_the_notebook_client_is_quiet_at_exit():
    """nbclient's exit hook on a client whose kernel is already gone printed an ignored AssertionError."""
    code = (
        "import atexit, nbformat\nfrom autograder.sandbox.kernel import CappedNotebookClient\n"
        "c = CappedNotebookClient(nbformat.v4.new_notebook())\nc.km = None\natexit.register(c._cleanup_kernel)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
