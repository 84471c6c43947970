"""Real models for the model-measurement tests, built the way the contract's notebook builds them.

``build_models(folder)`` trains a small MLPClassifier on the contract's data, converts it with
skl2onnx (zipmap off) and quantizes it with ONNX Runtime (dynamic; static QDQ per channel with a
300-row calibration reader, uint8 activations, int8 weights; static QOperator), plus a few
hand-made variants (weights-only QDQ, a ZipMap model, a partially dynamic one). ``hostile_*``
build the adversarial files. ``contract_results`` computes RESULTS exactly as the contract says.
Not a test module (no ``test_`` prefix); the test files import it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 21


def contract_data():
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    X, y = make_moons(n_samples=2000, noise=0.2, random_state=0)
    X = X.astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    mu = X_train.mean(axis=0)
    X_edge = (mu + 3.0 * (X_test - mu)).astype(np.float32)
    return X_train, X_test, y_train, y_test, X_edge


def train_clf(hidden=(64, 64), seed: int = 0):
    """A fitted MLPClassifier on the contract's X_train (BLAS on one thread: fast on a busy machine)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    X_train, _, y_train, _, _ = contract_data()
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MLPClassifier(hidden_layer_sizes=hidden, max_iter=200, random_state=seed).fit(X_train, y_train)


def to_onnx_file(clf, path: Path, zipmap: bool = False) -> Path:
    from skl2onnx import to_onnx

    options = None if zipmap else {"zipmap": False}
    model = to_onnx(clf, contract_data()[0][:1], options=options, target_opset=OPSET)
    path.write_bytes(model.SerializeToString())
    return path


def train_fp32(path: Path, hidden=(64, 64), seed: int = 0, zipmap: bool = False) -> Path:
    return to_onnx_file(train_clf(hidden, seed), path, zipmap)


class _Reader:
    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.i = 0

    def get_next(self):
        if self.i >= len(self.rows):
            return None
        self.i += 1
        return {"X": self.rows[self.i - 1 : self.i]}

    def rewind(self):
        self.i = 0


ALL_KINDS = ("int8_dynamic", "int8_dynamic_pc", "int8_qdq", "int8_qop", "int8_qdq_pt")


def quantize(fp32: Path, folder: Path, prefix: str = "", kinds=ALL_KINDS) -> dict[str, Path]:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    class Reader(_Reader, CalibrationDataReader):
        pass

    X_train = contract_data()[0]
    out = {k: folder / f"{prefix}{k}.onnx" for k in kinds}
    common = dict(activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    static = {
        "int8_qdq": (QuantFormat.QDQ, True),
        "int8_qdq_pt": (QuantFormat.QDQ, False),
        "int8_qop": (QuantFormat.QOperator, False),
    }
    for kind, path in out.items():
        if kind.startswith("int8_dynamic"):
            quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=kind.endswith("_pc"))
        else:
            fmt, per_channel = static[kind]
            quantize_static(
                str(fp32), str(path), Reader(X_train[:300]), quant_format=fmt, per_channel=per_channel, **common
            )
    return out


def ort_optimized(src: Path, out: Path) -> Path:
    """The model as ONNX Runtime saves it after ORT_ENABLE_ALL (FusedGemm, DynamicQuantizeMatMul, …)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(out)
    so.log_severity_level = 3
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    return out


def partial_dynamic(fp32: Path, path: Path) -> Path:
    """quantize_dynamic with the last MatMul left in float."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, nodes_to_exclude=["MatMul2"])
    return path


