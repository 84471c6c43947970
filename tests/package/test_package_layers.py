"""The layers of running student code import only downwards, and nothing they reach makes a cycle.

A unit is a top-level module of ``autograder/`` or a subpackage as a whole (every import of any
of its modules, inside functions too, counts for the unit). :data:`RANK` is the table of allowed
directions: a unit may import a unit of a lower rank; within the base (rank 0) the modules may
import each other as long as no cycle forms; a unit missing from the table (the pipeline, the
reports, measuring, the front ends ...) is above them all, so no unit of the table may import it.
So the notebook reader and the jail import neither each other nor anything that runs a notebook,
the kernel template imports the jail and never the sandbox, and the sandbox builds on all three.
A new base module a layer needs goes into the table (rank 0), with the standard library and the
base only below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autograder

PACKAGE = Path(autograder.__file__).resolve().parent

BASE = 0
RANK = {
    # the base: standard library, and each other
    **dict.fromkeys(
        (
            "cell_numbers",
            "defining_cells",
            "errors",
            "leak_budget",
            "limits",
            "ort_platform",
            "probe_format",
            "proc_info",
            "redact",
            "safe_files",
            "statuses",
            "student_text",
            "tree_walk",
        ),
        BASE,
    ),
    "notebook_reader": 1,  # the one bounded reader of submitted notebooks
    "jail": 1,  # isolation, confinement, cgroups, sandbox uids
    "kernel_template": 2,  # the zygote: builds each child's jail
    "sandbox": 3,  # running a notebook: the kernel, nbclient, the probe
}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def unit_imports(module: str, is_package: bool, tree: ast.Module) -> set[str]:
    """The units of ``autograder`` that ``module`` imports (relative imports resolved), its own left out."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = (module if is_package else module.rpartition(".")[0]).split(".")
                base = ".".join(package[: len(package) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            # `from autograder import jail` / `from .. import jail` names a unit in the alias
            targets = [f"{target}.{a.name}" for a in node.names] if target == "autograder" else [target]
        else:
            continue
        found |= {_unit(t) for t in targets if t.startswith("autograder.")}
    return found - {_unit(module)}


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph.setdefault(_unit(module), set()).update(unit_imports(module, is_package, tree))
    return graph


def bad_arrows(graph: dict[str, set[str]], rank: dict[str, int]) -> list[str]:
    """Every arrow from a unit of ``rank`` that does not go down (``a -> b``), and every cycle
    among the units of ``rank`` (``a -> b -> a``)."""
    bad = []
    for unit in sorted(u for u in graph if u in rank):
        for target in sorted(graph[unit]):
            if target not in rank:
                bad.append(f"{unit} -> {target} (above every layer)")
            elif rank[target] > rank[unit] or (rank[target] == rank[unit] != BASE):
                bad.append(f"{unit} -> {target} (rank {rank[unit]} -> {rank[target]})")
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = 1
        for target in sorted(graph.get(unit, ())):
            if target not in rank:
                continue
            if state.get(target) == 1:
                bad.append(" -> ".join([*path[path.index(target) :], target]) + " (cycle)")
            elif target not in state:
                visit(target, [*path, target])
        state[unit] = 2

    for unit in sorted(u for u in graph if u in rank):
        if unit not in state:
            visit(unit, [unit])
    return bad


def test_the_layers_import_only_downwards_and_make_no_cycle():
    graph = package_graph()
    assert {u for u in RANK if u not in graph} == set(), "a unit of the table is gone: update RANK"
    assert bad_arrows(graph, RANK) == []


# units of the whole package that import each other (directly or around a loop), sorted; a new
# loop fails the test below, and so does one of these gone (take it off the list)
KNOWN_CYCLES: list[list[str]] = []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more units (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for target in sorted(graph.get(unit, ())):
            if target not in graph:
                continue
            if target not in index:
                connect(target)
                low[unit] = min(low[unit], low[target])
            elif target in stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == unit:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for unit in sorted(graph):
        if unit not in index:
            connect(unit)
    return sorted(found)


def test_the_package_has_no_import_cycle_but_the_known_ones():
    assert cycles(package_graph()) == KNOWN_CYCLES


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
        ({"a": {"outside"}}, []),
    ],
)
def test_the_cycle_finder_finds_every_loop(graph, expected):
    assert cycles(graph) == expected


def test_the_reader_and_the_jail_import_nothing_that_runs_a_notebook():
    graph = package_graph()
    for unit in ("notebook_reader", "jail"):
        assert graph[unit] & {"jail", "kernel_template", "sandbox", "notebook_reader"} == set(), unit


RANKS = {"base_a": BASE, "base_b": BASE, "low": 1, "low2": 1, "mid": 2, "top": 3}


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"top": {"mid", "low", "base_a"}, "mid": {"low"}, "low": {"base_a"}}, []),
        ({"base_a": {"base_b"}, "base_b": set()}, []),  # the base imports itself, no cycle
        ({"low": {"mid"}}, ["low -> mid (rank 1 -> 2)"]),  # upwards
        ({"low": {"low2"}}, ["low -> low2 (rank 1 -> 1)"]),  # sideways above the base
        ({"mid": {"pipeline"}}, ["mid -> pipeline (above every layer)"]),  # a unit off the table
        ({"base_a": {"base_b"}, "base_b": {"base_a"}}, ["base_a -> base_b -> base_a (cycle)"]),
        ({"pipeline": {"top", "mid"}, "report": {"pipeline"}}, []),  # above the table: free
        (
            {"top": {"mid"}, "mid": {"top"}},
            ["mid -> top (rank 2 -> 3)", "mid -> top -> mid (cycle)"],
        ),
    ],
)
def test_the_check_finds_every_arrow_that_does_not_go_down(graph, expected):
    assert bad_arrows(graph, RANKS) == expected


@pytest.mark.parametrize(
    "module, is_package, source, expected",
    [
        ("autograder.jail.jail", False, "from . import confine\nfrom .cgroups import x", set()),
        ("autograder.jail.jail", False, "from .. import limits, tree_walk", {"limits", "tree_walk"}),
        ("autograder.jail.jail", False, "def f():\n    from ..sandbox.execute import x", {"sandbox"}),
        ("autograder.jail", True, "from ..notebook_reader import x", {"notebook_reader"}),  # from __init__
        ("autograder.jail", True, "from .procs import stop_jail", set()),
        ("autograder.jail.procs", False, "import autograder.sandbox.kernel", {"sandbox"}),
        ("autograder.jail.procs", False, "from autograder import kernel_template", {"kernel_template"}),
        ("autograder.jail.procs", False, "import numpy\nfrom os import path", set()),
        ("autograder.errors", False, "from .limits import x", {"limits"}),
    ],
)
def test_the_graph_reads_every_kind_of_import(module, is_package, source, expected):
    assert unit_imports(module, is_package, ast.parse(source)) == expected
