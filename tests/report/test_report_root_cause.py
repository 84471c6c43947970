"""The root cause of an unmeasured check, said once, by cell and line (unit level: no kernel).

Placing errors (cell_numbers.place_errors), finding the defining cell (defining_cells), the
cause the judge attaches (root_cause) and how the feedback shows it; on both lessons' rubrics.
Real kernels: tests/integration/test_root_cause_real.py."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.cell_numbers import OTHER_CODE, CellPlaces, cell_where, error_line, place_errors, without_place
from autograder.defining_cells import find_definitions
from autograder.judge import judge
from autograder.report.feedback import feedback_markdown
from autograder.report.gradescope_results import results_json
from autograder.sandbox.record import Outcome, build_record, reply_to_cell

from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

SOURCES = ["import numpy as np", "x = 1", "def quantize(x, scale)\n    return x\n"]
WHERE = [cell_where(n, i) for n, i in ((1, 0), (2, 2), (3, 5))]
PLACES = CellPlaces([(w, s, n + 4) for n, (w, s) in enumerate(zip(WHERE, SOURCES), start=1)])
HASH = str(murmur2_x86(SOURCES[2], get_tmp_hash_seed()))
KERNEL_NAMES = re.compile(r"\d+\.py|Cell In ?\[|Input In ?\[|ipython-input|ipykernel_")


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"expected ':' ({HASH}.py, line 1)", f"expected ':' ({WHERE[2]}, line 1)"),
        ("Cell In[7], line 2\n----> 2 quantize()", f"{WHERE[2]}, line 2\n----> 2 quantize()"),
        ("Cell In[5], line 3, in helper(x)", f"{WHERE[0]}, line 3, in helper(x)"),
        (f"File /tmp/ipykernel_123/{HASH}.py:2, in quantize(x)", f"{WHERE[2]}, line 2, in quantize(x)"),
        (f'  File "/tmp/ipykernel_9/{HASH}.py", line 2, in quantize', f"  {WHERE[2]}, line 2, in quantize"),
        ("Input In [6], in <cell line: 1>()", f"{WHERE[1]}, in <cell line: 1>()"),
        ("<ipython-input-6-0a1b2c3d4e5f> in <module>", f"{WHERE[1]} in <module>"),
        ("File /tmp/ipykernel_1/99.py:4, in f()", f"{OTHER_CODE}, line 4, in f()"),
        ("Cell In[99], line 1", f"{OTHER_CODE}, line 1"),
        ("ValueError: 3.py is not a file", "ValueError: 3.py is not a file"),  # the student's own words stay
    ],
)
def test_errors_are_placed_by_cell_and_line(text, expected):
    assert place_errors(text, PLACES) == expected


@settings(max_examples=200, deadline=None)
@given(
    digits=st.integers(0, 2**32 - 1),
    line=st.integers(1, 10**6),
    count=st.integers(0, 10**6),
    pid=st.integers(1, 10**7),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_no_kernel_name_survives_placing(digits, line, count, pid, before, after):
    """Whatever cell a kernel's name stands for, known or not, the student reads a cell, never it."""
    for form in (
        f"({digits}.py, line {line})",
        f"File /tmp/ipykernel_{pid}/{digits}.py:{line}",
        f'File "/tmp/ipykernel_{pid}/{digits}.py", line {line}',
        f"Cell In[{count}], line {line}",
    ):
        placed = place_errors(f"{before} {form} {after}", PLACES)
        assert not KERNEL_NAMES.search(placed.replace(before, "").replace(after, "")), placed


def test_the_line_and_the_bare_message_of_an_error():
    assert error_line(f"expected ':' ({HASH}.py, line 4)", "Cell In[9], line 4") == 4
    assert error_line("name 'np' is not defined", "---\nCell In[9], line 3\n----> 3 np\nCell In[2], line 7") == 3
    assert error_line("boom", "no frame") is None
    assert without_place(f"expected ':' ({WHERE[2]}, line 4)") == "expected ':'"


