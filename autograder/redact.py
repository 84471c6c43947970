"""The grader's own paths, and text with them replaced: no channel back shows where the grader lives.

The jail binds the interpreter at its real path (in a development checkout, the checkout's
``.venv``), so ``/proc/self/mountinfo``, ``sys.prefix`` or a traceback show it to the notebook,
which can then put it in an exception message or ``RESULTS``. Every text that reaches a record
or a student goes through :func:`redact` (``autograder.sandbox.record`` for execution.json,
``autograder.report.escape`` for what a student reads), which replaces each registered path
(and its real path) by ``<grader>``.
"""

from __future__ import annotations

import os
import sys
import tempfile

REDACTED = "<grader>"
_paths: list[str] = []


def register(path: str | os.PathLike[str]) -> None:
    """Add a path of the grader's (and its real path) to those :func:`redact` replaces."""
    for p in {os.fspath(path), os.path.realpath(path)}:
        p = p.rstrip("/")
        if len(p) > 1 and p not in _paths and p not in ("/tmp", "/usr", "/home", "/opt", "/root"):
            _paths.append(p)
    _paths.sort(key=len, reverse=True)  # the longest first: a nested path is replaced whole


def redact(text: str) -> str:
    """``text`` with every registered grader path replaced by ``<grader>``."""
    for path in _paths:
        if path in text:
            text = text.replace(path, REDACTED)
    return text


def _defaults() -> list[str]:
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [
        package_parent,  # the checkout (or site-packages) holding autograder
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
        os.path.join(tempfile.gettempdir(), "autograder-"),
    ]  # run, workspace and pool folders
    if os.environ.get("AUTOGRADER_ROOT"):
        paths.append(os.environ["AUTOGRADER_ROOT"])
    return paths


for _p in _defaults():
    register(_p)
