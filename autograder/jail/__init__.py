"""The jail: which isolation this machine offers and the command that starts a process inside it.

The lowest layer of running student code (tests/package/test_package_layers.py): it imports
nothing of the kernel template, of running a notebook (``autograder.sandbox``) or of the notebook
reader. Its modules:

- ``jail.py``: the modes (bwrap, fallback, none), the kernel's and the measuring child's command;
- ``confine.py``: the last trusted step before the kernel (rlimits, Landlock, seccomp), run by
  source text; ``jail_site.py``: the jail's ``sitecustomize`` (ONNX Runtime's pools bounded, the
  grader's session configuration), copied into the jail;
- ``cgroups.py`` (a budget per slot), ``users.py`` (the slot's sandbox uid and the reaper),
  ``uid_sweep.py`` (what the uid leaves without a process), ``procs.py`` (ending the jail's
  processes), ``disk_watchdog.py`` (what the jail holds on disk, where no tmpfs caps it).

Public API: code outside the layers of running student code (this package, ``autograder.kernel_template``
and ``autograder.sandbox``, which build on its modules) uses exactly the names of ``__all__``,
imported from ``autograder.jail`` (tests/package/test_package_source_rules.py): the measuring
child's jail, :func:`measure_isolation` and :func:`worker_command`, and :func:`stop_jail` to end
a jailed process from the inside out.
"""

from .jail import measure_isolation, worker_command
from .procs import stop_jail

__all__ = ["measure_isolation", "stop_jail", "worker_command"]
