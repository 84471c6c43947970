"""The probe's result encoding and its new arguments, through the real cells and the real reader
(in this process): JSON-like results round-trip, bounds make a case ``unconvertible`` with the
reason, ``Arg.strings`` arrives as a list and ``Arg.file`` as a path valid during its call only."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from probe_in_process import probe_in_process

from autograder.measure.compare import compare_output
from autograder.probe_format import (
    FILE_MAX_BYTES,
    RESULT_LIMITS,
    STRINGS_MAX_BYTES,
    STRINGS_MAX_ITEMS,
    Arg,
    ProbeCase,
    ResultError,
    ResultLimits,
    array_view,
    check_cases,
    decode_result,
)


def test_a_dict_result_with_strings_and_a_file(ws):
    seen = {}

    def count_ops(path, names):
        seen["path"], seen["during"] = path, os.path.isfile(path)
        with open(path, "rb") as f:
            data = f.read()
        return {
            "size": len(data),
            "names": names,
            "ops": collections.Counter(Conv=2),
            "none": None,
            "arr": np.arange(3, dtype=np.int16),
            "pair": (1.5, np.float32(2)),
        }

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


# ---------------------------------------------------------------- round trip (hypothesis)

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "60"))
NUMERIC = [
    np.dtype(t)
    for t in (
        "bool",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
]

_arrays = st.sampled_from(NUMERIC).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
)
_scalars = _arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()])
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    _arrays,
    _scalars,
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=10), inner, max_size=4),
    ),
    max_leaves=25,
)


def same(a, b) -> bool:
    """Equal with the same Python and NumPy types all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and np.shape(a) == np.shape(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    return a == b


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=_values)
def test_json_like_results_round_trip(tmp_path_factory, value):
    ws = tmp_path_factory.mktemp("rt")
    out = probe_in_process(ws, {"f": lambda: value}, [ProbeCase("c", "f")]).cases["c"]
    assert out.status == "ok", out
    assert same(out.value, value), (out.value, value)
    view = array_view(value)
    if view is not None:  # the array view lessons 03 and 07 read is what it was
        assert out.is_tuple == view[1] and len(out.values) == len(view[0])
        assert all(same(a, b) for a, b in zip(out.values, view[0]))


# ---------------------------------------------------------------- bounds and refusals


class Opaque:
    pass


class LyingDict:
    """Claims to be a dict (``isinstance``) without being one."""

    @property
    def __class__(self):
        return dict


class Trap(Exception):
    pass


def _trap(*_a, **_k):
    raise Trap("a method of the student's class ran")


class TrapDict(dict):
    items = keys = values = __iter__ = __getitem__ = __len__ = _trap


class TrapList(list):
    __iter__ = __len__ = __getitem__ = _trap


class TrapStr(str):
    __str__ = __repr__ = __len__ = __iter__ = encode = _trap


class TrapInt(int):
    __int__ = __index__ = __repr__ = _trap


class TrapFloat(float):
    __float__ = __repr__ = _trap


def test_subclasses_are_read_by_their_base_class_alone(ws):
    """A Counter, a namedtuple, an IntEnum are fine; no method a subclass overrides is called."""
    value = TrapDict(
        {TrapStr("k"): TrapList([TrapInt(3), TrapFloat(0.5), TrapStr("s")]), "c": collections.Counter(a=1)}
    )
    out = probe_in_process(ws, {"f": lambda: value}, [ProbeCase("c", "f")]).cases["c"]
    assert out.status == "ok", out
    assert same(out.value, {"k": [3, 0.5, "s"], "c": {"a": 1}})


def deep(n):
    v = 1
    for _ in range(n):
        v = [v]
    return v


def cycle():
    a = []
    a.append(a)
    return a


