"""The leak budget's reproducers (SECURITY.md, "The leak budget"): a notebook that steers what the
grader shows by its hidden data must not read that data back, in any rendering.

Round 4 of the red team found three channels left after masking:

- lesson 07: a model whose probabilities are outside [0, 1] on the hidden rows had their range
  printed to four significant digits (``[-2.25, 2.245]``): the identity model below shows the
  hidden test set's extremes there, a model that scales row 0 shows that row;
- lesson 05: ``count_ops`` receives the hidden model files; one submission spelled all of them out
  in its exception text (op types in order, the graph's name, the bytes in base64) and kept 75/100;
- lesson 07: a probed function raising with its input spelled in words (``one two dot five``)
  passed the mask, which keeps ASCII words.

Now a probed call is reported by its exception's type from a closed list only
(``sandbox/probe_run.py``), probability problems are fixed sentences, and a number measured on
hidden data is shown only as its relation to the threshold (``autograder/leak_budget.py``).
Every test reads the hidden values as the grader made them (the hidden split; the probe's cases
under this submission's key) and looks for them in results.json, feedback.md and feedback.html.
"""

from __future__ import annotations

import base64
import copy
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from advkit import ROOT, require_mode, student_visible
from autograder import hidden_secret
from autograder.assignment import Assignment, load_assignment
from autograder.leak_budget import OTHER_EXCEPTION
from autograder.measure.probabilities import OUT_OF_RANGE

pytestmark = pytest.mark.slow

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def spelled(value: float, digits: int = 6) -> str:
    """``-1.25`` → ``minus one dot two five``: a number in ASCII words, which masking keeps."""
    text = f"{float(value):.{digits}g}"
    words = {"-": "minus", ".": "dot", "e": "exp", "+": "plus"}
    return " ".join(DIGIT_WORDS[int(ch)] if ch.isdigit() else words.get(ch, ch) for ch in text)


def renderings(values: np.ndarray) -> dict[str, str]:
    """How a hidden number could appear in text: decimals to 3-6 digits, and spelled in words."""
    out = {}
    for v in np.asarray(values, dtype=np.float64).reshape(-1):
        for fmt in ("{:.4g}", "{:.3f}", "{:.4f}", "{:.6g}"):
            text = fmt.format(v).lstrip("-")
            if len(text.strip("0.")) >= 3:
                out[f"{v!r} as {fmt}"] = text
        out[f"{v!r} in words"] = spelled(v, 4)
    return out


def _with_limits(base: Assignment, **limits) -> Assignment:
    config = copy.deepcopy(base.config)
    config["execution"] = {**config.get("execution", {}), **limits}
    return Assignment(id=base.id, folder=base.folder, reference_folder=base.reference_folder, config=config)


def _cases_of(g, assignment) -> list:
    """The probe cases this grade drew (they are per submission: its key is in measurements.json)."""
    with hidden_secret.submission(g.measurements["assignment"]["submission_key"]):
        return list(assignment.grading.probe_cases())


def _model_cell(models: dict[str, bytes]) -> str:
    blobs = {f"artifacts/{name}.onnx": base64.b64encode(data).decode() for name, data in models.items()}
    return f"""\
import base64, os
os.makedirs("artifacts", exist_ok=True)
for _p, _b in {blobs!r}.items():
    with open(_p, "wb") as _f:
        _f.write(base64.b64decode(_b))
"""


# ── lesson 07: a model that maps the hidden rows into the range the grader shows ─────────────


def _io(label_type=TensorProto.INT64):
    return (
        helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2]),
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2]),
    )


