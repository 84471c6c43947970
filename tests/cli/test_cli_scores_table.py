"""The terminal's scores table keeps every total whole at any width: the note column wraps or
moves below the table, check names become numbers with a legend, check columns are left to
gradebook.csv, names are cut; the score never is. Rendered with rich's Console(width=...)."""

from __future__ import annotations

import io
import re

import pytest
from rich.cells import cell_len
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from autograder.report.console import print_scores_table

# lesson 07's checks, as a batch's rows carry them
CHECKS = [
    "quantize",
    "dequantize",
    "choose_qparams",
    "fp32_model",
    "dynamic_model",
    "static_model",
    "size",
    "reported_results",
    "execution",
]
NOTE = "timeout: the notebook ran past its 600 s limit; code cell 12 (cell 25 of the notebook) did not finish"


def _rows():
    full = {c: 10 for c in CHECKS}
    return [
        {"name": "reference.ipynb", "score": 100, "max": 100, "checks": full, "checks_max": full},
        {
            "name": "submission_123456_with_a_long_name.ipynb",
            "score": 57.5,
            "max": 100,
            "checks": {**full, "size": 2.5},
            "checks_max": full,
            "reason": NOTE,
        },
        {
            "name": "untouched.ipynb",
            "score": 1,
            "max": 100,
            "checks": {c: 0 for c in CHECKS},
            "checks_max": full,
            "reason": "not attempted",
        },
    ]


def _render(rows, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_scores_table(rows, console=console)
    return console.export_text()


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("│")]


@pytest.mark.parametrize("width", [60, 80, 100, 140, 200])
def test_every_total_is_whole_at_common_widths(width):
    text = _render(_rows(), width)
    assert all(len(line) <= width for line in text.splitlines()), text
    for total in ("100 / 100", "57.5 / 100", "1 / 100"):
        assert re.search(rf"│\s+{re.escape(total)}\s+│", text), (width, text)
    assert "100 / 1…" not in text and "100…" not in text
    assert "not attempted" in text and "600 s" in text, "the notes are shown, in the table or below it"


def test_what_gives_first_is_the_note_then_the_check_names_then_the_check_columns():
    wide, mid, narrow = _render(_rows(), 220), _render(_rows(), 140), _render(_rows(), 80)
    assert "dynamic_model" in wide.splitlines()[1] and "note" in wide.splitlines()[1]
    header = mid.splitlines()[1]
    assert re.search(r"┃\s+1\s+┃\s+2\s+┃", header) and "checks: 1 quantize · 2 dequantize" in mid.replace("\n", " ")
    assert "2.5/10" in mid, "a check's score stays visible while its column fits"
    assert "9 check columns do not fit 80 columns: see gradebook.csv" in narrow
    assert "57.5 / 100" in narrow


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(min_value=40, max_value=240),
    names=st.lists(
        st.text(st.characters(codec="utf-8", categories=("L", "N", "P")), min_size=1, max_size=60),
        min_size=1,
        max_size=6,
    ),
    n_checks=st.integers(min_value=0, max_value=14),
    scores=st.lists(
        st.floats(min_value=0, max_value=1000, allow_nan=False).map(lambda x: round(x, 2)), min_size=6, max_size=6
    ),
    notes=st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=300)), min_size=6, max_size=6),
)
def test_any_class_at_any_width_shows_every_total_whole(width, names, n_checks, scores, notes):
    checks = [f"check_{'x' * (i % 7)}{i}" for i in range(n_checks)]
    rows = [
        {
            "name": name,
            "score": scores[i],
            "max": 1000,
            "checks": {c: 1 for c in checks},
            "checks_max": {c: 1 for c in checks},
            "reason": notes[i],
        }
        for i, name in enumerate(names)
    ]
    text = _render(rows, width)
    assert all(cell_len(line) <= width for line in text.splitlines()), "in terminal cells: a combining mark takes none"
    cells = [[c.strip() for c in line.split("│")] for line in _table_lines(text)]
    for row in rows:
        total = f"{row['score']:g} / 1000"
        assert any(total in line for line in cells), (total, width, text)


@pytest.mark.parametrize(
    "name",
    [
        "ＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＸＹＺ",  # full-width Latin: two cells each
        "中文名字很长很长很长很长很长很长很长很长很长",
        "한국어이름이아주아주아주아주아주길다",
        "e\u0301" * 40,
    ],
)  # combining marks: no cell of their own
@pytest.mark.parametrize("width", [40, 44, 50, 60, 80])
def test_names_are_measured_in_terminal_cells_not_characters(name, width):
    rows = [{"name": name, "score": 999.99, "max": 1000, "checks": {}, "checks_max": {}, "reason": None}]
    text = _render(rows, width)
    assert any("999.99 / 1000" in line for line in _table_lines(text)), (width, text)
