"""The probe's real cells and the grader's real reader, in this process (no jail, no kernel).

For tests of the encoding: each case cell is exec'd in a plain namespace, its record read by
:class:`ProbeRun` exactly as after a kernel's cell, and the assembled files read back with
:func:`read_probe_result`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from autograder.limits import ExecutionLimits
from autograder.probe_format import OUTPUTS_FILE, REPORT_FILE, ProbeCase, ProbeResult, inline_cases, read_probe_result
from autograder.sandbox.probe import case_source, finish_source, setup_source
from autograder.sandbox.probe_run import ProbeRun


def probe_in_process(folder: Path, functions: dict, cases: list[ProbeCase]) -> ProbeResult:
    """Call ``functions`` (name → callable) on ``cases`` through the probe's cells; what the grader reads."""
    ns: dict = {"__name__": "__main__", **functions}
    run = ProbeRun(cases, list(functions), "RESULTS", ExecutionLimits(), str(folder), folder)
    exec(setup_source(str(folder), list(functions), "RESULTS"), ns)
    run._read_functions(list(functions))
    for index, (case, inline) in enumerate(zip(cases, inline_cases(cases))):
        exec(case_source(inline), ns)
        run._read_case(index, case)
    exec(finish_source(), ns)
    (folder / REPORT_FILE).write_text(json.dumps(run.report))
    buffer = io.BytesIO()
    np.savez(buffer, **run.outputs)
    (folder / OUTPUTS_FILE).write_bytes(buffer.getvalue())
    return read_probe_result(folder, cases, True)
