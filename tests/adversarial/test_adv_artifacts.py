"""Hostile artifacts: the files the grader reads after the kernel is gone are symlinks, FIFOs,
sockets, folders, sparse giants, or ONNX models built to escape, crash, hang or exhaust the
measuring child.

The grader opens artifacts with ``O_NOFOLLOW | O_NONBLOCK`` under the workspace, checks for a
regular file and a size cap, and parses and runs models only in a limited child process: each
attack must end as "invalid model: <reason>", quickly, with no point for that model.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import psutil
import pytest

import onnx_models
from advkit import FILE_SECRET, ROOT

pytestmark = pytest.mark.slow

MODELS = ("fp32", "int8_dynamic", "int8_qdq")
MODEL_CHECKS = ("fp32_model", "dynamic_model", "static_model", "size")


def _model_text(g, name: str) -> str:
    return json.dumps(g.measurements.get("models", {}).get(name, {}))


def _assert_no_model_credit(g, names=MODELS) -> dict[str, str]:
    """Every named model failed to load, each with a reason; returns the reasons."""
    models = g.measurements.get("models", {})
    reasons = {}
    for name in names:
        m = models.get(name, {})
        ok = isinstance(m, dict) and m.get("valid") is True
        assert not ok, f"{name} was measured as a valid model: {json.dumps(m)[:400]}"
        reasons[name] = _model_text(g, name)
        assert len(reasons[name]) > 20, f"{name}: no reason given: {reasons[name]}"
    for cid in MODEL_CHECKS:
        assert g.score(cid) == 0, f"{cid} scored {g.score(cid)} from hostile artifacts"
    return reasons


# ----------------------------------------------------------------------------- special files
SPECIAL_FILES = f"""
import os, socket
os.makedirs("artifacts", exist_ok=True)
made = {{}}
def attempt(name, fn):
    try:
        fn()
        made[name] = "made"
    except BaseException as e:
        made[name] = "ERR " + type(e).__name__
attempt("fp32", lambda: os.symlink("/etc/passwd", "artifacts/fp32.onnx"))
attempt("int8_dynamic", lambda: os.symlink({str(ROOT / "reference" / "07-quantization" / "tolerances.toml")!r},
                                           "artifacts/int8_dynamic.onnx"))
attempt("int8_qdq", lambda: os.mkfifo("artifacts/int8_qdq.onnx"))
_record("special", made)
"""

SPECIAL_FILES_2 = """
import os, socket
made = {}
def attempt(name, fn):
    try:
        fn()
        made[name] = "made"
    except BaseException as e:
        made[name] = "ERR " + type(e).__name__ + ": " + str(e)[:60]
os.makedirs("artifacts", exist_ok=True)
attempt("fp32", lambda: os.mkdir("artifacts/fp32.onnx"))
attempt("int8_dynamic", lambda: socket.socket(socket.AF_UNIX).bind("artifacts/int8_dynamic.onnx"))
def sparse_giant():
    with open("artifacts/int8_qdq.onnx", "wb") as f:
        f.truncate(1 << 30)
attempt("int8_qdq_1GB", sparse_giant)
if made["int8_qdq_1GB"] != "made":   # RLIMIT_FSIZE stopped it: the biggest allowed sparse file instead
    attempt("int8_qdq_cap", lambda: open("artifacts/int8_qdq.onnx", "wb").truncate((64 << 20) - 1))
_record("special", made)
"""

SPECIAL_DIR = f"""
import os
made = {{}}
for name, target in (("artifacts", {str(ROOT / "reference" / "07-quantization")!r}),):
    try:
        os.symlink(target, name)
        made[name] = "made"
    except BaseException as e:
        made[name] = "ERR " + type(e).__name__
try:
    os.link("/etc/passwd", "hardlink_passwd")
    made["hardlink"] = "made"
except BaseException as e:
    made["hardlink"] = "ERR " + type(e).__name__