def row_in_range(scale: float, label_int32: bool = False) -> bytes:
    """``probabilities = X · (1 + scale·[row is 0])``: the outputs are the hidden rows themselves
    (the range is the hidden set's extremes), row 0 scaled past the others (the range is row 0).
    ``label_int32``: the interface fails too, so its message lists the problems on the hidden rows."""
    x, label, probs = _io(TensorProto.INT32 if label_int32 else TensorProto.INT64)
    nodes = [
        helper.make_node("Shape", ["X"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
        helper.make_node("Squeeze", ["n"], ["n_s"]),
        helper.make_node("Range", ["zero_s", "n_s", "one_s"], ["rows"]),
        helper.make_node("Equal", ["rows", "zero_s"], ["is_first"]),
        helper.make_node("Cast", ["is_first"], ["first"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["first", "scale"], ["extra"]),
        helper.make_node("Add", ["extra", "one_f"], ["factor"]),
        helper.make_node("Unsqueeze", ["factor", "one"], ["column"]),
        helper.make_node("Mul", ["X", "column"], ["probabilities"]),
        helper.make_node("ArgMax", ["probabilities"], ["label64"], axis=1, keepdims=0),
        helper.make_node("Cast", ["label64"], ["label"], to=TensorProto.INT32 if label_int32 else TensorProto.INT64),
    ]
    consts = [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array(0, np.int64), "zero_s"),
        numpy_helper.from_array(np.array(1, np.int64), "one_s"),
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one_f"),
    ]
    graph = helper.make_graph(nodes, "row_in_range", [x], [label, probs], initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_a_model_that_maps_hidden_rows_into_the_shown_range_reads_a_fixed_sentence(
    grade_cells, jail_check, jail_mode, assignment07
):
    hidden = assignment07.grading.data.hidden_split(assignment07)
    models = {"fp32": row_in_range(0.0), "int8_dynamic": row_in_range(1000.0)}
    g = grade_cells([_model_cell(models)], name=f"leak-range-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g, gains_allowed=("fp32_model", "dynamic_model", "execution"))  # valid models, saved honestly
    visible = student_visible(g)
    fp32 = g.measurements["models"]["fp32"]
    assert fp32["problems"] == [OUT_OF_RANGE], fp32  # the fixed sentence, wherever a message quotes it
    needles = {
        "the accuracy on the hidden rows": f"{fp32['accuracy'] * 100:.1f}%",
        **renderings([hidden.X_test.min(), hidden.X_test.max()]),
        **renderings(hidden.X_test[0] * 1001.0),
        **renderings(hidden.X_test[0]),
    }
    leaked = [what for what, needle in needles.items() if needle in visible]
    assert not leaked, f"hidden rows reached results.json/feedback: {leaked}"
    assert "range over" not in visible


# ── lesson 05: count_ops spells the hidden model files out in its exception ───────────────────

SPELL_COUNT_OPS = r"""
import base64, onnx

class _Spelled(ValueError):
    pass

def count_ops(path):
    data = open(path, "rb").read()
    model = onnx.load_from_string(data)
    ops = " ".join(n.op_type for n in model.graph.node)
    name = "Ops_" + "_".join(n.op_type for n in model.graph.node)[:200]
    kind = type(name, (ValueError,), {})
    raise kind(f"{ops} graph {model.graph.name} {base64.b64encode(data).decode()}")
"""


def test_count_ops_spelling_the_hidden_files_out_shows_only_the_exception_type(grade_cells, jail_mode):
    lesson = _with_limits(load_assignment("05-graph-optimization", root=ROOT), cell_timeout_s=60)
    g = grade_cells([SPELL_COUNT_OPS], name=f"leak-count-ops-{jail_mode}", assignment=lesson)
    require_mode(g, jail_mode)
    visible = student_visible(g)
    cases = [c for c in _cases_of(g, lesson) if c.function == "count_ops"]  # not the public timing cases
    assert cases and g.measurements["functions"]["count_ops"]["raised"] == len(cases)
    assert OTHER_EXCEPTION in visible, "the student reads the exception's type, as the closed list allows"
    needles = {}
    for case in cases:
        data = case.raw(0)
        model = onnx.load_from_string(data)
        ops = [n.op_type for n in model.graph.node]
        needles[f"{case.id}: op types in order"] = " ".join(ops[:4])
        needles[f"{case.id}: op types as a class name"] = "_".join(ops[:4])
        needles[f"{case.id}: graph name"] = model.graph.name
        needles[f"{case.id}: bytes (base64)"] = base64.b64encode(data).decode()[8:40]
    leaked = [what for what, needle in needles.items() if needle in visible]
    assert not leaked, f"the hidden model files reached results.json/feedback: {leaked}"


# ── lesson 07: a probed function raises with its input spelled in words ───────────────────────

SPELL_QUANTIZE = r"""
import numpy as np

_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

def _spell(v):
    text = f"{float(v):.4g}"
    words = {"-": "minus", ".": "dot", "e": "exp", "+": "plus"}
    return " ".join(_WORDS[int(c)] if c.isdigit() else words.get(c, c) for c in text)

def _raise(values):
    flat = np.asarray(values, dtype=np.float64).reshape(-1)[:6]
    said = " and ".join(_spell(v) for v in flat)
    kind = type("Spelled" + "".join(w.capitalize() for w in _spell(flat[0]).split()) if flat.size else "Empty",
                (ValueError,), {})
    raise kind(said)

def quantize(x, scale, zero_point, dtype=np.uint8):
    _raise(x)

def dequantize(q, scale, zero_point):
    _raise(q)

def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    _raise([rmin, rmax])
"""


def test_a_probed_function_spelling_its_input_in_words_shows_only_the_exception_type(
    grade_cells, jail_check, jail_mode, assignment07
):
    g = grade_cells([SPELL_QUANTIZE], name=f"leak-words-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    visible = student_visible(g)
    cases = _cases_of(g, assignment07)
    assert g.measurements["functions"]["quantize"]["raised"] > 0
    assert OTHER_EXCEPTION in visible
    needles = {}
    for case in cases:
        for a in case.args:
            value = getattr(a, "value", a)
            arr = np.asarray(value) if not isinstance(value, str) else np.zeros(0)
            if arr.dtype.kind in "fiu" and arr.size:
                first = float(arr.reshape(-1)[0])
                if len(f"{first:.4g}".strip("-0.")) >= 2:  # 0, 1, 0.5 are words of any sentence
                    needles[f"{case.id}: {first!r} in words"] = spelled(first, 4)
    assert needles, "the probe's cases hold numbers to look for"
    leaked = [what for what, needle in needles.items() if needle in visible]
    assert not leaked, f"probe inputs spelled in words reached results.json/feedback: {leaked[:5]}"
    assert not re.search(r"Spelled[A-Z]", visible), "the notebook's own exception class name was shown"
