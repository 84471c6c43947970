"""Stage 1, EXECUTE: running the student's notebook in a jailed kernel, then the probe in the same kernel.

The top of three layers (tests/package/test_package_layers.py): the jail (:mod:`autograder.jail`)
and the kernel template (:mod:`autograder.kernel_template`) are below it and never import it; the
notebook it runs is read by :mod:`autograder.notebook_reader`, which imports none of the three.

Public API: code outside this package uses exactly the names of ``__all__``, imported from
``autograder.sandbox`` (never from a module inside it; tests/package/test_package_source_rules.py
checks every import of the package):

- running a notebook: :class:`ProbeSpec` (the probe's cases, the functions to report and the
  results variable); :func:`run_submission` (one notebook, returns the execution.json record;
  never raises for anything a notebook does; raises
  :class:`~autograder.errors.SandboxUnavailableError` when no isolation is available and
  ``unsafe_no_sandbox`` is False); :func:`detect_isolation` (``{"mode", "layers", "warnings"}``
  as a run would record it); the time bounds of a run: ``STARTUP_TIMEOUT_S``,
  ``RECOVER_GRACE_S``, :func:`probe_budget_s`; :func:`kernel_template_for` (the slot's kernel
  template that ``run_submission(template=...)`` starts kernels from, where the jail allows);
- its working directory: :func:`make_workspace_folder`, and
  ``with prepared_workspace(ws, limits, keep=...):`` around running and measuring (a size- and
  inode-capped tmpfs for the block as root, else the run watches it; unmounted on exit, its
  files copied back first when ``keep``).

The measuring child's jail (``measure_isolation``, ``worker_command``, ``stop_jail``) is
:mod:`autograder.jail`'s API; the bounded notebook reader is :mod:`autograder.notebook_reader`'s.
"""

from ..kernel_template import for_run as kernel_template_for
from .execute import RECOVER_GRACE_S, STARTUP_TIMEOUT_S, ProbeSpec, detect_isolation, run_submission
from .probe_run import probe_budget_s
from .runfolder import make_workspace_folder
from .workspace import prepared_workspace

__all__ = [
    "RECOVER_GRACE_S",
    "STARTUP_TIMEOUT_S",
    "ProbeSpec",
    "detect_isolation",
    "kernel_template_for",
    "make_workspace_folder",
    "prepared_workspace",
    "probe_budget_s",
    "run_submission",
]
