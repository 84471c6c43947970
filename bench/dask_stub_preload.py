"""Dask worker preload of the Dask benchmark: execution replaced by a copy of stored stage files.

Loaded by the benchmark's LocalCluster only (``distributed.worker.preload``); the folder comes from
``$AUTOGRADER_BENCH_STORED_STAGES``. Never used in grading.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def dask_setup(worker):  # called by distributed when the worker starts
    import autograder.pipeline
    from bench.bench_dask import STUB_ENV, stored_stages_stub

    autograder.pipeline.execute_and_measure = stored_stages_stub(Path(os.environ[STUB_ENV]))
