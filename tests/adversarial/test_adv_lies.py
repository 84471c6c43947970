"""Hostile notebooks that lie: return values that claim to be right, metadata and tags that
steer the runner, and files that are not notebooks at all.

The grader coerces every result to a plain number array in the kernel and compares it with its
own reference outside; it ignores every piece of notebook metadata; and a file it cannot read is
a zero with a reason, never a crash.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

from advkit import IDENTITY_CELL, ROOT, TOKEN, build_notebook, jail_uid

pytestmark = pytest.mark.slow

FUNCTION_CHECKS = ("quantize", "dequantize", "choose_qparams")

# A correct quantize (float32 division, as ONNX Runtime), used as the honest core of some lies.
TRUE_QUANTIZE = """\
import numpy as np
def _true_quantize(x, scale, zero_point, dtype=np.int8):
    info = np.iinfo(dtype)
    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.int64) + int(zero_point)
    return np.clip(q, info.min, info.max).astype(dtype)
"""

LIARS = {
    # an ndarray subclass, always "equal", holding wrong values
    "ndarray_subclass_eq_true": """
class Always(np.ndarray):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def all(self, *a, **k): return True
    def __bool__(self): return True
def quantize(x, scale, zero_point, dtype=np.int8):
    return np.full(np.shape(x), 7, dtype).view(Always)
""",
    # not an array: __eq__ True, __array__ right on the first call only, then wrong
    "array_protocol_right_only_once": """
class Sometimes:
    def __init__(self, good, bad): self.good, self.bad, self.calls = good, bad, 0
    def __eq__(self, other): return True
    def __array__(self, dtype=None, copy=None):
        self.calls += 1
        return self.good if self.calls == 1 else self.bad
    def __len__(self): return len(self.good)
def quantize(x, scale, zero_point, dtype=np.int8):
    good = _true_quantize(x, scale, zero_point, dtype)
    return Sometimes(good, np.full_like(good, 3))
""",
    # the right numbers, as Python ints in an object array
    "object_array": """
def quantize(x, scale, zero_point, dtype=np.int8):
    return np.array(_true_quantize(x, scale, zero_point, dtype).tolist(), dtype=object)
""",
    # NaN and inf where floats are expected; a tuple too short; an int subclass that lies
    "nan_inf_short_tuple": """
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def quantize(x, scale, zero_point, dtype=np.int8):
    return ()
def dequantize(q, scale, zero_point):
    return np.full(np.shape(q), np.nan, np.float32)
def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    return (np.float32(np.inf), Liar(-999))
""",
    # a generator, a 100 MB result, a dict
    "generator_huge_dict": """
def quantize(x, scale, zero_point, dtype=np.int8):
    return (v for v in _true_quantize(x, scale, zero_point, dtype))
def dequantize(q, scale, zero_point):
    return np.zeros(100 << 20, np.uint8)
def choose_qparams(rmin, rmax, dtype=np.uint8, symmetric=False):
    return {"scale": 1.0, "zero_point": 0}
