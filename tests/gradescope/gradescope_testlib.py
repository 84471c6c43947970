"""Helpers of the Gradescope tests (a uniquely named module: ``conftest`` is ambiguous across folders)."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

ASSIGNMENT = "07-quantization"


def unpack_root(zip_path: Path, parent: Path) -> Path:
    """A simulated /autograder: source/ (the unpacked zip), submission/ (empty), results/."""
    root = parent / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():  # extractall drops mode bits; Gradescope's unzip keeps them
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (root / "source" / info.filename).chmod(mode)
    return root


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
