"""The public self-checks and the grader apply the same rule, for every assignment and every example.

A student must never see a red self-check for something the grader accepts, or only green ones for
a notebook the grader takes points from (other than for an error in a cell: a cell that raises is
the `execution` check's, and the student sees its traceback). Each example of every assignment is
run here as a student runs it (nbclient, in an empty folder, no jail: the examples are our own
notebooks), and its self-checks are compared with its row of
``reference/<id>/expected_examples.toml``, whose grades the conformance suite
(``tests/conformance/``) holds against the real grader:

- an example that loses points outside `execution` fails at least one self-check;
- an example that keeps them (the reference, the valid variants, a mistake that only raises in a
  cell) fails none.

Both kinds of self-check are read: otter's ``grader.check("qN")`` cells (lesson 07) and the
``self_check`` lines that print ✅ or ❌ (lesson 03). The kernel gets the assignment's memory as
``RLIMIT_AS``: an example may allocate more than that on purpose.
"""

from __future__ import annotations

import asyncio
import resource
import tomllib
from pathlib import Path

import nbformat
import pytest

from autograder.assignment import load_assignment
from needs import needs

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "assignments").iterdir() if (p / "assignment.toml").is_file())


def table(assignment_id: str) -> dict:
    path = ROOT / "reference" / assignment_id / "expected_examples.toml"
    return tomllib.loads(path.read_text())


def checks_losing_points(row: dict, maxima: dict[str, float]) -> set[str]:
    """The checks a row of a table says lose points (``{"*"}``: all, or unknown which)."""
    if "loses" in row:
        return {row["loses"]}
    if "scores" in row:
        return {c for c, points in row["scores"].items() if points < maxima[c]}
    if row.get("full_marks"):
        return set()
    return {"*"}


def _text(cell) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))


def failed_self_checks(nb) -> list[str]:
    """Every self-check of an executed notebook that did not pass, in either form."""
    failed = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        text = _text(cell)
        if cell.source.startswith("grader.check(") and "All test cases passed" not in text:
            failed.append(cell.source.splitlines()[0])
        failed += [line for line in text.splitlines() if line.startswith("❌")]
    return failed


def run_like_a_student(path: Path, workdir: Path, memory_mb: float) -> dict:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=180, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(workdir)}}
    )

    async def run() -> None:
        async with client.async_setup_kernel():
            limit = int(memory_mb) << 20  # the kernel is our child: it gets the grader's memory, no more
            resource.prlimit(client.km.provisioner.process.pid, resource.RLIMIT_AS, (limit, limit))
            for index, cell in enumerate(nb.cells):
                await client.async_execute_cell(cell, index)

    asyncio.run(run())
    errors = [
        o.ename for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"
    ]
    return {"failed": failed_self_checks(nb), "errors": errors}


ROWS = [(a, name) for a in ASSIGNMENTS for name in sorted(table(a))]


def test_failed_self_checks_reads_both_forms():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "grader.check('q1')",
                outputs=[nbformat.v4.new_output("stream", text="q1 results: All test cases passed!")],
            ),
            nbformat.v4.new_code_cell(
                "grader.check('q2')",
                outputs=[
                    nbformat.v4.new_output(
                        "stream", text="q2 results:\n    q2 - 1 result:\n        ❌ Test case failed"
                    )
                ],
            ),
            nbformat.v4.new_code_cell(
                "self_check(...)",
                outputs=[nbformat.v4.new_output("stream", text="✅ a passes\n❌ b: raised ValueError: x")],
            ),
        ]
    )
    assert failed_self_checks(nb) == ["grader.check('q2')", "❌ b: raised ValueError: x"]


@pytest.fixture
@needs("kernel")
def run_self_checks(tmp_path):
    """``run_self_checks(assignment_id, example)``: that one example run as a student runs it (only
    the examples a selection keeps are run; xdist spreads them over its workers)."""

    def one(assignment_id: str, example: str) -> dict:
        memory_mb = load_assignment(assignment_id, ROOT).limits.memory_mb
        path = ROOT / "assignments" / assignment_id / "examples" / example
        return run_like_a_student(path, tmp_path, memory_mb)

    return one


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id, example", ROWS)
def test_self_checks_fail_exactly_when_the_grader_takes_points(run_self_checks, assignment_id, example):
    maxima = {c["id"]: c["points"] for c in load_assignment(assignment_id, ROOT).rubric()["checks"]}
    lost = checks_losing_points(table(assignment_id)[example], maxima) - {"execution"}
    got = run_self_checks(assignment_id, example)
    if lost:
        assert got["failed"], f"{example}: every self-check passed, yet the grader takes points at {sorted(lost)}"
    else:
        assert not got["failed"], f"{example}: the grader gives these points, yet self-checks fail: {got['failed']}"
