"""Dask worker preload for the tests (``dask worker --preload``): batchkit's fake stages, in the worker.

``$AUTOGRADER_FAKE_STAGES_LOG``: the executions log the fakes append to (one line per execution).
``$AUTOGRADER_FAKE_VERSION``: pretend this worker has another autograder version (the mismatch test).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def dask_setup(worker):  # called by distributed when the worker starts
    import autograder.environment
    import autograder.pipeline
    from batchkit import fake_stages

    autograder.pipeline.execute_and_measure = fake_stages(Path(os.environ["AUTOGRADER_FAKE_STAGES_LOG"]))
    version = os.environ.get("AUTOGRADER_FAKE_VERSION")
    if version:
        autograder.environment.__version__ = version
        autograder.environment.environment_versions.cache_clear()
