"""The probe's result encoding and its new arguments, through the real cells and the real reader
(in this process): JSON-like results round-trip, bounds make a case ``unconvertible`` with the
reason, ``Arg.strings`` arrives as a list and ``Arg.file`` as a path valid during its call only."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
from probe_in_process import probe_in_process

from autograder.probe_format import Arg, ProbeCase


def test_a_dict_result_with_strings_and_a_file(ws):
    seen = {}

    def count_ops(path, names):
        seen["path"], seen["during"] = path, os.path.isfile(path)
        with open(path, "rb") as f:
            data = f.read()
        return {"size": len(data), "names": names, "ops": collections.Counter(Conv=2), "none": None,
                "arr": np.arange(3, dtype=np.int16), "pair": (1.5, np.float32(2))}

    case = ProbeCase("c", "count_ops", (Arg.file(b"\x00model bytes", "model.onnx"), Arg.strings(["Conv", "Relu"])))
    out = probe_in_process(ws, {"count_ops": count_ops}, [case]).cases["c"]
    assert out.status == "ok", out
    assert seen["during"] and isinstance(seen["path"], str) and os.path.basename(seen["path"]) == "model.onnx"
    assert not os.path.lexists(os.path.dirname(seen["path"])), "the call's folder is removed after it"
    value = out.value
    assert value["size"] == 12 and value["names"] == ["Conv", "Relu"] and value["ops"] == {"Conv": 2}
    assert value["none"] is None and value["pair"] == (1.5, np.float32(2))
    assert value["arr"].dtype == np.int16 and value["arr"].tolist() == [0, 1, 2]
    assert out.values == [] and not out.is_tuple, "a dict has no array view"
    assert case.raw(0) == b"\x00model bytes" and case.raw(1) == ["Conv", "Relu"]


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"
