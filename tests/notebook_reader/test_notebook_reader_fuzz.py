"""The one bounded reader of submitted notebooks (autograder/notebook_reader/reader.py, parse_child.py),
fuzzed with hypothesis over notebook JSON shapes: deep, wide, huge numbers, odd types, byte order
marks, duplicate keys, truncation, junk bytes.

Invariants, for every input:
1. the answer is a parsed notebook or :class:`UnreadableNotebook` with a one-line reason for the
   student, never any other exception;
2. a parsed notebook agrees with the file: its code cells, in order, with their indices;
3. the grader's own process stays bounded: the parse is the child's, and what comes back is
   bounded (measured with tracemalloc around the call; the child has its own address-space limit).

``AUTOGRADER_FUZZ_EXAMPLES`` raises the number of examples for a longer run (nightly, by hand).
"""

from __future__ import annotations

import json
import os
import re
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.notebook_reader.reader import (
    MAX_INT_DIGITS,
    MAX_JSON_ARRAYS,
    MAX_NOTEBOOK_BYTES,
    LoadedNotebook,
    UnreadableNotebook,
    load_notebook,
    read_notebook_bytes,
)

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAME = "submission.ipynb"
GRADER_BYTES = 48 * 1024 * 1024  # what one read may cost the grader's process, whatever the file
_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(text: str) -> str:
    """As the reader gives text back: lone surrogates (valid JSON escapes) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
sources = st.text(max_size=60) | st.lists(st.text(max_size=20), max_size=4) | json_values
cells = st.fixed_dictionaries(
    {
        "cell_type": st.sampled_from(["code", "markdown", "raw"]) | st.text(max_size=6) | json_values,
        "source": sources,
        "metadata": st.just({}) | json_values,
    }
)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "autograder": st.fixed_dictionaries(
            {"assignment": st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True) | st.text(max_size=120) | json_values}
        ),
        "otter": st.fixed_dictionaries({"assignment_name": st.text(max_size=30) | json_values}),
        "kernelspec": json_values,
    },
)
notebooks = st.fixed_dictionaries(
    {
        "nbformat": st.sampled_from([4, 4, 4, 3, 5]) | json_values,
        "nbformat_minor": st.integers(0, 10),
        "metadata": metadata | json_values,
        "cells": st.lists(cells, max_size=8) | json_values,
    }
)


def _deep(depth: int, wide: int) -> str:
    return "[" * depth + ",".join(["[]"] * wide) + "]" * depth


raw_texts = st.one_of(
    notebooks.map(json.dumps),
    json_values.map(json.dumps),
    st.builds(_deep, st.integers(0, 3000), st.integers(0, 2000)),
    st.builds(lambda n: '{"nbformat": 4, "cells": [], "x": ' + "9" * n + "}", st.integers(1, 9000)),  # huge integers
    st.builds(lambda n: '{"nbformat": 4, "cells": [], "x": 1e' + "9" * n + "}", st.integers(1, 400)),  # huge floats
    st.builds(
        lambda a, b: (
            '{"nbformat": 4, "cells": '
            + json.dumps(a)
            + ', "cells": '
            + json.dumps(b)
            + ', "metadata": {}, "metadata": {"otter": {"assignment_name": "x"}}}'
        ),  # duplicate keys
        st.lists(cells, max_size=3),
        st.lists(cells, max_size=3) | json_values,
    ),
    st.text(max_size=200),
)


def _with_bytes(text: str, prefix: bytes, cut: int | None) -> bytes:
    data = prefix + text.encode("utf-8", "surrogatepass")
    return data if cut is None else data[: cut % (len(data) + 1)]


byte_inputs = st.builds(
    _with_bytes,
    raw_texts,
    st.sampled_from([b"", b"", b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00"]),
    st.none() | st.none() | st.integers(0, 10_000),
) | st.binary(max_size=300)


def _expected_code_cells(data: bytes) -> list[tuple[int, str]] | None:
    """What a parsed notebook must hold (the test parses the small generated input itself)."""
    nb = json.loads(data)
    return [
        (i, _encodable("".join(c["source"]) if isinstance(c["source"], list) else c["source"]))
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
    ]


def _read(data: bytes, **kwargs) -> tuple[LoadedNotebook | UnreadableNotebook, int]:
    tracemalloc.start()
    try:
        try:
            answer: LoadedNotebook | UnreadableNotebook = read_notebook_bytes(NAME, data, **kwargs)
        except UnreadableNotebook as e:
            answer = e
        return answer, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _assert_student_facing(reason: UnreadableNotebook) -> None:
    text = str(reason)
    assert text and "\n" not in text and len(text) < 600, text
    assert NAME in text or text.startswith("cell "), f"the reason names the file or the cell: {text!r}"
    assert "Traceback" not in text and "<grader>" not in text


@FUZZ
@given(byte_inputs)
def test_any_bytes_give_a_notebook_or_a_reason_and_cost_the_grader_little(data):
    answer, peak = _read(data)
    assert peak < GRADER_BYTES + 4 * len(data), f"the grader's process held {peak:,} bytes for {len(data):,}"
    if isinstance(answer, UnreadableNotebook):
        _assert_student_facing(answer)
        return
    assert isinstance(answer, LoadedNotebook)
    assert [(c.index, c.source) for c in answer.cells] == _expected_code_cells(data)
    assert [c.number for c in answer.cells] == list(range(1, len(answer.cells) + 1))
    assert answer.total >= len(answer.cells)
    assert all(isinstance(v, str) and len(v) <= 101 for v in answer.declared.values())


def _big_int(value) -> bool:
    """Some integer in ``value`` has more digits than the reader takes (it refuses those)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) >= 10**MAX_INT_DIGITS
    if isinstance(value, dict):
        return any(_big_int(v) for v in value.values())
    return isinstance(value, list) and any(_big_int(v) for v in value)


