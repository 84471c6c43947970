"""How the notebook ran, without contradictions: an interrupted cell is not a stopped notebook, a
failed download says the grader has no network, a kernel ended by a signal names it."""

from __future__ import annotations

import pytest

from autograder.report.execution_text import DIED_BY_SIGNAL, INTERRUPTED, NO_NETWORK, STATUS_HEADLINES, execution_lines


def _execution(**kw):
    base = {
        "status": "completed",
        "reason": None,
        "cells_total": 4,
        "cells_run": 4,
        "cells_errored": 0,
        "first_error": None,
        "probe": "completed",
        "duration_s": 3.0,
    }
    return {"execution": {**base, **kw}}


@pytest.mark.parametrize(
    "execution, headline, absent",
    [
        (
            dict(
                status="timeout",
                reason="code cell 2 (cell 3 of the notebook) exceeded the 120 s cell limit and was "
                "interrupted; the other cells ran",
            ),
            INTERRUPTED,
            "Your notebook was stopped",
        ),
        (
            dict(
                status="timeout",
                cells_run=2,
                reason="the notebook reached its 480 s limit in code cell 2; later cells did not run",
            ),
            STATUS_HEADLINES["timeout"],
            INTERRUPTED,
        ),
        (
            dict(
                status="kernel_died",
                cells_run=2,
                reason="the kernel was ended by signal 15 (SIGTERM) while running code "
                "cell 2 (exit code 143, signal 15)",
            ),
            DIED_BY_SIGNAL,
            "memory",
        ),
        (
            dict(
                status="kernel_died",
                cells_run=2,
                reason="the kernel died while running code cell 2 (killed by signal 9; "
                "os._exit, a crash or running out of memory)",
            ),
            STATUS_HEADLINES["kernel_died"],
            DIED_BY_SIGNAL,
        ),
    ],
)
def test_the_headline_agrees_with_the_reason(execution, headline, absent):
    lines = execution_lines(_execution(**execution))
    assert lines[0].startswith(f"- {headline} ("), lines
    assert absent not in "\n".join(lines)


@pytest.mark.parametrize(
    "summary, told",
    [
        ("URLError: <urlopen error [Errno -3] Temporary failure in name resolution>", True),
        ("ConnectionError: HTTPSConnectionPool(host='x', port=443): Max retries exceeded with url: /d.csv", True),
        ("gaierror: [Errno -2] Name or service not known", True),
        ("OSError: [Errno 101] Network is unreachable", True),
        ("NameError: name 'np' is not defined", False),
        ("FileNotFoundError: data.csv", False),
    ],
)
def test_a_failed_download_says_there_is_no_network(summary, told):
    first = {"cell": 3, "code_cell": 2, "where": "code cell 2 (cell 4 of the notebook)", "summary": summary}
    text = "\n".join(execution_lines(_execution(cells_errored=1, first_error=first)))
    assert (NO_NETWORK in text) is told
