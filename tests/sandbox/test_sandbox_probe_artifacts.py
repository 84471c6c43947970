"""What the probe carries beyond arrays, in this process (the probe's real module and cells, no jail):
the notebook's own files as arguments (``Arg.artifact``), sessions the probe opens
(``Arg.session``), dicts with tuple keys, sessions a function returns (``SessionDescription``),
and the probe's own timers (``grader:``). The same through the real jail: test_adv_probe_artifacts.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from autograder.probe_format import (
    ARTIFACT_REASONS,
    Arg,
    ProbeCase,
    SessionDescription,
    decode_result,
    inline_cases,
)
from autograder.sandbox import probe_kernel
from probe_in_process import probe_in_process

LIMITS = {"depth": 8, "leaves": 10_000, "string_bytes": 1_000_000, "encoded_bytes": 2 * 1024 * 1024}


def model_bytes(width: int = 8) -> bytes:
    """A small model: ``y = relu(x @ W)``, x float32 ``[N, 16]``."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [16, width], np.linspace(-1, 1, 16 * width).tolist())
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


# ---------------------------------------------------------------- the artifact's path, both sides

PATHS = [
    ("artifacts/profile.json", True),
    ("model.onnx", True),
    ("a/b/c.d", True),
    (".hidden", True),
    ("", False),
    ("/etc/passwd", False),
    ("../outside", False),
    ("artifacts/../../x", False),
    ("a//b", False),
    ("./a", False),
    ("a/", False),
    ("a\\b", False),
    ("a\0b", False),
    ("x" * 256, False),
    (None, False),
    (b"bytes", False),
]


@pytest.mark.parametrize("relpath, valid", PATHS, ids=[repr(p)[:30] for p, _ in PATHS])
def test_an_artifact_is_a_plain_relative_path_on_both_sides(tmp_path, relpath, valid):
    """The grader refuses what the probe would refuse as 'outside' (a forged case gets the same)."""
    if valid:
        assert Arg.artifact(relpath).value == relpath
    else:
        with pytest.raises(ValueError):
            Arg.artifact(relpath)
    try:
        probe_kernel.resolve_artifact(str(tmp_path), relpath)
    except probe_kernel.BadArtifact as e:
        assert e.args[0] == ("missing" if valid else "outside"), e.args
    else:
        pytest.fail(f"{relpath!r} resolved in an empty folder")


def test_the_probe_resolves_an_artifact_only_inside_the_working_directory(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "artifacts").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("x")
    (ws / "artifacts" / "m.onnx").write_bytes(b"m")
    (ws / "artifacts" / "dir").mkdir()
    os.mkfifo(ws / "artifacts" / "fifo")
    (ws / "artifacts" / "link_in").symlink_to(ws / "artifacts" / "m.onnx")
    (ws / "artifacts" / "link_out").symlink_to(outside / "secret")
    (ws / "artifacts" / "dangling_out").symlink_to(outside / "nothing")
    (ws / "out").symlink_to(outside)
    table = {
        "artifacts/m.onnx": None,
        "artifacts/link_in": None,
        "artifacts/nothing.onnx": "missing",
        "artifacts/dir": "not_a_file",
        "artifacts/fifo": "not_a_file",
        "artifacts/link_out": "outside",
        "artifacts/dangling_out": "outside",
        "out/secret": "outside",
    }
    for relpath, reason in table.items():
        try:
            path = probe_kernel.resolve_artifact(str(ws), relpath)
        except probe_kernel.BadArtifact as e:
            assert e.args == (reason, relpath), (relpath, e.args)
        else:
            assert reason is None and path == str((ws / "artifacts" / "m.onnx").resolve()), (relpath, path)
    assert set(table.values()) - {None} == set(ARTIFACT_REASONS) - {"no_session"}


# ---------------------------------------------------------------- keys: the encoding's round trip

SCALAR_KEYS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=5)
)
KEYS = st.recursive(SCALAR_KEYS, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=6)


def typed(v):
    """A value with the type of every key and item spelled out (``{1: x} == {True: x}`` in Python)."""
    if isinstance(v, dict):
        return [(typed(k), typed(x)) for k, x in v.items()]
    if isinstance(v, tuple):
        return ("tuple", [typed(x) for x in v])
    return (type(v).__name__, repr(v))


