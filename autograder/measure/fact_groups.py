"""The facts the model worker computes about one model: the groups the caller names.

================  ======================================================  =========================
group             facts                                                   module
================  ======================================================  =========================
``graph``         node count, domain-qualified operator counts, opsets,   :mod:`.graph_facts`
                  parameter count
``size``          the canonical re-serialisation's bytes                  :mod:`.canonical`
``session``       the graph ONNX Runtime runs at the level: node count,   :mod:`.graph_facts`
                  operator counts (computed by the worker, which saves
                  the optimised model)
``quantization``  classification, quantized weights, per channel, the     :mod:`.quantization.facts`
                  calibrated input range
``derived_from``  (a pair group: against the job's ``baseline``) whether  :mod:`.quantization.facts`
                  the model's weights are a quantization of the baseline's
``activation_     (against the ``baseline``, run by the worker) each       :mod:`.quantization.
ranges``          static activation quantizer's range and its tensor's     activation_ranges`
                  [min, max] in the baseline on the public input sets
================  ======================================================  =========================

Without a choice (``facts=None``) a job gets :data:`DEFAULT_GROUPS`, the generic ones; the
quantization groups are opt-in. With an interface, ``interface_ok`` and ``problems`` (its
deviations from the assignment's contract) come with any group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import onnx

from .canonical import size_facts
from .graph_facts import graph_group
from .quantization.facts import derived_from, quantization_facts

MODEL_GROUPS: dict[str, Callable[[onnx.ModelProto], dict[str, Any]]] = {
    "graph": graph_group,
    "size": size_facts,
    "quantization": quantization_facts,
}
PAIR_GROUPS: dict[str, Callable[[onnx.ModelProto, onnx.ModelProto], dict[str, Any]]] = {"derived_from": derived_from}
SESSION_GROUPS = ("session", "activation_ranges")  # computed by the worker with a session
ALL_GROUPS = (*MODEL_GROUPS, *PAIR_GROUPS, *SESSION_GROUPS)
DEFAULT_GROUPS = ("graph", "size")


def check_groups(groups: Iterable[str]) -> None:
    """Raises ValueError naming the groups that are not in :data:`ALL_GROUPS` (the grader's mistake)."""
    unknown = sorted(set(groups) - set(ALL_GROUPS))
    if unknown:
        raise ValueError(f"unknown model fact groups {unknown}; known: {', '.join(ALL_GROUPS)}")


def model_facts(model: onnx.ModelProto, interface=None, groups: Iterable[str] = DEFAULT_GROUPS) -> dict[str, Any]:
    """The facts of one model for the chosen ``groups`` (its :data:`MODEL_GROUPS`; the others are
    the worker's), with ``interface_ok`` and ``problems`` when an ``interface`` is given."""
    groups = tuple(groups)
    check_groups(groups)
    out: dict[str, Any] = {}
    if interface is not None:
        problems = interface.problems(model)
        out.update(interface_ok=not problems, problems=problems)
    for name, facts in MODEL_GROUPS.items():
        if name in groups:
            out.update(facts(model))
    return out


def pair_facts(baseline: onnx.ModelProto, model: onnx.ModelProto, groups: Iterable[str]) -> dict[str, Any] | None:
    """The facts of ``model`` against ``baseline`` for the chosen :data:`PAIR_GROUPS` (None: none asked for)."""
    chosen = [name for name in PAIR_GROUPS if name in tuple(groups)]
    if not chosen:
        return None
    out: dict[str, Any] = {}
    for name in chosen:
        out.update(PAIR_GROUPS[name](baseline, model))
    return out