def weights_only_qdq(fp32: Path, path: Path) -> Path:
    """Every MatMul weight replaced by DequantizeLinear(int8, per-channel scale); activations float."""
    model = onnx.load(str(fp32))
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    new_nodes, replaced = [], set()
    for node in g.node:
        if node.op_type == "MatMul" and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])
            scale = (np.abs(w).max(axis=0) / 127.0).astype(np.float32)
            scale[scale == 0] = 1.0
            q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
            base = node.input[1]
            g.initializer.extend(
                [
                    numpy_helper.from_array(q, base + "_q"),
                    numpy_helper.from_array(scale, base + "_s"),
                    numpy_helper.from_array(np.zeros_like(q[0]), base + "_zp"),
                ]
            )
            new_nodes.append(
                helper.make_node("DequantizeLinear", [base + "_q", base + "_s", base + "_zp"], [base + "_deq"], axis=1)
            )
            node.input[1] = base + "_deq"
            replaced.add(base)
        new_nodes.append(node)
    del g.node[:]
    g.node.extend(new_nodes)
    kept = [t for t in g.initializer if t.name not in replaced]
    del g.initializer[:]
    g.initializer.extend(kept)
    onnx.checker.check_model(model, full_check=True)
    path.write_bytes(model.SerializeToString())
    return path


def tamper_one_weight(q_path: Path, out: Path, steps: int = 2) -> Path:
    """The dynamic model with one int8 weight moved by ``steps`` quantization steps."""
    model = onnx.load(str(q_path))
    for t in model.graph.initializer:
        if t.data_type == TensorProto.INT8 and len(t.dims) == 2 and t.dims[0] > 1:
            q = numpy_helper.to_array(t).copy()
            i = int(np.argmin(np.abs(q)))  # far from saturation
            q.flat[i] += steps
            t.CopyFrom(numpy_helper.from_array(q, t.name))
            break
    out.write_bytes(model.SerializeToString())
    return out


# ── gamed files: bytes, nodes and scales that change no computation ─────────────────


def quantize_static_on(fp32: Path, out: Path, rows: np.ndarray, **options) -> Path:
    """``quantize_static`` QDQ per channel, uint8 activations, int8 weights, calibrated on ``rows``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(_Reader, CalibrationDataReader):
        pass

    kw = dict(
        quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8
    )
    kw.update(options)
    quantize_static(str(fp32), str(out), Reader(rows), **kw)
    return out


def padded(src: Path, out: Path, pad: int = 1_000_000) -> Path:
    """The same model with about ``pad`` bytes of padding: doc strings, metadata, very long tensor
    and node names, an unused initializer and a dead node. It computes the same outputs."""
    model = onnx.load(str(src))
    g = model.graph
    model.doc_string = "p" * (pad // 4)
    g.doc_string = "p" * (pad // 8)
    model.metadata_props.add(key="padding", value="m" * (pad // 8))
    keep = {i.name for i in g.input} | {o.name for o in g.output}
    rename = {}
    for k, n in enumerate(g.node):
        n.name = f"node_{'n' * 500}_{k}"
        for name in list(n.input) + list(n.output):
            if name and name not in keep:
                rename.setdefault(name, f"{'x' * 400}_{len(rename)}")
    for n in g.node:
        for i, x in enumerate(n.input):
            n.input[i] = rename.get(x, x)
        for i, x in enumerate(n.output):
            n.output[i] = rename.get(x, x)
    for t in g.initializer:
        t.name = rename.get(t.name, t.name)
    g.initializer.append(numpy_helper.from_array(np.zeros(pad // 16, np.float32), "unused_" + "u" * 100))
    g.node.append(helper.make_node("Identity", ["X"], ["dead_" + "d" * 200], name="dead"))
    onnx.checker.check_model(model, full_check=True)
    out.write_bytes(model.SerializeToString())
    return out


def with_unused_input_quantizer(src: Path, out: Path, scale: float = 0.05, zero_point: int = 128) -> Path:
    """``src`` plus a QuantizeLinear on X with a wide scale whose output nothing reads."""
    model = onnx.load(str(src))
    g = model.graph
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array(scale, np.float32), "wide_scale"),
            numpy_helper.from_array(np.array(zero_point, np.uint8), "wide_zp"),
        ]
    )
    g.node.insert(0, helper.make_node("QuantizeLinear", ["X", "wide_scale", "wide_zp"], ["X_wide_q"]))
    out.write_bytes(model.SerializeToString())
    return out


def with_repeated_per_tensor_scales(src: Path, out: Path, jitter: float = 0.0) -> Path:
    """A per-tensor QDQ model whose weight scales (and zero points) are rewritten as one value per
    output column, optionally multiplied by ``1 + jitter·k`` so they differ: same integers, same
    computation (up to the jitter), a per-channel shape."""
    model = onnx.load(str(src))
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        q = inits.get(n.input[0]) if n.op_type == "DequantizeLinear" else None
        if q is None or q.data_type != TensorProto.INT8 or len(q.dims) != 2:
            continue
        s, z = numpy_helper.to_array(inits[n.input[1]]), numpy_helper.to_array(inits[n.input[2]])
        if s.ndim:
            continue
        cols = q.dims[1]
        scales = (s * (1 + jitter * np.arange(cols))).astype(np.float32)
        inits[n.input[1]].CopyFrom(numpy_helper.from_array(scales, n.input[1]))
        inits[n.input[2]].CopyFrom(numpy_helper.from_array(np.full(cols, z, z.dtype), n.input[2]))
        n.attribute.append(helper.make_attribute("axis", 1))
    onnx.checker.check_model(model, full_check=True)
    out.write_bytes(model.SerializeToString())
    return out


# ── hostile files ─────────────────────────────────────────────────────────────────────────────


def _interface_graph(nodes, inits, name="hostile"):
    """A graph with the contract's interface: X float [N,2] → label int64 [N], probabilities [N,2]."""
    nodes = list(nodes) + [helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0)]
    return helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2]),
        ],
        initializer=inits,
    )


