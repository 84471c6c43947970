"""The contract's model of assignment 05, built exactly as the notebook's given cell builds it.

A small MLP classifier (16 features → 64 → 64 → 4 classes) written out the way an exporter that
knows no fused operator writes it: every dense layer a ``MatMul`` and an ``Add``, every GELU as
``x · 0.5 · (1 + Erf(x / √2))``, the LayerNormalization as its nine elementary steps. ONNX Runtime's
optimizer visibly rewrites it: at ``ORT_ENABLE_BASIC`` MatMul+Add become ``Gemm`` and the
decomposed LayerNorm one ``LayerNormalization``; at ``ORT_ENABLE_EXTENDED`` each GELU becomes one
``com.microsoft.Gelu``. The weights are drawn from the contract's public seed,
:data:`CONTRACT_SEED` (the notebook's ``build_mlp(np.random.default_rng(5))``), so the grader holds
the very model every student starts from (``tests/assignment/test_assignment05.py`` checks that
the notebook's cell is this code).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONTRACT_SEED = 5
N_FEATURES, N_CLASSES = 16, 4  # what build_mlp writes (its code is the notebook's, literals included)
INPUT, OUTPUT = "x", "probabilities"
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
SAVED_LEVEL = "ORT_ENABLE_EXTENDED"


# the same code as the notebook's "The model" cell (kept in step by test_assignment05.py)
def build_mlp(rng):
    nodes, weights = [], []

    def const(name, value):
        weights.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def node(op, inputs, name):
        nodes.append(helper.make_node(op, inputs, [name], name=name))
        return name

    def dense(i, x, n_in, n_out):
        w = const(f"dense{i}.weight", rng.normal(0, 1 / np.sqrt(n_in), (n_in, n_out)))
        b = const(f"dense{i}.bias", rng.normal(0, 0.1, n_out))
        return node("Add", [node("MatMul", [x, w], f"dense{i}.matmul"), b], f"dense{i}")

    def gelu(i, x):  # x * 0.5 * (1 + erf(x / sqrt(2))), written out
        e = node("Erf", [node("Div", [x, const(f"gelu{i}.sqrt2", np.sqrt(2.0))], f"gelu{i}.div")], f"gelu{i}.erf")
        one_plus = node("Add", [e, const(f"gelu{i}.one", 1.0)], f"gelu{i}.add")
        return node("Mul", [node("Mul", [x, one_plus], f"gelu{i}.mul"), const(f"gelu{i}.half", 0.5)], f"gelu{i}")

    def mean(x, name):  # over the last axis, keeping it (ReduceMean-17 takes axes as an attribute)
        nodes.append(helper.make_node("ReduceMean", [x], [name], axes=[-1], name=name))
        return name

    def layer_norm(i, x, n):  # (x - mean) / sqrt(var + eps) * gamma + beta, written out
        centred = node("Sub", [x, mean(x, f"ln{i}.mean")], f"ln{i}.sub")
        var = mean(node("Pow", [centred, const(f"ln{i}.two", 2.0)], f"ln{i}.pow"), f"ln{i}.var")
        std = node("Sqrt", [node("Add", [var, const(f"ln{i}.eps", 1e-5)], f"ln{i}.add_eps")], f"ln{i}.sqrt")
        gamma = const(f"ln{i}.gamma", rng.normal(1, 0.1, n))
        scaled = node("Mul", [node("Div", [centred, std], f"ln{i}.div"), gamma], f"ln{i}.mul")
        return node("Add", [scaled, const(f"ln{i}.beta", rng.normal(0, 0.1, n))], f"ln{i}")

    h = layer_norm(1, gelu(1, dense(1, "x", 16, 64)), 64)
    h = dense(3, gelu(2, dense(2, h, 64, 64)), 64, 4)
    nodes.append(helper.make_node("Softmax", [h], ["probabilities"], axis=-1, name="softmax"))
    graph = helper.make_graph(
        nodes,
        "mlp_gelu_layernorm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 4])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lesson05")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@lru_cache(maxsize=1)
def contract_model_bytes() -> bytes:
    """The serialised contract model (what the notebook writes to ``artifacts/mlp.onnx``)."""
    return build_mlp(np.random.default_rng(CONTRACT_SEED)).SerializeToString()
