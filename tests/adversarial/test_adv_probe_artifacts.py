"""What the probe carries, through the real jail and a real kernel, in each jail and kernel
(``[auto]``, ``[auto-template]``, ``[fallback]``): the notebook's own file as an argument
(``Arg.artifact``) and the ones it refuses (a link out, a folder, a missing file); a session the
probe opens (``Arg.session``, on an artifact and on a hidden file); a session a function returns,
described with the options the notebook asked for (the jail's record: a pool left at 0 reads 0
though the jail ran it with its own size); and timing honesty: an honest ``latency_ms`` paired
with the probe's timer gives a ratio near 1, a constant-returning one a ratio far off (wide
margins only: the machine may be loaded)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from advkit import TOKEN, xdist_slot
from autograder.limits import ExecutionLimits
from autograder.measure.timing_honesty import WINDOW, latency_pairing, measure_pairing
from autograder.probe_format import ARTIFACT_REASONS, Arg, ProbeCase, SessionDescription, read_probe_result
from autograder.sandbox import ProbeSpec, kernel_template_for, run_submission
from autograder.tree_walk import remove_tree

pytestmark = [pytest.mark.slow, pytest.mark.kernel]

W = np.linspace(-1, 1, 16 * 64, dtype=np.float32).reshape(16, 64)


def model_bytes() -> bytes:
    """``y = relu(x @ W)``: x float32 ``[N, 16]``."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor("W", TensorProto.FLOAT, [16, 64], W.ravel().tolist())],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


NOTEBOOK = f"""
import os, time
import numpy as np
import onnxruntime as ort

os.makedirs("artifacts/folder", exist_ok=True)
with open("artifacts/m.onnx", "wb") as f:
    f.write(bytes.fromhex({model_bytes().hex()!r}))
os.symlink("/etc/hostname", "artifacts/link_out")
os.symlink("../..", "artifacts/up")  # a '..' the grader would refuse to send, made by a link

def size(path):
    return [path, os.path.getsize(path)]

def run(session, x):
    return session.run(None, {{"x": x}})[0]

def pools(session):
    so = session.get_session_options()
    return [so.intra_op_num_threads, so.inter_op_num_threads]

def opened(intra):
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession("artifacts/m.onnx", so, providers=["CPUExecutionProvider"])

def latency_ms(session, x):
    feeds = {{"x": x}}
    for _ in range(10):
        session.run(None, feeds)
    times = []
    for _ in range(100):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1000

def constant_ms(session, x):
    return 1000.0
"""

X = np.linspace(-3, 3, 256 * 16, dtype=np.float32).reshape(256, 16)
MODEL = Arg.artifact("artifacts/m.onnx")
HONEST = latency_pairing("honest", "latency_ms", Arg.session(MODEL, intra_op_num_threads=1), Arg.array(X))
CONSTANT = latency_pairing("constant", "constant_ms", Arg.session(MODEL, intra_op_num_threads=1), Arg.array(X))
CASES = [
    ProbeCase("size", "size", (MODEL,)),
    ProbeCase("missing", "size", (Arg.artifact("artifacts/none.onnx"),)),
    ProbeCase("link_out", "size", (Arg.artifact("artifacts/link_out"),)),
    ProbeCase("folder", "size", (Arg.artifact("artifacts/folder"),)),
    ProbeCase("up", "size", (Arg.artifact("artifacts/up/etc/hostname"),)),
    ProbeCase("run", "run", (Arg.session(MODEL, intra_op_num_threads=1), Arg.array(X[:4]))),
    ProbeCase("run_hidden", "run", (Arg.session(Arg.file(model_bytes(), "hidden.onnx")), Arg.array(X[4:8]))),
    ProbeCase("pools_default", "pools", (Arg.session(MODEL),)),
    ProbeCase("opened_default", "opened", (0,)),
    ProbeCase("opened_2", "opened", (2,)),
    *HONEST.cases(),
    *CONSTANT.cases(),
]


@pytest.fixture
def probed(jail_mode, kernel_kind, short_assignment):
    base = Path(tempfile.mkdtemp(prefix=f"adv-{TOKEN}-probe-artifacts-"))
    os.chmod(base, 0o711)  # the fallback jail's uid must pass through
    try:
        nb = base / "submission.ipynb"
        import nbformat

        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(NOTEBOOK)]), nb)
        slot = xdist_slot()
        rec = run_submission(
            nb,
            base / "ws",
            limits=ExecutionLimits(cell_timeout_s=60, notebook_timeout_s=180),
            probe=ProbeSpec(CASES, sorted({c.function for c in CASES if ":" not in c.function})),
            slot=slot,
            template=kernel_template_for(slot, short_assignment, False),
        )
        if jail_mode == "fallback":
            assert rec["isolation"]["mode"] == "fallback", rec["isolation"]
        assert rec["status"] == "completed" and rec["probe"] == "completed", rec
        if kernel_kind == "template" and os.geteuid() == 0 and rec["isolation"]["mode"] == "bwrap":
            assert rec["kernel"] == "template", rec.get("kernel_reason")
        yield rec, read_probe_result(base / "ws", CASES, True)
    finally:
        remove_tree(base, ignore_errors=True)


def test_the_probe_carries_artifacts_sessions_and_timings(probed):
    rec, result = probed
    out = result.cases
    path, size = out["size"].value
    assert size == len(model_bytes()) and path.endswith("/artifacts/m.onnx"), out["size"]
    for case, reason in (("missing", "missing"), ("link_out", "outside"), ("up", "outside"), ("folder", "not_a_file")):
        assert out[case].status == "bad_artifact", (case, out[case])
        assert out[case].error["reason"] == reason and ARTIFACT_REASONS[reason] in out[case].error["message"]

    np.testing.assert_allclose(out["run"].value, np.maximum(X[:4] @ W, 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["run_hidden"].value, np.maximum(X[4:8] @ W, 0), rtol=1e-4, atol=1e-5)

    # the jail's rule: a pool left at 0 runs with the jail's size ...
    intra, inter = out["pools_default"].value
    assert 1 <= intra <= 4 and 1 <= inter <= 4, out["pools_default"]
    # ... and a returned session says what the notebook asked for
    default, two = out["opened_default"].value, out["opened_2"].value
    assert isinstance(default, SessionDescription) and isinstance(two, SessionDescription), out["opened_default"]
    assert default.options_source == two.options_source == "requested"
    assert (default.intra_op_num_threads, default.inter_op_num_threads) == (0, 0)
    assert (two.intra_op_num_threads, two.inter_op_num_threads) == (2, 0)
    assert two.graph_optimization_level == "ORT_ENABLE_BASIC" and two.execution_mode == "ORT_SEQUENTIAL"
    assert two.input_names == ("x",) and two.output_names == ("y",) and two.inputs[0].shape == ("N", 16)
    assert two.providers == ("CPUExecutionProvider",) and two.node_count == 2

    honest, constant = measure_pairing(HONEST, result), measure_pairing(CONSTANT, result)
    assert honest["error"] is None and honest["pairs"] == HONEST.repeats, honest
    assert honest["worst_ratio"] < WINDOW, honest  # calibrated with a wide margin under load
    assert constant["worst_ratio"] > 20 * WINDOW, constant  # 1000 ms against well under a millisecond
