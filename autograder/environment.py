"""Versions of everything that changes a grade, recorded in every measurement and result.

The core's own packages (what executes notebooks and measures ONNX models) are always recorded;
an assignment adds the packages its grading and its notebooks depend on in assignment.toml::

    [environment]
    packages = ["scikit-learn", "skl2onnx"]

(``Assignment.environment()`` and ``Assignment.environment_fingerprint()`` pass them here.)
``ort_session_config`` is recorded beside them: the configuration every ONNX Runtime session of a
grade gets (:mod:`autograder.ort_platform`), which changes measurements as a version does. The
fingerprint is part of the batch cache key: a new version of any of them re-executes work.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata

from . import __version__
from .ort_platform import config_text

CORE_PACKAGES = ("onnxruntime", "onnx", "numpy", "nbclient", "ipykernel")


def environment_versions(packages: Iterable[str] = ()) -> dict[str, str]:
    """``{"python", "autograder", <core packages>, <packages>}`` → version (or "missing")."""
    return dict(_versions(tuple(dict.fromkeys(packages))))


@lru_cache(maxsize=16)
def _versions(packages: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    versions = {"python": platform.python_version(), "autograder": __version__, "ort_session_config": config_text()}
    for name in CORE_PACKAGES + tuple(p for p in packages if p not in CORE_PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return tuple(versions.items())


def environment_fingerprint(packages: Iterable[str] = ()) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(environment_versions(packages).items()))
