"""Load an untrusted ONNX artifact without trusting it: the parent's side.

The pipeline (SECURITY.md, layer 6):

1. the parent reads the bytes through :func:`autograder.safe_files.read_bytes` (regular file, no
   symlink anywhere on the path, no FIFO, at most ``max_file_bytes``) — :func:`read_model_bytes`;
2. everything else happens in a child process (:mod:`autograder.measure.model_worker`, started by
   :func:`run_model_worker`; it may measure other models of the same submission, never another
   submission's: :mod:`autograder.measure.worker_process`) with an address-space limit and a wall-clock timeout, so a checker or
   ONNX Runtime segfault, a memory bomb (``ConstantOfShape`` → 14 GB) or a hang becomes
   "invalid model: <reason>", never a grader crash. Where bubblewrap works the child is jailed
   (:func:`autograder.jail.jail.worker_command`: no network, read-only system, only its job
   folder writable, the ``autograder-measure`` uid when the grader is root, seccomp), so a
   memory-safety bug of the parsers does not run as the grader; elsewhere it has rlimits only. The
   child checks the model and makes its session with :mod:`autograder.measure.model_check`
   (the parser, the structure rules, the checker, ONNX Runtime's options): the child's side,
   which this module does not import.

What a lesson accepts and how its models run is its :class:`~autograder.measure.model_policy.ModelPolicy`
(``[model_worker]`` in assignment.toml); the default is the strict one.

Data crosses the boundary as files in the child's temporary folder (emptied between jobs): ``job.json``, ``model.onnx``,
``baseline.onnx``, ``inputs.npz`` in; ``result.json`` and ``outputs.npz`` out, both read back
as untrusted files (``safe_files``: no links, no FIFOs, size caps, ``allow_pickle=False``). The
child's output goes to an unnamed file it cannot replace.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np

from .. import safe_files
from . import worker_process
from .model_interface import ModelInterface
from .model_policy import DEFAULT_POLICY, ModelPolicy
from .model_policy import LoadLimits as LoadLimits  # noqa: F401  (the limits callers pass)
from .model_worker import SET_SEPARATOR
from .worker_process import WorkerRun as WorkerRun  # noqa: F401  (the result type callers get)

if TYPE_CHECKING:
    from .warm_pool import MeasuringChildren


def read_model_bytes(root: Path | str, relpath: str, limits: LoadLimits = LoadLimits()) -> bytes:
    """The artifact's bytes; raises :class:`UnsafeFileError` ("… is missing", "… is a symlink …")."""
    return safe_files.read_bytes(root, relpath, limits.max_file_bytes)


InputSet = Union[np.ndarray, Mapping[str, np.ndarray]]


def _flatten_sets(inputs: Mapping[str, InputSet]) -> dict[str, np.ndarray]:
    """inputs.npz's keys: ``<set>`` for one array, ``<set>__<input name>`` for named inputs."""
    arrays: dict[str, np.ndarray] = {}
    for key, value in inputs.items():
        if SET_SEPARATOR in key or not key:
            raise ValueError(f"input set name {key!r} must be non-empty and contain no {SET_SEPARATOR!r}")
        if isinstance(value, Mapping):
            arrays.update({f"{key}{SET_SEPARATOR}{name}": np.asarray(a) for name, a in value.items()})
        else:
            arrays[key] = np.asarray(value)
    return arrays


def run_model_worker(
    model: bytes,
    *,
    inputs: Mapping[str, InputSet],
    interface: ModelInterface | None = None,
    facts: Sequence[str] | None = None,
    baseline: bytes | None = None,
    latency_input: str | None = None,
    latency_rounds: int = 50,
    latency_baseline: bool = False,
    policy: ModelPolicy = DEFAULT_POLICY,
    optimization_level: str | None = None,
    limits: LoadLimits | None = None,
    children: MeasuringChildren | None = None,
) -> WorkerRun:
    """Check and run ``model`` in a limited child; see :mod:`autograder.measure.model_worker`.

    ``inputs``: input set name → one array (a model with one input) or ``{input name: array}``
    (several inputs); each set runs in one call. ``facts``: the groups of
    :mod:`autograder.measure.fact_groups` to compute (default: the generic ``graph`` and ``size``;
    ``quantization``, ``derived_from`` and ``session`` only when named). ``baseline``: another
    model (already checked) for the pair groups (``derived_from``) and, with ``latency_baseline``,
    latency.
    Without ``interface``, each set feeds the model's inputs by name (one array: its only input)
    and every numeric output is kept, with no interface facts.

    ``policy``: the lesson's :class:`~autograder.measure.model_policy.ModelPolicy` (pass
    ``assignment.model_policy``; the default is the strict one): its extra operators, optimization
    level and limits. ``optimization_level`` and ``limits`` override the policy's for this call
    (time a model at another level; a shorter timeout).

    ``children``: the measuring children of the submission ``model`` comes from
    (:class:`~autograder.measure.warm_pool.MeasuringChildren`, ``ctx.children`` of the measuring
    context): the job runs in one of them, which may have measured that submission's other models
    before (SECURITY.md, layer 6). Without it (the grader's own models, a re-timing, a test), or
    with other limits than theirs, the job gets a fresh child of its own.
    """
    policy = policy.at_level(optimization_level)
    limits = policy.limits if limits is None else limits
    buf = io.BytesIO()
    np.savez(buf, **_flatten_sets(inputs))  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
    job = {
        "model": "model.onnx",
        "baseline": "baseline.onnx" if baseline is not None else None,
        "inputs": "inputs.npz",
        "interface": interface.to_json() if interface else None,
        "facts": None if facts is None else list(facts),
        "latency_input": latency_input,
        "latency_rounds": latency_rounds,
        "latency_baseline": latency_baseline and baseline is not None,
        "limits": asdict(limits),
        "extra_operators": sorted(policy.extra_operators),
        "optimization_level": policy.optimization_level,
    }
    files = {"model.onnx": model, **({"baseline.onnx": baseline} if baseline is not None else {})}
    files.update({"inputs.npz": buf.getvalue(), "job.json": json.dumps(job).encode()})  # job.json last
    shared = children if children is not None and children.limits == limits else None
    worker = shared.acquire() if shared is not None else worker_process.start(limits)
    try:
        return worker.run(files)
    finally:
        if shared is not None:
            shared.release(worker)
        else:
            worker.close()
