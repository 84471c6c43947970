"""How the notebook ran, in the student's words (feedback.md, results.json, the console).

Cells are named one way everywhere (:mod:`autograder.cell_numbers`): "code cell 20 (cell 41 of
the notebook)". Everything from execution.json that a kernel or a notebook wrote (reasons,
error names and messages, the language its metadata names) goes through :mod:`.markdown`'s
escaping, bounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..cell_numbers import error_summary, where_of, without_place
from ..statuses import ProbeStatus, RunStatus
from .markdown import code, text

STATUS_HEADLINES: dict[str, str] = {
    RunStatus.COMPLETED: "Your notebook ran to the end",
    RunStatus.TIMEOUT: "Your notebook was stopped because it ran out of time",
    RunStatus.KERNEL_DIED: "Your notebook's kernel died (often: it ran out of memory or crashed)",
    RunStatus.STARTUP_FAILED: "Your notebook's kernel could not start",
    RunStatus.UNREADABLE: "Your notebook could not be read",
    RunStatus.SANDBOX_ERROR: "The grader could not run your notebook (a problem on our side, not in your work)",
}


def execution_of(measurements: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    execution = measurements.get("execution") if isinstance(measurements, Mapping) else None
    return execution if isinstance(execution, Mapping) else None


def execution_lines(measurements: Mapping[str, Any] | None) -> list[str]:
    """What happened when the notebook ran: status, language, cells run, first error, truncation."""
    execution = execution_of(measurements)
    if execution is None:
        return []
    if execution.get("error") is not None:
        return [f"- The grader could not tell how your notebook ran: {text(execution['error'])}"]
    status = str(execution.get("status", "unknown"))
    headline = status_headline(execution)
    details = []
    if execution.get("reason") and status != RunStatus.COMPLETED:
        details.append(code(execution["reason"]))
    if isinstance(execution.get("duration_s"), (int, float)):
        details.append(f"{execution['duration_s']:.1f} s")
    lines = [f"- {headline}" + (f" ({', '.join(details)})" if details else "") + "."]
    lines += language_lines(execution)
    run, total = execution.get("cells_run"), execution.get("cells_total")
    if status == RunStatus.COMPLETED and total == 0:
        lines.append(f"- {NO_CODE}")
    elif status != RunStatus.COMPLETED and isinstance(run, int) and isinstance(total, int) and run < total:
        lines.append(f"- {run} of {total} code cells ran; checks that need the others got no measurement.")
    lines += first_error_lines(execution)
    if execution.get("probe") == ProbeStatus.FAILED and status == RunStatus.COMPLETED:
        lines.append("- After your notebook ran, the grader could not call your functions in it.")
    if execution.get("output_truncated"):
        lines.append("- Your notebook printed more output than the grader keeps; the rest was cut.")
    return lines


INTERRUPTED = "Your notebook ran to the end, but a cell was stopped because it ran out of time"
DIED_BY_SIGNAL = "Your notebook's kernel was ended by a signal"
NO_NETWORK = (
    "The grader runs notebooks without a network, so nothing can be downloaded while it grades: "
    "use the files and data the assignment provides."
)
_NETWORK_ERROR = re.compile(
    r"name resolution|Name or service not known|nodename nor servname|getaddrinfo|"
    r"Network is unreachable|No route to host|Connection refused|URLError|gaierror|"
    r"ConnectionError|NewConnectionError|Max retries exceeded",
    re.IGNORECASE,
)
_SIGNAL = re.compile(r"signal (\d+)")


def status_headline(execution: Mapping[str, Any]) -> str:
    """The first words about how the notebook ran. A timeout whose cells all ran (one was
    interrupted) is not "stopped"; a kernel ended by a signal other than SIGKILL (what the
    memory limit sends) is not "often: out of memory"."""
    status = str(execution.get("status", "unknown"))
    run, total = execution.get("cells_run"), execution.get("cells_total")
    if status == RunStatus.TIMEOUT and isinstance(run, int) and run == total:
        return INTERRUPTED
    killed = _SIGNAL.search(str(execution.get("reason") or ""))
    if status == RunStatus.KERNEL_DIED and killed and killed.group(1) != "9":
        return DIED_BY_SIGNAL
    return STATUS_HEADLINES.get(status, f"Execution status: {text(status)}")


def network_line(summary: str) -> list[str]:
    """One sentence when an error is a failed download or connection: the grader has no network."""
    return [f"- {NO_NETWORK}"] if _NETWORK_ERROR.search(summary) else []


NO_CODE = (
    "Your notebook has no code cell, so nothing ran: write your code in code cells (not "
    "markdown or raw cells) and submit the notebook you ran."
)


def language_lines(execution: Mapping[str, Any]) -> list[str]:
    """One line when the notebook's metadata names another language than Python."""
    language = execution.get("language")
    if not isinstance(language, str) or not language:
        return []
    return [
        f"- Your notebook's metadata names the {code(language, 40)} language, but the grader runs every "
        "notebook with Python, so its cells ran as Python code. Write this assignment in Python "
        "(in Jupyter: Kernel › Change kernel › Python 3)."
    ]


def error_text(first: Mapping[str, Any]) -> str:
    """``KeyError: 'latency'`` of a ``first_error`` record (also of one without ``summary``)."""
    if isinstance(first.get("summary"), str) and first["summary"]:
        return first["summary"]
    return error_summary(first.get("ename"), first.get("evalue"))


def first_error_lines(execution: Mapping[str, Any]) -> list[str]:
    first = execution.get("first_error")
    if not isinstance(first, Mapping):
        return []
    where = where_of(first)
    at = first.get("line") if isinstance(first.get("line"), int) and not isinstance(first.get("line"), bool) else None
    said = error_summary(first.get("ename"), without_place(str(first.get("evalue") or ""))) if at else error_text(first)
    line = f"- {where[0].upper()}{where[1:]} raised {code(said)}" + (f" at line {at}" if at else "")
    errored = execution.get("cells_errored")
    if isinstance(errored, int) and errored > 1:
        line += f"; {errored} cells raised errors in all"
    number, total = first.get("code_cell"), execution.get("cells_total")
    if execution.get("status") == RunStatus.COMPLETED and isinstance(number, int) and isinstance(total, int):
        if number < total:
            line += ". The cells after it still ran, so later checks could still earn points"
        else:
            line += ". It is your notebook's last code cell"
    return [line + "."] + network_line(error_text(first))
