"""The data of assignment 03: the contract's public split and the grader's hidden parity sets.

The public split is the contract's, bit for bit (``RESULTS`` is re-measured on its ``X_test``)::

    X, y = load_breast_cancer(return_X_y=True); X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)

The hidden parity sets are the grader's own inputs, drawn from the deployment's hidden-data secret
(stream :data:`HIDDEN_STREAM`, autograder/hidden_secret.py; no seed in the repository, and no
leaked row gives the others): ``hidden``, rows of the data set resampled with replacement, each feature scaled by
its own ``1 + N(0, 0.05)`` (new points of the same distribution, features still in their own
units); and ``hidden_edge``, the first ``n_edge`` of them pushed three times further from the
training mean (the same shapes, beyond the range the scaler saw). They need no labels: parity
compares the student's ONNX model with the student's own scikit-learn pipeline on them. Arrays are
float32, cached per process and read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autograder import hidden_secret
from autograder.hidden_secret import HiddenSecret

CONTRACT_SEED = 0
HIDDEN_STREAM = "03-export-parity/hidden-sets"
TEST_SIZE = 0.25
N_HIDDEN = 1000
N_EDGE = 500
NOISE = 0.05
EDGE_FACTOR = 3.0


@dataclass(frozen=True)
class Public:
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class Hidden:
    seed: str  # "secret:<fingerprint>" of the secret it was drawn from
    X: np.ndarray  # "hidden"
    X_edge: np.ndarray  # "hidden_edge"


def _frozen(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


@lru_cache(maxsize=1)
def public_split() -> Public:
    """Exactly the contract's data."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X = X.astype(np.float32)
    split = train_test_split(X, y, test_size=TEST_SIZE, random_state=CONTRACT_SEED, stratify=y)
    _frozen(*split)
    return Public(*split)


@lru_cache(maxsize=8)
def make_hidden(secret: HiddenSecret, n: int = N_HIDDEN, n_edge: int = N_EDGE) -> Hidden:
    """The hidden parity sets of ``secret`` (see the module's docstring)."""
    public = public_split()
    pool = np.concatenate([public.X_train, public.X_test]).astype(np.float64)
    rng = secret.generator(HIDDEN_STREAM)
    X = pool[rng.integers(0, len(pool), n)] * (1.0 + rng.normal(0.0, NOISE, (n, pool.shape[1])))
    mu = public.X_train.astype(np.float64).mean(axis=0)
    X_edge = mu + EDGE_FACTOR * (X[:n_edge] - mu)
    hidden = Hidden(f"secret:{secret.fingerprint()}", X.astype(np.float32), X_edge.astype(np.float32))
    _frozen(hidden.X, hidden.X_edge)
    return hidden


def hidden_sets() -> Hidden:
    """The grader's hidden parity sets, from the secret in effect (``hidden_secret.current()``)."""
    return make_hidden(hidden_secret.current())
