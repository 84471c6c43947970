"""Ending the jail's processes: the watchdog thread and the inside-out kill of the jail's top process."""

from __future__ import annotations

import os
import signal
import subprocess
import threading

from ..proc_info import children_of


class Watchdog(threading.Thread):
    """SIGKILLs the jail's top process (bwrap or the kernel, which we started) after ``timeout_s``."""

    def __init__(self, timeout_s: float, pid_of) -> None:
        super().__init__(daemon=True, name="autograder-watchdog")
        self.timeout_s, self.pid_of = timeout_s, pid_of
        self.done = threading.Event()
        self.fired = False

    def run(self) -> None:
        if self.done.wait(self.timeout_s):
            return
        pid = self.pid_of()
        if pid:
            self.fired = True
            for target in [*children_of(pid), pid]:  # inside out, as stop_jail does
                try:
                    os.kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def stop_jail(proc, timeout_s: float = 5.0) -> None:
    """Kill the jail from the inside out: first the children of its top process (bwrap's pid-namespace
    init, or the kernel's subprocesses), then the top process, which we started and reap here.

    Killing only the top process would orphan bwrap's init to the machine's pid 1, which in many
    containers never reaps it (a zombie per submission).
    """
    if proc.poll() is not None:
        return
    for child in children_of(proc.pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=min(2.0, timeout_s))
        return
    except subprocess.TimeoutExpired:
        pass
    proc.kill()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
