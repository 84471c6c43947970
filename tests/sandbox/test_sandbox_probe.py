"""The probe round trip: grader cases in (one cell each), the student's results out, read back with read_probe_result."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.limits import ExecutionLimits
from autograder.probe_format import Arg, ProbeCase, inline_cases, read_probe_result
from autograder.sandbox import ProbeSpec
from autograder.sandbox.probe import case_source, finish_source, setup_source
from needs import needs

pytestmark = pytest.mark.slow

STUDENT = """
import numpy as np

def quantize(x, scale, zero_point, dtype=np.int8):
    info = np.iinfo(dtype)
    q = np.rint(np.asarray(x, np.float32) / np.float32(scale)).astype(np.int32) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)

def dequantize(q, scale, zero_point):
    raise NotImplementedError("TODO: dequantize")

def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    return np.float32((rmax - rmin) / 255), 3

def as_object(x):
    return object()

def as_list(x):
    return [1, 2.5, np.float32(3)]

def hang(x):
    while True:
        pass

not_a_function = 42
RESULTS = {"fp32": {"accuracy": np.float64(0.95), "size_bytes": np.int64(1234), "latency_ms": 0.5}}
"""

CASES = [
    ProbeCase(
        "quantize/ties",
        "quantize",
        (Arg.array(np.array([1.25, 1.75, -1.25], np.float32)), 0.5, 0),
        {"dtype": Arg.dtype("int8")},
        group="ties",
    ),
    ProbeCase(
        "quantize/list_uint8",
        "quantize",
        (Arg.list([0.0, 300.0]), Arg.scalar(np.float32(1.0)), 10),
        {"dtype": Arg.dtype("uint8")},
        group="saturation",
    ),
    ProbeCase("dequantize/basic", "dequantize", (Arg.array(np.array([1, 2], np.int8)), 0.5, 0)),
    ProbeCase("choose_qparams/basic", "choose_qparams", (-1.0, 1.55)),
    ProbeCase("object", "as_object", (1,)),
    ProbeCase("list", "as_list", (1,)),
    ProbeCase("missing", "no_such_function", (1,)),
    ProbeCase("not_callable", "not_a_function", ()),
]
FUNCTIONS = ["quantize", "dequantize", "choose_qparams", "not_a_function", "no_such_function"]


@pytest.fixture(scope="module")
@needs("kernel")
def probed(tmp_path_factory):
    from autograder.sandbox import run_submission

    from sandbox_helpers import worker_slot, write_notebook

    tmp = tmp_path_factory.mktemp("probe")
    nb = write_notebook(tmp, [STUDENT])
    rec = run_submission(
        nb,
        tmp / "ws",
        limits=ExecutionLimits(cell_timeout_s=20, notebook_timeout_s=60),
        probe=ProbeSpec(CASES, FUNCTIONS),
        slot=worker_slot(),
    )
    return rec, read_probe_result(tmp / "ws", CASES, rec["probe"] == "completed"), tmp / "ws"


def test_probe_completed(probed):
    rec, result, _ = probed
    assert rec["status"] == "completed", rec["reason"]
    assert rec["probe"] == "completed"
    assert result.ran and result.error is None


def test_array_results_round_trip(probed):
    out = probed[1].cases
    assert out["quantize/ties"].status == "ok"
    np.testing.assert_array_equal(out["quantize/ties"].values[0], np.array([2, 4, -2], np.int8))
    assert out["quantize/ties"].values[0].dtype == np.int8
    np.testing.assert_array_equal(out["quantize/list_uint8"].values[0], np.array([10, 255], np.uint8))


def test_raising_function_is_recorded(probed):
    case = probed[1].cases["dequantize/basic"]
    assert case.status == "raised"
    assert case.error["type"] == "NotImplementedError"
    # made while the call held its inputs: only the type is kept (autograder.leak_budget)
    assert case.error["message"] == "" and case.error["traceback"] == ""


def test_tuple_result_has_parts(probed):
    case = probed[1].cases["choose_qparams/basic"]
    assert case.status == "ok" and case.is_tuple
    scale, zp = case.values
    assert scale.dtype == np.float32 and float(scale) == pytest.approx(2.55 / 255)
    assert int(zp) == 3


def test_list_of_numbers_is_parts(probed):
    case = probed[1].cases["list"]
    assert case.status == "ok" and [float(v) for v in case.values] == [1.0, 2.5, 3.0]


def test_object_result_is_unconvertible(probed):
    case = probed[1].cases["object"]
    assert case.status == "unconvertible"
    assert case.error["message"] == "a value of type object"  # the grader's words, a closed type name


def test_missing_and_uncallable_functions(probed):
    result = probed[1]
    assert result.cases["missing"].status == "missing_function"
    assert result.cases["not_callable"].status == "missing_function"
    assert result.functions["quantize"] == "defined"
    assert result.functions["no_such_function"] == "missing"
    assert result.functions["not_a_function"] == "not callable"


def test_results_variable_with_numpy_scalars(probed):
    result = probed[1]
    assert result.reported_error is None
    assert result.reported == {"fp32": {"accuracy": 0.95, "size_bytes": 1234, "latency_ms": 0.5}}


def test_workspace_has_exactly_the_probe_files(probed):
    assert sorted(p.name for p in probed[2].iterdir()) == ["probe_outputs.npz", "probe_report.json", "reported.json"]


def test_inline_arguments_keep_their_kind_shape_and_dtype(tmp_path):
    """What the probe's decoder makes of each inline argument is exactly the case's value."""
    import json

    values = [
        Arg.array(np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::2]),
        Arg.array(np.zeros((3, 0), np.int8)),
        Arg.scalar(np.float32(-3.75)),
        Arg.scalar(np.uint8(200)),
        Arg.list(np.array([[0.5, 1.5]], np.float32)),
        Arg.list(np.zeros(0, np.float32)),
        Arg.dtype("uint8"),
        1.25,
        7,
        True,
    ]
    case = ProbeCase("echo", "echo", tuple(values))
    got: list = []
    ns: dict = {"__name__": "__main__", "echo": lambda *a: got.extend(a) or 0}
    exec(setup_source(str(tmp_path), ["echo"], "RESULTS"), ns)
    exec(case_source(inline_cases([case])[0]), ns)
    assert json.loads((tmp_path / "probe_case.json").read_text())["status"] == "ok"
    assert len(got) == len(values)
    for i, (arg, value) in enumerate(zip(values, got)):
        want = case.raw(i) if isinstance(arg, Arg) else arg
        assert type(value) is type(want), (arg, value)
        if isinstance(want, np.ndarray) or isinstance(want, np.generic):
            assert value.shape == want.shape and value.dtype == want.dtype and np.array_equal(value, want), (arg, value)
        else:
            assert value == want, (arg, value)


def test_probe_cells_leave_no_names_and_hold_only_their_own_case(tmp_path):
    """Run the probe's cells in a plain namespace: each case cell carries its case alone, and
    after the last cell no name of the probe's is left."""
    import json

    ns: dict = {"__name__": "__main__"}
    exec(STUDENT, ns)
    before = set(ns)
    exec(setup_source(str(tmp_path), FUNCTIONS, "RESULTS"), ns)
    assert (tmp_path / "reported.json").is_file(), "RESULTS is dumped by the setup cell, before any call"
    assert json.loads((tmp_path / "probe_report.json").read_text())["functions"]["not_a_function"] == "not callable"
    inline = inline_cases(CASES[:4])
    sources = [case_source(c) for c in inline]
    for i, src in enumerate(sources):
        for other in inline[:i] + inline[i + 1 :]:
            assert other["id"] not in src, f"the cell of case {i} also carries case {other['id']}"
        exec(src, ns)
        assert json.loads((tmp_path / "probe_case.json").read_text())["id"] == inline[i]["id"]
    exec(finish_source(), ns)
    assert set(ns) == before, f"the probe left names behind: {sorted(set(ns) - before)}"
    assert list(tmp_path.iterdir()) == [], "the probe's last cell leaves no file behind"


