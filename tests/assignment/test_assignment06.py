"""Assignment 06 (performance), what is specific to it, on the grading code alone (fast; the
examples graded through the real jail are the conformance suite's):

- the notebook's given model cell is the grader's ``build_mlp``, so both hold the same model;
- the hidden profiles have the shape of what ONNX Runtime writes (compared with a real profile of
  the contract model, written here by real ONNX Runtime), and for any hidden-data secret and
  submission (hypothesis) each group tests what it is named for: counting fence events fails the
  fence group, an order of ties that is not the name's fails the tie group, each on every draw;
- the reference ``top_ops`` on known events (a table);
- the saved profile's facts on real profiles: the pool size, another model, one row;
- ``make_session``'s facts from the probe's session descriptions (a table).
"""

from __future__ import annotations

import ast
import inspect
import json
import shutil
import textwrap
from collections import defaultdict
from pathlib import Path

import nbformat
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import hidden_secret
from autograder.assignment import load_assignment
from autograder.hidden_secret import HiddenSecret
from autograder.probe_format import CaseOutput, ProbeResult, SessionDescription

ROOT = Path(__file__).resolve().parents[2]
ID = "06-performance"


@pytest.fixture(scope="module")
def grading():
    return load_assignment(ID, ROOT).grading


def test_the_notebooks_model_cell_is_the_graders_builder(grading):
    # the same code, compared as syntax trees: the grader's copy is formatted by ruff, the notebook's as written
    builder = ast.dump(ast.parse(textwrap.dedent(inspect.getsource(grading.model.build_mlp))).body[0])
    for path in (ROOT / "assignments" / ID / f"{ID}.ipynb", ROOT / "reference" / ID / "solution.ipynb"):
        cells = [
            c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code" and "def build_mlp" in c.source
        ]
        assert len(cells) == 1, f"{path.name}: one cell defines build_mlp"
        defined = [
            ast.dump(node)
            for node in ast.parse(cells[0]).body
            if isinstance(node, ast.FunctionDef) and node.name == "build_mlp"
        ]
        assert defined == [builder], f"{path.name}: the model cell is not grading/model.py's"
        m = grading.model
        for line in (
            f"build_mlp(np.random.default_rng({m.CONTRACT_SEED}))",
            f"BATCH_SIZES = {list(m.BATCH_SIZES)}",
            f"THREADS = {list(m.THREADS)}",
            f"PROFILE_THREADS = {m.PROFILE_THREADS}",
            f"TOP_K = {m.TOP_K}",
        ):
            assert line in cells[0], f"{path.name}: {line}"


