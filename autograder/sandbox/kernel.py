"""The jailed kernel: a kernel manager whose command is the jail's, and an output-capped client.

- :class:`JailedKernelManager` ignores every kernelspec (the notebook's included): it launches
  ``<jail prefix> python -m ipykernel_launcher -f <connection file>`` with the grader's own
  interpreter, ``interrupt_mode = "message"`` (a SIGINT would hit bwrap, not the kernel) and the
  ZMQ ``ipc`` transport in a run folder shared with the jail.
- :class:`JailedKernelClient` caps the size of every message it accepts (ZMQ ``MAXMSGSIZE``:
  a larger message drops the connection instead of filling the grader's memory) and the number
  of queued messages; a dropped iopub connection counts as truncated output. Every socket (the
  manager's control socket too) gives up a send after ``SEND_TIMEOUT_MS`` (``SNDTIMEO``): once a
  connection was dropped, a send would otherwise block the event loop forever.
- :class:`CappedNotebookClient` keeps no output (only counts it against ``output_cap_bytes``,
  every byte of a message) and ignores widget comms and the notebook's tags.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.connect import channel_socket_types
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.util import run_sync
from traitlets import Int

MiB = 1024 * 1024
# Per socket: the largest message accepted (a larger one drops the connection instead of filling
# the grader's memory; the kernel holds the session key and can forge any message) and how many
# messages may queue. Worst case held by the grader: about sum(size * queue) = 32 + 16 + 8 + 8 MiB.
SOCKET_LIMITS = {
    "iopub": (2 * MiB, 16),
    "shell": (4 * MiB, 4),
    "control": (1 * MiB, 8),
    "stdin": (1 * MiB, 8),
    "hb": (4096, 16),
}
# A send that cannot be queued (the kernel dropped or stopped reading the connection) raises
# zmq.Again after this long instead of blocking the grader's event loop forever (hole H2).
SEND_TIMEOUT_MS = 2000
MONITORED = ("iopub", "shell")  # channels whose dropped connection the grader wants to know about


def _limited_socket(context: zmq.Context, channel: str, identity: bytes | None) -> zmq.Socket:
    """A new, not yet connected socket for ``channel`` with the grader's size, queue and send limits."""
    sock = context.socket(channel_socket_types[channel])
    sock.linger = 1000
    max_size, queue = SOCKET_LIMITS[channel]
    sock.setsockopt(zmq.MAXMSGSIZE, max_size)
    sock.setsockopt(zmq.RCVHWM, queue)
    sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
    if identity:
        sock.identity = identity
    return sock


def kernel_spec() -> KernelSpec:
    """The one kernelspec the grader uses, whatever the notebook asks for."""
    return KernelSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        display_name="Python 3 (autograder)",
        language="python",
        interrupt_mode="message",
        env={},
        metadata={},
    )


class JailedKernelClient(AsyncKernelClient):
    """A kernel client whose sockets refuse oversized messages, give up blocked sends, and report
    dropped iopub and shell connections."""

    _monitors: dict[str, zmq.Socket] | None = None

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        sock = _limited_socket(self.context, channel, identity)
        if channel in MONITORED:
            addr = f"inproc://autograder-{channel}-monitor-{id(sock)}"
            sock.monitor(addr, zmq.EVENT_DISCONNECTED)
            mon: zmq.Socket = zmq.Context.shadow(self.context.underlying).socket(zmq.PAIR)
            mon.connect(addr)
            if self._monitors is None:
                self._monitors = {}
            self._monitors[channel] = mon
        sock.connect(self._make_url(channel))
        return sock

    def dropped(self, channel: str) -> bool:
        """True when ``channel``'s connection was dropped since the last call (an oversized message was lost)."""
        dropped = False
        mon = (self._monitors or {}).get(channel)
        while mon is not None:
            try:
                mon.recv_multipart(zmq.NOBLOCK)
                dropped = True
            except zmq.Again:
                break
        return dropped

    def iopub_dropped(self) -> bool:
        return self.dropped("iopub")

    def stop_channels(self) -> None:
        for mon in (self._monitors or {}).values():
            mon.close(linger=0)
        self._monitors = None
        super().stop_channels()


