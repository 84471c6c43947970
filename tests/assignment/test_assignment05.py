"""Assignment 05 (graph optimization), what is specific to it, on the grading code alone (fast; the
examples graded through the real jail are the conformance suite's):

- the notebook's given model cell is the grader's ``build_mlp``, so both hold the same model;
- count_ops's hidden models, for any hidden-data secret (hypothesis): each group tests what it is
  named for, and each common way of keying operators fails exactly the groups that name it;
- RESULTS: node counts judged exactly, latencies against the notebook's own latency_ms re-run by
  the probe beside its own timer (a table of timing styles and slips), a unit slip told apart
  from an honest report.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections import Counter
from pathlib import Path

import nbformat
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import hidden_secret
from autograder.assignment import load_assignment
from autograder.hidden_secret import HiddenSecret
from autograder.probe_format import CaseOutput, ProbeResult

ROOT = Path(__file__).resolve().parents[2]
ID = "05-graph-optimization"


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
        assert f"build_mlp(np.random.default_rng({grading.model.CONTRACT_SEED}))" in cells[0]


def test_the_contract_model_is_what_the_readme_says(grading):
    model = onnx.load_from_string(grading.model.contract_model_bytes())
    counts = Counter(n.op_type for n in model.graph.node)
    assert len(model.graph.node) == 26 and counts["Erf"] == 2 and counts["MatMul"] == 3
    assert {n.domain for n in model.graph.node} == {""}


# ── count_ops: the hidden models and the ways of keying an operator ─────────────────────────────


def contract(node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def op_type_only(node) -> str:  # the common snippet: domains dropped
    return node.op_type


def ai_onnx_as_a_domain(node) -> str:  # only "" taken as the default domain
    return node.op_type if node.domain == "" else f"{node.domain}.{node.op_type}"


def domain_always(node) -> str:  # every key prefixed, the default domain as "ai.onnx"
    return f"{node.domain or 'ai.onnx'}.{node.op_type}"


# a way of keying → the groups whose cases it must fail (and it agrees on every other group)
KEYINGS = {
    contract: set(),
    op_type_only: {"contrib", "other_domains"},
    ai_onnx_as_a_domain: {"other_domains"},
    domain_always: {"standard", "contrib", "other_domains"},
}


def _outputs(cases, keying) -> ProbeResult:
    out = {}
    for c in cases:
        model = onnx.load_from_string(c.raw(0))
        out[c.id] = CaseOutput("ok", value=dict(Counter(keying(n) for n in model.graph.node)))
    return ProbeResult(True, None, out, {"count_ops": "defined"}, None, None)


def _failing_groups(grading, cases, keying) -> set[str]:
    measured = grading.measure_functions(cases, _outputs(cases, keying), {"count_ops": grading.expect_count_ops})
    return {g for g, r in measured["count_ops"]["groups"].items() if r["agree"] < r["cases"]}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.binary(min_size=32, max_size=32))
def test_for_any_secret_each_keying_fails_exactly_its_groups(grading, secret):
    with hidden_secret.using(HiddenSecret(secret)):
        cases = grading.count_ops.probe_cases()
    assert {c.group for c in cases} == {"standard", "contrib", "other_domains"}
    for case in cases:
        model = onnx.load_from_string(case.raw(0))
        domains = {n.domain for n in model.graph.node}
        assert {"standard": {""}, "contrib": {"", "com.microsoft"}, "other_domains": {"", "ai.onnx", "ai.onnx.ml"}}[
            case.group
        ] == domains, case.id
    for keying, groups in KEYINGS.items():
        assert _failing_groups(grading, cases, keying) == groups, keying.__name__


def test_a_miscount_is_told_in_nodes_without_the_model(grading):
    cases = [c for c in grading.count_ops.probe_cases() if c.group == "standard"]
    probe = _outputs(cases, contract)
    first = probe.cases[cases[0].id]
    key = next(iter(first.value))
    first.value[key] += 1
    measured = grading.measure_functions(cases, probe, {"count_ops": grading.expect_count_ops})["count_ops"]
    assert "by 1 node" in measured["groups"]["standard"]["failure"]


def test_the_hidden_models_change_with_the_secret(grading):
    with hidden_secret.using(HiddenSecret(b"a" * 32)):
        a = [c.raw(0) for c in grading.count_ops.probe_cases()]
    with hidden_secret.using(HiddenSecret(b"b" * 32)):
        b = [c.raw(0) for c in grading.count_ops.probe_cases()]
    assert a != b and len(a) == len(b) == 7


# ── RESULTS ─────────────────────────────────────────────────────────────────────────────────────

LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
GRADER = {level: {"node_count": n, "why_not": None} for level, n in zip(LEVELS, (26, 15, 7, 7))}
TIMER_MS = dict(zip(LEVELS, (0.08, 0.06, 0.05, 0.05)))  # the probe's own timer, per level


SAVED = {
    level: {"path": f"artifacts/mlp_{level}.onnx", "node_count": g["node_count"], "genuine": True, "why_not": None}
    for level, g in GRADER.items()
}


def probed(grading, student=lambda level, pair: 1.1 * TIMER_MS[level], grader=lambda level, pair: TIMER_MS[level]):
    """The probe's records of the timing cases: ``student(level, pair)`` is what the notebook's
    latency_ms returned (a number, or an exception type to raise), ``grader`` the probe's timer."""
    cases = {}
    for level, pairing in grading.reported.pairings().items():
        for r in range(pairing.repeats):
            got = student(level, r)
            if isinstance(got, type):
                cases[pairing.student_id(r)] = CaseOutput("raised", error={"type": got.__name__})
            else:
                cases[pairing.student_id(r)] = CaseOutput("ok", value=got)
            cases[pairing.grader_id(r)] = CaseOutput("ok", value=grader(level, r))
    return ProbeResult(True, None, cases, {"latency_ms": "defined"}, None, None)


