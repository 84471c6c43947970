"""What a test needs beyond Python: the markers ``root``, ``container``, ``dask``, ``kernel``.

A fixture that starts one of these declares it once, under ``@pytest.fixture``::

    @pytest.fixture(scope="module")
    @needs("kernel")
    def graded(tmp_path_factory): ...

and tests/conftest.py marks every test that uses it, directly or through other fixtures. A test
that starts one itself carries the marker (``@pytest.mark.kernel``, or ``pytestmark`` for a whole
module). ``make test-fast`` deselects all of them, and ``slow``.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import pytest

NEEDS = ("root", "container", "dask", "kernel")
"""root: runs as root only (skipped otherwise: mounts, sandbox uids, chown);
container: the simulated Gradescope container; dask: a Dask scheduler and workers;
kernel: a real Jupyter kernel or another process in the jail."""

F = TypeVar("F", bound=Callable)


def needs(*what: str) -> Callable[[F], F]:
    """Declare on a fixture function what every test using it needs (one of :data:`NEEDS`)."""
    unknown = set(what) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown needs {sorted(unknown)}: choose from {NEEDS}")

    def declare(fixture: F) -> F:
        fixture.needs = frozenset(getattr(fixture, "needs", ())) | frozenset(what)
        return fixture

    return declare


def declared(fixture_function: Callable) -> frozenset[str]:
    """What a fixture function declared with :func:`needs` (empty when nothing)."""
    function = getattr(fixture_function, "__func__", fixture_function)
    return frozenset(getattr(function, "needs", ()))


def mark_by_fixtures(items: Iterable[pytest.Item], *, as_root: bool) -> None:
    """Give each test the markers its fixtures declared (through every fixture it uses, however
    indirectly), and skip a ``root`` test when the suite does not run ``as_root``."""
    not_root = pytest.mark.skip(reason="needs a root grader (mounts, sandbox uids, chown)")
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        wanted: set[str] = set()
        for defs in info.name2fixturedefs.values() if info else ():
            for fixturedef in defs:
                wanted |= declared(fixturedef.func)
        for name in sorted(wanted):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)
        if not as_root and item.get_closest_marker("root") is not None:
            item.add_marker(not_root)