@settings(max_examples=int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "100")), deadline=None)
@given(st.dictionaries(KEYS, st.integers(0, 9) | st.text(max_size=3), max_size=6))
def test_dict_keys_round_trip_through_the_probe_and_json(value):
    node, arrays, _ = probe_kernel.encode(value, 0, LIMITS)
    assert arrays == {}
    back = decode_result(json.loads(json.dumps(node)), arrays, 0)
    assert typed(back) == typed(value)


def test_numpy_keys_become_python_keys():
    value = {(np.int64(1), np.float32(0.5)): 1, np.bool_(True): 2}
    node, _, _ = probe_kernel.encode(value, 0, LIMITS)
    back = decode_result(node, {}, 0)
    assert typed(back) == typed({(1, 0.5): 1, True: 2})


# ---------------------------------------------------------------- through the probe's cells


def test_artifacts_sessions_and_tables_through_the_probe_cells(tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "m.onnx").write_bytes(model_bytes())
    (tmp_path / "artifacts" / "link").symlink_to("/etc/hostname")

    def size(path):
        return [type(path).__name__, os.path.getsize(path)]

    def run(session, x):
        return session.run(None, {"x": x})[0]

    def opened(path):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def table(batch_sizes, threads):
        return {(b, t): float(b * t) for b in batch_sizes for t in threads}

    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    model = Arg.artifact("artifacts/m.onnx")
    cases = [
        ProbeCase("size", "size", (model,)),
        ProbeCase("missing", "size", (Arg.artifact("artifacts/none.onnx"),)),
        ProbeCase("link", "size", (Arg.artifact("artifacts/link"),)),
        ProbeCase("run", "run", (Arg.session(model, intra_op_num_threads=1), Arg.array(x))),
        ProbeCase("run_file", "run", (Arg.session(Arg.file(model_bytes(), "h.onnx")), Arg.array(x))),
        ProbeCase("not_a_model", "run", (Arg.session(Arg.file(b"not onnx", "bad.onnx")), Arg.array(x))),
        ProbeCase("opened", "opened", (str(tmp_path / "artifacts/m.onnx"),)),
        ProbeCase("table", "table", (Arg.list([1, 8]), Arg.list([1, 2]))),
        ProbeCase("timer", "grader:latency_ms", (Arg.session(model), Arg.array(x)), {"runs": 5}),
        ProbeCase("timers", "grader:latency_table", (model, Arg.list([1, 4]), Arg.list([1])), {"runs": 3}),
    ]
    functions = {"size": size, "run": run, "opened": opened, "table": table}
    out = probe_in_process(tmp_path, functions, cases).cases
    assert out["size"].value == ["str", len(model_bytes())]
    assert out["missing"].status == "bad_artifact"
    assert out["missing"].error["message"] == "artifacts/none.onnx: " + ARTIFACT_REASONS["missing"]
    assert out["link"].status == "bad_artifact" and out["link"].error["reason"] == "outside"
    want = np.maximum(x @ np.linspace(-1, 1, 128).reshape(16, 8), 0)
    np.testing.assert_allclose(out["run"].value, want, rtol=1e-5)
    np.testing.assert_allclose(out["run_file"].value, want, rtol=1e-5)
    assert out["not_a_model"].status == "bad_artifact" and out["not_a_model"].error["reason"] == "no_session"
    described = out["opened"].value
    assert isinstance(described, SessionDescription), out["opened"]
    assert described.input_names == ("x",) and described.inputs[0].shape == ("N", 16)
    assert described.inputs[0].type == "tensor(float)" and described.output_names == ("y",)
    assert described.providers == ("CPUExecutionProvider",) and described.node_count == 2
    # no jail here: the options are the session's own
    assert (described.options_source, described.intra_op_num_threads) == ("session", 3)
    assert described.graph_optimization_level == "ORT_ENABLE_BASIC"
    assert out["table"].value == {(1, 1): 1.0, (1, 2): 2.0, (8, 1): 8.0, (8, 2): 16.0}
    assert isinstance(out["timer"].value, float) and out["timer"].value > 0
    assert sorted(out["timers"].value) == [(1, 1), (4, 1)] and min(out["timers"].value.values()) > 0


