"""A declared lower bound is a version that is tested: no bound below the pin's major.minor.

CI installs the pins of constraints.txt and nothing older, so a range that admits older releases
promises what nobody checks (a typer before its vendored Click, an onnx without an operator the
lessons use). Every requirement of pyproject.toml (dependencies and extras) has a lower bound,
and that bound is at least the major.minor of its pin; the upper bounds are free.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DECLARED = [*PROJECT["dependencies"], *(r for reqs in PROJECT.get("optional-dependencies", {}).values() for r in reqs)]


def _pins(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        line = line.partition("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


PINS = _pins((ROOT / "constraints.txt").read_text())


def lower_bound_problem(requirement: str, pin: str | None) -> str | None:
    """Why ``requirement``'s lower bound is not a tested one (``pin`` is its constraints.txt
    version), or None when it is."""
    req = Requirement(requirement)
    if pin is None:
        return f"{requirement} has no pin in constraints.txt"
    floors = [Version(s.version) for s in req.specifier if s.operator in (">=", "~=", "==", ">")]
    if not floors:
        return f"{requirement} has no lower bound: write >= the tested {pin}'s major.minor"
    tested = Version(pin)
    floor = max(floors)
    wanted = Version(f"{tested.major}.{tested.minor}")
    if floor < wanted:
        return (
            f"{requirement} admits {req.name} {floor}, below the tested {pin}: "
            f"raise the bound to >={wanted} (or test the lowest version in CI)"
        )
    return None


@pytest.mark.parametrize("requirement", DECLARED)
def test_every_lower_bound_is_at_least_the_tested_major_minor(requirement):
    problem = lower_bound_problem(requirement, PINS.get(canonicalize_name(Requirement(requirement).name)))
    assert problem is None, problem


@pytest.mark.parametrize(
    "requirement, pin, ok",
    [
        ("typer>=0.29,<1", "0.29.2", True),
        ("typer>=0.29.2,<1", "0.29.2", True),
        ("typer>=0.12,<1", "0.29.2", False),  # the drift this file stops: 0.12-0.28 untested
        ("numpy>=1.26,<3", "2.4.6", False),
        ("pyyaml>=6,<7", "6.0.4", True),  # 6 is 6.0
        ("dask>=2026.8,<2027", "2026.8.0", True),
        ("dask>=2024.8,<2027", "2026.8.0", False),
        ("ruff~=0.17.6", "0.17.6", True),
        ("packaging", "26.4", False),  # no lower bound at all
        ("rich<16", "15.0.0", False),  # an upper bound only
        ("rich>=15.0,<16", None, False),  # not pinned
    ],
)
def test_the_check_tells_a_tested_bound_from_an_untested_one(requirement, pin, ok):
    problem = lower_bound_problem(requirement, pin)
    assert (problem is None) == ok, problem
    if not ok:
        assert Requirement(requirement).name in problem