""",
}


@pytest.mark.parametrize("liar", sorted(LIARS))
def test_lying_return_values_earn_nothing(grade_cells, jail_check, wrong_baseline, liar):
    """Lies earn no more than honest wrong functions (which earn the kinds any answer gets right)."""
    g = grade_cells([TRUE_QUANTIZE + LIARS[liar]], name=f"liar-{liar}")
    jail_check(g, compare_to=wrong_baseline)
    assert g.execution["probe"] == "completed", g.execution_brief()
    functions = g.measurements["functions"]
    for name in FUNCTION_CHECKS:
        m = functions.get(name, {})
        if m.get("defined"):
            assert m["agree"] <= _empty_agreement(m), (
                f"{name}: {m['agree']} of {m['cases']} lying answers agreed: {m['first_mismatch']}"
            )


def _empty_agreement(m: dict) -> int:
    """Cases with an empty answer agree with any empty array (the object-array liar returns empties too)."""
    return m.get("groups", {}).get("empty", {}).get("cases", 0)


# ----------------------------------------------------------------------------- RESULTS that lie
REFERENCE = ROOT / "assignments" / "07-quantization" / "examples" / "reference.ipynb"
LIED_FIELDS = {
    "fp32": {"accuracy": 'float("nan")', "latency_ms": 'float("inf")', "max_rel_drift": 'float("-inf")'},
    "int8_dynamic": {"size_bytes": "-0.0", "accuracy": '"0.968"', "latency_ms": "True"},
    "int8_qdq": {"size_bytes": "None", "accuracy": "[0.966]", "latency_ms": '{"$gt": 0}'},
}


def _reference_cells() -> list[str]:
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not there yet")
    return [c.source for c in nbformat.read(REFERENCE, as_version=4).cells if c.cell_type == "code"]


def test_reported_numbers_that_lie_are_not_honest(grade_cells, jail_check, limited):
    """The reference solution, then RESULTS rewritten with NaN, ±inf, -0.0, strings, bools, None, a
    list and a dict: each such field is dishonest, and the grader does not stumble on them."""
    lies = "\n".join(
        f"RESULTS[{v!r}][{k!r}] = {expr}" for v, fields in LIED_FIELDS.items() for k, expr in fields.items()
    )
    g = grade_cells(
        _reference_cells() + [lies], name="lying-results", assignment=limited(cell_timeout_s=60, notebook_timeout_s=120)
    )
    jail_check(g, gains_allowed=tuple(g.scores()))
    fp32 = next(c for c in g.grade["checks"] if c["id"] == "fp32_model")
    assert fp32["score"] == fp32["max_score"], "control: the reference's fp32 model lost points"
    fields = g.measurements["reported"]["fields"]
    for variant, lied in LIED_FIELDS.items():
        for key in lied:
            f = fields.get(f"{variant}.{key}", {})
            assert f.get("ok") is not True, f"RESULTS[{variant!r}][{key!r}] = {lied[key]} was taken as honest: {f}"
    reported = next(c for c in g.grade["checks"] if c["id"] == "reported_results")
    honest_part = next(
        p for p in reported["parts"] if "measure" not in p or "honest" in p["name"] or "match" in p["name"]
    )
    assert not honest_part["passed"], f"lying RESULTS passed '{honest_part['name']}'"


def test_a_huge_reported_integer_does_not_crash_the_grader(grade_cells, jail_check, limited):
    """RESULTS['int8_dynamic']['size_bytes'] = 10**400: valid JSON, but no float can hold it."""
    g = grade_cells(
        _reference_cells() + ["RESULTS['int8_dynamic']['size_bytes'] = 10**400"],
        name="huge-int",
        assignment=limited(cell_timeout_s=60, notebook_timeout_s=120),
    )
    jail_check(g, gains_allowed=tuple(g.scores()))
    field = g.measurements["reported"]["fields"]["int8_dynamic.size_bytes"]
    assert field.get("ok") is not True, field


# ----------------------------------------------------------------------------- metadata and tags
def test_notebook_metadata_and_tags_are_ignored(grade_cells, jail_check, baseline):
    """kernelspec → another kernel, skip-execution on a bad cell, raises-exception on an erroring one."""
    metadata = {
        "kernelspec": {
            "name": "python3",
            "display_name": "host python",
            "language": "python",
            "argv": ["/bin/sh", "-c", "touch /tmp/adv-kernelspec-" + TOKEN],
        },
        "language_info": {"name": "python"},
        "nbgrader": {"grade": True, "points": 100},
        "papermill": {"parameters": {"x": 1}},
    }
    cells = [
        IDENTITY_CELL,
        {"source": "_record('skipped_cell_ran', True)", "metadata": {"tags": ["skip-execution"]}},
        {"source": "raise ValueError('hidden by a tag')", "metadata": {"tags": ["raises-exception"]}},
        {
            "source": "_record('after_error', True)",
            "metadata": {
                "tags": ["remove-cell"],
                "deletable": False,
                "editable": False,
                "jupyter": {"source_hidden": True, "outputs_hidden": True},
            },
        },
    ]
    g = grade_cells(cells, name="metadata", metadata=metadata)
    jail_check(g)
    me = g.record("identity")
    assert me["uid"] != 0 and me["uid"] == (jail_uid(g.execution) or me["uid"]), f"kernel identity: {me}"
    assert not Path(f"/tmp/adv-kernelspec-{TOKEN}").exists(), "the notebook's kernelspec argv was executed"
    assert g.has_record("skipped_cell_ran"), "a cell tagged skip-execution was skipped"
    assert g.execution["cells_errored"] >= 1 and g.execution["first_error"]["cell"] == 3, g.execution_brief()
    assert g.execution["first_error"]["ename"] == "ValueError"
    assert g.has_record("after_error"), "execution stopped at the error instead of going on"
    if baseline.score("execution") > 0:
        assert g.score("execution") < baseline.score("execution"), "an error hidden by a tag kept the execution points"


def test_raw_and_markdown_cells_do_not_run(grade_path, jail_check, tmp_path):
    notebook = build_notebook([IDENTITY_CELL])
    notebook.cells.append(nbformat.v4.new_raw_cell("_record('raw_ran', True)"))
    notebook.cells.append(nbformat.v4.new_markdown_cell("```python\n_record('md_ran', True)\n```"))
    notebook.cells.append(nbformat.v4.new_code_cell("_record('last', True)"))
    path = tmp_path / "cells.ipynb"
    nbformat.write(notebook, path)
    g = grade_path(path, name="raw-md")
    jail_check(g)
    assert g.has_record("last") and not g.has_record("raw_ran") and not g.has_record("md_ran")
    ran = [c["index"] for c in g.execution["cells"]]
    assert ran == [0, 1, 4], f"code cells run, by their index in the notebook: {ran}"


# ----------------------------------------------------------------------------- not notebooks
def _valid_notebook_bytes() -> bytes:
    return nbformat.writes(build_notebook(["x = 1"] * 5)).encode()


def _json_bomb(depth: int = 200_000) -> bytes:
    return b'{"cells": [], "metadata": ' + b"[" * depth + b"]" * depth + b', "nbformat": 4, "nbformat_minor": 5}'


def _fifo_with_rescue(path: Path, after_s: float = 20.0) -> None:
    """A FIFO nobody writes to; after ``after_s`` a rescuer writes to it, so a grader that blocked
    on it gets unblocked (and the test fails on time) instead of hanging the suite forever."""
    os.mkfifo(path)

    def rescue() -> None:
        time.sleep(after_s)
        end = time.monotonic() + 60
        while time.monotonic() < end and os.path.exists(path):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.5)
                continue
            os.write(fd, b"{}")
            os.close(fd)
            return

    threading.Thread(target=rescue, daemon=True).start()


MALFORMED = {
    "empty": lambda d: d.write_bytes(b""),
    "truncated": lambda d: d.write_bytes(_valid_notebook_bytes()[: len(_valid_notebook_bytes()) // 2]),
    "png": lambda d: d.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(random.Random(1).randrange(256) for _ in range(2000))),
    "random_bytes": lambda d: d.write_bytes(os.urandom(4096)),
    "json_list": lambda d: d.write_text("[1, 2, 3]"),
    "cells_not_a_list": lambda d: d.write_text('{"cells": 5, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}'),
    "cell_source_not_text": lambda d: d.write_text(
        json.dumps(
            {
                "cells": [{"cell_type": "code", "source": {"evil": 1}, "metadata": {}, "outputs": []}],
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
            }
        )
    ),
    "nbformat_3": lambda d: d.write_text('{"worksheets": [], "nbformat": 3, "nbformat_minor": 0, "metadata": {}}'),
    "json_nesting_bomb": lambda d: d.write_bytes(_json_bomb()),
    "too_big": lambda d: d.write_bytes(b'{"cells": [], "metadata": {"x": "' + b"a" * (40 << 20) + b'"}}'),
    "latin1_text": lambda d: d.write_bytes('{"cells": [], "metadata": {"x": "é"}}'.encode("latin-1")),
    "symlink_to_passwd": lambda d: d.symlink_to("/etc/passwd"),
    "symlink_to_rubric": lambda d: d.symlink_to(ROOT / "assignments" / "07-quantization" / "rubric.toml"),
    "fifo": lambda d: _fifo_with_rescue(d),
    "directory": lambda d: d.mkdir(),
    "socket": lambda d: socket.socket(socket.AF_UNIX).bind(str(d)),
}


def _grade_malformed(grade_path, kind: str):
    folder = Path(tempfile.mkdtemp(prefix=f"adv-bad-{TOKEN}-"))
    path = folder / "submission.ipynb"
    MALFORMED[kind](path)
    try:
        return grade_path(path, name=f"bad-{kind}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_file_that_is_not_a_notebook_is_graded_with_a_reason(grade_path, results_validator, kind):
    g = _grade_malformed(grade_path, kind)
    results_validator(g.results)
    assert g.execution.get("status") == "unreadable", g.execution_brief()
    reason = g.execution.get("reason") or ""
    assert reason and len(reason) < 500, f"{kind}: no clear reason: {reason!r}"
    assert "notebook" in g.student_text().lower() or reason[:30] in g.student_text(), (
        f"{kind}: the student is not told why: {g.results.get('output', '')[:500]}"
    )
    assert g.execution["cells"] == [] and g.execution["probe"] == "not_run", f"{kind}: a kernel ran it"
    assert "root:" not in g.student_text(), "the content of /etc/passwd reached the student"
    for c in g.grade["checks"]:
        if c["id"] != "execution":
            assert c["score"] == 0, f"{kind}: check {c['id']} scored {c['score']}"


@pytest.mark.parametrize("kind", ["empty", "png"])
def test_a_file_that_is_not_a_notebook_scores_zero(grade_path, kind):
    """Nothing ran, so nothing earns a point: not even "no cell raised an error"."""
    g = _grade_malformed(grade_path, kind)
    assert g.results["score"] == 0, (
        f"{kind}: scored {g.results['score']}: {[(c['id'], c['score']) for c in g.grade['checks'] if c['score']]}"
    )
