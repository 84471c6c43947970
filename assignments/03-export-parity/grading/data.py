"""The data of assignment 03: the contract's public split, the grader's hidden parity sets and
the contract's pipeline as the grader fits it.

The public split is the contract's, bit for bit (``RESULTS`` is re-measured on its ``X_test``)::

    X, y = load_breast_cancer(return_X_y=True); X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)

The hidden parity sets are the grader's own inputs, drawn from the deployment's hidden-data secret
and the key of the submission being graded (submission stream :data:`HIDDEN_STREAM`,
autograder/hidden_secret.py; no seed in the repository, no leaked row gives the others, and the
rows one student's model was judged on are not another's): ``hidden``, rows of the data set
resampled with replacement, each feature scaled by its own ``1 + N(0, 0.05)`` (new points of the same distribution, features still in their own
units); and ``hidden_edge``, the first ``n_edge`` of them pushed three times further from the
training mean (the same shapes, beyond the range the scaler saw). They need no labels: parity
compares the student's ONNX model with the contract's pipeline on them. Arrays are float32, cached
per process by secret and submission key, and read-only.

The contract's pipeline is what the student cannot choose: the grader fits it itself, on the
contract's data with the contract's seed (:func:`contract_test_probabilities` fits it once per process; scikit-learn's fit and
``predict_proba`` are deterministic, whatever the number of threads: the grader and the kernel get
the same probabilities, but for a few values ~1e-9 apart where their BLAS kernels round a float32
dot product otherwise), and :func:`contract_outputs` gives its probabilities on
the sets the student's ONNX model runs on. Parity is judged against them, never against what the
notebook's ``sklearn_probabilities`` returns, so a notebook cannot choose its own reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autograder.lesson import HiddenSecret, hidden_secret

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
    seed: str  # "secret:<fingerprint>/submission:<key>" it was drawn from
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
def make_hidden(
    secret: HiddenSecret, n: int = N_HIDDEN, n_edge: int = N_EDGE, submission: str = hidden_secret.NO_SUBMISSION
) -> Hidden:
    """The hidden parity sets of ``secret`` for the submission key ``submission`` (see the module's docstring)."""
    public = public_split()
    pool = np.concatenate([public.X_train, public.X_test]).astype(np.float64)
    rng = secret.generator(HIDDEN_STREAM, submission)
    X = pool[rng.integers(0, len(pool), n)] * (1.0 + rng.normal(0.0, NOISE, (n, pool.shape[1])))
    mu = public.X_train.astype(np.float64).mean(axis=0)
    X_edge = mu + EDGE_FACTOR * (X[:n_edge] - mu)
    seed = f"secret:{secret.fingerprint()}/submission:{submission}"
    hidden = Hidden(seed, X.astype(np.float32), X_edge.astype(np.float32))
    _frozen(hidden.X, hidden.X_edge)
    return hidden


def hidden_sets() -> Hidden:
    """The grader's hidden parity sets, from the secret and the submission in effect
    (``hidden_secret.current()``, ``hidden_secret.current_submission()``): ``parity.py`` runs the
    student's ONNX model on them and compares it with :func:`contract_outputs` there. No function
    of the notebook receives them."""
    return make_hidden(hidden_secret.current(), submission=hidden_secret.current_submission())


@dataclass(frozen=True)
class ContractOutputs:
    """The contract pipeline's probabilities (float64, ``[N, 2]``) on each parity set."""

    hidden: np.ndarray
    hidden_edge: np.ndarray
    public_test: np.ndarray


@lru_cache(maxsize=1)
def _fitted():
    """The contract's pipeline, fitted once per process (private: only :func:`contract_probabilities`
    calls it, so no grade can change it)::

        pipe = make_pipeline(StandardScaler(), SGDClassifier(loss="log_loss", random_state=MODEL_SEED))
        pipe.fit(X_train, y_train)

    with the notebook's ``MODEL_SEED = 0``, the contract's seed (:data:`CONTRACT_SEED`).
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    public = public_split()
    pipe = make_pipeline(StandardScaler(), SGDClassifier(loss="log_loss", random_state=CONTRACT_SEED))
    return pipe.fit(public.X_train, public.y_train)


def contract_probabilities(X: np.ndarray) -> np.ndarray:
    """The contract pipeline's ``predict_proba`` of ``X`` (float64, read-only)."""
    p = np.asarray(_fitted().predict_proba(X), dtype=np.float64)
    _frozen(p)
    return p


@lru_cache(maxsize=1)
def contract_test_probabilities() -> np.ndarray:
    """The contract pipeline's probabilities on ``X_test`` (float64, read-only, one object per
    process): ``prepare`` calls it while the kernel runs, so the pipeline is fitted by then."""
    return contract_probabilities(public_split().X_test)


@lru_cache(maxsize=8)
def _contract_outputs(secret: HiddenSecret, submission: str) -> ContractOutputs:
    hidden = make_hidden(secret, submission=submission)
    return ContractOutputs(
        contract_probabilities(hidden.X),
        contract_probabilities(hidden.X_edge),
        contract_test_probabilities(),
    )


def contract_outputs() -> ContractOutputs:
    """The contract pipeline's probabilities on the hidden sets of the secret and submission in
    effect (:func:`hidden_sets`) and on ``X_test``."""
    return _contract_outputs(hidden_secret.current(), hidden_secret.current_submission())
