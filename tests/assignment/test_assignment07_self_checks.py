"""The public self-checks catch what the grader catches: every example mistake fails one.

The student notebook's `grader.check("qN")` cells run otter's public tests on public data only.
Each example mistake of lesson 07 is run here as a student would run it (nbclient, in an empty
folder, no jail: the examples are our own notebooks) and must make at least one of them fail (the
reference passes all: tests/assignment/test_assignment_solution_runs.py). One exception, stated: `error_in_last_cell` raises in the notebook's last
cell, after every check, where the student sees the traceback itself.

The public tests quote four published tolerances (calibration coverage, the two size ratios, the
latency window); a fast test keeps those numbers equal to reference/07-quantization/tolerances.toml.
"""

from __future__ import annotations

import json
import re
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"
EXPECTED = tomllib.loads((ROOT / "tests" / "assignment" / "expected_examples_07.toml").read_text())
MASTER = ROOT / "reference" / "07-quantization" / "master.ipynb"
TOLERANCES = tomllib.loads((ROOT / "reference" / "07-quantization" / "tolerances.toml").read_text())
MISTAKES = sorted(k for k, v in EXPECTED.items() if "loses" in v)
RAISES_AFTER_EVERY_CHECK = {"error_in_last_cell.ipynb"}
PUBLISHED = {   # the tolerance each public test quotes, and how the test writes it
    "static_model.calibration_coverage_min": r"_covered >= ([0-9.]+)",
    "size.dynamic_ratio_max": r'_ratios\["int8_dynamic"\] <= ([0-9.]+)',
    "size.static_ratio_max": r'_ratios\["int8_qdq"\] <= ([0-9.]+)',
    "reported_results.latency_excess_max": r"_excess <= ([0-9.]+)",
}


def _text(cell) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))


def run_checks(path: Path, workdir: Path) -> dict[str, object]:
    """Run a notebook like a student; ``{"failed": [check cells that did not pass], "errors": [...]}``."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(workdir)}}).execute()
    checks = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("grader.check(")]
    failed = [c.source for c in checks if "All test cases passed" not in _text(c)]
    errors = [o.ename for c in nb.cells if c.cell_type == "code" and not c.source.startswith("grader.check(")
              for o in c.get("outputs", []) if o.output_type == "error"]
    return {"checks": len(checks), "failed": failed, "errors": errors}


def _value(key: str) -> float:
    section, name = key.split(".")
    entry = TOLERANCES[section][name]
    return float(entry["value"] if isinstance(entry, dict) else entry)


def test_public_tests_quote_the_published_tolerances():
    source = "\n".join("".join(c["source"]) for c in json.loads(MASTER.read_text())["cells"])
    for key, pattern in PUBLISHED.items():
        quoted = re.findall(pattern, source)
        assert quoted, f"no public test quotes {key}"
        assert {float(q) for q in quoted} == {_value(key)}, f"{key}: the master quotes {quoted}, tolerances.toml has {_value(key)}"


@pytest.fixture(scope="module")
def self_checks(tmp_path_factory):
    names = MISTAKES
    dirs = {n: tmp_path_factory.mktemp(n.replace(".", "_")) for n in names}
    with ThreadPoolExecutor(max_workers=2) as pool:   # two kernels at a time: the machine has 2 cores
        results = dict(zip(names, pool.map(lambda n: run_checks(EXAMPLES / n, dirs[n]), names)))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("example", MISTAKES)
def test_every_mistake_fails_a_self_check(self_checks, example):
    got = self_checks[example]
    if example in RAISES_AFTER_EVERY_CHECK:
        assert got["failed"] == [] and got["errors"] == ["KeyError"], f"{example}: expected only its own error, got {got}"
        return
    assert got["checks"] == 6 and got["failed"], f"{example}: every public self-check passed, yet the grader takes points at " \
                          f"{EXPECTED[example]['loses']}"
