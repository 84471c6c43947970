"""The kernel template (zygote): a slot's process that imports a lesson's libraries once and forks jailed kernels.

Above the jail (it builds each child's jail from :mod:`autograder.jail`'s folders, uids, cgroups and
confinement) and below running a notebook (``autograder.sandbox`` decides per run whether its
kernel comes from a template); it imports nothing of ``autograder.sandbox``
(tests/package/test_package_layers.py). SECURITY.md, "The kernel template (zygote)", has the
design and its invariants.

- ``template.py``: the grader's side (the template process, a child's request, the kernel command);
- ``template_process.py`` and ``template_launcher.py``: run by path, never imported by the grader
  (standard library only; the process loads ``confine.py`` and ``jail_site.py`` by path from
  ``autograder/jail/``);
- ``template_slot.py``: one template per (slot, lesson) of a grading process, restarted once.

Public API: code outside the layers of running student code uses exactly the names of
``__all__`` (tests/package/test_package_source_rules.py): :func:`for_run` (the slot's template
for a run, or None) and :func:`enabled` (``AUTOGRADER_KERNEL_TEMPLATE=1``).
"""

from .template import enabled
from .template_slot import for_run

__all__ = ["enabled", "for_run"]
