"""autograder/measure/timing_honesty.py on made-up probe results: the cases it asks for (A B A B, the
probe's own timer after the student's), and the facts it makes of the pairs. The real pairing in a
real jailed kernel: tests/adversarial/test_adv_probe_artifacts.py."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.measure.timing_honesty import (
    GRADER_LATENCY,
    GRADER_TABLE,
    WINDOW,
    latency_pairing,
    measure_pairing,
    table_pairing,
    within_window,
)
from autograder.probe_format import Arg, CaseOutput, ProbeResult, inline_cases

SESSION = Arg.session(Arg.artifact("artifacts/mlp.onnx"), intra_op_num_threads=1)
X = Arg.array(np.zeros((4, 16), np.float32))


def probe(pairing, student_values, grader_values, student_status="ok"):
    cases = {}
    for r, (s, g) in enumerate(zip(student_values, grader_values)):
        cases[pairing.student_id(r)] = CaseOutput(student_status, value=s, error={"type": "ValueError"})
        cases[pairing.grader_id(r)] = CaseOutput("ok", value=g)
    return ProbeResult(True, None, cases, {}, None, None)


def test_the_cases_alternate_the_students_timer_and_the_probes():
    pairing = latency_pairing("lat/basic", "latency_ms", SESSION, X, runs=20, repeats=3)
    cases = pairing.cases()
    assert [c.function for c in cases] == ["latency_ms", GRADER_LATENCY] * 3
    assert [c.id for c in cases[:2]] == ["lat/basic/student/0", "lat/basic/grader/0"]
    assert cases[1].args == cases[0].args and cases[1].kwargs == {"runs": 20}
    inline_cases(cases)  # the probe can send them
    table = table_pairing("tab", "latency_table", Arg.artifact("artifacts/mlp.onnx"), [1, 8], [1, 2])
    assert {c.function for c in table.cases()} == {"latency_table", GRADER_TABLE}
    with pytest.raises(TypeError):
        latency_pairing("x", "latency_ms", Arg.artifact("a.onnx"), X)


# (the student's timings, the probe's, the median ratio)
LATENCIES = [
    ([1.0, 1.1, 0.9], [1.0, 1.0, 1.0], 1.1),  # honest: ratios 1.0, 1.1, 1.11 → 1.1
    ([0.5, 0.5, 0.5], [1.0, 1.0, 1.0], 2.0),  # half
    ([1000.0, 1000.0, 1000.0], [1.0, 1.0, 1.0], 1000.0),  # seconds as ms
    ([np.float32(2.0), 9.0, 2.0], [2.0, 1.0, 2.0], 1.0),  # one loaded pair does not decide
]


@pytest.mark.parametrize("student, grader, ratio", LATENCIES)
def test_a_latencys_ratio_is_the_median_over_pairs(student, grader, ratio):
    pairing = latency_pairing("lat", "latency_ms", SESSION, X)
    facts = measure_pairing(pairing, probe(pairing, student, grader))
    assert facts["error"] is None and facts["pairs"] == 3
    assert facts["entries"]["latency"]["ratio"] == pytest.approx(ratio, rel=0.01)
    assert facts["worst_ratio"] == pytest.approx(ratio, rel=0.01)
    assert within_window(facts) == (ratio <= WINDOW)


def test_a_tables_worst_entry_is_the_judged_figure():
    pairing = table_pairing("tab", "latency_table", Arg.artifact("m.onnx"), [1, 8], [1, 2], repeats=2)
    grader = {(1, 1): 1.0, (1, 2): 0.8, (8, 1): 4.0, (8, 2): 2.5}
    student = {**grader, (8, 2): 25.0, (64, 4): 3.0}  # one entry 10× off; an extra one is ignored
    facts = measure_pairing(pairing, probe(pairing, [student, student], [grader, grader]))
    assert set(facts["entries"]) == {"1,1", "1,2", "8,1", "8,2"}
    assert facts["entries"]["1,2"]["ratio"] == 1.0 and facts["worst_ratio"] == pytest.approx(10.0)
    assert not within_window(facts)


REFUSED = [
    ("raised", [1.0] * 3, "raised ValueError"),
    ("bad_artifact", [1.0] * 3, "refused the file"),
    ("missing_function", [1.0] * 3, "does not define"),
    ("ok", [0.0, 1.0, 1.0], "not a positive number"),
    ("ok", ["1.0", 1.0, 1.0], "not a positive number"),
    ("ok", [float("nan"), 1.0, 1.0], "not a positive number"),
    ("ok", [True, 1.0, 1.0], "not a positive number"),
]


@pytest.mark.parametrize("status, student, words", REFUSED)
def test_a_pairing_without_a_usable_timing_says_why(status, student, words):
    pairing = latency_pairing("lat", "latency_ms", SESSION, X)
    facts = measure_pairing(pairing, probe(pairing, student, [1.0] * 3, status))
    assert words in facts["error"] and facts["worst_ratio"] is None and not within_window(facts)


def test_a_table_missing_an_entry_says_which():
    pairing = table_pairing("tab", "latency_table", Arg.artifact("m.onnx"), [1, 8], [1], repeats=1)
    facts = measure_pairing(pairing, probe(pairing, [{(1, 1): 1.0}], [{(1, 1): 1.0, (8, 1): 2.0}]))
    assert facts["error"] == "latency_table gave no timing for 8,1"
