"""tolerances.toml as ``autograder calibrate`` writes it: tomli-w writes the body, our header of
comments is prepended, and what is read back (tomllib, the judge's merge) is what was derived."""

from __future__ import annotations

import os
import tomllib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autograder.assignment import assignment_ids, load_assignment
from autograder.authoring.calibrate import load_calibration_config, render_tolerances, tolerance_specs
from autograder.errors import AssignmentError
from autograder.tolerances import flat_values

EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "60"))

names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
keys = st.lists(names, min_size=1, max_size=3).map(".".join)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
numbers = st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False)
entries = st.fixed_dictionaries(
    {"value": numbers, "measure": text, "samples": st.integers(1, 100), "worst": numbers, "rule": text}
)
provenances = st.fixed_dictionaries(
    {
        "command": text,
        "runs": st.integers(1, 50),
        "margin": st.floats(1, 10),
        "parameters": st.dictionaries(names, st.lists(st.integers(0, 99), max_size=25), max_size=2),
        "margins": st.dictionaries(keys, st.floats(1, 10), max_size=3),
        "reference_scores": st.lists(st.floats(0, 100), max_size=25),
    }
)


def _nested(derived: dict) -> dict:
    tree: dict = {}
    for key, entry in derived.items():
        *tables, leaf = key.split(".")
        table = tree
        for name in tables:
            table = table.setdefault(name, {})
        table[leaf] = entry
    return tree


def _header(text_: str) -> list[str]:
    lines = text_.splitlines()
    return lines[: lines.index("")]


def _clashing(derived: dict) -> bool:
    """A key that is also a table of other keys ('a.b' beside 'a.b.c'): TOML cannot hold both."""
    return any(other.startswith(key + ".") for key in derived for other in derived)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.dictionaries(keys, entries, min_size=1, max_size=8), provenances)
def test_what_is_written_reads_back_the_same(derived, provenance):
    assume(not _clashing(derived))
    written = render_tolerances(derived, provenance)
    data = tomllib.loads(written)
    assert data == {"provenance": provenance, **_nested(derived)}
    assert flat_values(data) == {k: e["value"] for k, e in derived.items()}, "the judge reads each value"
    header = _header(written)
    assert header and all(line.startswith("# ") for line in header)
    example = min(derived)
    table, _, leaf = example.rpartition(".")
    said = " ".join(line[2:] for line in header)
    assert f"`{leaf} = " in said and (not table or f"`[{table}]`" in said), "the example is a key of this file"


def test_a_key_that_is_also_a_table_is_refused_with_both_names():
    entry = {"value": 1.0, "worst": 1.0, "rule": "r"}
    for derived in ({"a.b": entry, "a.b.c": entry}, {"a.b.c": entry, "a.b": entry}):
        with pytest.raises(AssignmentError, match=r"tolerance 'a\.b(\.c)?'.*rename one of them"):
            render_tolerances(derived, {})


def test_no_tolerance_still_writes_a_header_and_the_provenance():
    written = render_tolerances({}, {"runs": 1})
    assert tomllib.loads(written) == {"provenance": {"runs": 1}}
    assert "--tolerances" in " ".join(_header(written))


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_each_lessons_header_shows_one_of_its_own_tolerances(assignment_id):
    """The override example is a key of that lesson's tolerances, not another lesson's."""
    assignment = load_assignment(assignment_id)
    specs = tolerance_specs(assignment.rubric(), load_calibration_config(assignment))
    derived = {s.key: {"value": 0.5, "measure": s.measure, "worst": 0.25, "rule": "r"} for s in specs}
    said = " ".join(line[2:] for line in _header(render_tolerances(derived, {"runs": 1})))
    if not specs:  # a lesson whose thresholds are all literal (as `new-assignment` writes one) has none to show
        assert "--tolerances" in said and "= 0.5" not in said
        return
    shown = [s.key for s in specs if f"`{s.key.rpartition('.')[2]} = 0.5`" in said]
    assert shown, f"{assignment_id}: the header's example names none of its tolerances: {said}"
