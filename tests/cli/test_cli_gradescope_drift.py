"""``autograder gradescope run`` tells the instructor (its stdout, hidden from students) about
version drift recorded in the results it wrote."""

from __future__ import annotations

from typer.testing import CliRunner

from autograder.cli import app


def test_gradescope_run_prints_version_drift_to_its_stdout(tmp_path, monkeypatch):
    import autograder.gradescope.run as gs_run

    drift = "onnxruntime 1.31.0 grades here, but the tolerances were calibrated with onnxruntime 1.32.0"
    monkeypatch.setattr(
        gs_run, "run", lambda root, assignment: {"score": 90.0, "extra_data": {"version_drift": [drift]}}
    )
    result = CliRunner().invoke(app, ["gradescope", "run", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"[autograder] warning: {drift}" in result.stdout and "score 90" in result.stdout
    monkeypatch.setattr(gs_run, "run", lambda root, assignment: {"score": 90.0, "extra_data": {"version_drift": []}})
    assert "warning" not in CliRunner().invoke(app, ["gradescope", "run", "--root", str(tmp_path)]).stdout