def must_be_read(nb: dict) -> bool:
    """A small notebook the reader has to accept: format 4 or later, a list of cells each naming
    its type, every code cell's source text or a list of lines, no integer over the digit limit.
    (The limits on size, objects, lists and code are far above what the strategies generate.)"""
    major, cells = nb["nbformat"], nb["cells"]
    if not isinstance(major, int) or isinstance(major, bool) or major < 4 or not isinstance(cells, list):
        return False
    for cell in cells:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            return False
        source = cell.get("source", "")
        if cell["cell_type"] == "code" and not (
            isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)
        ):
            return False
    return not _big_int(nb)


def test_must_be_read_tells_notebooks_from_the_rest():
    """The rule above, on hand-made cases: a reader refusing everything would fail the test below."""
    good = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": ["a", "b"]}]}
    assert must_be_read(good) and must_be_read({**good, "cells": [{"cell_type": "odd", "source": 3}]})
    for bad in (
        {**good, "nbformat": 3},
        {**good, "nbformat": True},
        {**good, "cells": {}},
        {**good, "cells": [{"source": "x"}]},
        {**good, "cells": [{"cell_type": "code", "source": ["a", 1]}]},
        {**good, "metadata": {"n": 10**4400}},
    ):
        assert not must_be_read(bad), bad
    answer, _ = _read(json.dumps(good).encode())
    assert isinstance(answer, LoadedNotebook) and [c.source for c in answer.cells] == ["ab"]


@FUZZ
@given(notebooks)
def test_a_format_4_notebook_reads_whole_and_its_declared_assignment_comes_back(nb):
    """Every generated notebook that must be read is read (its cells, in order, and what it
    declares); the others are refused with a reason for the student."""
    data = json.dumps(nb).encode()
    answer, _ = _read(data)
    if not must_be_read(nb):
        if isinstance(answer, UnreadableNotebook):
            _assert_student_facing(answer)
        return
    assert isinstance(answer, LoadedNotebook), f"refused a notebook it must read: {answer}"
    assert [(c.index, c.source) for c in answer.cells] == _expected_code_cells(data)
    meta = nb["metadata"] if isinstance(nb["metadata"], dict) else {}
    block = meta.get("autograder") if isinstance(meta.get("autograder"), dict) else {}
    if isinstance(block.get("assignment"), str):
        assert answer.declared["autograder"] == _encodable(block["assignment"][:101])
    else:
        assert "autograder" not in answer.declared
    meta_only, _ = _read(data, cells=False)
    assert isinstance(meta_only, LoadedNotebook) and meta_only.cells == [] and meta_only.declared == answer.declared


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[" + ",".join(["[]"] * (MAX_JSON_ARRAYS + 1)) + "]", "JSON lists"),
        ('{"nbformat": 4, "cells": [], "x": "' + "[" * (MAX_JSON_ARRAYS + 10) + '"}', None),  # brackets in a string
        ('{"nbformat": 3, "nbformat_minor": 0, "metadata": {}}', "uses notebook format 3"),  # no worksheets
        ('{"nbformat": 3, "worksheets": []}', "uses notebook format 3"),
        ('{"metadata": {}}', "not a Jupyter notebook"),
    ],
)
def test_structure_is_counted_before_it_is_built(body, reason):
    answer, peak = _read(body.encode())
    if reason is None:
        assert isinstance(answer, LoadedNotebook), answer
    else:
        assert isinstance(answer, UnreadableNotebook) and reason in str(answer), answer
        _assert_student_facing(answer)


def test_a_file_of_sixty_megabytes_of_empty_lists_costs_the_grader_nothing(tmp_path):
    """The file is handed to the child as a descriptor: the grader never holds its bytes."""
    path = tmp_path / NAME
    with open(path, "wb") as f:
        f.write(b"[")
        chunk = b"[]," * (1024 * 1024)
        while f.tell() < 60 * 1024 * 1024:
            f.write(chunk)
        f.write(b"[]]")
    for size in (60 * 1024 * 1024, MAX_NOTEBOOK_BYTES - 1024):  # over the cap, and just under it
        os.truncate(path, size - 1)
        with open(path, "ab") as f:
            f.write(b"]")
        tracemalloc.start()
        try:
            with pytest.raises(UnreadableNotebook) as e:
                load_notebook(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * 1024 * 1024, f"the grader's process held {peak:,} bytes"
        _assert_student_facing(e.value)
        assert ("more than the" in str(e.value)) if size > MAX_NOTEBOOK_BYTES else ("JSON lists" in str(e.value))
