"""What the grader reads back from the working directory is what it held before the probe.

While the probe runs, the student's functions hold hidden inputs, and anything they write (an
artifact rewritten with an initializer named after the inputs, a forged ``RESULTS``, the
probe's own files) could carry those inputs back into a message. So the grader freezes the
channel: right after the probe's first cell (which dumps ``RESULTS``) and before any hidden
input reaches the kernel, it copies the working directory aside (:func:`take`, inert:
:func:`~.workspace.copy_tree_safely`) and keeps its own copy of ``reported.json``. A working
directory past the walker's limits (:mod:`autograder.tree_walk`: depth, entries) raises
:class:`~autograder.tree_walk.TreeLimitError`, and no hidden input is sent. Once the jail
is gone, :func:`restore` puts the working directory back as it was then, plus the probe's report
and outputs as the grader collected them case by case (:mod:`.probe_run`), and the
``reported.json`` taken before the first call.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import safe_files
from ..errors import UnsafeFileError
from ..probe_format import OUTPUTS_FILE, REPORT_FILE, REPORTED_FILE
from .. import tree_walk
from .workspace import copy_tree_safely

MiB = 1024 * 1024
REPORTED_MAX_BYTES = 2 * MiB  # the probe refuses RESULTS over 1,000,000 characters
PROBE_FILES = (REPORTED_FILE, OUTPUTS_FILE, REPORT_FILE, "probe_case.json", "probe_case.npz")


@dataclass
class Snapshot:
    folder: Path  # the grader's copy of the working directory (not the jail's)
    reported: bytes  # reported.json as the probe wrote it before the first call


def take(workspace: Path, folder: Path, max_bytes: int) -> Snapshot:
    """Copy ``workspace`` into the new grader-owned ``folder`` and keep its ``reported.json``;
    :class:`~autograder.tree_walk.TreeLimitError` (the student's reason) past the walker's limits."""
    try:
        reported = safe_files.read_bytes(workspace, REPORTED_FILE, REPORTED_MAX_BYTES)
    except UnsafeFileError as e:
        reported = _error_json(f"RESULTS could not be read: {e}")
    folder.mkdir(mode=0o700)
    copy_tree_safely(workspace, folder, max_bytes=max_bytes)
    for name in PROBE_FILES:  # the probe's files come from the grader's copies alone
        tree_walk.remove_tree(folder / name)
    return Snapshot(folder, reported)


def restore(snap: Snapshot, workspace: Path, probe: tuple[dict, dict[str, np.ndarray]] | None, max_bytes: int) -> None:
    """Empty ``workspace`` (the jail is gone), copy the snapshot back and write ``reported.json``,
    and, when the probe completed (``probe``: its report and outputs), its two files."""
    kept: dict[str, bytes] = {REPORTED_FILE: snap.reported}
    if probe is not None:
        report, outputs = probe
        kept[REPORT_FILE] = json.dumps(report).encode()
        buffer = io.BytesIO()
        np.savez(buffer, **outputs)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
        kept[OUTPUTS_FILE] = buffer.getvalue()
    tree_walk.empty_folder(workspace)
    copy_tree_safely(snap.folder, workspace, max_bytes=max_bytes)
    for name, data in kept.items():
        fd = os.open(workspace / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


def _error_json(message: str) -> bytes:
    return json.dumps({"__probe_error__": message[:500]}).encode()
