"""Hostile notebooks that try to bloat the grader: output the cap did not count, too many cells, a
notebook whose parse alone costs gigabytes, an execution record of megabytes.

Each runs in a fresh grading process whose own peak memory is measured (``grade_in_child``): the
grader's peak stays under 500 MB whatever the notebook does. Every case is a graded outcome with
a reason, never "the grader itself failed".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advkit import SHORT_LIMITS, grade_in_child, jail_uid, leftover_processes, require_mode

pytestmark = pytest.mark.slow

MiB = 1 << 20
GRADER_PEAK_CAP = 500 * MiB
CHILD_TIMEOUT_S = 240
EXECUTION_JSON_CAP = 1 * MiB


def _check_graded(g, peak: int, results_validator, jail_mode: str) -> None:
    results_validator(g.results)
    require_mode(g, jail_mode)
    assert peak < GRADER_PEAK_CAP, f"the grader's peak RSS reached {peak / MiB:.0f} MB"
    assert "grader itself failed" not in json.dumps(g.results), g.results.get("output", "")[:500]
    assert not leftover_processes(g.workspace, jail_uid(g.execution), g.ended)
    if (g.out / "execution.json").is_file():
        assert (g.out / "execution.json").stat().st_size < EXECUTION_JSON_CAP


# Display metadata was not counted by the output cap, and nbclient kept it: 2,000 of these took
# a grader to 3.2 GB. 600 (900 MB sent) are enough to show it is no longer kept; the cell limit
# leaves time to send them all even on a machine 5x slower than this one.
METADATA_FLOOD = """\
from IPython.display import publish_display_data
for i in range(600):
    publish_display_data({"text/plain": ""}, metadata={"p": "x" * 1_500_000})
"""
IDS_FLOOD = """\
from IPython.display import display
for i in range(300):
    display({"text/plain": ""}, raw=True, metadata={"k%d" % j: "y" * 1000 for j in range(500)},
            transient={"display_id": "d" * 1_000_000 + str(i)})
"""


@pytest.mark.kernel
@pytest.mark.parametrize("flood", ["display_metadata", "metadata_and_display_ids"])
def test_output_the_cap_did_not_count_keeps_the_grader_small(tmp_path, flood, jail_mode, results_validator):
    cells = [METADATA_FLOOD if flood == "display_metadata" else IDS_FLOOD, "x = 1"]
    g, peak = grade_in_child(
        tmp_path, cells, cell_s=120, notebook_s=240, timeout_s=CHILD_TIMEOUT_S, jail_mode=jail_mode
    )
    try:
        _check_graded(g, peak, results_validator, jail_mode)
        assert g.execution["output_truncated"], f"900 MB of output were not even counted: {g.execution_brief()}"
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)


def _notebook(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


def _cells_json(n: int, source: str = "", compact: bool = False) -> str:
    cell = (
        json.dumps({"cell_type": "code", "source": source}, separators=(",", ":"))
        if compact
        else json.dumps({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source})
    )
    return '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [' + ",".join([cell] * n) + "]}"


UNREADABLE = {
    # 950,000 empty code cells, 30 MB: validated cell by cell outside any deadline, it ran 325-827 s
    "a_million_empty_cells": lambda: _cells_json(950_000, compact=True),
    # one code cell more than the grader runs
    "2001_code_cells": lambda: _cells_json(2_001, "x = 1"),
    # 4 million tiny strings in metadata: ~400 MB once parsed in the grader's process
    "millions_of_small_objects": lambda: (
        '{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"m": [' + ",".join(['"ab"'] * 4_000_000) + "]}}"
    ),
    # an integer of 5,000 digits (int() refuses > 4,300: ValueError outside the try, before)
    "an_integer_of_5000_digits": lambda: (
        '{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"n": ' + "7" * 5000 + "}}"
    ),
    # nesting 100,000 deep
    "nested_100000_deep": lambda: '{"nbformat": 4, "cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
}
EXPECTED_REASON = {
    "a_million_empty_cells": "JSON objects",
    "2001_code_cells": "2,001 code cells",
    "millions_of_small_objects": "",
    "an_integer_of_5000_digits": "5,000 digits",
    "nested_100000_deep": "nested too deeply",
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_notebook_that_costs_too_much_to_read_is_refused_with_a_reason(tmp_path, case, jail_mode, results_validator):
    nb = _notebook(tmp_path / f"{case}.ipynb", UNREADABLE[case]())
    g, peak = grade_in_child(
        tmp_path,
        notebook=nb,
        cell_s=SHORT_LIMITS["cell_timeout_s"],
        notebook_s=SHORT_LIMITS["notebook_timeout_s"],
        timeout_s=CHILD_TIMEOUT_S,
        jail_mode=jail_mode,
    )
    try:
        _check_graded(g, peak, results_validator, jail_mode)
        if case == "millions_of_small_objects":  # read in the child, then run: nothing to refuse
            assert g.execution["status"] in ("completed", "unreadable"), g.execution_brief()
        else:
            assert g.execution["status"] == "unreadable", g.execution_brief()
            assert EXPECTED_REASON[case] in g.execution["reason"], g.execution["reason"]
            assert g.results["score"] == 0
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)


MANY_ERRORS = "raise ValueError('e' * 5000)"


def _cells_that_spend_the_budget() -> int:
    """How many MANY_ERRORS cells spend execution.json's budget of error details, at the most a
    cell can keep (its message and traceback at their caps): about 52."""
    from autograder.sandbox.record import DETAILS_BUDGET, EVALUE_CAP, TRACEBACK_CAP

    return -(-DETAILS_BUDGET // (EVALUE_CAP + TRACEBACK_CAP))


@pytest.mark.kernel
def test_execution_json_stays_small_with_hundreds_of_failing_cells(tmp_path, jail_mode, results_validator):
    """Twice as many cells as spend execution.json's budget of error details, each raising a
    5,000-character message: execution.json keeps every cell, the first ones in full, and at least
    the second half with their name and a short message only, within its bound. (600 cells, 3.6 MB
    of details, took six times as long and proved the same: the budget is spent by cell ~52.)"""
    from autograder.sandbox.record import SHORT_EVALUE_CAP

    spent = _cells_that_spend_the_budget()
    n = 2 * spent
    nb = _notebook(tmp_path / "errors.ipynb", _cells_json(n, MANY_ERRORS))
    g, peak = grade_in_child(
        tmp_path, notebook=nb, cell_s=60, notebook_s=400, timeout_s=CHILD_TIMEOUT_S + 300, jail_mode=jail_mode
    )
    try:
        _check_graded(g, peak, results_validator, jail_mode)
        assert g.execution["cells_total"] == n, g.execution_brief()
        assert g.execution["cells_errored"] == g.execution["cells_run"] == n, g.execution_brief()
        cells = g.execution["cells"]
        assert len(cells) == n and all(c["status"] == "error" and c["ename"] == "ValueError" for c in cells)
        assert cells[0]["traceback"] and len(cells[0]["evalue"]) > SHORT_EVALUE_CAP, cells[0]
        short = [c for c in cells if not c["traceback"] and len(c["evalue"]) <= SHORT_EVALUE_CAP]
        assert short == cells[len(cells) - len(short) :] and len(short) >= n - spent, (
            f"the budget was not spent by cell {spent}: {len(short)} of {n} cells kept short"
        )
    finally:
        shutil.rmtree(g.workspace.parent, ignore_errors=True)
