"""Helpers for the batch tests: a tiny assignment and a stand-in for the jail + measure stages.

The fake ``execute_and_measure`` never runs a notebook: it reads a ``fake`` block from the
notebook's metadata (status, measured values, how to misbehave) and writes execution.json and
measurements.json as the real stages would. Each call appends ``<stem> slot=<i> pid=<pid>`` to a
log, so tests count executions. Worker processes are forked, so the monkeypatch reaches them.
Judging and reporting are the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import time
import zipfile
from pathlib import Path
from typing import Any

ASSIGNMENT_ID = "fake-07"

ASSIGNMENT_TOML = """
id = "fake-07"
title = "Fake lesson for batch tests"
version = "1"
notebook = "fake.ipynb"
[execution]
cell_timeout_s = 5
notebook_timeout_s = 10
[summary.scatter]
title = "Size vs drift of the int8 models"
x = "size_ratio"
y = "max_abs_dp"
series = {dynamic = "models.int8_dynamic", "static QDQ" = "models.int8_qdq"}
x_label = "size ratio (int8 file / fp32 file)"
y_label = "max |Δp| vs fp32"
"""

RUBRIC_TOML = """
[[checks]]
id = "quantize"
title = "quantize agrees with QuantizeLinear"
points = 10
  [[checks.parts]]
  name = "agreement"
  measure = "functions.quantize.agree_share"
  op = ">="
  tolerance = "functions.agree_share_min"
  points = 10
  format = "percent"
  message = "{measured} of cases agree, need {threshold}"

[[checks]]
id = "size"
title = "int8 files are small"
points = 10
requires = "models"
  [[checks.parts]]
  name = "dynamic size ratio"
  measure = "models.int8_dynamic.size_ratio"
  op = "<="
  tolerance = "size.ratio_max"
  points = 5
  format = "ratio"
  [[checks.parts]]
  name = "static size ratio"
  measure = "models.int8_qdq.size_ratio"
  op = "<="
  tolerance = "size.ratio_max"
  points = 5
  format = "ratio"

[[checks]]
id = "drift"
title = "int8 outputs stay close"
points = 10
  [[checks.parts]]
  name = "dynamic drift"
  measure = "models.int8_dynamic.max_abs_dp"
  op = "<="
  tolerance = "drift.max_abs_dp_max"
  points = 5
  format = "float3"
  [[checks.parts]]
  name = "static drift"
  measure = "models.int8_qdq.max_abs_dp"
  op = "<="
  tolerance = "drift.max_abs_dp_max"
  points = 5
  format = "float3"

[[checks]]
id = "execution"
title = "runs to the end"
points = 5
  [[checks.parts]]
  name = "completed"
  measure = "execution.completed"
  op = "is_true"
  points = 3
  [[checks.parts]]
  name = "no cell raised an error"
  measure = "execution.cells_errored"
  op = "<="
  value = 0
  points = 2
"""

TOLERANCES_TOML = """
[functions]
agree_share_min = 1.0
[size]
ratio_max = 0.35
[drift]
max_abs_dp_max = 0.10
"""


def make_assignment_tree(root: Path) -> Path:
    folder = root / "assignments" / ASSIGNMENT_ID
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text(ASSIGNMENT_TOML)
    (folder / "rubric.toml").write_text(RUBRIC_TOML)
    (folder / "grading" / "__init__.py").write_text('"""fake grading package (never imported by the fakes)"""\n')
    ref = root / "reference" / ASSIGNMENT_ID
    ref.mkdir(parents=True)
    (ref / "tolerances.toml").write_text(TOLERANCES_TOML)
    return root


def notebook_json(**fake: Any) -> str:
    """A minimal nbformat-4 notebook whose metadata tells the fake stages what to pretend."""
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"fake": fake},
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None, "id": "c1"}
        ],
    }
    return json.dumps(nb, indent=1, sort_keys=True)


def write_notebook(path: Path, **fake: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(notebook_json(**fake))
    return path


GOOD = dict(agree=1.0, dyn=(0.27, 0.04), qdq=(0.30, 0.05))


BATCH_PID_ENV = "BATCHKIT_BATCH_PID"


def batch_in_child(*args, **kwargs) -> dict:
    """``run_batch(*args, **kwargs)`` in a child process this test owns (forked: the fake stages
    installed by the test come along), so a fake stage's Ctrl-C (``interrupt_parent_once``) reaches
    that child, never the pytest process. Returns what the child saw: the exception ``run_batch``
    raised (its class name, or None) and how many of its own children were still alive after it."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run_batch_child, args=(send, args, kwargs), daemon=False)
    child.start()
    send.close()
    try:
        if not receive.poll(300):
            raise AssertionError("the batch in the child did not end within 300 s")
        seen = receive.recv()
    finally:
        child.join(60)
        if child.is_alive():  # our own child, by its pid
            child.kill()
            child.join()
    assert child.exitcode == 0, f"the batch's child exited {child.exitcode}: {seen}"
    return seen


