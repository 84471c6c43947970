"""The contract's public data of assignment 06, bit for bit: the model and the timing batch.

Nothing else of this lesson is data: its hidden inputs are ONNX Runtime profiles, drawn per
submission (:mod:`.profiles`), and its measurements are timings of the public model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .model import contract_model_bytes, timing_batch


@dataclass(frozen=True)
class Public:
    X_timing: np.ndarray
    model: np.ndarray  # the contract model's bytes (uint8)


@lru_cache(maxsize=1)
def public_split() -> Public:
    """Exactly the contract's public data (read-only arrays)."""
    model = np.frombuffer(contract_model_bytes(), dtype=np.uint8).copy()
    model.flags.writeable = False
    return Public(timing_batch(), model)
