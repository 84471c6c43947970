"""The rubric parsed once into typed, frozen values (autograder/rubric.py): every lesson's rubric
parses, its values are the tables', the judge grades a parsed rubric as it grades the table, and a
rubric is parsed again only when its text changes."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.assignment import load_assignment
from autograder.contracts import schema
from autograder.errors import AssignmentError
from autograder.judge import judge
from autograder.rubric import Op, Rubric, parse_rubric

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(
    p.name
    for p in (ROOT / "assignments").iterdir()
    if (p / "assignment.toml").is_file() and (ROOT / "reference" / p.name / "tolerances.toml").is_file()
)


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def lesson(request):
    a = load_assignment(request.param, ROOT)
    return a.rubric(), a.tolerances()


@pytest.mark.parametrize(
    "enum, path",
    [(Op, ("$defs", "part", "properties", "op"))],
    ids=["Op"],
)
def test_each_rubric_enum_is_its_schemas_list(enum, path):
    node = schema("rubric")
    for step in path:
        node = node[step]
    assert [m.value for m in enum] == node["enum"]


def test_a_lessons_rubric_parses_into_the_tables_values(lesson):
    table, tolerances = lesson
    parsed = parse_rubric(table, tolerances)
    assert [c.id for c in parsed.checks] == [c["id"] for c in table["checks"]] == parsed.check_ids
    assert parsed.max_points == pytest.approx(sum(c["points"] for c in table["checks"]))
    assert [m.as_dict() for m in parsed.manual] == table.get("manual", [])
    for check, raw in zip(parsed.checks, table["checks"]):
        assert check.visibility == raw.get("visibility", "visible") and check.title == raw.get("title", raw["id"])
        requires = raw.get("requires", [])
        assert list(check.requires) == ([requires] if isinstance(requires, str) else requires)
        for part, raw_part in zip(check.parts, raw["parts"], strict=True):
            assert (part.name, part.measure, part.op, part.points) == (
                raw_part["name"],
                raw_part["measure"],
                raw_part["op"],
                raw_part["points"],
            )
            assert part.format == raw_part.get("format", "text")


def _measurements(rubric: Rubric, tolerances, meet: list[bool]) -> dict:
    """Measurements that meet (or miss) every part's threshold, at its measure path."""
    out: dict = {}
    flags = iter(meet * (1 + sum(len(c.parts) for c in rubric.checks)))
    for check in rubric.checks:
        for part in check.parts:
            ok, limit = next(flags), part.threshold(tolerances)
            if part.op in (Op.IS_TRUE, Op.IS_FALSE):
                value = limit if ok else not limit
            elif part.op == Op.IN:
                value = limit[0] if ok and limit else "not one of them"
            elif part.op in (Op.EQ, Op.NE):
                value = limit if ok == (part.op == Op.EQ) else ["something else"]
            else:  # (passes, fails) for each ordering op
                value = {
                    Op.LE: (limit, limit + 1),
                    Op.LT: (limit - 1, limit),
                    Op.GE: (limit, limit - 1),
                    Op.GT: (limit + 1, limit),
                }[part.op][0 if ok else 1]
            node = out
            *head, last = part.measure.split(".")
            for key in head:
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            node[last] = value
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(meet=st.lists(st.booleans(), min_size=1, max_size=12))
def test_the_judge_grades_a_parsed_rubric_as_the_table(lesson, meet):
    table, tolerances = lesson
    parsed = parse_rubric(table, tolerances)
    measurements = _measurements(parsed, tolerances, meet)
    from_table, from_parsed = judge(table, tolerances, measurements), judge(parsed, tolerances, measurements)
    assert json.dumps(from_table, sort_keys=True) == json.dumps(from_parsed, sort_keys=True)
    assert json.dumps(judge(table, tolerances, {}), sort_keys=True) == json.dumps(
        judge(parsed, tolerances, {}), sort_keys=True
    )


def test_the_values_are_frozen(lesson):
    parsed = parse_rubric(*lesson)
    for value, name in ((parsed, "checks"), (parsed.checks[0], "points"), (parsed.checks[0].parts[0], "op")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, None)


def test_a_rubric_is_parsed_once_per_text(lesson):
    table, tolerances = lesson
    assert parse_rubric(copy.deepcopy(table), tolerances) is parse_rubric(table, tolerances)
    changed = copy.deepcopy(table)
    changed["checks"][0]["title"] = "another title"
    again = parse_rubric(changed, tolerances)
    assert again is not parse_rubric(table, tolerances) and again.checks[0].title == "another title"


def test_a_parsed_rubric_is_checked_against_other_tolerances(lesson):
    table, tolerances = lesson
    parsed = parse_rubric(table, tolerances)
    keyed = [p for c in parsed.checks for p in c.parts if p.tolerance]
    if not keyed:
        pytest.skip("this rubric names no tolerance")
    with pytest.raises(AssignmentError, match=keyed[0].tolerance):
        parse_rubric(parsed, {})


def test_a_parsed_rubric_keeps_its_own_values():
    table = {
        "checks": [
            {
                "id": "ran",
                "points": 1,
                "parts": [
                    {"name": "status", "measure": "execution.status", "op": "in", "value": ["completed"], "points": 1}
                ],
            }
        ]
    }
    parsed = parse_rubric(table, {})
    table["checks"][0]["parts"][0]["value"].append("timeout")  # the caller's table changes after the parse
    assert parsed.checks[0].parts[0].threshold({}) == ["completed"]
    grade = judge(parsed, {}, {"execution": {"status": "timeout"}})
    assert grade["score"] == 0 and grade["checks"][0]["parts"][0]["threshold"] == ["completed"]
    assert judge(parsed, {}, {"execution": {"status": "completed"}})["score"] == 1
