"""Models whose run-time errors carry the grader's hidden rows back to the student.

Round 3 of the red team: a model whose ``Gather`` index is ``1e6·x + 5e7`` fails inside ONNX
Runtime with ``idx=50318600 must be within the inclusive range``, and the measuring child passed
that message on (capped, not masked): hidden ``X_test[0]`` to 1e-6 in results.json, feedback.md
and feedback.html. Now the child turns a failed run into a fixed sentence
(``autograder/measure/onnx_errors.py``) and masks every other text it writes after the grader's
rows were fed (``autograder/student_text.mask``), so no lesson can echo a value.

The models here make each kind of run-time text a hidden row can reach: a ``Gather`` index (the
hole), a ``Reshape`` whose shape is computed from the row, an output whose shape is computed from
the row (the interface's own message quotes it), and a ``Range`` too long to allocate.
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from advkit import require_mode, student_visible
from autograder.measure.onnx_errors import PREFIX

pytestmark = pytest.mark.slow

OPSET = [helper.make_opsetid("", 17)]
SCALE, OFFSET = 1e6, 5e7  # index = 1e6·x + 5e7: a hidden x to six decimals


def _model(nodes, initializers=()) -> bytes:
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])
    label = helper.make_tensor_value_info("label", TensorProto.INT64, ["N"])
    probs = helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])
    graph = helper.make_graph(nodes, "leaky", [x], [label, probs], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    return model.SerializeToString()


def _constants(column: int) -> list:
    return [
        numpy_helper.from_array(np.array([column], np.int64), "col"),
        numpy_helper.from_array(np.array(SCALE, np.float32), "scale"),
        numpy_helper.from_array(np.array(OFFSET, np.float32), "offset"),
        numpy_helper.from_array(np.full((2, 2), 0.5, np.float32), "table"),
    ]


def _code_of_x(column: int) -> list:
    """``code = int64(1e6·X[:, column] + 5e7)``, shape [N] (a flatten keeps it 1-D)."""
    return [
        helper.make_node("Gather", ["X", "col"], ["xc"], axis=1),
        helper.make_node("Flatten", ["xc"], ["xc2"], axis=0),
        helper.make_node("Squeeze", ["xc2"], ["xf"]),
        helper.make_node("Mul", ["xf", "scale"], ["xs"]),
        helper.make_node("Add", ["xs", "offset"], ["xo"]),
        helper.make_node("Cast", ["xo"], ["code"], to=TensorProto.INT64),
    ]


def _head(source: str) -> list:
    return [
        helper.make_node("Softmax", [source], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0),
    ]


def gather_index(column: int = 0) -> bytes:
    """The hole: ``table[1e6·x + 5e7]`` (a 2-row table), out of range with the row's value in it."""
    nodes = (
        _code_of_x(column)
        + [helper.make_node("Gather", ["table", "code"], ["logits"], axis=0, name="node named 12345 to be echoed")]
        + _head("logits")
    )
    return _model(nodes, _constants(column))


def reshape_from_x(column: int = 1) -> bytes:
    """``Reshape(X, [code, -1])``: the error names the requested shape, i.e. the row's value."""
    nodes = (
        _code_of_x(column)
        + [
            helper.make_node("Slice", ["code", "zero", "one"], ["first"]),
            helper.make_node("Concat", ["first", "minus_one"], ["shape"], axis=0),
            helper.make_node("Reshape", ["X", "shape"], ["reshaped"]),
            helper.make_node("Reshape", ["reshaped", "n_by_two"], ["logits"]),
        ]
        + _head("logits")
    )
    extra = [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
        numpy_helper.from_array(np.array([-1, 2], np.int64), "n_by_two"),
    ]
    return _model(nodes, _constants(column) + extra)


def output_shape_from_x(column: int = 0) -> bytes:
    """A valid run whose ``probabilities`` is [N, k] with k = 1e6·x[0] + 5e7 mod small: the
    interface's "output probabilities is float32 of shape (N, k)" would quote it."""
    nodes = _code_of_x(column) + [
        helper.make_node("Slice", ["code", "zero", "one"], ["first"]),
        helper.make_node("Mod", ["first", "modulus"], ["k"]),
        helper.make_node("Add", ["k", "three"], ["k3"]),
        helper.make_node("Shape", ["X"], ["xshape"]),
        helper.make_node("Slice", ["xshape", "zero", "one"], ["n"]),
        helper.make_node("Concat", ["n", "k3"], ["oshape"], axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["oshape"],
            ["probabilities"],
            value=helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5]),
        ),
        helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0),
    ]
    extra = [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([997], np.int64), "modulus"),
        numpy_helper.from_array(np.array([3], np.int64), "three"),
    ]
    return _model(nodes, _constants(column) + extra)


