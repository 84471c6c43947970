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

from typing import Callable, TypeVar

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
