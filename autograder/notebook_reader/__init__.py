"""The one bounded reader of submitted notebooks: a notebook parsed in a limited child, metadata dropped.

A layer of its own, below everything that reads a submission (the pipeline, the sandbox that runs
it, deciding the assignment, the batch client, Gradescope's ``run``, the integrity report): it
imports nothing of the jail or of running a notebook (tests/package/test_package_layers.py).

Public API: code outside this package uses exactly the names of ``__all__``, imported from
``autograder.notebook_reader`` (tests/package/test_package_source_rules.py checks every import):

- :func:`load_notebook` (a file) and :func:`read_notebook_bytes` (bytes, e.g. a zip entry), both
  returning a :class:`LoadedNotebook` or raising :class:`UnreadableNotebook` (the message is for
  the student); :func:`read_each` (several at once, a few children at a time);
- :class:`CodeCell` and :func:`stripped_notebook` (a fresh nbformat-4 notebook of only the code
  cells, for nbclient);
- the bounds: ``MAX_NOTEBOOK_BYTES``, ``PARSE_TIMEOUT_S``, and ``DECLARED_AT`` (the metadata paths
  whose strings are returned).

``reader.py`` is the grader's side; ``parse_child.py`` runs by source text in the child.
"""

from .reader import (
    DECLARED_AT,
    MAX_NOTEBOOK_BYTES,
    PARSE_TIMEOUT_S,
    CodeCell,
    LoadedNotebook,
    UnreadableNotebook,
    load_notebook,
    read_each,
    read_notebook_bytes,
    stripped_notebook,
)

__all__ = [
    "DECLARED_AT",
    "MAX_NOTEBOOK_BYTES",
    "PARSE_TIMEOUT_S",
    "CodeCell",
    "LoadedNotebook",
    "UnreadableNotebook",
    "load_notebook",
    "read_each",
    "read_notebook_bytes",
    "stripped_notebook",
]
