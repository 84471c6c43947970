"""Lesson 07's function checks: credit per kind of input, and the right part blamed for each bug.

Each probe group (grading/functions.py) is one part of its function's check (rubric.toml), so one
wrong kind of input costs that kind's share only. Here, with the real rubric, the real
tolerances and the real measurement (the implementations run in-process on the decoded probe
arguments, as the probe would call them):

- every group of every function has exactly one part, and the parts add up to the check;
- for each group: failing that group alone loses exactly its part, nowhere else;
- for each realistic bug: exactly the parts its mistake is about fail, and the feedback names the
  failure (exception, argument types, dtype/shape/steps) without a value of the hidden input;
- tie cases do not saturate and saturation cases hold no ties ("saturate, then add the
  zero point" used to lose a point at "rounds exact ties half to even").
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from autograder.judge import judge
from autograder.measure import failure
from autograder.probe_format import CaseOutput, ProbeResult, decode_value
from autograder.student_text import mask
from autograder.measure.quantization.reference_ops import qrange

ROOT = Path(__file__).resolve().parents[2]
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255)}
FUNCTION_CHECKS = ("quantize", "dequantize", "choose_qparams")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fn = _load(ROOT / "assignments" / "07-quantization" / "grading" / "functions.py", "a07_functions_for_groups")
CASES = fn.probe_cases()


def run_probe(impls: dict, origins: dict | None = None) -> ProbeResult:
    out = {}
    for c in CASES:
        args = [decode_value(a) for a in c.args]
        kwargs = {k: decode_value(v) for k, v in c.kwargs.items()}
        try:
            with np.errstate(all="ignore"):
                r = impls[c.function](*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the probe records every exception as data
            out[c.id] = CaseOutput("raised", error={"type": type(e).__name__, "message": str(e), "traceback": ""})
            continue
        if isinstance(r, (tuple, list)):
            out[c.id] = CaseOutput("ok", [np.asarray(v) for v in r], is_tuple=True)
        else:
            out[c.id] = CaseOutput("ok", [np.asarray(r)])
    return ProbeResult(True, None, out, {n: "defined" for n in fn.FUNCTIONS}, None, None, origins or {})


# ---------------------------------------------------------------- honest and buggy implementations


def quantize_ok(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def dequantize_ok(q, scale, zero_point):
    return ((np.asarray(q).astype(np.int32) - int(zero_point)) * np.float32(scale)).astype(np.float32)


def choose_qparams_ok(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if symmetric:
        rmin, rmax = -max(-rmin, rmax), max(-rmin, rmax)
    if rmax == rmin:
        return 1.0, 0
    scale = (rmax - rmin) / (qmax - qmin)
    return scale, int(round((qmin + qmax) / 2) if symmetric else round(qmin - rmin / scale))


HONEST = {"quantize": quantize_ok, "dequantize": dequantize_ok, "choose_qparams": choose_qparams_ok}


def quantize_no_saturation(x, scale, zero_point, dtype=np.int8):
    return (np.rint(np.asarray(x, np.float32) / np.float32(scale)).astype(np.int64) + int(zero_point)).astype(dtype)


def quantize_saturates_then_adds_zero_point(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    r = np.clip(np.rint(np.asarray(x, np.float32) / np.float32(scale)), qmin, qmax)
    return (r.astype(np.int32) + int(zero_point)).astype(dtype)


def quantize_loop_zero_point_own_type(x, scale, zero_point, dtype=np.int8):
    """The example quantize_loop_uint8_zero_point: NumPy 2 keeps np.uint8(128) + 500 in uint8."""
    qmin, qmax = RANGES[dtype]
    r = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale))
    q = np.array([int(v) + zero_point for v in r.reshape(-1)]).reshape(r.shape)
    return np.asarray(np.clip(q, qmin, qmax).astype(dtype))


def quantize_python_scalar(x, scale, zero_point, dtype=np.int8):
    q = quantize_ok(x, scale, zero_point, dtype)
    return int(q) if q.ndim == 0 else q


def quantize_no_lists(x, scale, zero_point, dtype=np.int8):
    return quantize_ok(x.astype(np.float32), scale, zero_point, dtype)  # 'list' object has no attribute 'astype'


def quantize_rounds_half_up(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    q = np.floor(np.asarray(x, np.float32) / np.float32(scale) + np.float32(0.5)).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def quantize_rounds_half_away_from_zero(x, scale, zero_point, dtype=np.int8):
    qmin, qmax = RANGES[dtype]
    v = np.asarray(x, np.float32) / np.float32(scale)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int32) + int(zero_point)
    return np.clip(q, qmin, qmax).astype(dtype)


def ort_model_quantizer(model_input, model_output, quant_config):
    """What `from onnxruntime.quantization import quantize` puts in the notebook's namespace."""
    raise TypeError(f"expected a model path, got {type(model_input).__name__}")


