"""The data of assignment 07: the contract's public split and the grader's hidden one.

The public split is the contract's, bit for bit (``reported.*`` is re-measured on it)::

    X, y = make_moons(n_samples=2000, noise=0.2, random_state=0); X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    mu = X_train.mean(axis=0); X_edge = (mu + 3.0 * (X_test - mu)).astype(np.float32)

The hidden split is the same recipe with the grader's own seed (``[hidden] data_seed`` and
``n_samples`` in assignment.toml, or an explicit seed), used for ``models.*``. Splits are cached
per process and their arrays are read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autograder.errors import AssignmentError

CONTRACT_SEED = 0
N_SAMPLES = 2000
NOISE = 0.2
TEST_SIZE = 0.25
EDGE_FACTOR = 3.0


@dataclass(frozen=True)
class Split:
    seed: int
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    mu: np.ndarray
    X_edge: np.ndarray


@lru_cache(maxsize=8)
def make_split(seed: int, n_samples: int = N_SAMPLES) -> Split:
    """The contract's recipe with ``seed`` as both the data and the split seed."""
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    X, y = make_moons(n_samples=n_samples, noise=NOISE, random_state=seed)
    X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=TEST_SIZE, random_state=seed, stratify=y)
    mu = X_train.mean(axis=0)
    X_edge = (mu + EDGE_FACTOR * (X_test - mu)).astype(np.float32)
    arrays = [X_train, X_test, y_train, y_test, mu, X_edge]
    for a in arrays:
        a.flags.writeable = False
    return Split(seed, *arrays)


def public_split() -> Split:
    """Exactly the contract's data (what the notebook's RESULTS are measured on)."""
    return make_split(CONTRACT_SEED, N_SAMPLES)


def hidden_split(assignment=None, seed: int | None = None) -> Split:
    """The grader's hidden data: ``seed`` if given, else ``[hidden] data_seed`` of the assignment."""
    hidden = dict(assignment.config.get("hidden", {})) if assignment is not None else {}
    if seed is None:
        if "data_seed" not in hidden:
            raise AssignmentError("assignment.toml has no [hidden] data_seed and no seed was given")
        seed = int(hidden["data_seed"])
    return make_split(int(seed), int(hidden.get("n_samples", N_SAMPLES)))