LIMITS = RESULT_LIMITS
# (name, the result, words of the reason the case gives)
REFUSED = [
    ("too deep", deep(LIMITS.depth + 1), "nested more than 8 deep"),
    ("a cycle", cycle(), "nested more than 8 deep"),
    ("dict too deep", {"a": deep(LIMITS.depth)}, "nested more than 8 deep"),
    ("too wide", list(range(LIMITS.leaves + 1)), "more than 10,000 values"),
    ("too many keys", {str(i): i for i in range(LIMITS.leaves + 1)}, "more than 10,000 values"),
    ("a frozenset key", {frozenset(): 2}, "a dict key of type frozenset"),
    ("a bytes key", {b"k": 1}, "a dict key of type bytes"),
    ("a tuple key holding bytes", {("a", b"b"): 1}, "a dict key of type bytes"),
    ("a set", {1, 2}, "a value of type set"),
    ("a frozenset inside", {"a": [frozenset()]}, "a value of type frozenset"),
    ("bytes", b"abc", "a value of type bytes"),
    ("an object", Opaque(), "a value of a type defined in the notebook"),
    ("a lying dict", LyingDict(), "a value of a type defined in the notebook"),
    ("a generator", (i for i in range(3)), "a value of type generator"),
    ("a huge string", "x" * (LIMITS.string_bytes + 1), "bytes of strings"),
    ("many strings", ["y" * 1000] * (LIMITS.string_bytes // 1000 + 1), "bytes of strings"),
    ("huge keys", {"k" * 600_000: 1, "j" * 600_000: 2}, "bytes of strings"),
    ("an escaped encoding", "\x01" * (LIMITS.encoded_bytes // 6 + 1), "its JSON encoding is more than"),
    ("an int beyond 64 bits", 2**64, "an int beyond 64 bits"),
    ("a negative int beyond 64 bits", [-(2**63) - 1], "an int beyond 64 bits"),
    ("an object array", np.array([None, 1], dtype=object), "an array of dtype object"),
    ("a str array", np.array(["a"]), "an array of dtype"),
    ("a datetime", np.datetime64("2020-01-01"), "a NumPy value of dtype"),
]


@pytest.mark.kernel  # starts jailed children (tests/needs.py)
@pytest.mark.parametrize("result, words", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_result_beyond_the_bounds_is_unconvertible_with_the_reason(ws, result, words):
    out = probe_in_process(
        ws, {"f": lambda: result, "g": lambda: {"ok": [1]}}, [ProbeCase("bad", "f"), ProbeCase("next", "g")]
    ).cases
    assert out["bad"].status == "unconvertible", out["bad"]
    account = compare_output({"any": "thing"}, out["bad"])["account"]  # what the student reads
    assert account.startswith("returned a result the grader does not accept (") and words in account, account
    assert out["next"].status == "ok" and out["next"].value == {"ok": [1]}, "the next call is unaffected"


@pytest.mark.parametrize(
    "result",
    [deep(LIMITS.depth), list(range(LIMITS.leaves)), "x" * LIMITS.string_bytes, {"k": 2**64 - 1, "m": -(2**63)}],
    ids=["8 deep", "10000 values", "1 MB", "64-bit"],
)
def test_a_result_at_the_bounds_is_kept(ws, result):
    out = probe_in_process(ws, {"f": lambda: result}, [ProbeCase("c", "f")]).cases["c"]
    assert out.status == "ok" and same(out.value, result)


FORGED = [
    ({"list": [{"int": 1}, {"oops": 1}]}, "malformed"),
    ({"dict": [[1, {"none": None}]]}, "malformed dict key"),
    ({"dict": [[{"list": []}, {"none": None}]]}, "a dict key that is not"),
    ({"dict": [["a", {"none": None}], ["a", {"none": None}]]}, "given twice"),
    ({"session": {"inputs": "x"}}, "malformed session"),
    ({"array": "c7"}, "not this call's"),
    ({"array": "c0_5"}, "missing"),
    ({"set": []}, "malformed"),
    (None, "malformed"),
    ({"float": "1.5"}, "malformed"),
    ({"int": 2**70}, "beyond 64 bits"),
    ({"bool": 1}, "malformed"),
    (deep_node := {"list": [{"list": [{"list": [{"none": None}]}]}]}, "nested more than 2 deep"),
    ({"list": [{"none": None}] * 3}, "more than 2 values"),
    ({"str": "abc"}, "bytes of strings"),
]


@pytest.mark.parametrize("node, words", FORGED)
def test_the_grader_checks_the_encoding_again(node, words):
    """A record the probe did not make (a thread of the student's rewrote it) is held to the bounds."""
    with pytest.raises(ResultError, match=words):
        decode_result(node, {}, 0, ResultLimits(depth=2, leaves=2, string_bytes=2))


def test_a_forged_record_makes_the_case_unconvertible(ws):
    from autograder.limits import ExecutionLimits
    from autograder.sandbox.probe_run import ProbeRun

    case = ProbeCase("c", "f")
    (ws / "probe_case.json").write_text(json.dumps({"id": "c", "status": "ok", "value": {"array": "c1"}}))
    np.savez(ws / "probe_case.npz", c1=np.zeros(2))
    run = ProbeRun([case], ["f"], "RESULTS", ExecutionLimits(), str(ws), ws)
    run._read_case(0, case)
    assert run.report["cases"]["c"]["status"] == "unconvertible" and run.outputs == {}


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize("name", ["model.onnx", "a", "M-1_b.bin", "x" * 100])
def test_a_plain_file_name_is_accepted(name):
    assert Arg.file(b"", name).value == (name, b"")


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        ".hidden",
        "a/b",
        "../m.onnx",
        "/etc/passwd",
        "a\\b",
        "a\x00b",
        "x" * 101,
        "mödel.onnx",
        "a b",
        "-",
        3,
        None,
    ],
)
def test_a_file_name_that_is_not_a_plain_name_is_refused(name):
    with pytest.raises(ValueError if isinstance(name, str) else (ValueError, TypeError)):
        Arg.file(b"data", name)


def test_arguments_are_bounded():
    with pytest.raises(ValueError, match="at most"):
        Arg.file(bytes(FILE_MAX_BYTES + 1), "big.bin")
    with pytest.raises(ValueError, match="at most"):
        Arg.strings(["a"] * (STRINGS_MAX_ITEMS + 1))
    with pytest.raises(ValueError, match="at most"):
        Arg.strings(["é" * (STRINGS_MAX_BYTES // 2 + 1)])
    with pytest.raises(TypeError):
        Arg.strings(["a", 1])
    with pytest.raises(TypeError):
        Arg.file("not bytes", "a.txt")
    two = Arg.file(bytes(FILE_MAX_BYTES), "a.bin")
    with pytest.raises(ValueError, match="more than"):
        check_cases([ProbeCase("c", "f", (two, two))])
    with pytest.raises(ValueError, match="named alike"):
        check_cases([ProbeCase("c", "f", (Arg.file(b"1", "m"),), {"other": Arg.file(b"2", "m")})])


def test_the_plugin_refuses_cases_the_probe_cannot_send(tmp_path):
    """A lesson whose cases cannot be sent fails when its cases are read (build, every front end)."""
    from autograder.assignment import load_assignment
    from autograder.errors import AssignmentError

    folder = tmp_path / "assignments" / "files-01"
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text('id = "files-01"\n')
    (folder / "grading" / "__init__.py").write_text(
        "from autograder.probe_format import Arg, ProbeCase\n"
        "def probe_cases():\n"
        "    f = Arg.file(b'x', 'm.onnx')\n"
        "    return [ProbeCase('c', 'count_ops', (f,), {'again': f})]\n"
        "def measure(ctx):\n    return {}\n"
    )
    (tmp_path / "reference" / "files-01").mkdir(parents=True)
    with pytest.raises(AssignmentError, match="files-01/grading: probe case 'c': two file arguments are named alike"):
        load_assignment("files-01", tmp_path).grading.probe_cases()


def test_file_and_strings_arguments_are_described_without_their_content():
    from autograder.measure.compare import describe_call
    from autograder.measure.failure import describe_arguments

    case = ProbeCase("c", "count_ops", (Arg.file(b"secret-bytes", "hidden.onnx"), Arg.strings(["Conv", "Gelu"])))
    told = describe_arguments(case, ("path", "names"))
    assert told == "path a str (the path of a file), names a list of 2 str"
    assert "secret" not in describe_call(case) and "hidden.onnx" in describe_call(case)


def test_all_results_together_are_bounded(ws, monkeypatch):
    """Past the grader's bound on all results' encodings, a call is unconvertible and says so."""
    monkeypatch.setattr("autograder.sandbox.probe_run.ENCODINGS_MAX_BYTES", 200)
    out = probe_in_process(
        ws, {"f": lambda: {"text": "x" * 120}}, [ProbeCase("first", "f"), ProbeCase("second", "f")]
    ).cases
    assert out["first"].status == "ok"
    assert out["second"].status == "unconvertible"
    assert (
        compare_output({"text": "x"}, out["second"])["account"]
        == "returned a result the grader does not accept (all results of the probe together are too large)"
    )


def test_the_probe_budget_counts_the_bytes_its_cells_carry():
    from autograder.limits import ExecutionLimits
    from autograder.sandbox.probe_run import PAYLOAD_S_PER_MIB, probe_budget_s

    limits = ExecutionLimits()
    assert probe_budget_s(limits, 3, 8 * 1024 * 1024) - probe_budget_s(limits, 3) == pytest.approx(
        8 * PAYLOAD_S_PER_MIB
    )
