"""Hidden files and JSON-like results through the real jail and a real kernel.

A notebook's ``count_ops(path, names)`` returns a dict; it gets an ``Arg.file`` and an
``Arg.strings``. The same notebook's hostile functions look, during their call, for every other
case's file (by its bytes, anywhere they can read) and for the files of calls already made: they
find their own file only, and nothing of a call once it returned, even after it raised or
locked its folder."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.limits import ExecutionLimits
from autograder.measure.compare import Expect, compare_output
from autograder.probe_format import Arg, ProbeCase, read_probe_result
from autograder.sandbox import ProbeSpec

pytestmark = pytest.mark.slow

MARKS = [f"HIDDEN-FILE-MARK-{i}-".encode() * 3 for i in range(4)]

STUDENT = r'''
import os, stat, sys

SEEN = []          # paths and folders of the calls made so far
ROOTS = sorted({os.environ.get("TMPDIR", "/tmp"), "/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~")})
# the interpreter, bound read-only at its own path (under /tmp when the grader is installed there:
# 37,500 files, 700 MB read per scan, past the call's limit under load); no call can write there
INTERPRETER = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
MARKS = %r

def _scan():
    """Which of the cases' marks any readable file under the roots holds, and every probe folder."""
    found, folders = set(), []
    for root in ROOTS:
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(here, d)) not in INTERPRETER]
            folders += [os.path.join(here, d) for d in dirs if d.startswith("probe-call-")]
            for name in files:
                try:
                    with open(os.path.join(here, name), "rb") as f:
                        data = f.read(1 << 20)
                except OSError:
                    continue
                found |= {i for i, m in enumerate(MARKS) if m.encode("latin-1") in data}
    return sorted(found), sorted(set(folders))

def _look(path):
    marks, folders = _scan()
    earlier = [p for p in SEEN if os.path.lexists(p)]
    folder = os.path.dirname(path)
    SEEN.extend([path, folder])
    return {"marks": marks, "folders": len(folders), "earlier_left": len(earlier),
            "mine_private": stat.S_IMODE(os.stat(folder).st_mode) == 0o700, "is_str": type(path) is str}

def count_ops(path, names):
    with open(path, "rb") as f:
        data = f.read()
    return {"bytes": len(data), "names": names, "look": _look(path), "ops": {"ai.onnx::Conv": 2, "ai.onnx::Relu": 1},
            "arr": np.arange(3, dtype=np.int16), "pair": (0.5, None)}

def raises(path):
    _look(path)
    raise RuntimeError("after looking")

def locks(path):
    look = _look(path)
    folder = os.path.dirname(path)
    os.mkdir(os.path.join(folder, "sub"))
    os.chmod(os.path.join(folder, "sub"), 0)
    os.chmod(path, 0)
    os.chmod(folder, 0o500)
    return look

def last(path, names):
    return {"look": _look(path), "names": names}

import numpy as np
''' % ([m.decode("latin-1") for m in MARKS],)

CASES = [
    ProbeCase("count", "count_ops", (Arg.file(MARKS[0], "model.onnx"), Arg.strings(["Conv", "Relu", ""]))),
    ProbeCase("raises", "raises", (Arg.file(MARKS[1], "model.onnx"),)),
    ProbeCase("locks", "locks", (Arg.file(MARKS[2], "m.onnx"),)),
    ProbeCase("last", "last", (Arg.file(MARKS[3], "other.bin"),), {"names": Arg.strings([])}),
]


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    from sandbox_helpers import worker_slot, write_notebook

    from autograder.sandbox import run_submission

    tmp = tmp_path_factory.mktemp("probe-files")
    nb = write_notebook(tmp, [STUDENT])
    rec = run_submission(
        nb,
        tmp / "ws",
        limits=ExecutionLimits(cell_timeout_s=30, notebook_timeout_s=90),
        probe=ProbeSpec(CASES, [c.function for c in CASES]),
        slot=worker_slot(),
    )
    return rec, read_probe_result(tmp / "ws", CASES, rec["probe"] == "completed"), tmp / "ws"


def test_a_function_gets_a_file_and_strings_and_returns_a_dict(probed):
    rec, result, _ = probed
    assert rec["status"] == "completed" and rec["probe"] == "completed", rec
    out = result.cases["count"]
    assert out.status == "ok", out
    assert out.value["bytes"] == len(MARKS[0]) and out.value["names"] == ["Conv", "Relu", ""]
    assert out.value["arr"].dtype == np.int16 and out.value["pair"] == (0.5, None)
    fact = compare_output(
        Expect({"ai.onnx::Conv": 2, "ai.onnx::Relu": 2}, unit="node"), type(out)("ok", value=out.value["ops"])
    )
    assert fact["account"] == "at ['ai.onnx::Relu']: the value differs, by 1 node"


def test_each_call_sees_its_own_file_alone_in_a_private_folder(probed):
    _, result, _ = probed
    looks = {
        "count": result.cases["count"].value["look"],
        "locks": result.cases["locks"].value,
        "last": result.cases["last"].value["look"],
    }
    for index, (case_id, look) in zip((0, 2, 3), looks.items()):
        assert look["marks"] == [index], f"{case_id} could read the files of other calls: {look}"
        assert look["folders"] == 1, f"{case_id} saw other calls' folders: {look}"
        assert look["mine_private"] and look["is_str"], look


def test_no_file_is_left_after_its_call_returned_raised_or_locked_its_folder(probed):
    _, result, _ = probed
    assert result.cases["raises"].status == "raised"
    assert result.cases["locks"].value["earlier_left"] == 0
    assert result.cases["last"].value["look"]["earlier_left"] == 0, "a file of an earlier call is still there"


def test_the_working_directory_holds_no_file_argument(probed):
    ws = probed[2]
    for path in ws.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(m in data for m in MARKS), path
