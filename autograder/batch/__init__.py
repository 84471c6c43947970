"""Batch grading front end: a folder of notebooks or a Gradescope export → a graded class.

``run.py`` drives a batch (tasks, resume, cache, gradebook and summary) and ``rescore``;
``pool.py`` is the local process-pool executor and ``worker.py`` grades one task in a worker;
``sources.py`` finds the submissions and ``cache.py`` keeps executions by content hash.
"""

from .run import BatchError, BatchSummary, read_batch_file, rescore, run_batch

__all__ = ["BatchError", "BatchSummary", "read_batch_file", "rescore", "run_batch"]