def _model(graph, extra_opsets=()):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), *extra_opsets])
    m.ir_version = 10
    return m


def hostile_external_data(fp32: Path, out: Path, location: str = "../secret") -> Path:
    model = onnx.load(str(fp32))
    t = next(t for t in model.graph.initializer if t.data_type == TensorProto.FLOAT and len(t.dims) == 2)
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in (("location", location), ("offset", "0"), ("length", str(4 * int(np.prod(t.dims))))):
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    out.write_bytes(model.SerializeToString())
    return out


def hostile_custom_domain(out: Path) -> Path:
    node = helper.make_node("Evil", ["X"], ["probabilities"], domain="com.evil")
    out.write_bytes(_model(_interface_graph([node], []), [helper.make_opsetid("com.evil", 1)]).SerializeToString())
    return out


def hostile_memory_bomb(out: Path, side: int = 60_000) -> Path:
    """ConstantOfShape([side, side]) float: 14.4 GB at 60,000, folded into a valid interface."""
    shape = numpy_helper.from_array(np.array([side, side], dtype=np.int64), "bomb_shape")
    nodes = [
        helper.make_node(
            "ConstantOfShape", ["bomb_shape"], ["bomb"], value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
        ),
        helper.make_node("ReduceSum", ["bomb"], ["bomb_sum"], keepdims=0),
        helper.make_node("Add", ["X", "bomb_sum"], ["probabilities"]),
    ]
    out.write_bytes(_model(_interface_graph(nodes, [shape])).SerializeToString())
    return out


def hostile_deep_if(out: Path, depth: int) -> Path:
    """``depth`` If nodes nested in each other's then-branch (else-branches are one Identity)."""

    def leaf(level: int):
        y = helper.make_tensor_value_info(f"y{level}", TensorProto.FLOAT, ["N", 2])
        return helper.make_graph([helper.make_node("Identity", ["X"], [f"y{level}"])], f"leaf{level}", [], [y])

    graph = leaf(depth)
    for level in range(depth - 1, 0, -1):  # built from the inside out: size grows linearly
        y = helper.make_tensor_value_info(f"y{level}", TensorProto.FLOAT, ["N", 2])
        cond = numpy_helper.from_array(np.array(True), f"c{level}")
        node = helper.make_node("If", [f"c{level}"], [f"y{level}"], then_branch=graph, else_branch=leaf(level))
        graph = helper.make_graph([node], f"g{level}", [], [y], initializer=[cond])
    cond = numpy_helper.from_array(np.array(True), "c0")
    node = helper.make_node("If", ["c0"], ["probabilities"], then_branch=graph, else_branch=leaf(0))
    out.write_bytes(_model(_interface_graph([node], [cond])).SerializeToString())
    return out


