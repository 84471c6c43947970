"""``count_ops(path)``: the probe's hidden model files and the reference's answer.

Each case hands the student's function the path of a hidden ONNX file (``Arg.file``: it exists
only during that call) and expects ``{qualified op: count}`` over the nodes of the main graph,
keys domain-qualified as the contract says (``op_type`` for the default domain, written ``""`` or
``"ai.onnx"``; ``"<domain>.<op_type>"`` for any other). The reference counts with the core's
:func:`~autograder.measure.model_policy.qualified_op`, the same rule as the ``op_counts`` fact.

The models are drawn from the deployment's hidden-data secret and the key of the submission being
graded (submission stream :data:`PROBE_STREAM`): a chain of nodes, each an operator picked from
the group's pool, so no two submissions share a file and no answer can be memorised or passed on.
Each file is a valid model (:func:`hidden_model`: it passes ``onnx.checker`` with
``full_check=True`` and loads in ONNX Runtime). Groups, each its own rubric part:

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
from onnx import TensorProto, helper, numpy_helper

from autograder.lesson import Arg, Expect, ProbeCase, hidden_secret, qualified_op

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
IR_VERSION = 8  # opset 17's: loads in every ONNX Runtime the course supports


WIDTH = 8  # every tensor of a hidden model is float [N, WIDTH]
# (domain, op type) → the node's inputs beside the chain's tensor: an initializer's shape, or
# ``SKIP`` (the graph's input, SkipLayerNormalization's skip); "ai.onnx" nodes take the default
# domain's. Every node is what its schema asks (inputs, attributes, types), so each file passes
# ``onnx.checker.check_model(full_check=True)`` and loads in ONNX Runtime: a count_ops that checks
# the model first, as the notebook's own build_mlp does, is not failed by the grader's file.
SKIP = "x"
INPUTS: dict[tuple[str, str], tuple[Any, ...]] = {
    ("", "MatMul"): ((WIDTH, WIDTH),),
    ("", "Add"): ((WIDTH,),),
    ("", "Mul"): ((WIDTH,),),
    ("", "Div"): ((WIDTH,),),
    ("", "Gemm"): ((WIDTH, WIDTH), (WIDTH,)),
    ("", "LayerNormalization"): ((WIDTH,), (WIDTH,)),
    ("com.microsoft", "BiasGelu"): ((WIDTH,),),
    ("com.microsoft", "FastGelu"): ((WIDTH,),),
    ("com.microsoft", "FusedMatMul"): ((WIDTH, WIDTH),),
    ("com.microsoft", "SkipLayerNormalization"): (SKIP, (WIDTH,), (WIDTH,)),
}
NORMS = ("MAX", "L1", "L2")


def _node(rng: np.random.Generator, i: int, domain: str, op: str, previous: str):
    """Node ``i`` (``op`` of ``domain`` reading ``previous``, writing ``t<i>``) and its initializers."""
    inputs, initializers, attributes = [previous], [], {}
    for k, extra in enumerate(INPUTS.get(("" if domain == "ai.onnx" else domain, op), ())):
        if extra == SKIP:
            inputs.append(SKIP)
            continue
        name = f"n{i}_in{k + 1}"
        values = rng.uniform(0.5, 1.5, extra).astype(np.float32)  # nonzero: a Div is a real division
        initializers.append(numpy_helper.from_array(values, name))
        inputs.append(name)
    if domain == "ai.onnx.ml" and op == "Scaler":
        attributes = {
            "offset": [float(v) for v in rng.normal(size=WIDTH)],
            "scale": [float(v) for v in rng.uniform(0.5, 2.0, WIDTH)],
        }
    elif domain == "ai.onnx.ml" and op == "Normalizer":
        attributes = {"norm": str(rng.choice(NORMS))}
    node = helper.make_node(op, inputs, [f"t{i}"], name=f"n{i}", domain=domain, **attributes)
    return node, initializers


def hidden_model(rng: np.random.Generator, n_range: tuple[int, int], pools) -> bytes:
    """A chain of ``n`` nodes drawn from ``pools`` (each node reads the previous one's output);
    every pool supplies at least one node, so each model tests what its group is about. Inputs
    and outputs are declared with their type and shape (float ``[N, WIDTH]``)."""
    n = int(rng.integers(n_range[0], n_range[1] + 1))
    weights = np.array([w for _, _, w in pools])
    picks = list(range(len(pools))) + list(rng.choice(len(pools), size=n - len(pools), p=weights / weights.sum()))
    nodes, initializers, previous, domains = [], [], SKIP, set()
    for i, pick in enumerate(rng.permutation(picks)):
        domain, ops, _ = pools[int(pick)]
        node, inits = _node(rng, i, domain, str(rng.choice(ops)), previous)
        nodes.append(node)
        initializers.extend(inits)
        previous = f"t{i}"
        domains.add(domain)
    graph = helper.make_graph(
        nodes,
        f"hidden_{int(rng.integers(1 << 30))}",
        [helper.make_tensor_value_info(SKIP, TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["N", WIDTH])],
        initializer=initializers,
    )
    imports = [helper.make_opsetid(d, OPSETS[d]) for d in sorted(domains | {""}) if d != "ai.onnx"]
    return helper.make_model(
        graph, opset_imports=imports, producer_name="grader", ir_version=IR_VERSION
    ).SerializeToString()


def probe_cases() -> list[ProbeCase]:
    """One call per hidden model, grouped as in :data:`GROUPS`: drawn for the submission being
    graded (``hidden_secret.submission_generator``), so one student's leaked files are nothing
    to another's grade."""
    rng = hidden_secret.submission_generator(PROBE_STREAM)
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