@pytest.fixture
def reported(grading, monkeypatch):
    monkeypatch.setattr(grading.reported, "grader_levels", lambda policy: GRADER)

    def judge(results, saved=SAVED, probe=None):
        timing = grading.reported.measure_timing(probe or probed(grading))
        return grading.reported.measure_reported(results, None, None, saved, timing)

    return judge


def honest():
    return {
        "node_counts": {lv: g["node_count"] for lv, g in GRADER.items()},
        "latency_ms": {lv: 1.2 * TIMER_MS[lv] for lv in LEVELS},  # timed during the notebook: a little off
    }


def honest_levels(section, r):
    key = "honest" if section == "node_counts" else "within_window"
    return sorted(lv for lv, v in r[section]["levels"].items() if v.get(key))


def test_an_honest_report(reported):
    r = reported(honest())
    assert r["node_counts"]["honest_share"] == 1.0 and r["node_counts"]["problems"] == []
    for v in r["latency"]["levels"].values():
        assert v["timer_ratio"] == pytest.approx(1.1) and v["reported_ratio"] == pytest.approx(1.2 / 1.1)
        assert v["ratio"] == pytest.approx(1.1) and v["within_window"] and v["window"] == r["latency"]["window"]
    assert r["latency"]["worst_ratio"] == pytest.approx(1.1)


# the notebook's latency_ms (per level and pair), RESULTS' latency → the level's ratio and verdict
TIMING_CASES = [
    ("honest", lambda lv, r: 1.1 * TIMER_MS[lv], 1.2, 1.1, True),
    ("a busy pair: the median of three pairs", lambda lv, r: (5.0 if r == 1 else 1.0) * TIMER_MS[lv], 1.0, 1.0, True),
    ("seconds for milliseconds", lambda lv, r: TIMER_MS[lv] / 1000, 1 / 1000, 1000.0, False),
    ("the sum of the 100 runs", lambda lv, r: 100 * TIMER_MS[lv], 100.0, 100.0, False),
    ("RESULTS typed far from what latency_ms gives", lambda lv, r: TIMER_MS[lv], 10.0, 10.0, False),
    ("RESULTS typed close to what latency_ms gives", lambda lv, r: TIMER_MS[lv], 1.5, 1.5, True),
]


@pytest.mark.parametrize(
    "student, reported_factor, ratio, within", [c[1:] for c in TIMING_CASES], ids=[c[0] for c in TIMING_CASES]
)
def test_a_latency_is_judged_against_the_notebooks_own_latency_ms_beside_the_probes_timer(
    grading, reported, student, reported_factor, ratio, within
):
    results = honest()
    results["latency_ms"] = {lv: reported_factor * TIMER_MS[lv] for lv in LEVELS}
    r = reported(results, probe=probed(grading, student))
    levels = r["latency"]["levels"]
    for lv in LEVELS:
        assert levels[lv]["ratio"] == pytest.approx(ratio) and levels[lv]["within_window"] is within, lv
    assert r["node_counts"]["honest_share"] == 1.0, "a timing slip costs the latencies only"