def _real_profile(tmp_path: Path, grading, threads: int, rows: int = 256, model: bytes | None = None) -> Path:
    """A profile written by real ONNX Runtime: the contract model (or ``model``) on ``rows`` rows."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / f"p{threads}_{rows}")
    model_path = tmp_path / "model.onnx"  # from a file, as the notebook does (model_loading_uri)
    model_path.write_bytes(model or grading.model.contract_model_bytes())
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    for _ in range(2):
        session.run(None, {"x": grading.model.timing_batch()[:rows]})
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    return Path(shutil.move(session.end_profiling(), tmp_path / "artifacts" / "profile.json"))


def _keys(events, cat, suffix=""):
    return [(set(e), set(e["args"])) for e in events if e["cat"] == cat and (not suffix or e["name"].endswith(suffix))]


def test_hidden_profiles_have_the_shape_of_onnx_runtimes(tmp_path, grading):
    real = json.loads(_real_profile(tmp_path, grading, threads=3).read_text())
    rng = np.random.default_rng(0)
    for fences, tie in ((False, False), (True, False), (False, True)):
        hidden = json.loads(grading.profiles.hidden_profile(rng, fences, tie))
        assert {e["name"] for e in hidden if e["cat"] == "Session"} == {
            e["name"] for e in real if e["cat"] == "Session"
        }
        event_keys = {frozenset(k) for k, _ in _keys(real, "Node") + _keys(hidden, "Node")}
        assert len(event_keys) == 1, "every Node event has the keys ONNX Runtime writes"
        real_args = set.union(*(a for _, a in _keys(real, "Node", "_kernel_time")))
        for _, args in _keys(hidden, "Node", "_kernel_time"):
            assert {"op_name", "provider", "node_index", "input_type_shape", "output_type_shape"} <= args <= real_args
        assert all(isinstance(e["dur"], int) and e["ph"] == "X" for e in hidden)
        assert any(e["name"].endswith("_fence_before") for e in hidden) == fences
        assert len(grading.profiles.hidden_profile(rng, fences, tie)) < 64_000


def _totals(events, keep):
    totals = defaultdict(int)
    for e in events:
        if e["cat"] == "Node" and keep(e):
            totals[e["args"]["op_name"]] += e["dur"]
    return totals


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.binary(min_size=32, max_size=32), submission=st.text(min_size=1, max_size=20))
def test_each_group_catches_its_mistake_on_every_draw(grading, key, submission):
    with hidden_secret.using(HiddenSecret(key)), hidden_secret.submission(submission):
        cases = [c for c in grading.probe_cases() if c.group in grading.profiles.GROUPS]
    assert [c.group for c in cases] == [g for g, (n, _, _) in grading.profiles.GROUPS.items() for _ in range(n)]
    for case in cases:
        events, k = json.loads(case.raw(0)), int(case.raw(1))
        want = grading.profiles.reference_top_ops(events, k)
        assert 2 <= k <= 4 and len(want) == k
        with_fences = sorted(_totals(events, lambda e: True).items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        first_seen = sorted(
            _totals(events, lambda e: e["name"].endswith("_kernel_time")).items(), key=lambda kv: -kv[1]
        )[:k]
        assert (with_fences != want) == (case.group == "fences"), case.id
        assert (first_seen != want) == (case.group == "ties"), case.id


@pytest.mark.parametrize(
    "events, k, expected",
    [
        ([], 3, []),
        ([{"cat": "Session", "name": "model_run", "dur": 9, "args": {}}], 3, []),
        (
            [
                {"cat": "Node", "name": "a_fence_before", "dur": 7, "args": {"op_name": "MatMul"}},
                {"cat": "Node", "name": "a_kernel_time", "dur": 30, "args": {"op_name": "MatMul"}},
                {"cat": "Node", "name": "b_kernel_time", "dur": 20, "args": {"op_name": "MatMul"}},
                {"cat": "Node", "name": "c_kernel_time", "dur": 50, "args": {"op_name": "Gemm"}},
                {"cat": "Node", "name": "d_kernel_time", "dur": 25, "args": {"op_name": "Add"}},
                {"cat": "Node", "name": "d_fence_after", "dur": 70, "args": {"op_name": "Add"}},
            ],
            2,
            [("Gemm", 50), ("MatMul", 50)],
        ),
        ([{"cat": "Node", "name": "x_kernel_time", "dur": 5, "args": {"op_name": "Relu"}}], 5, [("Relu", 5)]),
    ],
)
def test_reference_top_ops(grading, events, k, expected):
    assert grading.profiles.reference_top_ops(events, k) == expected


def test_the_saved_profile_on_real_profiles(tmp_path, grading):
    measure = grading.saved_profile.measure_saved_profile
    assert "error" in measure(tmp_path)  # nothing saved
    _real_profile(tmp_path, grading, threads=3)
    facts = measure(tmp_path)
    assert facts["valid"] and facts["contract_model"] and facts["contract_batch"] and 1 <= facts["threads"] <= 3
    assert {op for op, _ in facts["top_ops"]} == {"FusedGemm", "Gemm", "Softmax"}  # what ONNX Runtime ran
    _real_profile(tmp_path, grading, threads=1, rows=1)
    facts = measure(tmp_path)
    assert facts["contract_model"] and not facts["contract_batch"] and facts["threads"] == 1
    other = grading.model.build_mlp(np.random.default_rng(0))
    other.graph.node[0].name = "first"
    _real_profile(tmp_path, grading, threads=2, model=other.SerializeToString())
    facts = measure(tmp_path)
    assert facts["valid"] and not facts["contract_model"] and 1 <= facts["threads"] <= 2


def _session(intra, mode="ORT_SEQUENTIAL"):
    return SessionDescription(
        (), ("probabilities",), ("CPUExecutionProvider",), 12, intra, 0, mode, "ORT_ENABLE_ALL", "requested"
    )


@pytest.mark.parametrize(
    "outputs, share, sequential",
    [
        (lambda t: CaseOutput("ok", value=_session(t)), 1.0, True),
        (lambda t: CaseOutput("ok", value=_session(0)), 0.0, True),
        (lambda t: CaseOutput("ok", value=_session(t, "ORT_PARALLEL")), 1.0, False),
        (lambda t: CaseOutput("ok", value=_session(1)), 1 / 3, True),
        (lambda t: CaseOutput("raised", error={"type": "ValueError"}), 0.0, False),
        (lambda t: CaseOutput("ok", value={"intra_op_num_threads": t}), 0.0, False),
    ],
)
def test_make_session_facts(grading, outputs, share, sequential):
    cases = grading.sessions.probe_cases()
    probe = ProbeResult(True, None, {c.id: outputs(int(c.raw(1))) for c in cases}, {}, None, None)
    facts = grading.sessions.measure_sessions(cases, probe)
    assert facts["threads_share"] == pytest.approx(share) and facts["sequential"] is sequential
    assert (facts["failure"] == "") == (share == 1.0)


def _pairing_probe(grading, student, grader=None):
    """A probe result for latency_table's pairing: ``student(r)`` is the r-th call's table."""
    pairing = grading.latency.PAIRING
    cases = {}
    for r in range(pairing.repeats):
        cases[pairing.student_id(r)] = CaseOutput("ok", value=student(r))
        cases[pairing.grader_id(r)] = CaseOutput("ok", value=grader(r) if grader else _table(grading, 1.0))
    return ProbeResult(True, None, cases, {}, None, None)


def _table(grading, scale, keys=None):
    ms = {1: 0.03, 32: 0.15, 256: 1.1}
    return {
        k: ms[k[0]] * scale for k in keys or [(b, t) for b in grading.model.BATCH_SIZES for t in grading.model.THREADS]
    }


@pytest.mark.parametrize(
    "student, shape_ok, worst",
    [
        (lambda g, r: _table(g, 1.0 + 0.1 * r), True, 1.1),  # honest, a little noise
        (lambda g, r: _table(g, 1e-3), True, 1000.0),  # seconds
        (lambda g, r: _table(g, 50.0), True, 50.0),  # the sum of 50 runs
        (
            lambda g, r: {f"{b},{t}": v for (b, t), v in _table(g, 1.0).items()},
            False,
            1.0,
        ),  # str keys: timed, not the shape
        (lambda g, r: _table(g, 1.0, keys=[(1, 1), (32, 2)]), False, None),  # a table missing keys
    ],
)
def test_latency_table_facts(grading, student, shape_ok, worst):
    facts = grading.latency.measure_latency_table(_pairing_probe(grading, lambda r: student(grading, r)))
    assert facts["shape_ok"] is shape_ok and (facts["shape_problem"] == "") == shape_ok
    if worst is None:
        assert "error" in facts["honest_ratio"]
    else:
        assert facts["honest_ratio"] == pytest.approx(worst, rel=1e-6)


def test_reported_latency_is_judged_against_the_notebooks_own_rerun(tmp_path, grading):
    profile = {"valid": True, "contract_model": True}
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "model.onnx").write_bytes(grading.model.contract_model_bytes())
    rerun = grading.latency.measure_latency_table(_pairing_probe(grading, lambda r: _table(grading, 1e-3 * (1 + r))))
    table = {f"{b},{t}": v for (b, t), v in _table(grading, 1e-3).items()}
    results = {
        "latency_ms": table,
        "batch_speedup": 256 * table["1,1"] / table["256,1"],
        "thread_speedup": table["256,1"] / table["256,2"],
    }
    facts = grading.reported.measure_reported(results, None, tmp_path, profile, rerun)
    # a wrong timer (seconds) honestly reported: the closest re-run is the same numbers
    assert facts["backed"] and facts["latency"]["keys_ok"] and facts["latency"]["worst_ratio"] == pytest.approx(1.0)
    assert facts["comparisons"]["consistent"]
    typed = {**results, "latency_ms": {k: v * 1000 for k, v in table.items()}, "thread_speedup": 2.0}
    facts = grading.reported.measure_reported(typed, None, tmp_path, profile, rerun)
    assert facts["latency"]["worst_ratio"] > 300 and not facts["comparisons"]["consistent"]
    # nothing backs RESULTS without the contract's model, or beside another model's profile
    (tmp_path / "artifacts" / "model.onnx").write_bytes(b"not the model")
    assert not grading.reported.measure_reported(results, None, tmp_path, profile, rerun)["backed"]
    (tmp_path / "artifacts" / "model.onnx").write_bytes(grading.model.contract_model_bytes())
    other = {"valid": True, "contract_model": False}
    assert "error" in grading.reported.measure_reported(results, None, tmp_path, other, rerun)["latency"]
