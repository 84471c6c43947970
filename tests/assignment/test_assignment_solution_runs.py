"""The reference solution really runs: one execution with nbclient in an empty folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "reference" / "07-quantization" / "solution.ipynb"
RESULT_KEYS = ["accuracy", "edge_max_rel_drift", "latency_ms", "max_rel_drift", "size_bytes"]


def _outputs_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.append(str(o.get("data", {}).get("text/plain", "")))
    return "".join(parts)


@pytest.mark.kernel
@pytest.mark.slow
def test_solution_executes_writes_artifacts_and_passes_its_own_self_checks(tmp_path):
    from nbclient import NotebookClient

    nb = nbformat.read(SOLUTION, as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell("import json\nwith open('results_dump.json', 'w') as f:\n    json.dump(RESULTS, f)")
    )
    # no timing asserted here (the machine may be busy): bench/ measures how long the reference takes
    NotebookClient(
        nb, timeout=600, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [
        (i, o.ename, o.evalue)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors, f"the solution raised: {errors}"
    for name in ("fp32", "int8_dynamic", "int8_qdq"):
        assert (tmp_path / "artifacts" / f"{name}.onnx").is_file(), f"artifacts/{name}.onnx was not written"
    results = json.loads((tmp_path / "results_dump.json").read_text())
    assert sorted(results) == ["fp32", "int8_dynamic", "int8_qdq"]
    for name, entry in results.items():
        assert sorted(entry) == RESULT_KEYS, name
        assert entry["size_bytes"] == os.path.getsize(tmp_path / "artifacts" / f"{name}.onnx")
    assert results["int8_dynamic"]["size_bytes"] < results["fp32"]["size_bytes"] / 3
    checks = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("grader.check(")]
    assert len(checks) == 6
    for c in checks:
        assert "All test cases passed" in _outputs_text(c), f"{c.source}: {_outputs_text(c)[:500]}"


def test_setup_cell_does_nothing_when_everything_is_installed(tmp_path):
    nb = nbformat.read(SOLUTION, as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert "importlib.util.find_spec" in setup.source and "pip" in setup.source
    proc = subprocess.run(
        [sys.executable, "-c", setup.source + "\nprint('missing:', _missing)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "missing: []", "the grading image has every package: nothing may be installed"
