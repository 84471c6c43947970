"""``count_ops(path)``: the probe's hidden model files and the reference's answer.

Each case hands the student's function the path of a hidden ONNX file (``Arg.file``: it exists
only during that call) and expects ``{qualified op: count}`` over the nodes of the main graph,
keys domain-qualified as the contract says (``op_type`` for the default domain, written ``""`` or
``"ai.onnx"``; ``"<domain>.<op_type>"`` for any other). The reference counts with the core's
:func:`~autograder.measure.model_policy.qualified_op`, the same rule as the ``op_counts`` fact.

The models are drawn from the deployment's hidden-data secret (stream :data:`PROBE_STREAM`):
a chain of nodes, each an operator picked from the group's pool, so no two deployments share a
file and no answer can be memorised. Groups, each its own rubric part:

- ``standard``: default-domain operators only (what an unoptimised export holds);
- ``contrib``: ONNX Runtime's contrib operators (``com.microsoft``) among standard ones, what an
  ``ORT_ENABLE_EXTENDED`` model holds; a count that drops domains merges or misnames them;
- ``other_domains``: ``ai.onnx.ml`` operators, and default-domain nodes whose domain is written
  out as ``"ai.onnx"`` (the same operators as ``""``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from autograder import hidden_secret
from autograder.measure.compare import Expect
from autograder.measure.model_policy import qualified_op
from autograder.probe_format import Arg, ProbeCase

FUNCTION = "count_ops"
PROBE_STREAM = "05-graph-optimization/count-ops-models"
STANDARD = ("MatMul", "Add", "Mul", "Relu", "Erf", "Div", "Gemm", "Softmax", "LayerNormalization", "Sigmoid")
CONTRIB = ("Gelu", "BiasGelu", "FastGelu", "FusedMatMul", "SkipLayerNormalization")
ML = ("Scaler", "Normalizer")
# group → (number of cases, node count range, pools of (domain, op types) and their weights)
GROUPS: dict[str, tuple[int, tuple[int, int], tuple[tuple[str, tuple[str, ...], float], ...]]] = {
    "standard": (2, (3, 40), (("", STANDARD, 1.0),)),
    "contrib": (3, (4, 40), (("", STANDARD, 0.6), ("com.microsoft", CONTRIB, 0.4))),
    "other_domains": (2, (4, 30), (("", STANDARD, 0.4), ("ai.onnx", STANDARD, 0.3), ("ai.onnx.ml", ML, 0.3))),
}
OPSETS = {"": 17, "ai.onnx": 17, "com.microsoft": 1, "ai.onnx.ml": 3}


def hidden_model(rng: np.random.Generator, n_range: tuple[int, int], pools) -> bytes:
    """A chain of ``n`` nodes drawn from ``pools`` (each node reads the previous one's output);
    every pool supplies at least one node, so each model tests what its group is about."""
    n = int(rng.integers(n_range[0], n_range[1] + 1))
    weights = np.array([w for _, _, w in pools])
    picks = list(range(len(pools))) + list(rng.choice(len(pools), size=n - len(pools), p=weights / weights.sum()))
    nodes, previous, domains = [], "x", set()
    for i, pick in enumerate(rng.permutation(picks)):
        domain, ops, _ = pools[int(pick)]
        op = str(rng.choice(ops))
        nodes.append(helper.make_node(op, [previous], [f"t{i}"], name=f"n{i}", domain=domain))
        previous = f"t{i}"
        domains.add(domain)
    graph = helper.make_graph(
        nodes,
        f"hidden_{int(rng.integers(1 << 30))}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, None)],
    )
    imports = [helper.make_opsetid(d, OPSETS[d]) for d in sorted(domains | {""}) if d != "ai.onnx"]
    return helper.make_model(graph, opset_imports=imports, producer_name="grader").SerializeToString()


def probe_cases() -> list[ProbeCase]:
    """One call per hidden model, grouped as in :data:`GROUPS`."""
    rng = hidden_secret.generator(PROBE_STREAM)
    cases = []
    for group, (count, n_range, pools) in GROUPS.items():
        for k in range(count):
            data = hidden_model(rng, n_range, pools)
            cases.append(ProbeCase(f"{FUNCTION}/{group}/{k}", FUNCTION, (Arg.file(data, "model.onnx"),), {}, group))
    return cases


def reference_counts(data: bytes) -> dict[str, int]:
    """The contract's answer for one model file's bytes."""
    model = onnx.load_from_string(data)
    return dict(Counter(qualified_op(n) for n in model.graph.node))


def expect_count_ops(case: ProbeCase) -> Any:
    return Expect(reference_counts(case.raw(0)), unit="node")
