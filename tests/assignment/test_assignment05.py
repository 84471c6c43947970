"""Assignment 05 (graph optimization), what is specific to it, on the grading code alone (fast; the
examples graded through the real jail are the conformance suite's):

- the notebook's given model cell is the grader's ``build_mlp``, so both hold the same model;
- count_ops's hidden models, for any hidden-data secret (hypothesis): each group tests what it is
  named for, and each common way of keying operators fails exactly the groups that name it;
- RESULTS: node counts judged exactly, latencies by their ratio to the grader's timing, a unit
  slip told apart from an honest report.
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
        cases = grading.probe_cases()
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
    cases = [c for c in grading.probe_cases() if c.group == "standard"]
    probe = _outputs(cases, contract)
    first = probe.cases[cases[0].id]
    key = next(iter(first.value))
    first.value[key] += 1
    measured = grading.measure_functions(cases, probe, {"count_ops": grading.expect_count_ops})["count_ops"]
    assert "by 1 node" in measured["groups"]["standard"]["failure"]


def test_the_hidden_models_change_with_the_secret(grading):
    with hidden_secret.using(HiddenSecret(b"a" * 32)):
        a = [c.raw(0) for c in grading.probe_cases()]
    with hidden_secret.using(HiddenSecret(b"b" * 32)):
        b = [c.raw(0) for c in grading.probe_cases()]
    assert a != b and len(a) == len(b) == 7


# ── RESULTS ─────────────────────────────────────────────────────────────────────────────────────

LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
GRADER = {
    level: {"node_count": n, "latency_ms": ms, "why_not": None}
    for level, n, ms in zip(LEVELS, (26, 15, 7, 7), (0.08, 0.06, 0.05, 0.05))
}


SAVED = {
    level: {"path": f"artifacts/mlp_{level}.onnx", "node_count": g["node_count"], "genuine": True, "why_not": None}
    for level, g in GRADER.items()
}


@pytest.fixture
def reported(grading, monkeypatch):
    monkeypatch.setattr(grading.reported, "grader_levels", lambda policy: GRADER)
    monkeypatch.setattr(grading.reported, "retime_level", lambda policy, level: None)  # no fresh timing
    return lambda results, saved=SAVED: grading.reported.measure_reported(results, None, None, saved)


@pytest.mark.parametrize(
    "fresh, ratio, calls",
    [
        ([None], 0.2 / 0.06, 2),  # no fresh timing: the kept one counts
        ([0.19, 0.2], 0.2 / 0.19, 1),  # the machine was busier when the notebook timed: a fresh timing agrees
        ([0.06, 0.07], 0.2 / 0.07, 2),  # still far: the closest of all the grader's timings counts
    ],
)
def test_a_latency_far_from_the_kept_timing_is_timed_again(grading, monkeypatch, fresh, ratio, calls):
    monkeypatch.setattr(grading.reported, "grader_levels", lambda policy: GRADER)
    made = []

    def retime(policy, level):
        made.append(level)
        return fresh[min(len(made) - 1, len(fresh) - 1)]

    monkeypatch.setattr(grading.reported, "retime_level", retime)
    results = honest()
    results["latency_ms"]["ORT_ENABLE_BASIC"] = 0.2  # 3.3 times the kept timing of that level, 0.06
    r = grading.reported.measure_reported(results, None, None, SAVED)
    level = r["latency"]["levels"]["ORT_ENABLE_BASIC"]
    assert level["ratio"] == pytest.approx(ratio) and made == ["ORT_ENABLE_BASIC"] * calls
    assert all(v["ratio"] == pytest.approx(1.5) for lv, v in r["latency"]["levels"].items() if lv != "ORT_ENABLE_BASIC")


def honest():
    return {
        "node_counts": {lv: g["node_count"] for lv, g in GRADER.items()},
        "latency_ms": {lv: 1.5 * g["latency_ms"] for lv, g in GRADER.items()},
    }


def honest_levels(section, r):
    key = "honest" if section == "node_counts" else "ratio"
    return sorted(lv for lv, v in r[section]["levels"].items() if v.get(key))


def test_an_honest_report(reported):
    r = reported(honest())
    assert r["node_counts"]["honest_share"] == 1.0 and r["node_counts"]["problems"] == []
    assert r["latency"]["worst_ratio"] == pytest.approx(1.5)
    assert all(v["ratio"] == pytest.approx(1.5) for v in r["latency"]["levels"].values())


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


@pytest.mark.parametrize("scale, ratio", [(1e-3, 1000 / 1.5), (100.0, 150.0)])
def test_a_latency_is_judged_by_its_ratio_to_the_graders(reported, scale, ratio):
    results = honest()
    results["latency_ms"] = {lv: v * scale for lv, v in results["latency_ms"].items()}
    r = reported(results)
    assert r["latency"]["worst_ratio"] == pytest.approx(ratio)
    assert all(v["ratio"] == pytest.approx(ratio) for v in r["latency"]["levels"].values())
    assert r["node_counts"]["honest_share"] == 1.0


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
        (_with("ORT_ENABLE_BASIC", node_count=None, latency_ms=None, why_not="timed out"), True),
        (_with("ORT_ENABLE_ALL", latency_ms=None), True),  # ran, but could not be timed
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
    rep.grader_levels(policy)["ORT_ENABLE_ALL"]["latency_ms"] = 99.0  # a caller's copy, not the kept one
    assert rep.grader_levels(policy) == GRADER and len(calls) == 1
    other = dataclasses.replace(policy, optimization_level="ORT_ENABLE_ALL")
    rep.grader_levels(other)
    assert calls == [policy, other], "another policy is measured on its own"
    monkeypatch.setattr(rep, "LEVELS_MAX_AGE_S", -1.0)  # every kept timing is now too old
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
    assert all(first[lv]["latency_ms"] > 0 for lv in LEVELS)
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
