"""Batch grading front end: a folder of notebooks or a Gradescope export → a graded class.

``run.py`` drives a batch (tasks, resume, gradebook and summary) and ``rescore``;
``dispatch.py`` runs the tasks on an engine (``executor.py``: the interface; ``pool.py``: the local
process pool; ``dask_executor.py``: Dask distributed), ``worker.py`` grades one job on a worker
and ``outcomes.py`` writes its result on the client; ``sources.py`` finds the submissions,
``cache.py`` keeps executions by content hash and ``progress.py`` shows the progress bar.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BatchError", "BatchSummary", "read_batch_file", "rescore", "run_batch"]


def __getattr__(name: str) -> Any:
    # loaded on first use: every ``autograder`` command imports batch.cli, only batch commands need run.py
    if name in __all__:
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
