"""The rows assignment 05 runs models on: the contract's public timing batch and the grader's
hidden rows.

``X_timing`` is the contract's (the notebook times every level on it, the grader too)::

    X_timing = np.random.default_rng(0).normal(size=(256, 16)).astype(np.float32)

The hidden rows are the grader's own, drawn from the deployment's hidden-data secret (stream
:data:`HIDDEN_STREAM`): standard-normal features like the timing batch's, a quarter of them scaled
by 4 so the GELUs and the LayerNorm see their tails. Cached per secret, read-only.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from autograder import hidden_secret
from autograder.hidden_secret import HiddenSecret

from .model import N_FEATURES

TIMING_SEED, N_TIMING = 0, 256
HIDDEN_STREAM = "05-graph-optimization/hidden-rows"
N_HIDDEN = 1000
WIDE_SHARE, WIDE_SCALE = 0.25, 4.0


@lru_cache(maxsize=1)
def timing_batch() -> np.ndarray:
    x = np.random.default_rng(TIMING_SEED).normal(size=(N_TIMING, N_FEATURES)).astype(np.float32)
    x.flags.writeable = False
    return x


@lru_cache(maxsize=2)
def _hidden(secret: HiddenSecret) -> np.ndarray:
    rng = secret.generator(HIDDEN_STREAM)
    x = rng.normal(size=(N_HIDDEN, N_FEATURES))
    x[: int(WIDE_SHARE * N_HIDDEN)] *= WIDE_SCALE
    x = x.astype(np.float32)
    x.flags.writeable = False
    return x


def hidden_rows() -> np.ndarray:
    return _hidden(hidden_secret.current())
