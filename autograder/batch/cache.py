"""The execution cache: a notebook already run under the same grading code is never run again.

Key: sha256 of the notebook's bytes + ``Assignment.fingerprint()`` (config, grading code and the
hidden-data secret's fingerprint) + ``environment_fingerprint()`` (package versions). An entry is
a folder ``<root>/<key>/`` holding the stages that need the notebook (``execution.json``,
``measurements.json``) and ``entry.json`` written last; judging and reporting are redone from
them, so a new rubric or new tolerances never need an execution. Entries are published with an
atomic rename, so concurrent workers and an interrupted run never leave a half-written entry.

Infrastructure failures (``sandbox_error``, ``startup_failed``) are not cached: they say nothing
about the notebook, and a re-run should try again. Nor is a ``timeout`` or ``kernel_died`` that
happened while a neighbour was running (``outcomes.from_reply``): only its regrade alone is.
Entries are read and written by the batch's client only; workers never see the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..pipeline import EXECUTION_FILE, MEASUREMENTS_FILE
from ..statuses import RunStatus

CACHED_FILES = (EXECUTION_FILE, MEASUREMENTS_FILE)
ENTRY_FILE = "entry.json"
UNCACHED_STATUSES = frozenset({RunStatus.SANDBOX_ERROR, RunStatus.STARTUP_FAILED})


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(notebook_sha256: str, assignment_fingerprint: str, environment_fingerprint: str) -> str:
    text = f"notebook={notebook_sha256}\nassignment={assignment_fingerprint}\nenvironment={environment_fingerprint}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class ExecutionCache:
    """Folder-backed cache of (execution.json, measurements.json) by cache key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry(self, key: str) -> Path | None:
        """The entry folder for ``key`` when it is complete, else None."""
        folder = self.root / key
        try:
            meta = json.loads((folder / ENTRY_FILE).read_text())
        except (OSError, ValueError):
            return None
        if meta.get("key") != key or not all((folder / name).is_file() for name in CACHED_FILES):
            return None
        return folder

    def restore(self, key: str, out_dir: Path) -> bool:
        """Copy the cached stage files into ``out_dir``; False on a miss."""
        folder = self.entry(key)
        if folder is None:
            return False
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in CACHED_FILES:
            shutil.copyfile(folder / name, out_dir / name)
        return True

    def store(self, key: str, out_dir: Path, *, info: dict[str, Any] | None = None) -> bool:
        """Publish ``out_dir``'s stage files under ``key``; False when not cacheable or already there."""
        if not all((out_dir / name).is_file() for name in CACHED_FILES) or self.entry(key) is not None:
            return False
        try:
            status = json.loads((out_dir / EXECUTION_FILE).read_text()).get("status")
        except (OSError, ValueError, AttributeError):
            return False
        if status in UNCACHED_STATUSES:
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        if (self.root / key).exists():  # a damaged entry (entries are published whole, by rename)
            shutil.rmtree(self.root / key, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{key}."))
        try:
            for name in CACHED_FILES:
                shutil.copyfile(out_dir / name, tmp / name)
            meta = {"key": key, "status": status, "stored_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(info or {})}
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
            os.rename(tmp, self.root / key)
            return True
        except OSError:  # another worker published the same key first
            return False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