def _run_batch_child(send, args, kwargs) -> None:
    import multiprocessing

    from autograder.batch import run_batch

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever pytest set
    os.environ[BATCH_PID_ENV] = str(os.getpid())
    raised = None
    try:
        run_batch(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - reported to the test, which asserts which
        raised = type(e).__name__
    send.send({"raised": raised, "children_left": len(multiprocessing.active_children())})
    send.close()


def fake_stages(log: Path):
    """A stand-in for ``pipeline.execute_and_measure`` driven by the notebook's metadata."""

    def execute_and_measure(
        notebook,
        assignment,
        out_dir,
        workspace,
        *,
        unsafe_no_sandbox=False,
        slot=0,
        on_stage=None,
        timings=None,
        pictures=(),
        kernel_template=False,
        submission_key=None,
    ):
        from autograder.errors import SandboxUnavailableError
        from autograder.safe_files import write_json_atomic

        fake = json.loads(Path(notebook).read_text())["metadata"]["fake"]
        with open(log, "a") as f:
            f.write(f"{Path(notebook).stem} slot={slot} pid={os.getpid()}\n")
        time.sleep(float(fake.get("sleep", 0.0)))
        if fake.get("interrupt_parent_once"):
            marker = log.with_suffix(".interrupted")
            if not marker.exists():
                marker.write_text("1")
                batch = int(os.environ.get(BATCH_PID_ENV, "0"))
                if batch != os.getppid():  # only the batch process a test started for this (batch_in_child)
                    raise RuntimeError(f"interrupt_parent_once outside batch_in_child ({BATCH_PID_ENV}={batch})")
                try:
                    os.kill(batch, signal.SIGINT)  # Ctrl-C in the batch's own process
                    time.sleep(10)  # the parent stops us (SIGTERM) long before this ends
                finally:  # stands for the sandbox's cleanups (kernel shutdown, workspace removal)
                    log.with_suffix(".cleaned").write_text("1")
        if fake.get("die"):
            os.kill(os.getpid(), signal.SIGKILL)
        if fake.get("no_sandbox"):
            raise SandboxUnavailableError("no isolation layer available (fake)")
        if fake.get("raise"):
            raise RuntimeError(fake["raise"])
        status = fake.get("status", "completed")
        if fake.get("timeout_once"):  # a timeout the first time only (a busy neighbour, say)
            marker = log.with_name(f"{log.name}.{Path(notebook).stem}.timed-out")
            if not marker.exists():
                marker.write_text("1")
                status = "timeout"
        first_error = fake.get("first_error")
        execution = {
            "status": status,
            "reason": fake.get("reason"),
            "cells_total": 1,
            "cells_run": 1,
            # the cell that hung or died counts as errored, as a raising one does
            "cells_errored": 1 if first_error or status != "completed" else 0,
            "cells": [],
            "first_error": first_error,
            "probe": "completed" if status == "completed" else "not_run",
            "duration_s": float(fake.get("duration", 1.0)),
            "output_truncated": False,
            "isolation": {"mode": "bwrap", "layers": ["fake"], "warnings": []},
        }
        if "cpu_denied_share" in fake:  # how starved the timed-out kernel was (None: unknown)
            execution["cpu_denied_share"] = fake["cpu_denied_share"]
        write_json_atomic(Path(out_dir) / "execution.json", execution)
        from autograder.environment import environment_versions

        measurements: dict[str, Any] = {
            "schema": 1,
            "environment": environment_versions(),
            "assignment": {"id": assignment.id, "version": assignment.version, "fingerprint": "fake"},
            "execution": {**{k: v for k, v in execution.items() if k != "cells"}, "completed": status == "completed"},
        }
        if status == "completed":
            dyn, qdq = fake.get("dyn", GOOD["dyn"]), fake.get("qdq", GOOD["qdq"])
            measurements["functions"] = {"quantize": {"agree_share": fake.get("agree", 1.0)}}
            measurements["models"] = {
                "int8_dynamic": {"size_ratio": dyn[0], "max_abs_dp": dyn[1]},
                "int8_qdq": {"size_ratio": qdq[0], "max_abs_dp": qdq[1]},
            }
        else:
            reason = fake.get("reason") or status
            measurements["functions"] = {"error": reason}
            measurements["models"] = {"error": reason}
        write_json_atomic(Path(out_dir) / "measurements.json", measurements)
        return measurements

    return execute_and_measure


def executions(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()]


def read_gradebook(out: Path) -> list[dict[str, str]]:
    import csv

    with open(out / "gradebook.csv", newline="") as f:
        return list(csv.DictReader(f))


def make_export_zip(
    path: Path,
    folders: dict[str, dict[str, str | bytes]],
    metadata: str | None,
    extra: list[tuple[zipfile.ZipInfo | str, bytes]] = (),
    top: str = "assignment_1_export",
) -> Path:
    """A Gradescope-style export: ``top/submission_metadata.yml`` + ``top/submission_<id>/<files>``."""
    with zipfile.ZipFile(path, "w") as zf:
        if metadata is not None:
            zf.writestr(f"{top}/submission_metadata.yml", metadata)
        for folder, files in folders.items():
            zf.writestr(f"{top}/{folder}/", b"")
            for name, content in files.items():
                zf.writestr(f"{top}/{folder}/{name}", content)
        for info, content in extra:
            zf.writestr(info, content)
    return path