@pytest.mark.parametrize(
    "source, line",
    [
        ("def quantize(x):\n    return x", 1),
        ("import numpy as np\n\n\ndef quantize(x, scale)\n    return x", 4),  # does not parse
        ("%%time\nQ = 1\ndef quantize(x):\n    return x", 3),  # a magic
        ("try:\n    import torch\nexcept ImportError:\n    def quantize(x):\n        pass", 4),
        ("from mylib import quantize", 1),
        ("quantize = lambda x: x", 1),
        ("async def quantize(x):\n  pass\n  if x:", 1),  # does not parse
        ("# quantize is defined below\nprint('quantize')", None),
        ("def helper():\n    def quantize(x):\n        return x", None),  # not top level
        ("class Q:\n    def quantize(self):\n        pass", None),
        ("y = dequantize(1)", None),
    ],
)
def test_the_cell_that_defines_a_name(source, line):
    found = find_definitions(["quantize"], ["x = 1", source])
    assert found.get("quantize") == ([(1, line)] if line else None)


def _execution(cell_source: str, content: dict, *, names=("quantize", "dequantize")) -> dict:
    sources = ["import numpy as np", cell_source, "print(1)"]
    records = [
        reply_to_cell(0, {"status": "ok", "execution_count": 1}, 0.1, number=1),
        reply_to_cell(3, {**content, "execution_count": 2}, 0.1, number=2),
        reply_to_cell(4, {"status": "ok", "execution_count": 3}, 0.1, number=3),
    ]
    record = build_record(
        Outcome("completed", None),
        records,
        {},
        0.0,
        probe="completed",
        cells_in_notebook=5,
        sources=sources,
        names=list(names),
    )
    return {**{k: v for k, v in record.items() if k != "cells"}, "completed": True, "ran": True}


BROKEN = "import numpy as np\n\n\ndef quantize(x, scale)\n    return x\n\ndef dequantize(q):\n    return q\n"
SYNTAX = {
    "status": "error",
    "ename": "SyntaxError",
    "evalue": f"expected ':' ({murmur2_x86(BROKEN, get_tmp_hash_seed())}.py, line 4)",
    "traceback": ["  Cell In[2], line 4", "    def quantize(x, scale)", "SyntaxError: expected ':'"],
}
NAME = {
    "status": "error",
    "ename": "NameError",
    "evalue": "name 'np' is not defined",
    "traceback": ["----", "Cell In[2], line 1", "----> 1 np.zeros(3)", "NameError: name 'np' is not defined"],
}
MISSING = {"defined": False, "error": "the notebook does not define {} at its top level"}
RUBRIC = {
    "checks": [
        {
            "id": f,
            "title": f"{f} agrees",
            "points": 3,
            "requires": f"functions.{f}",
            "parts": [
                {
                    "name": f"{f} part {k}",
                    "measure": f"functions.{f}.agree_share",
                    "op": ">=",
                    "value": 1.0,
                    "points": 1,
                    "hint": f"HINT-{f}-{k}",
                }
                for k in range(3)
            ],
        }
        for f in ("quantize", "dequantize")
    ]
    + [
        {
            "id": "runs",
            "title": "runs",
            "points": 1,
            "parts": [
                {"name": "ran", "measure": "execution.completed", "op": "is_true", "points": 1, "hint": "HINT-runs"}
            ],
        }
    ]
}


def _grade(execution: dict, **functions) -> dict:
    measurements = {
        "execution": execution,
        "functions": {
            f: functions.get(f, {**MISSING, "error": MISSING["error"].format(f)}) for f in ("quantize", "dequantize")
        },
    }
    return judge(RUBRIC, {}, measurements)


