"""The grader's own warm-ups, paid once per process, not once per submission.

While a submission's kernel runs the grader is idle; the pipeline uses that time (a background
thread, started when the kernel is launched) to call :func:`warm_up`, which warms what the later
stages of the grade need:

- the assignment's optional ``prepare(assignment)`` (its data sets, the reference answers'
  sessions): once per process for each loaded assignment and hidden-data secret (``calibrate``, or
  a test that makes another secret current, prepares again: the hidden data differ). Only data
  of the deployment belongs there (the test set the grader scores models on): the inputs a
  student's functions receive are drawn per submission (``hidden_secret.submission_generator``)
  when ``probe_cases`` runs, and cached, where a lesson caches them, by the submission's key;
  a warm-up done for one submission is never another's draw;
- the drawing library, once per process for each picture format the grade's reports draw
  (:func:`autograder.report.figure.warm_up`); a grade that draws no picture (``calibrate``, the
  build) warms none.

A process that grades many submissions (a local pool's worker, a Dask worker) pays them with its
first submission; the others find them done. A warm-up that fails is not recorded as done: the
stage that needs it does the work itself (and says why if it cannot), and the next grade tries again.

No state of one submission reaches another's grade through them. A warm-up is given the
assignment and nothing of a submission, and only fills caches of trusted code, built from the
assignment and the secret alone: the assignment's data sets are cached read-only (NumPy arrays
with ``writeable=False``, in frozen dataclasses: code that tried to change one would raise, not
change the next grade's data; docs/ADDING-AN-ASSIGNMENT.md asks this of every ``prepare``), the
reference sessions are only run, and matplotlib keeps its fonts and text layouts (each picture is
a new ``Figure`` drawn inside ``rc_context``: nothing drawn stays). Those caches were per process
before this module too; what it keeps itself is only which warm-ups are done.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from . import hidden_secret

_lock = threading.Lock()
# per loaded assignment (its grading plugin, one per Assignment object): the secrets it was prepared for
_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_pictures: set[str] = set()  # the picture formats warmed in this process


def _new_lock_in_child() -> None:
    """A forked child starts with a free lock: a thread of the parent that held it does not exist there."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def warm_up(assignment: Any, pictures: Sequence[str] = ()) -> None:
    """Run, in this thread, the warm-ups this process has not done yet: ``prepare`` of
    ``assignment`` under the current secret, then the drawing library in each format of
    ``pictures`` (``"svg"``, ``"png"``) not warmed yet. Each is tried even if the other failed;
    then the first failure is raised (that warm-up is tried again by the next call)."""
    from .report.figure import warm_up as warm_up_figure

    failures: list[Exception] = []
    with _lock:
        plugin = assignment.grading
        prepare = getattr(plugin, "prepare", None)
        if prepare is not None:
            try:
                secret = hidden_secret.fingerprint()
                done = _prepared.setdefault(plugin, set())
                if secret not in done:
                    prepare(assignment)
                    done.add(secret)
            except Exception as e:  # noqa: BLE001 - raised below, once the picture is warm too
                failures.append(e)
        missing = [fmt for fmt in dict.fromkeys(pictures) if fmt not in _pictures]
        if missing:
            try:
                warm_up_figure(missing)
                _pictures.update(missing)
            except Exception as e:  # noqa: BLE001 - raised below
                failures.append(e)
    if failures:
        raise failures[0]
