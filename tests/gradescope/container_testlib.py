"""Helpers of the container tests (the simulated Gradescope container, autograder/gradescope/
container.py): skipping with the reason where it cannot run, the examples' expectations."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"
EXPECTED = tomllib.loads((ROOT / "reference" / "07-quantization" / "expected_examples.toml").read_text())
# The layers the fallback jail must hold in Gradescope's container (no bwrap, no namespaces).
FALLBACK_LAYERS = {"rlimits", "no_new_privs", "clearenv", "landlock", "seccomp"}


def require_container() -> None:
    """Skip (with the reason) where the simulated container cannot run: not root, no cgroup v1.
    `make setup` installs what it needs (python3-seccomp, util-linux) on a Debian machine."""
    from autograder.gradescope.sim.container import unavailable_reason

    why = unavailable_reason()
    if why:
        pytest.skip(f"the simulated Gradescope container cannot run here: {why}")


def check_scores(name: str, results: dict) -> list[str]:
    """What is wrong with ``results`` for the example ``name`` (reference/07-quantization/expected_examples.toml)."""
    expected = EXPECTED[name]
    tests = {t["tags"][0]: t for t in results.get("tests", [])}
    problems = []
    if expected.get("full_marks"):
        lost = {k: (t["score"], t["max_score"]) for k, t in tests.items() if t["score"] < t["max_score"]}
        if lost or results.get("score") != 100:
            problems.append(f"expected full marks, got {results.get('score')}; lost: {lost}")
    if "max_score" in expected and not results.get("score", 0) <= expected["max_score"]:
        problems.append(f"expected at most {expected['max_score']}, got {results.get('score')}")
    if "loses" in expected:
        lost = {k for k, t in tests.items() if t["score"] < t["max_score"]}
        if lost != {expected["loses"]}:
            problems.append(f"expected to lose points at exactly {expected['loses']!r}, lost at {sorted(lost)}")
    return problems