@pytest.mark.parametrize(
    "content, cause",
    [
        (
            SYNTAX,
            "quantize could not be checked: code cell 2 (cell 4 of the notebook), where it is defined, "
            "has a syntax error at line 4: expected ':'",
        ),
        (
            NAME,
            "quantize could not be checked: code cell 2 (cell 4 of the notebook), where it is defined, "
            "stopped at line 1 with NameError: name 'np' is not defined",
        ),
    ],
)
def test_a_check_names_its_root_cause_once_and_hints_nothing_unmeasured(content, cause):
    grade = _grade(_execution(BROKEN, content))
    check = grade["checks"][0]
    assert check["cause"]["text"] == cause and check["cause"]["kind"] in ("syntax_error", "error")
    assert all(p["hint"] == "" for c in grade["checks"][:2] for p in c["parts"])
    feedback = feedback_markdown(grade, {"execution": _execution(BROKEN, content)})
    results = results_json(grade, {"execution": _execution(BROKEN, content)})
    top = feedback.split("## Running your notebook")[0]
    assert "## Fix this first" in top and "code cell 2 (cell 4 of the notebook)" in top
    assert "quantize and dequantize could not be checked" in top and "where they are defined" in top
    for text in (feedback, results["output"], *(t["output"] for t in results["tests"])):
        assert "HINT-quantize" not in text and "HINT-dequantize" not in text
        assert not KERNEL_NAMES.search(text), text
    assert feedback.count("could not be checked") == 1  # nothing else measured: the short form, cause on top
    assert all(t["output"].count("could not be checked") == 1 for t in results["tests"][:2])


def test_no_cause_when_the_function_was_measured_or_no_problem_is_known():
    ok_cell = "def quantize(x):\n    return x\ndef dequantize(q):\n    return q\n"
    grade = _grade(
        _execution(ok_cell, {"status": "ok"}),
        quantize={"defined": True, "agree_share": 0.5},
        dequantize={"defined": True, "agree_share": 1.0},
    )
    assert not any("cause" in c for c in grade["checks"])
    assert "HINT-quantize-0" in feedback_markdown(grade, {}) and "Fix this first" not in feedback_markdown(grade, {})
    grade = _grade(_execution(ok_cell, {"status": "ok"}))  # defined by a cell that ran, yet missing
    assert not any("cause" in c for c in grade["checks"])


def test_no_cell_defines_it():
    grade = _grade(_execution("def quantise(x):\n    return x", {"status": "ok"}))
    assert grade["checks"][0]["cause"]["kind"] == "undefined"
    assert grade["checks"][0]["cause"]["text"].startswith("quantize could not be checked: no code cell")
    feedback = feedback_markdown(grade, {})
    assert "## Nothing to grade yet" in feedback and "could not be checked" not in feedback, (
        "nothing graded: the short paragraph names what is missing, not a line per function"
    )


def test_lesson_03_functions_get_their_cause_too(project_root):
    from autograder.assignment import load_assignment

    a03 = load_assignment("03-export-parity", root=project_root)
    cell = "def parity_report(onnx_path)\n    pass\ndef sklearn_probabilities(X):\n    pass\n"
    content = {
        **SYNTAX,
        "evalue": f"expected ':' ({murmur2_x86(cell, get_tmp_hash_seed())}.py, line 1)",
        "traceback": ["  Cell In[2], line 1", "SyntaxError: expected ':'"],
    }
    execution = _execution(cell, content, names=a03.config["probe"]["functions"])
    measurements = {
        "execution": execution,
        "functions": {
            "parity_report": {"defined": False, "error": "the notebook does not define parity_report at its top level"}
        },
        "models": {"pipeline": {"error": "artifacts/pipeline.onnx is missing"}},
        "parity": {"error": "sklearn_probabilities is not defined at the notebook's top level"},
    }
    grade = judge(a03.rubric(), a03.tolerances(), measurements)
    causes = {c["id"]: c["cause"]["name"] for c in grade["checks"] if "cause" in c}
    assert set(causes.values()) == {"parity_report", "sklearn_probabilities"}, causes
    feedback = feedback_markdown(grade, measurements)
    assert feedback.split("## ")[1].startswith("Fix this first")
    assert "has a syntax error at line 1: expected ':'" in feedback.split("## ")[1]


def test_hashing_to_place_errors_is_bounded():
    """ipykernel's hash is pure Python: a cell beyond the budget is not hashed, its file is OTHER_CODE."""
    from autograder import cell_numbers

    huge = "x = 1\n" * (cell_numbers.HASHED_CHARS // 6 + 1)
    places = CellPlaces([("code cell 1 (cell 1 of the notebook)", huge, 1)])
    digits = murmur2_x86(huge, get_tmp_hash_seed())
    assert place_errors(f"({digits}.py, line 3)", places) == f"({OTHER_CODE}, line 3)"
