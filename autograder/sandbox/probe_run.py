"""Running the probe: its setup cell, the snapshot, one cell per case, then its last cell.

The order is what keeps hidden inputs from coming back (see :mod:`.probe` and :mod:`.snapshot`):

1. the setup cell dumps ``RESULTS``; if it did not complete, the probe failed and no hidden
   input was ever sent;
2. the grader takes its snapshot of the working directory and of ``reported.json``;
3. one cell per case, each sent only after the previous one returned, each bounded by the
   case's alarm plus a margin and by the probe's whole budget;
4. the last cell writes the probe's files.

Any step that times out, kills the kernel or breaks the connection makes the probe "failed".
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nbclient.exceptions import CellTimeoutError, DeadKernelError

from ..assignment import ExecutionLimits
from ..errors import AutograderError
from ..probe_format import ProbeCase, inline_cases
from .probe import case_source, finish_source, setup_source

PROBE_MAX_S = 120.0          # the calls themselves, at most (and at most one cell limit)
PROBE_CASE_MAX_S = 10.0      # one call
PER_CELL_OVERHEAD_S = 0.25   # a round trip per case cell, generous for a slow machine
CELL_MARGIN_S = 5.0          # beyond a call's alarm, before the cell itself times out
HARNESS_BUGS = (AutograderError, NameError, ImportError, SyntaxError, AssertionError)

Execute = Callable[[str, float], Awaitable["dict | None"]]


def probe_budget_s(limits: ExecutionLimits, n_cases: int) -> float:
    """How long the whole probe may take: the calls' budget plus a round trip per cell."""
    return min(PROBE_MAX_S, float(limits.cell_timeout_s)) + PER_CELL_OVERHEAD_S * (n_cases + 2) + CELL_MARGIN_S


@dataclass
class ProbeRun:
    cases: list[ProbeCase]
    functions: list[str]
    results_variable: str
    limits: ExecutionLimits
    out_dir: str                 # the working directory as the kernel sees it

    async def run(self, execute: Execute, take_snapshot: Callable[[], None]) -> str:
        """"completed" or "failed"; ``execute(source, budget_s)`` runs one cell, returning its reply."""
        deadline = time.monotonic() + probe_budget_s(self.limits, len(self.cases))
        case_s = min(PROBE_CASE_MAX_S, PROBE_MAX_S, float(self.limits.cell_timeout_s))
        cells = [setup_source(self.out_dir, self.functions, self.results_variable, case_timeout_s=case_s)]
        cells += [case_source(c) for c in inline_cases(self.cases)]
        cells.append(finish_source())
        for n, source in enumerate(cells):
            budget = min(case_s + CELL_MARGIN_S, deadline - time.monotonic())
            if budget <= 0 or not await self._ok(execute, source, budget):
                return "failed"
            if n == 0:
                take_snapshot()          # before the first hidden input enters the kernel
        return "completed"

    @staticmethod
    async def _ok(execute: Execute, source: str, budget: float) -> bool:
        try:
            content = await execute(source, budget)
        except (CellTimeoutError, DeadKernelError):
            return False
        except HARNESS_BUGS:
            raise
        except Exception:  # noqa: BLE001 - a malformed kernel message: the probe did not complete
            return False
        return bool(content) and content.get("status") == "ok"
