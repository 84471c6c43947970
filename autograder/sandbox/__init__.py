"""Stage 1, EXECUTE: the student's notebook in a jailed kernel, then the probe in the same kernel.

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
  files copied back first when ``keep``);
- the measuring child's jail: :func:`measure_isolation`, :func:`worker_command`, and
  :func:`stop_jail` to end a jailed process from the inside out;
- the bounded notebook reader (a notebook parsed in a limited child): :func:`load_notebook`,
  :func:`read_notebook_bytes`, :func:`read_each`, :class:`LoadedNotebook`,
  :class:`UnreadableNotebook`, ``MAX_NOTEBOOK_BYTES``, ``DECLARED_AT``.
"""

from .execute import RECOVER_GRACE_S, STARTUP_TIMEOUT_S, ProbeSpec, detect_isolation, run_submission
from .jail import measure_isolation, worker_command
from .notebook import (
    DECLARED_AT,
    MAX_NOTEBOOK_BYTES,
    LoadedNotebook,
    UnreadableNotebook,
    load_notebook,
    read_each,
    read_notebook_bytes,
)
from .probe_run import probe_budget_s
from .procs import stop_jail
from .runfolder import make_workspace_folder
from .template_slot import for_run as kernel_template_for
from .workspace import prepared_workspace

__all__ = [
    "DECLARED_AT",
    "MAX_NOTEBOOK_BYTES",
    "RECOVER_GRACE_S",
    "STARTUP_TIMEOUT_S",
    "LoadedNotebook",
    "ProbeSpec",
    "UnreadableNotebook",
    "detect_isolation",
    "kernel_template_for",
    "load_notebook",
    "make_workspace_folder",
    "measure_isolation",
    "prepared_workspace",
    "probe_budget_s",
    "read_each",
    "read_notebook_bytes",
    "run_submission",
    "stop_jail",
    "worker_command",
]
