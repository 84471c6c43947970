"""The models are measured while the probe runs (``measure_artifacts``), from the working directory
frozen before the probe's first hidden input. Through the real jail and ONNX Runtime:

- that path really runs (grade.json's timings say how long it took beside the probe), and its
  ``models`` section is what measuring the restored workspace afterwards gives;
- a student's function that rewrites an artifact when the probe calls it changes nothing: the
  models measured, and the workspace the grader keeps, are the ones the notebook left.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat
import pytest

from autograder.measure_context import ArtifactContext
from autograder.pipeline import grade_notebook
from needs import needs

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"
# Timings vary from run to run; everything else in a model's entry is a fact of the file.
TIMED = ("latency",)

pytestmark = pytest.mark.slow

SWAP_ON_CALL = """
import shutil as _shutil
_quantize_as_written = quantize

def quantize(*args, **kwargs):
    # called by the grader's probe, after every cell ran: swap the static model for the fp32 one
    _shutil.copyfile("artifacts/fp32.onnx", "artifacts/int8_qdq.onnx")
    return _quantize_as_written(*args, **kwargs)
"""


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if not any(t in k for t in TIMED)}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
@needs("kernel")
def reference_graded(assignment07, tmp_path_factory):
    base = tmp_path_factory.mktemp("beside-probe")
    grade = grade_notebook(REFERENCE, assignment07, base / "out", workspace=base / "ws")
    return grade, base / "out", base / "ws"


def test_models_measured_beside_the_probe_are_those_measured_after_it(assignment07, reference_graded):
    grade, out, ws = reference_graded
    assert grade["score"] == 100
    assert grade["timings"].get("measure_artifacts_s", 0) > 0, (
        f"the models were not measured beside the probe: {grade['timings']}"
    )
    beside = json.loads((out / "measurements.json").read_text())["models"]
    after = assignment07.grading.measure_artifacts(ArtifactContext(assignment07, ws))["models"]
    assert _without_timings(beside) == _without_timings(after)


def test_an_artifact_rewritten_during_the_probe_is_not_what_gets_measured(assignment07, reference_graded, tmp_path):
    grade, out, ws = reference_graded
    nb = nbformat.read(REFERENCE, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(SWAP_ON_CALL))
    swapped = tmp_path / "swap_on_call.ipynb"
    nbformat.write(nb, swapped)
    g = grade_notebook(swapped, assignment07, tmp_path / "out", workspace=tmp_path / "ws")
    probe = json.loads((tmp_path / "out" / "execution.json").read_text())["probe"]
    assert probe == "completed"
    # the probe did call it (the kernel's copy was swapped), but the grader kept the file from before
    assert _sha(tmp_path / "ws" / "artifacts" / "int8_qdq.onnx") != _sha(tmp_path / "ws" / "artifacts" / "fp32.onnx")
    models = json.loads((tmp_path / "out" / "measurements.json").read_text())["models"]
    reference = json.loads((out / "measurements.json").read_text())["models"]
    assert models["int8_qdq"]["size_bytes"] == reference["int8_qdq"]["size_bytes"]
    assert _without_timings(models["int8_qdq"]) == _without_timings(reference["int8_qdq"])
    static = {c["id"]: c["score"] for c in g["checks"]}.get("static_model")
    assert static == {c["id"]: c["max_score"] for c in grade["checks"]}["static_model"]
