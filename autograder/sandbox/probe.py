"""The probe: cells run after the student's cells in the same kernel, one case at a time.

1. :func:`setup_source` defines the probe's state in the kernel, and writes which functions
   exist (``probe_report.json``) and ``RESULTS`` (``reported.json``) before any hidden input
   reaches the kernel; the grader takes its copies right after this cell (:mod:`.execute`);
2. :func:`case_source`, once per case: that case's arguments inline (autograder/probe_format.py),
   decoded (a file argument written to a folder of that call's own, removed as soon as it
   returns), passed to the student's function under a per-call alarm; the result, encoded as
   JSON-like nodes (autograder/probe_format.py, "Result encoding"), goes with its record to
   ``probe_case.json`` and its NumPy values to ``probe_case.npz``, which the grader reads before
   it sends the next case. So the kernel never holds inputs of calls still to come, no file
   holds any but a call's own file arguments while it runs, and what the grader keeps of call k
   was fixed before call k+1;
3. :func:`finish_source` deletes the probe's names and files.

The grader assembles ``probe_outputs.npz`` and ``probe_report.json`` itself from what it read
(:mod:`.probe_run`), and trusts nothing else the probe says. The kernel-side code is a real
module, :mod:`.probe_kernel` (the standard library and numpy, linted and unit-tested in the
grader's process): the setup cell carries its source text and runs it as a fresh module in the
kernel, which cannot import the grader's package. It prints nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ..probe_format import FILE_NAME, RESULT_LIMITS, ResultLimits
from . import probe_kernel

STATE = "__autograder_probe"

LOADER = "__autograder_probe_load"


def loader_source() -> str:
    """A cell function that runs the probe's module (its source text) as a fresh module, calls its
    ``setup`` with the kernel's user namespace, and returns what it returns."""
    return (
        f"def {LOADER}(source, args):\n"
        "    import types\n"
        "    module = types.ModuleType('autograder_probe_kernel')\n"
        "    exec(compile(source, '<autograder probe>', 'exec'), module.__dict__)\n"
        "    return module.setup(globals(), *args)\n"
    )


def setup_source(
    out_dir: str,
    functions: list[str],
    results_variable: str,
    case_timeout_s: float = 10.0,
    max_bytes: int = 32 * 1024 * 1024,
    limits: ResultLimits = RESULT_LIMITS,
) -> str:
    """The first probe cell: defines the probe's state, writes which ``functions`` exist and RESULTS.
    ``max_bytes``: all results together; ``limits``: one result (probe_format)."""
    call_args = ", ".join(
        json.dumps(v)
        for v in (
            out_dir,
            list(functions),
            results_variable,
            float(case_timeout_s),
            int(max_bytes),
            asdict(limits),
            FILE_NAME.pattern,
        )
    )
    return (
        loader_source() + f"try:\n    {STATE} = {LOADER}({json.dumps(probe_kernel.source())}, [{call_args}])\n"
        f"finally:\n    del {LOADER}\n"
    )


def case_source(case: dict) -> str:
    """One probe cell: call the student's function on this case (inline JSON, see probe_format)."""
    return f"{STATE}['call'](__import__('json').loads({json.dumps(json.dumps(case))}))\n"


def finish_source() -> str:
    """The last probe cell: remove the probe's files and names."""
    return f"try:\n    {STATE}['finish']()\nfinally:\n    del {STATE}\n"