def test_a_notebook_cannot_define_the_probes_functions(tmp_path):
    """``grader:`` names the probe's own table: a notebook's global of that name is never called."""
    (tmp_path / "m.onnx").write_bytes(model_bytes())
    x = np.ones((1, 16), np.float32)
    case = ProbeCase("t", "grader:latency_ms", (Arg.session(Arg.artifact("m.onnx")), Arg.array(x)), {"runs": 2})
    out = probe_in_process(tmp_path, {"grader:latency_ms": lambda *a, **k: -1.0}, [case]).cases["t"]
    assert out.status == "ok" and out.value > 0
    with pytest.raises(ValueError, match="no function"):
        inline_cases([ProbeCase("u", "grader:other", ())])


def test_the_timers_sessions_are_cached_by_content(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes(8))
    timers = probe_kernel.Timers()
    first = timers.session(str(path), {})
    assert timers.session(str(path), {}) is first
    assert timers.session(str(path), {"intra_op_num_threads": 1}) is not first
    path.write_bytes(model_bytes(4))  # the same path, other bytes: another session
    assert timers.session(str(path), {}) is not first


def test_a_session_description_is_checked_by_the_grader():
    good = {
        "inputs": [["x", ["N", 16], "tensor(float)"]],
        "outputs": ["y"],
        "providers": ["CPUExecutionProvider"],
        "node_count": None,
        "options": {"intra_op_num_threads": 0, "inter_op_num_threads": 2, "execution_mode": None},
        "options_source": "requested",
    }
    d = decode_result({"session": good}, {}, 0)
    assert (d.intra_op_num_threads, d.inter_op_num_threads, d.graph_optimization_level) == (0, 2, None)
    from autograder.probe_format import ResultError

    for bad in ({**good, "options_source": "mine"}, {**good, "node_count": -1}, {**good, "inputs": [["x"]]}):
        with pytest.raises(ResultError, match="session"):
            decode_result({"session": bad}, {}, 0)


def test_the_kernel_module_imports_the_standard_library_and_numpy_only():
    import ast
    import sys

    tree = ast.parse(probe_kernel.source())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names - {"__future__", "numpy"} <= set(sys.stdlib_module_names), names


def test_a_call_with_artifacts_and_sessions_is_told_without_values():
    from autograder.measure.compare import describe_call
    from autograder.measure.failure import describe_arguments

    model = Arg.artifact("artifacts/m.onnx")
    case = ProbeCase("c", "f", (model, Arg.session(model, intra_op_num_threads=2)))
    assert describe_arguments(case, ("path", "session")) == (
        "path a str (the path of artifacts/m.onnx), session an onnxruntime.InferenceSession"
    )
    assert describe_call(case) == "f('artifacts/m.onnx', <session on 'artifacts/m.onnx', intra_op_num_threads=2>)"


def test_a_refused_artifact_is_told_as_a_call_not_made(tmp_path):
    from autograder.measure.compare import compare_output

    case = ProbeCase("c", "f", (Arg.artifact("artifacts/none.json"),))
    out = probe_in_process(tmp_path, {"f": lambda path: 1}, [case]).cases["c"]
    fact = compare_output(1, out)
    assert not fact["agree"] and fact["reason"] == "missing"
    assert fact["account"] == "not called: artifacts/none.json: the notebook did not write it"


def test_a_sessions_options_are_onnx_runtimes_own():
    import onnxruntime as ort

    from autograder.probe_format import MAX_SESSION_THREADS, OPTIMIZATION_LEVELS

    assert set(OPTIMIZATION_LEVELS) == set(ort.GraphOptimizationLevel.__members__)
    model = Arg.artifact("m.onnx")
    for bad in (
        {"intra_op_num_threads": -1},
        {"inter_op_num_threads": MAX_SESSION_THREADS + 1},
        {"intra_op_num_threads": 1.0},
    ):
        with pytest.raises(ValueError):
            Arg.session(model, **bad)
    with pytest.raises(ValueError, match="graph_optimization_level"):
        Arg.session(model, graph_optimization_level="O3")
    with pytest.raises(TypeError):
        Arg.session(Arg.array([1.0]))
