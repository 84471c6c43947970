"""Stage 1, EXECUTE: the student's notebook in a jailed kernel, then the probe in the same kernel.

Public API (others code against exactly this):

- :class:`ProbeSpec` — the probe's cases, the functions to report and the results variable;
- :func:`run_submission` — run one notebook, return the execution.json record (never raises for
  anything a notebook does; raises :class:`~autograder.errors.SandboxUnavailableError` when no
  isolation is available and ``unsafe_no_sandbox`` is False);
- :func:`prepared_workspace` — ``with prepared_workspace(ws, limits, keep=...):`` around running
  and measuring: the workspace is a size- and inode-capped tmpfs for the block (root only; else
  the run watches it), unmounted on exit, its files copied back first when ``keep``;
- :func:`detect_isolation` — ``{"mode", "layers", "warnings"}`` as a run would record it.
"""

from .execute import ProbeSpec, detect_isolation, run_submission
from .workspace import prepared_workspace

__all__ = ["ProbeSpec", "detect_isolation", "prepared_workspace", "run_submission"]
