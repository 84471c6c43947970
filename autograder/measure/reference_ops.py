"""References for contracted functions: ONNX Runtime itself, on the same inputs.

Any operator: :func:`ort_node` runs a one-node graph of any ONNX operator on the grader's own
arrays (``ort_node("Softmax", x, axis=-1)``) and :func:`ort_model` any grader-built model; both
cache one session per graph (CPU, one thread, graph optimisations off). An assignment whose
reference is not an ONNX operator computes it in its own grading code (trusted NumPy, never the
student's); see docs/ADDING-AN-ASSIGNMENT.md. The quantization references (``ort_quantize``,
``ort_dequantize``, ``ort_choose_qparams``) are :mod:`autograder.measure.quantization.reference_ops`.

These functions run only the grader's own graphs on the grader's own inputs, in the grader's
process; nothing here touches submission code or a submitted model (those go to the limited child
of :mod:`autograder.measure.onnx_load`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from ..errors import AutograderError
from ..ort_platform import session_options

OPSET = 19  # the default opset of a reference node
IR_VERSION = 9  # the IR version that goes with opset 19

run_lock = threading.Lock()  # one run at a time on the cached sessions


@lru_cache(maxsize=64)
def _model_session(digest: str, data: bytes) -> ort.InferenceSession:  # noqa: ARG001 - the digest keys the cache
    options = session_options("ORT_DISABLE_ALL")
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def ort_model(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run a grader-built ``model`` on ``feeds`` (CPU, one thread, no graph optimisation); every output."""
    data = model.SerializeToString()
    session = _model_session(hashlib.sha256(data).hexdigest(), data)
    with run_lock:
        return session.run(None, dict(feeds))


def node_model(
    op_type: str, inputs: Sequence[np.ndarray], *, outputs: int = 1, domain: str = "", opset: int = OPSET, **attributes
) -> onnx.ModelProto:
    """A checked one-node model ``op_type(i0, i1, …) -> o0, …`` for inputs of these dtypes and ranks
    (every dimension free), output types inferred."""
    value_infos = []
    for i, a in enumerate(inputs):
        a = np.asarray(a)
        try:
            elem = helper.np_dtype_to_tensor_dtype(a.dtype)
        except (KeyError, ValueError, TypeError):
            raise AutograderError(
                f"reference {op_type}: input {i} has dtype {a.dtype}, which ONNX has no type for"
            ) from None
        value_infos.append(helper.make_tensor_value_info(f"i{i}", elem, [f"d{i}_{k}" for k in range(a.ndim)]))
    node = helper.make_node(
        op_type, [f"i{i}" for i in range(len(inputs))], [f"o{k}" for k in range(outputs)], domain=domain, **attributes
    )
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    graph = helper.make_graph(
        [node], f"reference_{op_type}", value_infos, [onnx.ValueInfoProto(name=f"o{k}") for k in range(outputs)]
    )
    model = helper.make_model(graph, opset_imports=imports, producer_name="autograder.reference_ops")
    model.ir_version = IR_VERSION
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001 - shape inference and the checker raise several kinds
        raise AutograderError(f"reference {op_type}{attributes or ''} is not a valid ONNX node: {e}") from None
    return model


def ort_node(op_type: str, *inputs, outputs: int = 1, domain: str = "", opset: int = OPSET, **attributes):
    """ONNX Runtime's ``op_type`` on ``inputs`` (arrays, used with their own dtypes and shapes).

    Returns one array, or a tuple when ``outputs > 1``. Example: ``ort_node("Softmax", x, axis=-1)``,
    ``ort_node("TopK", x, np.array([3]), outputs=2, axis=-1)``.
    """
    arrays = [np.asarray(a) for a in inputs]
    model = node_model(op_type, arrays, outputs=outputs, domain=domain, opset=opset, **attributes)
    results = ort_model(model, {f"i{i}": a for i, a in enumerate(arrays)})
    return results[0] if outputs == 1 else tuple(results)
