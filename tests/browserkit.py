"""Headless chromium for the tests that look at a page in a real browser (Debian's chromium,
local files only, no network). Tests skip, with the reason, where :func:`chromium_binary` is None.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

SKIP_REASON = "chromium is not installed (apt-get install -y chromium)"


def chromium_binary() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def chromium(tmp: Path, *args: str) -> str:
    """Run headless chromium once on local files; returns stdout. Its whole process group is
    killed on timeout."""
    cmd = [
        chromium_binary(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=5000",
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "HOME": str(tmp)},
    )
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("chromium did not finish within 90 s")
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}"
    return out.decode("utf-8", "replace")