def hidden_renderings(rows: np.ndarray) -> dict[str, str]:
    """How the first rows of a hidden set could appear in a message (what ONNX Runtime prints and more)."""
    out = {}
    for r, row in enumerate(rows[:3]):
        for c, v in enumerate(row):
            f32 = np.float32(v)
            code = int(np.int64(f32 * np.float32(SCALE) + np.float32(OFFSET)))
            out[f"row {r} column {c} as the index"] = str(code)
            out[f"row {r} column {c} as the index's last six digits"] = str(code)[-6:]
            out[f"row {r} column {c} as the reshape's shape"] = f"{{{code},"
            out[f"row {r} column {c} mod 997"] = f"shape ({len(rows)}, {code % 997 + 3})"
            for fmt in ("{:.6f}", "{:.4f}", "{!r}"):
                text = fmt.format(float(f32)).lstrip("-")
                if len(text.strip("0.")) >= 4:
                    out[f"row {r} column {c} as {fmt}"] = text
    return out


# ── the measuring child itself (real ONNX Runtime, the measuring jail where there is one) ─────


@pytest.fixture(scope="module")
def hidden(assignment07):
    return assignment07.grading.data.hidden_split(assignment07)


@pytest.mark.parametrize(
    "build, words",
    [
        (gather_index, "a `Gather` index out of range"),
        (reshape_from_x, "`Reshape`"),
    ],
)
def test_a_failed_run_is_a_fixed_sentence_without_values(assignment07, hidden, build, words):
    from autograder.measure.onnx_load import run_model_worker

    interface = assignment07.grading.models.INTERFACE
    run = run_model_worker(
        build(), inputs={"hidden_test": hidden.X_test, "hidden_edge": hidden.X_edge}, interface=interface, facts=()
    )
    assert run.ok, run.reason
    error = run.result["run_error"]
    assert error.startswith(PREFIX) and words in error, error
    assert not re.search(r"\d", error), f"a number in {error!r}"
    text = json.dumps(run.result)
    leaked = [what for what, needle in hidden_renderings(hidden.X_test).items() if needle in text]
    assert not leaked, f"hidden rows in the worker's result: {leaked}: {error}"
    assert "12345" not in text, "the node's name was echoed"


def test_an_output_shape_made_from_a_row_is_masked(assignment07, hidden):
    from autograder.measure.onnx_load import run_model_worker

    interface = assignment07.grading.models.INTERFACE
    run = run_model_worker(output_shape_from_x(), inputs={"hidden_test": hidden.X_test}, interface=interface, facts=())
    assert run.ok, run.reason
    error = run.result["run_error"]
    assert "output probabilities" in error and "<n>" in error, error
    assert not re.search(r"\d", re.sub(r"float32|int64", "", error)), error
    leaked = [what for what, needle in hidden_renderings(hidden.X_test).items() if needle in json.dumps(run.result)]
    assert not leaked, leaked


# ── the whole pipeline: a notebook saves these models as its artifacts ────────────────────────


def _write_models_cell(models: dict[str, bytes]) -> str:
    blobs = {f"artifacts/{name}.onnx": base64.b64encode(data).decode() for name, data in models.items()}
    return f"""\
import base64, os
os.makedirs("artifacts", exist_ok=True)
for _p, _b in {blobs!r}.items():
    with open(_p, "wb") as _f:
        _f.write(base64.b64decode(_b))
"""


def test_hidden_rows_never_reach_the_student_through_a_models_errors(
    grade_cells, jail_check, jail_mode, assignment07, hidden
):
    models = {"fp32": gather_index(0), "int8_dynamic": reshape_from_x(1), "int8_qdq": output_shape_from_x(0)}
    g = grade_cells([_write_models_cell(models)], name=f"model-errors-{jail_mode}")
    require_mode(g, jail_mode)
    jail_check(g)
    measured = g.measurements.get("models", {})
    fp32 = json.dumps(measured.get("fp32", {}))
    assert f"{PREFIX}: a `Gather` index out of range" in fp32, fp32[:600]
    visible = student_visible(g)
    assert PREFIX in visible, "the student is told why the model could not be measured"
    renderings = {**hidden_renderings(hidden.X_test), **hidden_renderings(hidden.X_edge)}
    for where, text in (
        ("results.json/feedback.md/feedback.html", visible),
        ("measurements.json", json.dumps(g.measurements)),
    ):
        leaked = [what for what, needle in renderings.items() if needle in text]
        assert not leaked, f"hidden rows reached {where}: {leaked}"
        assert "idx=" not in text and "inclusive range" not in text, f"ONNX Runtime's message reached {where}"
