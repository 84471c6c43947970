"""``artifacts/profile.json``: the profile the notebook saved, read and judged by the grader.

The contract: a profile ONNX Runtime wrote for a session made by the notebook's own
``make_session(MODEL_PATH, PROFILE_THREADS)`` with profiling on, after it ran the contract's
timing batch (``X_timing``, :data:`~.model.PROFILE_BATCH` rows) at least once. The grader reads
the file safely (``load_json``: no symlink, at most :data:`MAX_BYTES`) and never runs it; what it
finds is a fact each rubric part judges:

- ``valid``: a JSON list of trace events holding ONNX Runtime's kernel events (``"cat": "Node"``,
  names ending ``_kernel_time``, an ``op_name``, an integer ``dur``) and at least one ``model_run``;
- ``contract_model``: every kernel event names a node of the contract's model (ONNX Runtime keeps
  the names of the nodes it fuses: ``"fused dense1.matmul/MatMulAddFusion"``), all four dense
  layers ran, and the first layer's input was ``[PROFILE_BATCH, 64]``: the timing batch, not one row;
- ``threads`` (for the staff, not judged): the most threads any kernel event lists in its
  ``thread_scheduling_stats`` (the calling thread and one ``sub_threads`` entry per other
  thread; none for one thread), ``pool_sizes`` each size seen (0: an event without them). It is a
  lower bound of the pool, not its size: a thread that has not started yet is not listed, and on
  a busy machine a short run (one row) may end before it does. What ``make_session`` asked for is
  judged from the sessions the probe describes (:mod:`.sessions`).

``top_ops`` is the reference's reading of this profile (:func:`.profiles.reference_top_ops`), for
the staff; ``RESULTS["top_ops"]`` is judged against the notebook's own ``top_ops`` on this file.
"""

from __future__ import annotations

import re
from typing import Any

from autograder.lesson import UnsafeFileError, load_json

from .model import N_FEATURES, PROFILE_BATCH, TOP_K, node_names
from .profiles import KERNEL, reference_top_ops

PATH = "artifacts/profile.json"
MAX_BYTES = 4 * 1024 * 1024  # the notebook's profile of a few runs is ~20 KB
FUSED = re.compile(r"^(?:fused )?(?P<node>[^/ ]+)(?:/\w+)?$")  # "fused dense1.matmul/MatMulAddFusion"
FIRST_LAYER = "dense1.matmul"
DENSE = ("dense1.matmul", "dense2.matmul", "dense3.matmul", "dense4.matmul")


def _kernel_events(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        if not (isinstance(e, dict) and e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL)):
            continue
        args = e.get("args")
        dur = e.get("dur")
        if isinstance(args, dict) and isinstance(args.get("op_name"), str) and type(dur) is int:
            out.append(e)
    return out


def _node_name(event: dict[str, Any]) -> str | None:
    match = FUSED.match(str(event["name"])[: -len(KERNEL)])
    return match.group("node") if match else None


def _pool_sizes(kernels: list[dict[str, Any]]) -> list[int]:
    sizes = set()
    for e in kernels:
        stats = e["args"].get("thread_scheduling_stats")
        sub = stats.get("sub_threads") if isinstance(stats, dict) else None
        sizes.add(1 + len(sub) if isinstance(sub, dict) else 0)
    return sorted(sizes)


def _pool_size(kernels: list[dict[str, Any]]) -> int:
    """The most threads the kernels list: the largest ``1 + len(sub_threads)`` over the events that
    carry ``thread_scheduling_stats``, 1 when none does (a lower bound of the pool: see the module)."""
    return max((size for size in _pool_sizes(kernels) if size > 0), default=1)


def _first_input_shape(event: dict[str, Any]) -> Any:
    shapes = event["args"].get("input_type_shape")
    if not (isinstance(shapes, list) and shapes and isinstance(shapes[0], dict) and len(shapes[0]) == 1):
        return None
    return next(iter(shapes[0].values()))


def measure_saved_profile(workspace) -> dict[str, Any]:
    """The ``profile`` section (see the module), or ``{"error": why}`` when there is no profile to judge."""
    try:
        events = load_json(workspace, PATH, MAX_BYTES)
    except UnsafeFileError as e:
        return {"error": f"{e}: save the profile ONNX Runtime wrote (session.end_profiling() returns its path) there"}
    if not isinstance(events, list):
        return {"error": f"{PATH} is not a list of trace events, as ONNX Runtime writes a profile"}
    kernels = _kernel_events(events)
    runs = sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == "model_run")
    valid = bool(kernels) and runs > 0
    names = {_node_name(e) for e in kernels}
    contract = node_names()
    first = [e for e in kernels if _node_name(e) == FIRST_LAYER]
    shapes = {str(_first_input_shape(e)) for e in first}
    return {
        "path": PATH,
        "valid": valid,
        "kernel_events": len(kernels),
        "runs": runs,
        "contract_model": valid and names <= contract and set(DENSE) <= names,
        "contract_batch": valid and shapes == {str([PROFILE_BATCH, N_FEATURES])},
        "threads": _pool_size(kernels) if kernels else None,
        "pool_sizes": _pool_sizes(kernels),
        "top_ops": [list(t) for t in reference_top_ops(events, TOP_K)],
    }
