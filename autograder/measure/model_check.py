"""The measuring child's checks of an untrusted ONNX model: what it accepts, and the session it runs.

Imported in the child (:mod:`autograder.measure.model_worker`), never needed by the parent's
API (:mod:`autograder.measure.onnx_load`, which reads the bytes and hands them over).
:func:`parse_and_check`: ``onnx.load_from_string`` (external data is never loaded) →
:func:`structure_problems` (no external data anywhere, no model-local functions or training info,
allowed domains and ops: the default allowlist plus the lesson's ``extra_operators``, caps on
nodes, subgraph nesting and declared initializer bytes) → ``onnx.checker.check_model(full_check=True)``;
then :func:`make_session`: ONNX Runtime on ``CPUExecutionProvider`` only, one thread, the lesson's
optimization level, :mod:`autograder.ort_platform`'s configuration (int8 products exact on every
CPU), no custom ops, no configuration from the model (the child's environment is rebuilt from
scratch, so ``ORT_LOAD_CONFIG_FROM_MODEL`` is unset). A model refused here raises
:class:`InvalidModel` with the reason, for the student.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..ort_platform import session_options
from ..student_text import clean
from .model_policy import DEFAULT_POLICY, LoadLimits, qualified_op

ALLOWED_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")
# com.microsoft ops that ONNX Runtime's quantizer and its graph optimiser produce; nothing else
# from that domain (no custom kernels, no contrib ops with file or network access).
MICROSOFT_OPS = frozenset(
    {
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QGemm",
        "QLinearAdd",
        "QLinearMul",
        "QLinearSigmoid",
        "QLinearConcat",
        "QLinearLeakyRelu",
        "QLinearSoftmax",
        "QLinearAveragePool",
        "QLinearGlobalAveragePool",
        "QuantizeLinear",
        "DequantizeLinear",
        "FusedGemm",
        "FusedMatMul",
    }
)
MESSAGE_CAP = 300


class InvalidModel(Exception):
    """The artifact is not a model the grader will run; the message is for the student."""


def _short(text: Any, cap: int = MESSAGE_CAP) -> str:
    return clean(text, cap)


def _tensor_problem(t, where: str) -> str | None:
    from onnx import TensorProto

    if t.data_location == TensorProto.EXTERNAL or len(t.external_data):
        loc = next((e.value for e in t.external_data if e.key == "location"), "?")
        return (
            f"tensor '{_short(t.name, 60)}' ({where}) keeps its data in an external file "
            f"('{_short(loc, 60)}'); the contract needs one self-contained .onnx file"
        )
    return None


def _op_problem(node, extra_operators: frozenset[str] = frozenset()) -> str | None:
    """Why ``node``'s operator is not accepted, or None: the default allowlist (standard ONNX,
    ``ai.onnx.ml``, :data:`MICROSOFT_OPS`) plus the lesson's ``extra_operators``
    (:func:`~autograder.measure.model_policy.qualified_op` names)."""
    import onnx.defs

    if qualified_op(node) in extra_operators:
        return None
    domain = node.domain or ""
    op = f"{_short(domain or 'ai.onnx', 40)}.{_short(node.op_type, 60)}"
    allowed = "the standard ONNX operators, 'ai.onnx.ml' and ONNX Runtime's quantization operators" + (
        f", plus {', '.join(sorted(extra_operators))[:200]}" if extra_operators else ""
    )
    if domain not in ALLOWED_DOMAINS:
        return f"operator {op} comes from the domain '{_short(domain, 40)}'; this assignment allows only {allowed}"
    if domain == "com.microsoft":
        if node.op_type in MICROSOFT_OPS:
            return None
        return f"operator {op} is not an allowed ONNX operator: this assignment allows only {allowed}"
    ok = onnx.defs.has(node.op_type, "" if domain == "ai.onnx" else domain)
    return None if ok else f"operator {op} is not an allowed ONNX operator"


def structure_problems(
    model, limits: LoadLimits = LoadLimits(), extra_operators: frozenset[str] = frozenset()
) -> list[str]:
    """What makes ``model`` unsafe or out of scope, before the checker or ONNX Runtime sees it
    (``extra_operators``: the lesson's operators beyond the default allowlist)."""
    from onnx import AttributeProto, helper

    problems: list[str] = []
    counts = {"nodes": 0, "bytes": 0}

    def tensors_of(attr):
        if attr.type == AttributeProto.TENSOR:
            yield attr.t
        elif attr.type == AttributeProto.TENSORS:
            yield from attr.tensors
        elif attr.type == AttributeProto.SPARSE_TENSOR:
            yield attr.sparse_tensor.values
            yield attr.sparse_tensor.indices
        elif attr.type == AttributeProto.SPARSE_TENSORS:
            for s in attr.sparse_tensors:
                yield s.values
                yield s.indices

    def declared_bytes(t) -> int:
        n = 1
        for d in t.dims:
            if d < 0:
                problems.append(f"initializer '{_short(t.name, 60)}' declares a negative dimension {d}")
                return 0
            n *= d
        try:
            item = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        except Exception:  # noqa: BLE001 - an element type NumPy does not know: counted as one byte
            item = 1
        return n * item

    def walk(graph, depth: int) -> None:
        if depth > limits.max_graph_depth:
            problems.append(f"subgraphs (If/Loop/Scan bodies) are nested more than {limits.max_graph_depth} deep")
            return
        for t in (
            list(graph.initializer)
            + [s.values for s in graph.sparse_initializer]
            + [s.indices for s in graph.sparse_initializer]
        ):
            p = _tensor_problem(t, "initializer")
            if p:
                problems.append(p)
            counts["bytes"] += declared_bytes(t)
        for node in graph.node:
            counts["nodes"] += 1
            p = _op_problem(node, extra_operators)
            if p:
                problems.append(p)
            for attr in node.attribute:
                for t in tensors_of(attr):
                    p = _tensor_problem(t, f"attribute of node '{_short(node.name, 40)}'")
                    if p:
                        problems.append(p)
                    counts["bytes"] += declared_bytes(t)
                for sub in (
                    [attr.g]
                    if attr.type == AttributeProto.GRAPH
                    else list(attr.graphs)
                    if attr.type == AttributeProto.GRAPHS
                    else []
                ):
                    walk(sub, depth + 1)
            if len(problems) > 20 or counts["nodes"] > limits.max_nodes:
                return

    if len(model.functions):
        problems.append(f"the model defines {len(model.functions)} local function(s); custom operators are not allowed")
    if len(model.training_info):
        problems.append("the model carries training information; export an inference-only model")
    walk(model.graph, 0)
    if counts["nodes"] > limits.max_nodes:
        problems.append(f"the model has more than {limits.max_nodes:,} nodes")
    if counts["bytes"] > limits.max_initializer_bytes:
        problems.append(f"its constants declare {counts['bytes']:,} bytes, more than {limits.max_initializer_bytes:,}")
    return problems


def parse_and_check(data: bytes, limits: LoadLimits = LoadLimits(), extra_operators: frozenset[str] = frozenset()):
    """The checked ``onnx.ModelProto`` of ``data``; raises :class:`InvalidModel` with the reason."""
    import onnx

    if not data:
        raise InvalidModel("the file is empty")
    try:
        model = onnx.load_from_string(data)
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds on a malformed file
        raise InvalidModel(f"not an ONNX model file ({_short(type(e).__name__ + ': ' + str(e), 200)})") from None
    if not model.HasField("graph") or not len(model.graph.node):
        raise InvalidModel("not an ONNX model file (no graph or no nodes)")
    problems = list(dict.fromkeys(structure_problems(model, limits, frozenset(extra_operators))))  # unique, in order
    if problems:
        raise InvalidModel(_short("; ".join(problems[:3])))
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001 - the checker raises several kinds; each is the model's problem
        raise InvalidModel(f"the ONNX checker rejects it: {_short(e, 240)}") from None
    return model


def make_session(
    model, optimization_level: str = DEFAULT_POLICY.optimization_level, save_optimized: Path | None = None
):
    """An ONNX Runtime session of a checked model: CPU only, one thread, the policy's
    ``optimization_level`` (one of :data:`~autograder.measure.model_policy.OPTIMIZATION_LEVELS`) and the
    platform's session configuration (:mod:`autograder.ort_platform`);
    ``save_optimized``: where ONNX Runtime writes the graph it optimised (the ``session`` facts)."""
    import onnxruntime as ort

    # the default, ORT_ENABLE_ALL, is what the student's default session runs, so reported numbers
    # can be re-measured to the bit (the jail gives the notebook's sessions the same configuration)
    so = session_options(optimization_level)
    if save_optimized is not None:
        so.optimized_model_filepath = str(save_optimized)
    so.add_session_config_entry("session.load_model_format", "ONNX")
    try:
        return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - ONNX Runtime raises its own kinds; each means the model cannot load
        raise InvalidModel(f"ONNX Runtime cannot load it: {_short(e, 240)}") from None
