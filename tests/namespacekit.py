"""For the tests that start the fallback jail from a private mount namespace (``unshare -m``): the
interpreter, the venv and this checkout made reachable by the sandbox uid."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def reachable_interpreter(hold: Path) -> str:
    """Shell lines (for a private mount namespace) that make the interpreter, the venv and this
    checkout reachable by other uids: each folder others cannot traverse on the way to them (pyenv
    in a mode-700 /root, a checkout in a mode-700 mktemp folder) is covered by a tmpfs that shows
    only the subfolder needed. Skips the test when one tmpfs cannot do it."""
    needed = [Path(os.path.realpath(sys.executable)), Path(sys.prefix).resolve(), CHECKOUT]
    keeps: dict[Path, Path] = {}
    for path in needed:
        blocked = [p for p in reversed(path.parents) if p != Path("/") and not os.stat(p).st_mode & 0o001]
        if not blocked:
            continue
        if len(blocked) > 1:
            pytest.skip(f"{path} is behind several folders others cannot traverse: {blocked}")
        top = blocked[0]
        keep = top / path.relative_to(top).parts[0]
        if keeps.setdefault(top, keep) != keep:
            pytest.skip(f"{top} would have to show both {keeps[top]} and {keep}")
    lines = []
    for i, (top, keep) in enumerate(sorted(keeps.items())):
        slot = hold / str(i)
        slot.mkdir()
        lines.append(
            f"mount --bind {keep} {slot}\nmount -t tmpfs -o mode=0755,size=1m autograder-test {top}\n"
            f"mkdir -p {keep}\nmount --bind {slot} {keep}\n"
        )
    return "".join(lines)