_record("special", made)
"""


@pytest.mark.parametrize("variant", ["symlinks_and_fifo", "dir_socket_sparse", "symlinked_folder"])
def test_special_files_as_artifacts_are_refused_without_blocking(grade_cells, jail_check, variant):
    source = {
        "symlinks_and_fifo": SPECIAL_FILES,
        "dir_socket_sparse": SPECIAL_FILES_2,
        "symlinked_folder": SPECIAL_DIR,
    }[variant]
    g = grade_cells([source], name=f"special-{variant}")
    jail_check(g)
    made = g.record("special")
    assert any(v == "made" for v in made.values()), f"the notebook could not plant anything: {made}"
    reasons = _assert_no_model_credit(g)
    text = " ".join(reasons.values())
    assert "root:x:" not in text and "root:" not in g.student_text(), "the content of /etc/passwd leaked"
    if variant == "symlinks_and_fifo":
        assert "symlink" in reasons["fp32"] and "symlink" in reasons["int8_dynamic"], reasons
        assert "regular file" in reasons["int8_qdq"] or "FIFO" in reasons["int8_qdq"], reasons["int8_qdq"]
    if variant == "symlinked_folder":
        assert all("symlink" in r or "folder" in r for r in reasons.values()), reasons


# ----------------------------------------------------------------------------- hostile ONNX models
def _write_models_cell(models: dict[str, bytes], extra: dict[str, bytes] | None = None) -> str:
    blobs = {f"artifacts/{name}.onnx": base64.b64encode(data).decode() for name, data in models.items()}
    blobs.update({f"artifacts/{name}": base64.b64encode(data).decode() for name, data in (extra or {}).items()})
    return f"""\
import base64, os
os.makedirs("artifacts", exist_ok=True)
for _p, _b in {blobs!r}.items():
    with open(_p, "wb") as _f:
        _f.write(base64.b64decode(_b))
"""


def _hostile_sets(canary_dir) -> dict[str, tuple[dict[str, bytes], dict[str, bytes], dict[str, tuple[str, ...]]]]:
    """name → (models by artifact, extra files, expected words in each model's reason)."""
    return {
        "external_data": (
            {
                "fp32": onnx_models.external_data("../../../../../../etc/passwd"),
                "int8_dynamic": onnx_models.external_data(str(canary_dir / "secret.txt")),
                "int8_qdq": onnx_models.external_data("weights.bin"),
            },
            {"weights.bin": np.ones(4, np.float32).tobytes()},
            dict.fromkeys(MODELS, ("external",)),
        ),
        "domain_bomb_depth": (
            {
                "fp32": onnx_models.custom_domain(),
                "int8_dynamic": onnx_models.constant_of_shape_bomb(),
                "int8_qdq": onnx_models.nested_if(1000),
            },
            {},
            {
                "fp32": ("com.evil",),
                "int8_dynamic": ("memory", "allocat", "run", "Runtime"),
                "int8_qdq": ("ONNX", "nested", "depth"),
            },
        ),
        "declared_functions_nesting": (
            {
                "fp32": onnx_models.huge_declared_initializer(),
                "int8_dynamic": onnx_models.local_functions(),
                "int8_qdq": onnx_models.nested_if(5),
            },
            {},
            {"fp32": ("declare",), "int8_dynamic": ("function",), "int8_qdq": ("nested",)},
        ),
    }


@pytest.mark.parametrize("kind", ["external_data", "domain_bomb_depth", "declared_functions_nesting"])
def test_hostile_onnx_models_are_invalid_with_a_reason(grade_cells, jail_check, canary_dir, kind):
    models, extra, words = _hostile_sets(canary_dir)[kind]
    g = grade_cells([_write_models_cell(models, extra)], name=f"onnx-{kind}")
    jail_check(g)
    reasons = _assert_no_model_credit(g)
    for name, expected in words.items():
        assert any(w.lower() in reasons[name].lower() for w in expected), f"{name}: reason {reasons[name][:300]}"
    assert FILE_SECRET not in json.dumps(g.measurements), "external data pulled the canary secret in"


def test_a_model_that_never_finishes_is_stopped_at_the_time_limit():
    """A Loop with 2^63 iterations: the measuring child is killed at its limit and leaves nothing."""
    from autograder.measure.onnx_load import LoadLimits, run_model_worker

    run = run_model_worker(
        onnx_models.loop_forever(), inputs={"public_test": np.zeros((4, 2), np.float32)}, limits=LoadLimits(timeout_s=3)
    )
    assert not run.ok and "took longer than the 3 s" in (run.reason or ""), run
    children = [p for p in psutil.Process().children(recursive=True) if "model_worker" in " ".join(p.cmdline())]
    assert not children, f"measuring children left: {children}"
