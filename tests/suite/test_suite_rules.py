"""Rules of the suite itself, checked over every test file: no assert bounds a wall-clock reading
from above (a busy machine would fail it; speed goals live in bench/), and a fixture's declared
needs reach every test using it."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from needs import NEEDS, declared, mark_by_fixtures, needs

TESTS = Path(__file__).resolve().parent.parent
CLOCKS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
DURATION = re.compile(r"(^|_)(wall|elapsed|took|duration)(_|$)")


def _reads_clock(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr in CLOCKS
                and isinstance(f.value, ast.Name)
                and f.value.id == "time"
            ):
                return True
            if isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}:
                return True
    return False


def _timed(expr: ast.AST, clocked: set[str]) -> bool:
    if _reads_clock(expr):
        return True
    called = {id(n.func) for n in ast.walk(expr) if isinstance(n, ast.Call)}
    for node in ast.walk(expr):
        if id(node) in called:
            continue
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else node.value
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            else None
        )
        if name is not None and (name in clocked or DURATION.search(name)):
            return True
    return False


def _bounded_above(compare: ast.Compare, clocked: set[str]) -> bool:
    """``timed < x``, ``x > timed`` (or ``<=``, ``>=``) anywhere in the chain: a lower bound
    (``duration > 0``) holds however slow the machine, an upper bound does not."""
    sides = [compare.left, *compare.comparators]
    for left, op, right in zip(sides, compare.ops, sides[1:]):
        if (isinstance(op, (ast.Lt, ast.LtE)) and _timed(left, clocked)) or (
            isinstance(op, (ast.Gt, ast.GtE)) and _timed(right, clocked)
        ):
            return True
    return False


def wall_clock_asserts(source: str) -> list[int]:
    """Lines of the asserts in ``source`` that bound a clock reading or a duration from above."""
    tree = ast.parse(source)
    clocked: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reads_clock(node.value):
            for target in node.targets:
                clocked |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            for part in ast.walk(node.test):
                if isinstance(part, ast.Compare) and _bounded_above(part, clocked):
                    found.append(node.lineno)
                    break
    return sorted(found)


@pytest.mark.parametrize(
    "source, flagged",
    [
        ("t0 = time.monotonic()\nrun()\nassert time.monotonic() - t0 < 5", True),
        ("started = time.perf_counter()\nrun()\nelapsed = time.perf_counter() - started\nassert elapsed < 5", True),
        ("assert g.wall_s < 30, g", True),
        ("assert rec['duration_s'] <= 26", True),
        ("took = measure()\nassert took < 15", True),
        ("assert ok and (time.time() - start) < 1", True),
        ("assert 5 > elapsed", True),
        ("assert 1.5 < rec['cells'][0]['duration_s'] < 30", True),
        ("assert rec['duration_s'] > 0", False),
        ("assert rec['cells'][0]['duration_s'] >= 1.5", False),
        ("assert wall_clock_asserts(source) == []", False),
        ("end = time.monotonic() + 60\nwhile time.monotonic() < end:\n    poll()\nassert done()", False),
        ("assert rec['status'] == 'timeout' and 'cell limit' in rec['reason']", False),
        ("assert not thread.is_alive(), 'blocked'", False),
        ("assert size < 1 << 20", False),
    ],
)
def test_the_detector_tells_a_timed_assert_from_a_behavioural_one(source, flagged):
    assert bool(wall_clock_asserts(source)) is flagged, source


def test_no_test_asserts_how_long_something_took():
    """CONTRIBUTING: no timed assertions; a test asserts which limit fired, or joins with a wide
    bound and asserts the state (tests/waiting.py)."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        lines = wall_clock_asserts(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(TESTS)}:{line}" for line in lines]
    assert not found, "asserts on a duration (assert behaviour instead):\n" + "\n".join(found)


# ------------------------------------------------------------------ what a test needs


def _fixture(name: str, func) -> SimpleNamespace:
    return SimpleNamespace(argname=name, func=func)


class _Item:
    """Enough of a pytest item for the marking rule: its fixture closure and its markers."""

    def __init__(self, defs: dict, marks: tuple[str, ...] = ()):
        self._fixtureinfo = SimpleNamespace(name2fixturedefs={k: [v] for k, v in defs.items()})
        self.marks = [getattr(pytest.mark, m).mark for m in marks]

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker):
        self.marks.append(getattr(marker, "mark", None) or getattr(pytest.mark, marker).mark)

    def names(self) -> set[str]:
        return {m.name for m in self.marks}


@needs("kernel")
def _grades():
    pass


@needs("dask", "kernel")
def _cluster():
    pass


def _plain():
    pass


@pytest.mark.parametrize(
    "defs, marks, as_root, expected",
    [
        ({}, (), True, set()),
        ({"tmp_path": _plain}, (), True, set()),
        ({"graded": _grades}, (), True, {"kernel"}),
        # through another fixture: the closure holds every fixture the test uses, however indirectly
        ({"report": _plain, "graded": _grades, "tmp_path": _plain}, (), True, {"kernel"}),
        ({"cluster": _cluster, "graded": _grades}, (), True, {"dask", "kernel"}),
        ({"graded": _grades}, ("kernel",), True, {"kernel"}),
        ({}, ("root",), True, {"root"}),
        ({}, ("root",), False, {"root", "skip"}),
    ],
)
def test_a_fixtures_needs_mark_every_test_that_uses_it(defs, marks, as_root, expected):
    item = _Item({name: _fixture(name, func) for name, func in defs.items()}, marks)
    mark_by_fixtures([item], as_root=as_root)
    assert item.names() == expected
    assert len(item.marks) == len(expected), "a marker was added twice"


def test_needs_refuses_a_marker_it_does_not_know():
    with pytest.raises(ValueError, match="unknown needs"):
        needs("gpu")
    assert declared(_cluster) == {"dask", "kernel"} and declared(_plain) == frozenset()


def test_every_need_is_a_registered_marker(pytestconfig):
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(NEEDS) | {"slow"} <= registered, registered