# ── what an honest notebook reports ───────────────────────────────────────────────────────────


def contract_results(paths: dict[str, Path], rounds: int = 50) -> dict:
    """RESULTS computed exactly as the contract defines them (default session, one thread), with
    the configuration the jail gives every session of a notebook (autograder/ort_platform.py)."""
    import os
    import time

    import onnxruntime as ort

    from autograder import ort_platform

    _, X_test, _, y_test, X_edge = contract_data()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ort_platform.apply_config(so)
    sessions = {k: ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"]) for k, p in paths.items()}
    probs = {
        k: (s.run(["probabilities"], {"X": X_test})[0], s.run(["probabilities"], {"X": X_edge})[0])
        for k, s in sessions.items()
    }

    def drift(p, r):
        return float(np.max(np.max(np.abs(p - r), axis=1) / np.max(np.abs(r), axis=1)))

    results = {}
    for k, s in sessions.items():
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            s.run(None, {"X": X_test})
            times.append((time.perf_counter() - t0) * 1000)
        p, pe = probs[k]
        r, re_ = probs["fp32"]
        results[k] = {
            "size_bytes": os.path.getsize(paths[k]),
            "accuracy": float(np.mean(np.argmax(p, axis=1) == y_test)),
            "latency_ms": float(np.median(times)),
            "max_rel_drift": drift(p, r),
            "edge_max_rel_drift": drift(pe, re_),
        }
    return results


def hostile_deep_if_wire(out: Path, depth: int = 400) -> Path:
    """``depth`` nested If nodes written as raw protobuf: too deep for the Python API to build."""

    def varint(v: int) -> bytes:
        b = bytearray()
        while True:
            b.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(b)

    def field(num: int, payload: bytes) -> bytes:
        return varint(num << 3 | 2) + varint(len(payload)) + payload

    graph = b""
    for _ in range(depth):
        attr = field(1, b"then_branch") + field(6, graph) + varint(20 << 3) + varint(5)  # type = GRAPH
        node = field(4, b"If") + field(5, attr)  # op_type, attribute
        graph = field(1, node)  # GraphProto.node
    out.write_bytes(varint(1 << 3) + varint(10) + field(7, graph))  # ir_version, graph
    return out


# ── one shared set per test process ───────────────────────────────────────────────────────────

_SETS: dict[str, dict[str, Path]] = {}


def model_set(folder: Path) -> dict[str, Path]:
    """The (64, 64) models every model test uses, built once per process under ``folder``."""
    key = str(folder)
    if key not in _SETS:
        folder.mkdir(parents=True, exist_ok=True)
        clf = train_clf()
        fp32 = to_onnx_file(clf, folder / "fp32.onnx")
        paths = {"fp32": fp32, **quantize(fp32, folder)}
        other = train_fp32(folder / "other_fp32.onnx", seed=1)
        paths["other_fp32"] = other
        paths["other_int8_dynamic"] = quantize(other, folder, "other_", ("int8_dynamic",))["int8_dynamic"]
        paths["weights_only_qdq"] = weights_only_qdq(fp32, folder / "weights_only_qdq.onnx")
        paths["partial_dynamic"] = partial_dynamic(fp32, folder / "partial_dynamic.onnx")
        paths["tampered_dynamic"] = tamper_one_weight(paths["int8_dynamic"], folder / "tampered_dynamic.onnx")
        paths["zipmap"] = to_onnx_file(clf, folder / "zipmap.onnx", zipmap=True)
        for name in ("fp32", "int8_dynamic", "int8_qdq"):
            paths[f"ort_{name}"] = ort_optimized(paths[name], folder / f"ort_{name}.onnx")
        _SETS[key] = paths
    return _SETS[key]


def make_workspace(root: Path, models: dict[str, Path], names=("fp32", "int8_dynamic", "int8_qdq")) -> Path:
    """A submission's working directory with ``artifacts/<name>.onnx`` copied from ``models``."""
    import shutil

    (root / "artifacts").mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(models[name], root / "artifacts" / f"{name}.onnx")
    return root
