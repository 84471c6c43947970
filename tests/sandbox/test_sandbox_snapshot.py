"""The pre-probe snapshot: what the grader reads back is the working directory as it was before
the first hidden input, plus only the files the grader itself collected."""

from __future__ import annotations

import json
import os

import numpy as np

from autograder.probe_format import OUTPUTS_FILE, REPORT_FILE, REPORTED_FILE
from autograder.sandbox import snapshot

CAP = 64 << 20


def _tree(ws):
    ws.mkdir()
    (ws / "artifacts").mkdir()
    (ws / "artifacts" / "fp32.onnx").write_bytes(b"model")
    (ws / REPORTED_FILE).write_text('{"fp32": {"accuracy": 0.9}}')
    os.symlink("/etc/passwd", ws / "link")
    os.mkfifo(ws / "fifo")


def test_restore_brings_back_the_pre_probe_tree_and_only_the_graders_probe_files(tmp_path):
    ws = tmp_path / "ws"
    _tree(ws)
    snap = snapshot.take(ws, tmp_path / "snap", CAP)
    assert json.loads(snap.reported) == {"fp32": {"accuracy": 0.9}}
    # during the probe the notebook rewrites everything
    (ws / "artifacts" / "fp32.onnx").write_bytes(b"hidden inputs")
    (ws / REPORTED_FILE).write_text('{"leak": "hidden inputs"}')
    (ws / "deadbeef").write_text("")
    os.unlink(ws / "link")
    os.symlink("/etc/shadow", ws / OUTPUTS_FILE)  # planted where the grader will write
    snapshot.restore(snap, ws, ({"cases": {}, "functions": {"f": "defined"}}, {"c0": np.arange(3)}), CAP)
    assert sorted(p.name for p in ws.iterdir()) == sorted(
        ["artifacts", REPORTED_FILE, "link", "fifo", OUTPUTS_FILE, REPORT_FILE]
    )
    assert (ws / "artifacts" / "fp32.onnx").read_bytes() == b"model"
    assert json.loads((ws / REPORTED_FILE).read_text()) == {"fp32": {"accuracy": 0.9}}
    assert os.readlink(ws / "link") == "/etc/passwd" and not (ws / OUTPUTS_FILE).is_symlink()
    with np.load(ws / OUTPUTS_FILE) as z:
        assert z["c0"].tolist() == [0, 1, 2]
    assert json.loads((ws / REPORT_FILE).read_text())["functions"] == {"f": "defined"}


def test_without_a_completed_probe_only_the_tree_and_results_come_back(tmp_path):
    ws = tmp_path / "ws"
    _tree(ws)
    snap = snapshot.take(ws, tmp_path / "snap", CAP)
    (ws / OUTPUTS_FILE).write_bytes(b"forged")
    snapshot.restore(snap, ws, None, CAP)
    assert not (ws / OUTPUTS_FILE).exists() and not (ws / REPORT_FILE).exists()
    assert (ws / REPORTED_FILE).is_file()


def test_a_results_file_that_is_not_a_file_is_a_reason(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink("/etc/passwd", ws / REPORTED_FILE)
    snap = snapshot.take(ws, tmp_path / "snap", CAP)
    assert "__probe_error__" in json.loads(snap.reported)
