"""A local regrade of a Gradescope export equals Gradescope's grade, for a submission folder that
holds the assignment's notebook and a second one: the shipped ``run_autograder`` (from the real
zip) and ``batch`` of the export zip both grade ``07-quantization.ipynb`` with the real jail,
kernel and ONNX Runtime, and give the same score. Before, ``batch`` gave a zero ("the submission
holds 2 notebooks") where Gradescope gave 92/100."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gradescope_testlib import ASSIGNMENT, unpack_root

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / ASSIGNMENT / "examples"
GRADED = EXAMPLES / "quantize_no_saturation.ipynb"  # loses points at one check: a score between 0 and 100
SECOND = EXAMPLES / "untouched.ipynb"


@pytest.mark.kernel
def test_an_export_with_a_second_notebook_grades_as_gradescope_run_grades_it(
    gradescope_zip, world_readable_tmp, tmp_path, results_validator
):
    from autograder.assignment import load_assignment
    from autograder.batch import run_batch

    root = unpack_root(gradescope_zip, world_readable_tmp)
    for d in (root, root / "submission", root / "results"):
        d.chmod(0o755)
    (root / "submission" / f"{ASSIGNMENT}.ipynb").write_bytes(GRADED.read_bytes())
    (root / "submission" / "my_work.ipynb").write_bytes(SECOND.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_ROOT", "AUTOGRADER_JAIL")}
    env.update(GRADESCOPE_ROOT=str(root), AUTOGRADER_VENV=sys.prefix)
    done = subprocess.run(
        [str(root / "source" / "run_autograder")], env=env, cwd=root, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    gradescope = json.loads((root / "results" / "results.json").read_text())
    results_validator(gradescope)
    assert gradescope["output"].startswith(
        f"Your submission has 2 notebooks; graded {ASSIGNMENT}.ipynb, ignored my_work.ipynb."
    ), gradescope["output"][:300]
    assert 0 < gradescope["score"] < 100, gradescope["score"]

    export = tmp_path / "export.zip"
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr(
            "assignment_export/submission_metadata.yml",
            "submission_1:\n  :submitters:\n  - :name: Ada\n    :sid: '1'\n",
        )
        for path in sorted((root / "submission").iterdir()):
            zf.write(path, f"assignment_export/submission_1/{path.name}")
    summary = run_batch(export, tmp_path / "class", assignment=load_assignment(ASSIGNMENT), jobs=1, progress=False)
    (row,) = summary.rows
    assert row["status"] == "ok" and row["origin"].endswith(f"submission_1/{ASSIGNMENT}.ipynb"), row
    assert row["score"] == gradescope["score"], (row["score"], gradescope["score"])
    assert any("graded 07-quantization.ipynb, ignored my_work.ipynb" in w for w in summary.warnings), summary.warnings