def test_probe_handles_hang_missing_results_and_preplanted_symlink(run_cells, monkeypatch):
    """A hanging function times out per case; a symlink planted under an output name is replaced."""
    cases = [ProbeCase("hang", "hang", (1,)), ProbeCase("ok", "quantize", (Arg.list([1.0]), 1.0, 0))]
    code = STUDENT.replace("RESULTS =", "_unused =") + "\nimport os\nos.symlink('/etc/passwd', 'probe_report.json')"
    limits = ExecutionLimits(cell_timeout_s=30, notebook_timeout_s=60)
    monkeypatch.setattr("autograder.sandbox.probe_run.PROBE_CASE_MAX_S", 1.0)
    rec, ws = run_cells([code], limits=limits, probe=ProbeSpec(cases, ["hang", "quantize"]))
    assert rec["probe"] == "completed", rec
    result = read_probe_result(ws, cases, True)
    assert result.cases["hang"].status == "raised"
    assert result.cases["hang"].error["type"] == "ProbeTimeout"
    assert result.cases["ok"].status == "ok"
    assert result.reported is None and "RESULTS is not defined" in result.reported_error
    assert not (ws / "probe_report.json").is_symlink()


def test_probe_fails_when_the_kernel_is_broken(run_cells):
    """Student code that breaks numpy's saver makes the probe fail, not the grader."""
    cases = [ProbeCase("q", "quantize", (1.0, 1.0, 0))]
    rec, _ = run_cells([STUDENT + "\nnp.savez = None"], probe=ProbeSpec(cases, ["quantize"]))
    assert rec["status"] == "completed"
    assert rec["probe"] == "failed"


def test_probe_not_run_after_a_dead_kernel(run_cells):
    rec, ws = run_cells(["import os\nos._exit(1)"], probe=ProbeSpec(CASES, FUNCTIONS))
    assert rec["status"] == "kernel_died" and rec["probe"] == "not_run"
    result = read_probe_result(ws, CASES, rec["probe"] == "completed")
    assert not result.ran and all(c.status == "not_run" for c in result.cases.values())