def dequantize_forgets_zero_point(q, scale, zero_point):
    return (np.asarray(q).astype(np.float32) * np.float32(scale)).astype(np.float32)


def dequantize_no_empty(q, scale, zero_point):
    if np.asarray(q).size == 0:
        raise ValueError("zero-size array to reduction operation maximum which has no identity")
    return dequantize_ok(q, scale, zero_point)


def choose_qparams_no_widening(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin, rmax = float(rmin), float(rmax)
    if symmetric:
        rmin, rmax = -max(abs(rmin), abs(rmax)), max(abs(rmin), abs(rmax))
    if rmax == rmin:
        return 1.0, 0
    scale = (rmax - rmin) / (qmax - qmin)
    return scale, int(round((qmin + qmax) / 2) if symmetric else round(qmin - rmin / scale))


def choose_qparams_divides_by_zero(rmin, rmax, dtype=np.uint8, symmetric=False):
    qmin, qmax = RANGES[dtype]
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if symmetric:
        rmin, rmax = -max(-rmin, rmax), max(-rmin, rmax)
    scale = (rmax - rmin) / (qmax - qmin)
    return scale, int(round((qmin + qmax) / 2) if symmetric else round(qmin - rmin / scale))


# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def rubric_and_tolerances(assignment07):
    return assignment07.rubric(), assignment07.tolerances()


def _group_parts(rubric) -> dict[tuple[str, str], dict]:
    out = {}
    for check in rubric["checks"]:
        if check["id"] in FUNCTION_CHECKS:
            for part in check["parts"]:
                m = re.fullmatch(rf"functions\.{check['id']}\.groups\.(\w+)\.agree_share", part["measure"])
                assert m, f"{check['id']} part {part['name']!r} does not measure one group: {part['measure']}"
                out[(check["id"], m.group(1))] = part
    return out


def _judged(probe: ProbeResult, rubric, tolerances) -> tuple[dict, dict]:
    functions = fn.measure_functions(CASES, probe)
    return functions, judge(rubric, tolerances, {"functions": functions})


def _failed_parts(grade) -> set[tuple[str, str]]:
    return {
        (c["id"], p["name"])
        for c in grade["checks"]
        if c["id"] in FUNCTION_CHECKS
        for p in c["parts"]
        if not p["passed"]
    }


GROUPS = sorted({(c.function, c.group) for c in CASES})


# ---------------------------------------------------------------- the scheme


def test_every_group_is_one_part_and_the_parts_add_up(rubric_and_tolerances):
    rubric, _ = rubric_and_tolerances
    parts = _group_parts(rubric)
    assert sorted(parts) == GROUPS, "each probe group needs exactly one part (and each part one group)"
    for check in rubric["checks"]:
        if check["id"] in FUNCTION_CHECKS:
            assert sum(p["points"] for p in check["parts"]) == check["points"]
            assert all(p["points"] >= 1 for p in check["parts"])


def test_the_honest_implementations_get_every_function_point(rubric_and_tolerances):
    functions, grade = _judged(run_probe(HONEST), *rubric_and_tolerances)
    assert _failed_parts(grade) == set()
    assert all(g["failure"] is None for f in functions.values() for g in f["groups"].values())


@pytest.mark.parametrize("function, group", GROUPS)
def test_one_wrong_kind_of_input_costs_that_kinds_share_only(rubric_and_tolerances, function, group):
    rubric, tolerances = rubric_and_tolerances
    wrong = {c.id for c in CASES if (c.function, c.group) == (function, group)}
    probe = run_probe(HONEST)
    for cid in wrong:
        probe.cases[cid] = CaseOutput("raised", error={"type": "ValueError", "message": "wrong kind", "traceback": ""})
    functions, grade = _judged(probe, rubric, tolerances)
    part = _group_parts(rubric)[(function, group)]
    assert _failed_parts(grade) == {(function, part["name"])}
    check = next(c for c in grade["checks"] if c["id"] == function)
    assert check["max_score"] - check["score"] == part["points"]
    failed = next(p for p in check["parts"] if not p["passed"])
    assert "raised ValueError (the call: " in failed["message"], failed["message"]


# ---------------------------------------------------------------- each bug: its parts, its words

BUGS = [
    # (function, implementation, the groups whose parts must fail, words the first failure shows)
    ("quantize", quantize_no_saturation, {"saturation", "zero_point_bounds"}, "elements differ, by"),
    ("quantize", quantize_saturates_then_adds_zero_point, {"saturation", "zero_point_bounds"}, "elements differ"),
    (
        "quantize",
        quantize_loop_zero_point_own_type,
        {"saturation", "zero_point_bounds"},
        "raised OverflowError (the call: x a float32 array of shape (6,), "
        "scale a numpy.float32 scalar, zero_point a numpy.uint8 scalar, dtype np.uint8)",
    ),
    (
        "quantize",
        quantize_python_scalar,
        {"scalar"},
        "returned dtype int64, expected int8 (the shape () is right) (the call: x a Python float",
    ),
    (
        "quantize",
        quantize_no_lists,
        {"list", "empty", "scalar"},
        "raised AttributeError",
    ),
    ("quantize", quantize_rounds_half_up, {"ties"}, "elements differ, by 1 step"),
    ("quantize", quantize_rounds_half_away_from_zero, {"ties"}, "elements differ, by 1 step"),
    (
        "dequantize",
        dequantize_forgets_zero_point,
        {"uint8", "zero_point_bounds", "scalar", "multi_dim", "random"},
        "by more than 100 steps",
    ),
    ("dequantize", dequantize_no_empty, {"empty"}, "raised ValueError (the call: q a uint8 array"),
    ("choose_qparams", choose_qparams_no_widening, {"positive_only", "negative_only"}, "scale: dtype"),
    (
        "choose_qparams",
        choose_qparams_divides_by_zero,
        {"degenerate"},
        "raised ZeroDivisionError",
    ),
]


@pytest.mark.parametrize("function, impl, groups, words", BUGS, ids=[b[1].__name__ for b in BUGS])
def test_each_bug_loses_exactly_the_parts_it_is_about(rubric_and_tolerances, function, impl, groups, words):
    rubric, tolerances = rubric_and_tolerances
    functions, grade = _judged(run_probe({**HONEST, function: impl}), rubric, tolerances)
    parts = _group_parts(rubric)
    assert _failed_parts(grade) == {(function, parts[(function, g)]["name"]) for g in groups}
    shown = [functions[function]["groups"][g]["failure"] for g in groups]
    assert any(words in s for s in shown), shown


def test_an_import_that_replaced_the_function_is_named(rubric_and_tolerances):
    origins = {
        "quantize": {
            "module": "onnxruntime.quantization.quantize",
            "qualname": "quantize",
            "params": ["model_input", "model_output", "quant_config"],
        }
    }
    functions, grade = _judged(run_probe({**HONEST, "quantize": ort_model_quantizer}, origins), *rubric_and_tolerances)
    q = functions["quantize"]
    assert q["replaced"] == (
        "quantize is not the function defined in the notebook: it is quantize(model_input, "
        "model_output, quant_config) from module onnxruntime.quantization.quantize (an import "
        "after your definition replaced it)"
    )
    check = next(c for c in grade["checks"] if c["id"] == "quantize")
    assert check["score"] == 0 and all(
        p["message"].count("is not the function defined in the notebook") == 1 for p in check["parts"]
    )
    assert "replaced it); raised TypeError (the call: " in check["parts"][0]["message"]
    # the notebook's own function (module __main__) is never called replaced
    own = {"quantize": {"module": "__main__", "qualname": "quantize", "params": ["x", "scale", "zero_point", "dtype"]}}
    assert fn.measure_functions(CASES, run_probe(HONEST, own))["quantize"]["replaced"] is None
    # nor a wrapper object around it (functools.partial, np.vectorize: a module, but no __qualname__)
    for wrapper in ({"module": "functools", "qualname": "None"}, {"module": "numpy", "qualname": "None"}):
        assert failure.replaced("quantize", wrapper) is None


# ---------------------------------------------------------------- blame the right part ──────────


def _quotients(case):
    x = np.asarray(fn._arg(case, 0, "x"), dtype=np.float32)
    return (
        x / np.float32(fn._arg(case, 1, "scale")),
        int(fn._arg(case, 2, "zero_point")),
        qrange(fn._arg(case, 3, "dtype", np.int8)),
    )


def test_tie_cases_never_saturate_and_saturation_cases_hold_no_tie():
    quantize = [c for c in CASES if c.function == "quantize"]
    for case in quantize:
        q, zp, (lo, hi) = _quotients(case)
        r = np.rint(q)
        saturates = bool(np.any((r < lo) | (r > hi) | (r + zp < lo) | (r + zp > hi)))  # before or after the zero point
        tie = bool(np.any(np.abs(q - np.floor(q) - 0.5) <= 1e-6))
        if case.group == "ties":
            assert tie and not saturates, case.id
        if case.group == "saturation":
            assert saturates and not tie, case.id
        if case.group in ("scalar", "list", "empty", "multi_dim", "int8", "uint8", "defaults"):
            assert not saturates and not tie, f"{case.id} tests a kind of input: no tie, no saturation"


# ---------------------------------------------------------------- nothing of the hidden input in the words

CANARY = 4321.8125


def _leaky(*args, **kwargs):
    """A hostile function: it puts what it received, in every form it can, in its exception."""
    values = [np.asarray(a) for a in args if not isinstance(a, type)]
    data = [v.tolist() for v in values]
    raw = b"".join(np.ascontiguousarray(v).tobytes() for v in values)
    import base64

    raise type("Leak" + str(CANARY).replace(".", "_"), (ValueError,), {})(
        f"{data!r} {raw.hex()} {base64.b64encode(raw).decode()} {CANARY} x1f{int(CANARY)} {CANARY:e}"
    )


def test_no_hidden_value_reaches_the_feedback(rubric_and_tolerances):
    cases = list(CASES)
    probe = run_probe({"quantize": _leaky, "dequantize": _leaky, "choose_qparams": _leaky})
    functions, grade = _judged(probe, *rubric_and_tolerances)
    # what the student's code controls: each failure as shown (the rubric's own words around it are fixed)
    texts = [
        p["message"].split("the first that does not: ", 1)[1]
        for c in grade["checks"]
        for p in c["parts"]
        if c["id"] in FUNCTION_CHECKS
    ]
    shown = "\n".join(texts)
    assert len(texts) == len(GROUPS)
    assert "raised an exception of a type defined in the notebook" in shown  # its type, no message
    for case in cases:
        for a in case.args:
            v = np.asarray(decode_value(a))
            if v.dtype.kind in "fiu" and v.size:
                for e in v.reshape(-1)[:50]:
                    for form in {repr(float(e)), f"{float(e):.9g}", str(e)}:
                        if len(form.strip("-")) > 2:  # 0.5, 1.0, 2 also appear as shapes and counts
                            assert form not in shown, f"{case.id}: {form} reached the feedback"
    for form in (str(CANARY), "4321", "8125", np.float32(CANARY).tobytes().hex()):
        assert form not in shown


@pytest.mark.parametrize(
    "text, shown",
    [
        ("Python integer 500 out of bounds for uint8", "Python integer <n> out of bounds for uint8"),
        ("could not broadcast (6,) with (3,)", "could not broadcast (<n>,) with (<n>,)"),
        ("x = [1000.8125, -2.5e+30, 0x1f]", "x = [<n>]"),
        ("float32 and int8 only", "float32 and int8 only"),
        ("a1000 b2.5 c 3", "<n> c <n>"),
        ("AADgPwAAEEBAAIBAAAAA/AADgPw+AAEE", "<…>"),
        ("deadbeefcafebabedeadbeefcafe0000", "<…>"),
        ("line one\n\n   line two", "line one line two"),
    ],
)
def test_mask_text(text, shown):
    assert mask(text, failure.MAX_MESSAGE) == shown


def test_mask_text_is_bounded():
    assert len(mask("word " * 500, failure.MAX_MESSAGE)) == failure.MAX_MESSAGE
