"""The contract's model of assignment 06, built exactly as the notebook's given cell builds it.

A plain MLP classifier (64 features → 512 → 512 → 512 → 10 classes), every dense layer a
``MatMul`` and an ``Add``, each hidden one followed by a ``Relu``, and a ``Softmax``: 12 nodes,
about 0.6 million weights (2.3 MB), big enough that the batch size and the intra-op thread count
change its latency visibly, small enough that a whole latency table takes about a second. ONNX
Runtime at its default level fuses each hidden layer into one ``FusedGemm`` (MatMul + Add + Relu)
and the last into a ``Gemm``: a profile names those, not the operators as written. The weights
are drawn from the contract's public seed, :data:`CONTRACT_SEED` (the notebook's
``build_mlp(np.random.default_rng(6))``), so the grader holds the very model every student
starts from, byte for byte (``tests/assignment/test_assignment06.py`` checks that the notebook's
cell is this code).

The contract's public numbers live here too: the batch sizes and thread counts of the latency
table, the thread count of the saved profile, the ``k`` of the reported top operators, and the
timing batch :func:`timing_batch` (``X_timing``), whose first ``b`` rows are the batch of size ``b``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONTRACT_SEED = 6
N_FEATURES, N_CLASSES = 64, 10  # what build_mlp writes (its code is the notebook's, literals included)
INPUT, OUTPUT = "x", "probabilities"
BATCH_SIZES = (1, 32, 256)
THREADS = (1, 2)
PROFILE_THREADS = 3  # the profiled session's intra-op threads
PROFILE_BATCH = 256
TOP_K = 3
TIMING_RUNS = 50


# the same code as the notebook's "The model" cell (kept in step by test_assignment06.py)
def build_mlp(rng):
    nodes, weights = [], []

    def const(name, value):
        weights.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def node(op, inputs, name):
        nodes.append(helper.make_node(op, inputs, [name], name=name))
        return name

    def dense(i, x, n_in, n_out):
        w = const(f"dense{i}.weight", rng.normal(0, np.sqrt(2 / n_in), (n_in, n_out)))
        b = const(f"dense{i}.bias", rng.normal(0, 0.1, n_out))
        return node("Add", [node("MatMul", [x, w], f"dense{i}.matmul"), b], f"dense{i}")

    h = "x"
    for i, (n_in, n_out) in enumerate([(64, 512), (512, 512), (512, 512)], start=1):
        h = node("Relu", [dense(i, h, n_in, n_out)], f"relu{i}")
    h = dense(4, h, 512, 10)
    nodes.append(helper.make_node("Softmax", [h], ["probabilities"], axis=-1, name="softmax"))
    graph = helper.make_graph(
        nodes,
        "mlp_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lesson06")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@lru_cache(maxsize=1)
def contract_model_bytes() -> bytes:
    """The serialised contract model (what the notebook writes to ``artifacts/model.onnx``)."""
    return build_mlp(np.random.default_rng(CONTRACT_SEED)).SerializeToString()


@lru_cache(maxsize=1)
def node_names() -> frozenset[str]:
    """The names of the contract model's nodes (a profile's kernel events name them, fused or not)."""
    return frozenset(n.name for n in build_mlp(np.random.default_rng(CONTRACT_SEED)).graph.node)


@lru_cache(maxsize=1)
def timing_batch() -> np.ndarray:
    """``X_timing``: the contract's public rows; the batch of size ``b`` is its first ``b`` rows."""
    x = np.linspace(-2, 2, PROFILE_BATCH * N_FEATURES, dtype=np.float32).reshape(PROFILE_BATCH, N_FEATURES)
    x.flags.writeable = False
    return x


def table_key(batch_size: int, threads: int) -> str:
    """How ``RESULTS["latency_ms"]`` names one entry of the table: ``"<batch size>,<threads>"``."""
    return f"{batch_size},{threads}"
