"""What a test needs beyond Python: the markers ``root``, ``container``, ``dask``, ``kernel``.

A fixture that starts one of these declares it once, under ``@pytest.fixture``::

    @pytest.fixture(scope="module")
    @needs("kernel")
    def graded(tmp_path_factory): ...

and tests/conftest.py marks every test that uses it, directly or through other fixtures. A test
that starts one itself carries the marker (``@pytest.mark.kernel``, or ``pytestmark`` for a whole
module). ``make test-fast`` deselects all of them, and ``slow``, and sets ``AUTOGRADER_TEST_NO_JAIL=1``:
then a test whose setup or call starts a jail, a kernel, a measuring child or a kernel template in
the test process fails, naming what it started (:func:`guard_no_jail`), so a missing marker shows
at once instead of slowing the loop. The jail's detection probes (``jail._bwrap_works``, the
fallback's checks: a shell that exits, cached per process) are not a start. A grandchild (a CLI run
in a subprocess that starts its own jail) is not seen.
"""

from __future__ import annotations

import os
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
        if info and item.get_closest_marker("xdist_group") is None and shares_a_costly_fixture(info):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def shares_a_costly_fixture(info) -> bool:
    """The test uses a module- or class-scoped fixture that starts a kernel, a container or Dask:
    the tests of its module then run on one xdist worker (``--dist loadgroup``), so that fixture
    runs once, not once per worker. Every other test goes to whichever worker is free."""
    return any(
        getattr(d, "scope", "function") in ("module", "class") and declared(d.func) & {"kernel", "container", "dask"}
        for defs in info.name2fixturedefs.values()
        for d in defs
    )


NO_JAIL_ENV = "AUTOGRADER_TEST_NO_JAIL"
"""Set to "1" by ``make test-fast``: no jail, no kernel, no template may start."""


class JailInFastTests(RuntimeError):
    pass


STARTED: list[str] = []  # what a test started under the guard (tests/conftest.py fails that test)


def guard_no_jail() -> None:
    """Make every start of a jailed child, a kernel or a kernel template in this process raise
    :class:`JailInFastTests` (and record it in :data:`STARTED`, which tests/conftest.py fails the
    test on): the test lacks its marker (``kernel``, or ``needs("kernel")`` on its fixture)."""
    import subprocess
    import threading

    from autograder.jail import jail
    from autograder.kernel_template import template

    probing = threading.local()

    def refuse(what: str):
        STARTED.append(what)
        raise JailInFastTests(
            f"{what} started under {NO_JAIL_ENV}=1 (make test-fast): mark the test `kernel` "
            "(@pytest.mark.kernel, or @needs('kernel') on the fixture that starts it: tests/needs.py)"
        )

    def probe(function):
        def detect(*args, **kwargs):
            probing.depth = getattr(probing, "depth", 0) + 1
            try:
                return function(*args, **kwargs)
            finally:
                probing.depth -= 1

        return detect

    for name in ("_bwrap_works", "_confine_layers", "_fallback_check", "_check_user"):  # detection: cached, cheap
        setattr(jail, name, probe(getattr(jail, name)))

    def refused_template(*args, **kwargs):
        refuse("a kernel template")

    template.KernelTemplate.start = refused_template
    jailers = {"bwrap", "setpriv", "unshare", "ipykernel_launcher", "template_process.py", "template_launcher.py"}
    confine = jail._confine_source()
    popen_init = subprocess.Popen.__init__

    def checked_init(self, args, *rest, **kwargs):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        text = [os.fsdecode(a) for a in argv if isinstance(a, (str, bytes, os.PathLike))]
        named = {os.path.basename(a) for a in text}
        jailed = named & jailers and not named & {"--help", "--version"} or confine in text
        if jailed and not getattr(probing, "depth", 0):
            refuse(f"a child ({' '.join(text)[:200]})")
        popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = checked_init
