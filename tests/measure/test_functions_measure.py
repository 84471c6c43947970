"""measure_functions end to end: ProbeResults from honest and from buggy implementations.

The implementations run in-process on the decoded probe arguments (as the probe would call them in
the kernel); the grading code itself never runs student code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from autograder.probe_format import CaseOutput, ProbeResult, decode_value, encode_cases

FUNCTIONS_PY = Path(__file__).resolve().parents[2] / "assignments" / "07-quantization" / "grading" / "functions.py"


def _load_functions():
    spec = importlib.util.spec_from_file_location("a07_grading_functions_under_test", FUNCTIONS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fn = _load_functions()
CASES = fn.probe_cases()
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255)}


def run_probe(impls: dict, functions: dict | None = None) -> ProbeResult:
    """What the probe would record for these implementations (in-process, for the unit test)."""
    out = {}
    for c in CASES:
        f = impls.get(c.function)
        if f is None:
            out[c.id] = CaseOutput("missing_function")
            continue
        args = [decode_value(a) for a in c.args]
        kwargs = {k: decode_value(v) for k, v in c.kwargs.items()}
        try:
            with np.errstate(all="ignore"):
                r = f(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the probe records every exception as data
            out[c.id] = CaseOutput("raised", error={"type": type(e).__name__, "message": str(e), "traceback": ""})
            continue
        if isinstance(r, (tuple, list)):
            out[c.id] = CaseOutput("ok", [np.asarray(v) for v in r], is_tuple=True)
        else:
            out[c.id] = CaseOutput("ok", [np.asarray(r)])
    functions = functions or {n: "defined" if n in impls else "missing" for n in fn.FUNCTIONS}
    return ProbeResult(True, None, out, functions, None, None)


# ---------------------------------------------------------------- honest implementations


def quantize_ok(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def quantize_float64(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = np.rint(np.asarray(x, dtype=np.float64) / float(scale)).astype(np.int64) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def quantize_reciprocal(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = np.rint(np.asarray(x, dtype=np.float32) * np.float32(1.0 / scale)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def dequantize_ok(q, scale, zero_point):
    return ((np.asarray(q).astype(np.int32) - int(zero_point)) * np.float32(scale)).astype(np.float32)


def dequantize_float64(q, scale, zero_point):
    return ((np.asarray(q).astype(np.float64) - int(zero_point)) * float(scale)).astype(np.float32)


def choose_qparams_ok(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if symmetric:
        absmax = max(-rmin, rmax)
        rmin, rmax = -absmax, absmax
    if rmax == rmin:
        return 1.0, 0
    scale = (rmax - rmin) / (qmax - qmin)
    zp = round((qmin + qmax) / 2) if symmetric else round(qmin - rmin / scale)
    return scale, int(zp)


def choose_qparams_float32(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin = np.minimum(np.float32(rmin), np.float32(0))
    rmax = np.maximum(np.float32(rmax), np.float32(0))
    if symmetric:
        absmax = np.maximum(-rmin, rmax)
        rmin, rmax = -absmax, absmax
    if rmax == rmin:
        return np.float32(1.0), 0
    scale = (rmax - rmin) / np.float32(qmax - qmin)
    zp = np.rint(np.float32((qmin + qmax) / 2)) if symmetric else np.rint(np.float32(qmin) - rmin / scale)
    return scale, int(zp)


HONEST = {"quantize": quantize_ok, "dequantize": dequantize_ok, "choose_qparams": choose_qparams_ok}


# ---------------------------------------------------------------- buggy implementations


def quantize_truncates(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = (np.asarray(x, np.float32) / np.float32(scale)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def quantize_rounds_half_away(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    t = np.asarray(x, np.float32) / np.float32(scale)
    q = (np.sign(t) * np.floor(np.abs(t) + 0.5)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def quantize_no_saturation(x, scale, zero_point, dtype=np.int8):
    q = np.rint(np.asarray(x, np.float32) / np.float32(scale)).astype(np.int64) + int(zero_point)
    return q.astype(dtype)  # wraps modulo 256 instead of clipping


def quantize_float64_result(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    return np.clip(np.rint(np.asarray(x, np.float32) / np.float32(scale)) + int(zero_point), qmin, qmax)


def quantize_adds_zero_point_after_cast(x, scale, zero_point, dtype=np.int8):
    q = np.rint(np.asarray(x, np.float32) / np.float32(scale)).astype(np.int64).astype(dtype)
    return q + np.asarray(zero_point).astype(dtype)  # uint8/int8 arithmetic wraps


def quantize_python_scalar(x, scale, zero_point, dtype=np.int8):
    q = quantize_ok(x, scale, zero_point, dtype)
    return int(q) if q.ndim == 0 else q  # a scalar x gives a Python int, not a 0-d int8 array


def dequantize_forgets_zero_point(q, scale, zero_point):
    return (np.asarray(q).astype(np.float32) * np.float32(scale)).astype(np.float32)


def dequantize_float64_result(q, scale, zero_point):
    return (np.asarray(q).astype(np.float64) - int(zero_point)) * float(scale)


def dequantize_subtracts_in_q_dtype(q, scale, zero_point):
    q = np.asarray(q)
    return ((q - np.asarray(zero_point).astype(q.dtype)).astype(np.float32) * np.float32(scale)).astype(np.float32)


def choose_qparams_no_widening(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin, rmax = float(rmin), float(rmax)
    if symmetric:
        absmax = max(abs(rmin), abs(rmax))
        rmin, rmax = -absmax, absmax
    if rmax == rmin:
        return 1.0, 0
    scale = (rmax - rmin) / (qmax - qmin)
    return scale, int(round((qmin + qmax) / 2) if symmetric else round(qmin - rmin / scale))


def choose_qparams_floor_midpoint(rmin, rmax, dtype=np.uint8, symmetric=False):
    scale, zp = choose_qparams_ok(rmin, rmax, dtype, symmetric)
    if symmetric and scale != 1.0:
        qmin, qmax = RANGES[dtype]
        zp = (qmin + qmax) // 2  # int8: -1, uint8: 127 (ORT: 0 and 128)
    return scale, zp


def choose_qparams_float_zero_point(rmin, rmax, dtype=np.uint8, symmetric=False):
    scale, zp = choose_qparams_ok(rmin, rmax, dtype, symmetric)
    return scale, float(zp)


def choose_qparams_array(rmin, rmax, dtype=np.uint8, symmetric=False):
    return np.array(choose_qparams_ok(rmin, rmax, dtype, symmetric))


def raises(*args, **kwargs):
    raise NotImplementedError("TODO")


# ---------------------------------------------------------------- the cases themselves


def test_cases_are_modest_unique_encodable_and_grouped():
    ids = [c.id for c in CASES]
    assert 30 <= len(CASES) <= 64, f"{len(CASES)} probe cases: keep them modest (each is a kernel call)"
    assert len(set(ids)) == len(ids)
    assert all(c.id.startswith(c.function + "/") and c.group for c in CASES)
    plain, arrays = encode_cases(CASES)
    assert len(plain) == len(CASES) and arrays
    groups = {(c.function, c.group) for c in CASES}
    for g in (
        "ties",
        "saturation",
        "negative_zero",
        "scalar",
        "list",
        "empty",
        "multi_dim",
        "uint8",
        "int8",
        "random",
        "zero_point_bounds",
    ):
        assert ("quantize", g) in groups, f"quantize has no {g} case"
    for g in ("asymmetric_uint8", "symmetric_int8", "positive_only", "negative_only", "degenerate", "tiny"):
        assert ("choose_qparams", g) in groups, f"choose_qparams has no {g} case"
    assert fn.probe_cases()[30].raw(0).tolist() == CASES[30].raw(0).tolist(), "random cases must be seeded"


def test_expected_values_come_from_onnx_runtime():
    case = next(c for c in CASES if c.id == "quantize/saturation_uint8_zp128_numpy_scalars")
    np.testing.assert_array_equal(fn.expect_quantize(case).value, np.array([128, 129, 130, 255, 1, 0], np.uint8))
    case = next(c for c in CASES if c.id == "choose_qparams/degenerate_zero_uint8")
    scale, zp = fn.expect_choose_qparams(case)
    assert (float(scale.value), int(zp.value)) == (1.0, 0)


# ---------------------------------------------------------------- honest implementations agree everywhere


def _assert_all_agree(section: dict, name: str):
    f = section[name]
    assert f["first_mismatch"] is None, f"{name}: {f['first_mismatch']}"
    assert (f["defined"], f["agree"], f["agree_share"], f["raised"]) == (True, f["cases"], 1.0, 0)


@pytest.mark.parametrize(
    "impls",
    [
        HONEST,
        {"quantize": quantize_float64, "dequantize": dequantize_float64, "choose_qparams": choose_qparams_float32},
        {"quantize": quantize_reciprocal, "dequantize": dequantize_ok, "choose_qparams": choose_qparams_ok},
    ],
    ids=["float32", "float64", "reciprocal"],
)
def test_honest_implementations_agree_on_every_case(impls):
    section = fn.measure_functions(CASES, run_probe(impls))
    assert list(section) == list(fn.FUNCTIONS)
    for name in fn.FUNCTIONS:
        _assert_all_agree(section, name)


def test_float64_quantize_really_differs_from_ort_somewhere():
    # the fairness allowance must be doing work, else the test above proves nothing
    diffs = sum(
        int(
            np.sum(
                np.asarray(
                    quantize_float64(
                        *[decode_value(a) for a in c.args], **{k: decode_value(v) for k, v in c.kwargs.items()}
                    )
                )
                != fn.expect_quantize(c).value
            )
        )
        for c in CASES
        if c.function == "quantize"
    )
    assert diffs > 0


def test_section_shape_is_the_documented_one():
    section = fn.measure_functions(CASES, run_probe(HONEST))
    q = section["quantize"]
    assert set(q) == {"defined", "cases", "agree", "agree_share", "raised", "replaced", "groups", "first_mismatch"}
    assert sum(g["cases"] for g in q["groups"].values()) == q["cases"]
    assert all(set(g) == {"cases", "agree", "agree_share", "raised", "failure"} for g in q["groups"].values())
    assert all(g["failure"] is None and g["agree_share"] == 1.0 for g in q["groups"].values())


# ---------------------------------------------------------------- each bug fails with its reason and group


@pytest.mark.parametrize(
    "name, impl, reason, group",
    [
        ("quantize", quantize_truncates, "values", "ties"),
        ("quantize", quantize_rounds_half_away, "values", "ties"),
        ("quantize", quantize_no_saturation, "values", "saturation"),
        ("quantize", quantize_float64_result, "dtype", "ties"),
        ("quantize", quantize_adds_zero_point_after_cast, "values", "saturation"),
        ("quantize", quantize_python_scalar, "dtype", "scalar"),
        ("quantize", raises, "raised", "ties"),
        ("dequantize", dequantize_forgets_zero_point, "values", "uint8"),
        ("dequantize", dequantize_float64_result, "dtype", "int8"),
        ("dequantize", dequantize_subtracts_in_q_dtype, "values", "uint8"),
        ("choose_qparams", choose_qparams_no_widening, "values", "positive_only"),
        ("choose_qparams", choose_qparams_floor_midpoint, "values", "symmetric_int8"),
        ("choose_qparams", choose_qparams_float_zero_point, "dtype", "asymmetric_uint8"),
        ("choose_qparams", choose_qparams_array, "type", "asymmetric_uint8"),
    ],
)
def test_bug_fails_with_expected_reason_and_group(name, impl, reason, group):
    section = fn.measure_functions(CASES, run_probe({**HONEST, name: impl}))
    f = section[name]
    first = f["first_mismatch"]
    assert first is not None and f["agree"] < f["cases"], f"{impl.__name__} was not caught"
    assert (first["reason"], first["group"]) == (reason, group), first
    assert f["groups"][group]["agree"] < f["groups"][group]["cases"]
    assert first["call"].startswith(name + "(") and first["case"].startswith(name + "/")
    for other in fn.FUNCTIONS:
        if other != name:
            _assert_all_agree(section, other)


@pytest.mark.parametrize(
    "name, impl, groups",
    [
        ("quantize", quantize_no_saturation, ["saturation", "zero_point_bounds"]),
        ("quantize", quantize_adds_zero_point_after_cast, ["saturation", "zero_point_bounds"]),
        ("dequantize", dequantize_subtracts_in_q_dtype, ["zero_point_bounds"]),
        ("choose_qparams", choose_qparams_no_widening, ["positive_only", "negative_only"]),
        ("choose_qparams", choose_qparams_floor_midpoint, ["symmetric_int8", "symmetric_uint8"]),
    ],
)
def test_bug_shows_in_the_groups_that_test_it(name, impl, groups):
    f = fn.measure_functions(CASES, run_probe({**HONEST, name: impl}))[name]
    for g in groups:
        assert f["groups"][g]["agree"] < f["groups"][g]["cases"], f"{impl.__name__} passes every {g} case"


def test_raising_function_counts_raised_and_shows_the_exception():
    f = fn.measure_functions(CASES, run_probe({**HONEST, "dequantize": raises}))["dequantize"]
    assert f["raised"] == f["cases"] and f["agree"] == 0 and f["agree_share"] == 0.0
    assert f["first_mismatch"]["got"] == "raised NotImplementedError: TODO"


def test_truncation_mismatch_is_explained():
    first = fn.measure_functions(CASES, run_probe({**HONEST, "quantize": quantize_truncates}))["quantize"][
        "first_mismatch"
    ]
    assert first["case"] == "quantize/ties_pow2_int8"
    assert first["call"].startswith("quantize(np.array([0.25, 0.75, 1.25")
    assert first["expected"] == "[0 2 2 4 4 0 …] int8 shape (10,)"
    assert "instead of" in first["got"] and "elements differ" in first["got"]


# ---------------------------------------------------------------- missing functions, probe not run


def test_missing_function_is_not_defined():
    section = fn.measure_functions(CASES, run_probe({"quantize": quantize_ok, "dequantize": dequantize_ok}))
    assert section["choose_qparams"] == {
        "defined": False,
        "error": "the notebook does not define choose_qparams at its top level",
    }
    _assert_all_agree(section, "quantize")


def test_missing_function_without_a_functions_map():
    probe = run_probe({"quantize": quantize_ok, "dequantize": dequantize_ok}, functions={"_": "defined"})
    assert probe.functions.get("choose_qparams") is None
    assert fn.measure_functions(CASES, probe)["choose_qparams"]["defined"] is False


def test_not_callable_is_not_defined():
    probe = run_probe(
        {**HONEST}, functions={"quantize": "not callable", "dequantize": "defined", "choose_qparams": "defined"}
    )
    for c in CASES:
        if c.function == "quantize":
            probe.cases[c.id] = CaseOutput("missing_function")
    q = fn.measure_functions(CASES, probe)["quantize"]
    assert q["defined"] is False and "not callable" in q["error"]


def test_probe_that_did_not_run_is_one_error():
    probe = ProbeResult(
        False,
        "the probe did not run to completion (the notebook did not finish)",
        {c.id: CaseOutput("not_run") for c in CASES},
        {},
        None,
        "the probe did not run",
    )
    assert fn.measure_functions(CASES, probe) == {
        "error": "the probe did not run to completion (the notebook did not finish)"
    }


def test_cases_the_probe_did_not_record_count_as_missing():
    probe = run_probe(HONEST)
    dropped = next(c for c in CASES if c.function == "dequantize")
    del probe.cases[dropped.id]
    d = fn.measure_functions(CASES, probe)["dequantize"]
    assert d["agree"] == d["cases"] - 1 and d["first_mismatch"]["reason"] == "missing"