@pytest.mark.parametrize(
    "student, why",
    [
        (lambda lv, r: NotImplementedError, "raised NotImplementedError"),
        (lambda lv, r: -1.0, "not a positive number of milliseconds"),
        (lambda lv, r: "fast", "not a positive number of milliseconds"),
    ],
)
def test_a_latency_ms_that_cannot_be_timed_earns_nothing(grading, reported, student, why):
    r = reported(honest(), probe=probed(grading, student))
    for v in r["latency"]["levels"].values():
        assert set(v) == {"error"} and why in v["error"], v
    assert r["latency"]["worst_ratio"] is None and r["node_counts"]["honest_share"] == 1.0


def test_the_probe_times_the_saved_graph_of_each_level_with_one_thread(grading):
    for level, pairing in grading.reported.pairings().items():
        session, x = pairing.student_args
        assert session.kind == "session" and pairing.grader_args == pairing.student_args
        path, options = session.value
        assert path.kind == "artifact" and path.value == f"artifacts/mlp_{level}.onnx"
        assert options == {"intra_op_num_threads": 1, "graph_optimization_level": level}
        assert x.kind == "array" and x.value is grading.data.timing_batch()
        assert pairing.student == "latency_ms" and pairing.repeats >= 3


@pytest.mark.parametrize(
    "mistake, bad",
    [
        (lambda r: r["node_counts"].update({lv: 26 for lv in LEVELS}), 0.25),
        (lambda r: r["node_counts"].update(ORT_ENABLE_ALL=8), 0.75),
        # one misspelled level costs that level only, in node counts and nowhere else
        (lambda r: r["node_counts"].update(ORT_ENABLED_ALL=r["node_counts"].pop("ORT_ENABLE_ALL")), 0.75),
        (lambda r: r["node_counts"].update(ORT_ENABLE_BASIC="15"), 0.75),
    ],
)
def test_a_node_count_is_judged_level_by_level(reported, mistake, bad):
    results = honest()
    mistake(results)
    r = reported(results)
    assert r["node_counts"]["honest_share"] == bad
    assert honest_levels("latency", r) == sorted(LEVELS)


def saved_without(*levels, **change):
    return {lv: ({"error": "missing"} if lv in levels else {**v, **change}) for lv, v in SAVED.items()}


@pytest.mark.parametrize(
    "saved, honest_count, timed",
    [
        ({}, 0, 0),  # nothing saved: the README's numbers, typed in, earn nothing
        (saved_without("ORT_ENABLE_BASIC"), 3, 3),
        (saved_without(genuine=False, why_not="another model"), 0, 0),  # files of another model
        (saved_without(node_count=99), 0, 4),  # the counts are not those of the saved files
    ],
)
def test_numbers_earn_points_only_with_the_saved_graph_behind_them(reported, saved, honest_count, timed):
    r = reported(honest(), saved)
    assert r["node_counts"]["honest"] == honest_count
    assert len(honest_levels("latency", r)) == timed


@pytest.mark.parametrize("results", [None, {}, {"node_counts": honest()["node_counts"]}, [1, 2]])
def test_results_without_latencies_are_an_error_with_a_reason(reported, results):
    r = reported(results)
    assert set(r["latency"]) == {"error"} and r["latency"]["error"]


@pytest.mark.parametrize("bad", [-1.0, "fast", None])
def test_a_latency_that_cannot_be_compared_costs_its_level_only(reported, bad):
    results = honest()
    results["latency_ms"]["ORT_ENABLE_BASIC"] = bad
    r = reported(results)
    levels = r["latency"]["levels"]
    assert set(levels["ORT_ENABLE_BASIC"]) == {"error"} and "fast" not in levels["ORT_ENABLE_BASIC"]["error"]
    assert honest_levels("latency", r) == sorted(set(LEVELS) - {"ORT_ENABLE_BASIC"})
    assert r["node_counts"]["honest_share"] == 1.0


# ── the grader's own model: measured once per process ─────────────────────────────────────────


@pytest.fixture
def counted_levels(grading, monkeypatch):
    """``measure_levels`` replaced by a counter returning ``answers`` in turn (the last one again)."""
    rep = grading.reported
    monkeypatch.setattr(rep, "_levels", {})
    calls: list[object] = []
    answers: list[dict] = []

    def measure(policy):
        calls.append(policy)
        return {lv: dict(m) for lv, m in answers[min(len(calls), len(answers)) - 1].items()}

    monkeypatch.setattr(rep, "measure_levels", measure)
    return rep, calls, answers


def _with(level: str, **changes) -> dict:
    return {lv: {**m, **changes} if lv == level else dict(m) for lv, m in GRADER.items()}