class JailedKernelManager(AsyncKernelManager):
    """Starts the kernel through ``command_builder(kernel_argv) -> argv`` and hands the sandbox uid its files."""

    def __init__(
        self,
        *,
        command_builder: Callable[[list[str]], list[str]],
        rundir: Path,
        owner: tuple[int, int] | None,
        **kw: Any,
    ) -> None:
        super().__init__(transport="ipc", ip=str(rundir / "k"), connection_file=str(rundir / "kernel.json"), **kw)
        self._kernel_spec = kernel_spec()
        self.client_factory = JailedKernelClient
        self._command_builder = command_builder
        self._owner = owner
        self.cache_ports = False
        self.shutdown_wait_time = 2.0

    def _create_connected_socket(self, channel: str, identity: bytes | None = None) -> zmq.Socket:
        """The manager's own socket (control: interrupt and shutdown requests), limited like the client's."""
        sock = _limited_socket(self.context, channel, identity)
        sock.connect(self._make_url(channel))
        return sock

    def _connect_control_socket(self) -> None:
        """jupyter_client's control socket, without lingering when closed: the grader shuts a kernel
        down only after stopping its jail, so the interrupt request jupyter_client queues first
        has nobody to read it, and closing with its linger of 100 ms waited that long every grade."""
        super()._connect_control_socket()
        if self._control_socket is not None:
            self._control_socket.linger = 0

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        conn = self.connection_file
        if self._owner is not None:
            os.chown(conn, *self._owner, follow_symlinks=False)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", conn, *(extra_arguments or [])]
        return self._command_builder(argv)

    @property
    def kernel_pid(self) -> int | None:
        prov = self.provisioner
        proc = getattr(prov, "process", None) if prov is not None else None
        return proc.pid if proc is not None else None


class CappedNotebookClient(NotebookClient):
    """nbclient that keeps no output at all (the grader grades replies and files, never outputs);
    it only counts what the kernel sent, every byte of it (data, metadata, evalue, traceback,
    display ids), to report truncation past ``output_cap_bytes``. The notebook's metadata has no say."""

    output_cap_bytes = Int(1024 * 1024, help="output counted per notebook, in bytes, before it is reported truncated")

    def __init__(self, nb: Any, km: Any = None, **kw: Any) -> None:
        super().__init__(nb, km=km, **kw)
        self.output_bytes = 0
        self.output_truncated = False

    async def _async_cleanup_kernel(self) -> None:
        """nbclient's cleanup, but a no-op once the kernel is gone: the grader's own teardown stops
        the jail, and nbclient's ``assert self.km is not None`` would otherwise be printed as
        "Exception ignored in atexit callback" when a hook of nbclient's runs it again at exit."""
        if self.km is None:
            return
        await super()._async_cleanup_kernel()

    _cleanup_kernel = run_sync(_async_cleanup_kernel)

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        """Count the message; keep nothing (2,000 display_data messages with 1.5 MB of metadata
        each took a grader that kept outputs to 3.2 GB)."""
        self.output_bytes += message_size(msg.get("content"), self.output_cap_bytes + 1)
        if self.output_bytes > self.output_cap_bytes:
            self.output_truncated = True
        return None

    def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
        return None  # widgets are not graded and their state could grow without bound

    def _update_display_id(self, display_id: str, msg: dict) -> None:
        return None  # update_display_data could rewrite kept outputs past the cap


def message_size(value: Any, budget: int) -> int:
    """About how many bytes ``value`` (a message's content) holds: the length of every string and
    key, 8 per other leaf, 16 per container; stops counting past ``budget``. Iterative."""
    total, stack = 0, [value]
    while stack and total <= budget:
        v = stack.pop()
        if isinstance(v, (str, bytes)):
            total += len(v)
        elif isinstance(v, dict):
            total += 16
            for k, item in v.items():
                total += len(k) if isinstance(k, str) else 8
                stack.append(item)
        elif isinstance(v, (list, tuple)):
            total += 16
            stack.extend(v)
        else:
            total += 8
    return total
