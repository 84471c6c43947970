"""The rows assignment 05 runs models on: the contract's public data and the grader's hidden rows.

The public data is the contract's, bit for bit: the model (:mod:`.model`) and the timing batch
every level is timed on, in the notebook and in the grader::

    X_timing = np.linspace(-3, 3, 256 * 16, dtype=np.float32).reshape(256, 16)

The hidden rows are the grader's own, drawn from the deployment's hidden-data secret (stream
:data:`HIDDEN_STREAM`): standard-normal features, a quarter of them scaled by 4 so that the GELUs
and the LayerNorm see their tails. Cached per secret, read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autograder.lesson import HiddenSecret, current

from .model import N_FEATURES, contract_model_bytes

N_TIMING = 256
HIDDEN_STREAM = "05-graph-optimization/hidden-rows"
N_HIDDEN = 1000
WIDE_SHARE, WIDE_SCALE = 0.25, 4.0


@dataclass(frozen=True)
class Public:
    X_timing: np.ndarray
    model: np.ndarray  # the contract model's bytes (uint8)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@lru_cache(maxsize=1)
def public_split() -> Public:
    """Exactly the contract's public data."""
    x = np.linspace(-3, 3, N_TIMING * N_FEATURES, dtype=np.float32).reshape(N_TIMING, N_FEATURES)
    return Public(_frozen(x), _frozen(np.frombuffer(contract_model_bytes(), dtype=np.uint8).copy()))


def timing_batch() -> np.ndarray:
    return public_split().X_timing


@lru_cache(maxsize=2)
def _hidden(secret: HiddenSecret) -> np.ndarray:
    x = secret.generator(HIDDEN_STREAM).normal(size=(N_HIDDEN, N_FEATURES))
    x[: int(WIDE_SHARE * N_HIDDEN)] *= WIDE_SCALE
    return _frozen(x.astype(np.float32))


def hidden_rows() -> np.ndarray:
    """The grader's hidden rows for the current secret."""
    return _hidden(current())