@pytest.mark.parametrize(
    "first, measured_again",
    [
        (GRADER, False),  # complete: kept
        (_with("ORT_ENABLE_BASIC", node_count=None, why_not="timed out"), True),
        (_with("ORT_DISABLE_ALL", node_count=None), True),
    ],
)
def test_the_graders_levels_are_kept_only_when_every_level_was_measured(counted_levels, first, measured_again):
    rep, calls, answers = counted_levels
    answers += [first, GRADER]
    policy = load_assignment(ID, ROOT).model_policy
    assert rep.grader_levels(policy) == first
    assert rep.grader_levels(policy) == (GRADER if measured_again else first)
    assert len(calls) == (2 if measured_again else 1)
    rep.grader_levels(policy)
    assert len(calls) == (2 if measured_again else 1), "a complete measurement is reused"


def test_the_graders_levels_are_keyed_by_the_policy_and_expire(counted_levels, monkeypatch):
    import dataclasses

    rep, calls, answers = counted_levels
    answers.append(GRADER)
    policy = load_assignment(ID, ROOT).model_policy
    rep.grader_levels(policy)["ORT_ENABLE_ALL"]["node_count"] = 99  # a caller's copy, not the kept one
    assert rep.grader_levels(policy) == GRADER and len(calls) == 1
    other = dataclasses.replace(policy, optimization_level="ORT_ENABLE_ALL")
    rep.grader_levels(other)
    assert calls == [policy, other], "another policy is measured on its own"
    monkeypatch.setattr(rep, "LEVELS_MAX_AGE_S", -1.0)  # every kept measurement is now too old
    rep.grader_levels(policy)
    assert len(calls) == 3


@pytest.mark.kernel
def test_a_second_grade_in_the_process_starts_no_model_worker_for_the_graders_model(grading, monkeypatch):
    """Through the real model worker: the first call measures the four levels (one child each), the
    second reuses them and starts none."""
    from autograder.measure import worker_process

    rep = grading.reported
    monkeypatch.setattr(rep, "_levels", {})
    started: list[object] = []
    real_start = worker_process.start
    monkeypatch.setattr(worker_process, "start", lambda limits: started.append(limits) or real_start(limits))
    policy = load_assignment(ID, ROOT).model_policy
    first = rep.grader_levels(policy)
    assert len(started) == len(LEVELS)
    assert [first[lv]["node_count"] for lv in LEVELS] == [26, 15, 7, 7]
    assert rep.grader_levels(policy) == first
    assert len(started) == len(LEVELS), "the grader's own model was measured again"


# ── the graphs the notebook saved: the evidence behind RESULTS (real ONNX Runtime, real model worker) ──


def _save_level(workspace: Path, level: str, model_bytes: bytes, name: str) -> None:
    import onnxruntime as ort

    from autograder.ort_platform import session_options

    (workspace / "artifacts").mkdir(exist_ok=True)
    options = session_options(level)
    options.optimized_model_filepath = str(workspace / "artifacts" / name)
    ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


@pytest.mark.kernel  # the grader's levels and the saved files are read by jailed measuring children
def test_the_saved_graphs_are_counted_and_told_apart_from_another_models(grading, tmp_path):
    import numpy as np

    assignment = load_assignment(ID, ROOT)
    grader = grading.reported.grader_levels(assignment.model_policy)
    contract = grading.model.contract_model_bytes()
    other = grading.model.build_mlp(np.random.default_rng(6)).SerializeToString()  # another model, same graph
    for level in LEVELS:
        _save_level(tmp_path, level, other if level == "ORT_ENABLE_ALL" else contract, f"mlp_{level}.onnx")
    # the file of ORT_ENABLE_BASIC holds the graph as written: the right model, not that level's graph
    _save_level(tmp_path, "ORT_DISABLE_ALL", contract, "mlp_ORT_ENABLE_BASIC.onnx")
    (tmp_path / "artifacts" / "mlp_ORT_ENABLE_EXTENDED.onnx").unlink()
    saved = grading.saved_levels.measure_saved_levels(assignment, tmp_path, grader)
    assert saved["ORT_DISABLE_ALL"]["genuine"] and saved["ORT_DISABLE_ALL"]["node_count"] == 26
    assert not saved["ORT_ENABLE_BASIC"]["genuine"] and saved["ORT_ENABLE_BASIC"]["node_count"] == 26
    assert "error" in saved["ORT_ENABLE_EXTENDED"]
    assert not saved["ORT_ENABLE_ALL"]["genuine"] and saved["ORT_ENABLE_ALL"]["node_count"] == 7
