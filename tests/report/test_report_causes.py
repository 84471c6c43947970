"""One model of causes (root_cause.py), unit level: a function still the starter's placeholder, a
file missing while the cell that names it failed; said once, in notebook order, under "Fix this
first", with no hints on the parts they explain (real kernels: tests/integration/test_causes_real.py)."""

from __future__ import annotations

from autograder.judge import judge
from autograder.report.feedback import feedback_markdown
from autograder.report.summary_causes import root_causes
from autograder.sandbox.record import CellRecord, Outcome, build_record

SOURCES = [
    "import numpy as np",
    'def quantize(x):\n    """Encode."""\n    raise NotImplementedError\n\n\ndef dequantize(q):\n    ...\n',
    'clf.fit(X_trian)\nopen("artifacts/fp32.onnx", "wb").write(b"")',
    'quantize_dynamic("artifacts/fp32.onnx", "artifacts/int8.onnx")',
]
CELLS = [
    CellRecord(0, "ok", 0.1, number=1),
    CellRecord(2, "ok", 0.1, number=2),
    CellRecord(4, "error", 0.1, "NameError", "name 'X_trian' is not defined", "", number=3, line=1),
    CellRecord(6, "error", 0.1, "FileNotFoundError", "artifacts/fp32.onnx", "", number=4, line=1),
]
RUBRIC = {
    "assignment": "t",
    "checks": [
        {
            "id": "quantize",
            "title": "quantize agrees",
            "points": 4,
            "parts": [
                {
                    "name": "ties",
                    "measure": "functions.quantize.ties",
                    "op": ">=",
                    "value": 1.0,
                    "points": 2,
                    "hint": "round half to even",
                },
                {
                    "name": "range",
                    "measure": "functions.quantize.range",
                    "op": ">=",
                    "value": 1.0,
                    "points": 2,
                    "hint": "clip",
                },
            ],
        },
        {
            "id": "int8",
            "title": "The int8 model",
            "points": 3,
            "parts": [{"name": "size", "measure": "models.int8.ratio", "op": "<=", "value": 0.3, "points": 3}],
        },
        {
            "id": "fp32",
            "title": "The fp32 model",
            "points": 3,
            "parts": [{"name": "valid", "measure": "models.fp32.valid", "op": "is_true", "points": 3}],
        },
    ],
}


def _measurements() -> dict:
    record = build_record(
        Outcome("completed", None),
        CELLS,
        {"mode": "bwrap", "layers": [], "warnings": []},
        0.0,
        probe="completed",
        sources=SOURCES,
        names=["quantize", "dequantize"],
    )
    execution = {k: v for k, v in record.items() if k != "cells"}
    return {
        "execution": execution,
        "functions": {"quantize": {"ties": 0.0, "range": 0.0}},
        "models": {
            "fp32": {"error": "artifacts/fp32.onnx is missing: the notebook did not write it"},
            "int8": {"error": "artifacts/int8.onnx is missing: the notebook did not write it"},
        },
    }


def test_the_record_marks_placeholders_and_the_files_of_failed_cells():
    execution = _measurements()["execution"]
    assert execution["definitions"]["quantize"]["stub"] is True
    assert execution["definitions"]["dequantize"]["stub"] is True
    files = execution["files"]
    assert files["artifacts/fp32.onnx"]["code_cell"] == 3, "the first failed cell that names it"
    assert files["artifacts/int8.onnx"]["code_cell"] == 4 and files["artifacts/int8.onnx"]["status"] == "error"


def test_causes_are_said_once_in_notebook_order_and_explain_their_parts():
    measurements = _measurements()
    grade = judge(RUBRIC, {}, measurements)
    causes = {c["id"]: c.get("cause") for c in grade["checks"]}
    assert causes["quantize"]["kind"] == "unwritten"
    assert causes["fp32"]["kind"] == "file" and causes["fp32"]["code_cell"] == 3
    assert causes["int8"]["kind"] == "file" and causes["int8"]["code_cell"] == 4
    hints = [p["hint"] for c in grade["checks"] for p in c["parts"] if not p["passed"]]
    assert hints == ["", "", "", ""], "no hint for what a placeholder or a failed cell explains"
    text = feedback_markdown(grade, measurements)
    fix = text.split("## Fix this first\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(fix) == 2, fix
    assert fix[0].startswith("- quantize is not written yet: its body in code cell 2")
    assert fix[1].startswith("- artifacts/fp32.onnx is missing: code cell 3 (cell 5 of the notebook)")
    assert "NameError" in fix[1] and "so artifacts/int8.onnx" in fix[1], "the consequence folded into its cause"
    assert text.index("## Fix this first") < text.index("## Nothing to grade yet")  # nothing passed here


def test_the_summary_counts_a_cause_once_not_once_per_part():
    measurements = _measurements()
    grade = judge(RUBRIC, {}, measurements)
    causes = root_causes({"failures": []}, grade, {})
    labels = sorted(label for label, _ in causes.values())
    assert labels == [
        "artifacts/fp32.onnx missing: the cell that names it failed",
        "artifacts/int8.onnx missing: the cell that names it failed",
        "quantize: still the starter's stub, not written yet",
    ], labels
