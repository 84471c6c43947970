"""The data of assignment 07: the contract's public split and the grader's hidden one.

The public split is the contract's, bit for bit (``reported.*`` is re-measured on it)::

    X, y = make_moons(n_samples=2000, noise=0.2, random_state=0); X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    mu = X_train.mean(axis=0); X_edge = (mu + 3.0 * (X_test - mu)).astype(np.float32)

The hidden split, used for ``models.*``, is the same recipe with ``[hidden] n_samples`` rows
and, instead of a seed, one ``RandomState`` of the deployment's hidden-data secret (stream
:data:`HIDDEN_STREAM`, autograder/hidden_secret.py) for both ``make_moons`` and the split: no
value written in the repository, and no leaked row, gives the others. Splits are cached per
process (per secret) and their arrays are read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autograder.lesson import HiddenSecret, hidden_secret

CONTRACT_SEED = 0
HIDDEN_STREAM = "07-quantization/hidden-split"
N_SAMPLES = 2000
NOISE = 0.2
TEST_SIZE = 0.25
EDGE_FACTOR = 3.0


@dataclass(frozen=True)
class Split:
    seed: int | str  # the public seed, or "secret:<fingerprint>" for the hidden split
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    mu: np.ndarray
    X_edge: np.ndarray


@lru_cache(maxsize=8)
def make_split(seed: int | HiddenSecret, n_samples: int = N_SAMPLES) -> Split:
    """The contract's recipe with ``seed`` as both the data and the split seed; for a secret, its
    :data:`HIDDEN_STREAM` drives both (one ``RandomState``, used in that order)."""
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    if isinstance(seed, HiddenSecret):
        source, random_state = f"secret:{seed.fingerprint()}", seed.random_state(HIDDEN_STREAM)
    else:
        source, random_state = seed, seed
    X, y = make_moons(n_samples=n_samples, noise=NOISE, random_state=random_state)
    X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_SIZE, random_state=random_state, stratify=y
    )
    mu = X_train.mean(axis=0)
    X_edge = (mu + EDGE_FACTOR * (X_test - mu)).astype(np.float32)
    arrays = [X_train, X_test, y_train, y_test, mu, X_edge]
    for a in arrays:
        a.flags.writeable = False
    return Split(source, *arrays)


def public_split() -> Split:
    """Exactly the contract's data (what the notebook's RESULTS are measured on)."""
    return make_split(CONTRACT_SEED, N_SAMPLES)


def hidden_split(assignment=None) -> Split:
    """The grader's hidden data: the recipe on the secret in effect (``hidden_secret.current()``),
    with ``[hidden] n_samples`` of the assignment."""
    hidden = dict(assignment.config.get("hidden", {})) if assignment is not None else {}
    return make_split(hidden_secret.current(), int(hidden.get("n_samples", N_SAMPLES)))
