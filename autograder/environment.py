"""Versions of everything that changes a grade, recorded in every measurement and result."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

from . import __version__

PACKAGES = ("onnxruntime", "onnx", "numpy", "scikit-learn", "skl2onnx", "nbclient", "ipykernel")


@lru_cache(maxsize=1)
def environment_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "autograder": __version__}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def environment_fingerprint() -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(environment_versions().items()))
