"""A malformed rubric or tolerances file is instructor input: the judge refuses it loudly,
with a message that names the check, the part and the fix."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judge_report_fixtures import MEASUREMENTS, RUBRIC, TOLERANCES

from autograder.errors import AssignmentError
from autograder.judge import judge
from autograder.rubric import validate_rubric


def _good_part(**changes):
    return {"name": "p", "measure": "m.x", "op": "<=", "value": 1.0, "points": 5, **changes}


def _rubric(part=None, **check_changes):
    check = {"id": "c", "title": "C", "points": 5, "parts": [part or _good_part()], **check_changes}
    return {"checks": [check]}


def _without(d, key):
    return {k: v for k, v in d.items() if k != key}


# (id, rubric, tolerances, words the message must contain)
BAD_RUBRICS = [
    ("not a table", [], {}, ["rubric"]),
    ("no checks", {"checks": []}, {}, ["at least one [[checks]]"]),
    ("checks not a list", {"checks": {"id": "c"}}, {}, ["at least one [[checks]]"]),
    ("unknown op", _rubric(_good_part(op="=<")), {}, ["check 'c'", "part 'p'", "unknown op '=<'", "<="]),
    ("unknown format", _rubric(_good_part(format="pct")), {}, ["unknown format 'pct'", "percent"]),
    # a lone brace: "{...}}" read "}}" as an escape and lost a brace (the RESULTS hint did)
    (
        "lone brace in a hint",
        _rubric(_good_part(hint="RESULTS = {'fp32': {...}}")),
        {},
        ["part 'p' hint", "lone brace", "{{ and }}"],
    ),
    ("lone closing brace", _rubric(_good_part(message="a } b")), {}, ["part 'p' message", "lone brace"]),
    ("points mismatch", _rubric(points=10), {}, ["points = 10", "add up to 5"]),
    (
        "check without points",
        {"checks": [_without(_rubric()["checks"][0], "points")]},
        {},
        ["check 'c'", "needs points"],
    ),
    ("negative part points", _rubric(_good_part(points=-5), points=-5), {}, ["points must be a number >= 0"]),
    ("bool points", _rubric(_good_part(points=True), points=1), {}, ["points must be a number"]),
    ("duplicate check id", {"checks": _rubric()["checks"] * 2}, {}, ["duplicate id 'c'"]),
    ("manual id clashes with a check", {**_rubric(), "manual": [{"id": "c", "title": "M"}]}, {}, ["duplicate id 'c'"]),
    ("check without id", _rubric(id=""), {}, ["check #1", "has no id"]),
    ("check with a blank id", _rubric(id="  "), {}, ["has no id"]),
    ("check missing its id", {"checks": [_without(_rubric()["checks"][0], "id")]}, {}, ["check #1", "needs id"]),
    ("duplicate part name", _rubric(points=10, parts=[_good_part(), _good_part()]), {}, ["duplicate part name"]),
    ("part without name", _rubric(_without(_good_part(), "name")), {}, ["part #1", "needs name"]),
    ("part with an empty name", _rubric(_good_part(name="")), {}, ["non-empty name"]),
    ("part without measure", _rubric(_without(_good_part(), "measure")), {}, ["needs measure"]),
    ("no parts", _rubric(parts=[]), {}, ["at least one [[checks.parts]]"]),
    ("bad visibility", _rubric(visibility="secret"), {}, ["visibility 'secret'", "after_due_date"]),
    (
        "tolerance key missing",
        _rubric(_without(_good_part(tolerance="dyn.drop_max"), "value")),
        {"dyn": {}},
        ["tolerance 'dyn.drop_max'", "tolerances.toml"],
    ),
    (
        "tolerance is a table",
        _rubric(_without(_good_part(tolerance="dyn"), "value")),
        {"dyn": {"a": 1}},
        ["tolerance 'dyn'"],
    ),
    (
        "value and tolerance",
        _rubric(_good_part(tolerance="dyn.drop_max")),
        {"dyn": {"drop_max": 1}},
        ["exactly one of value"],
    ),
    ("neither value nor tolerance", _rubric(_without(_good_part(), "value")), {}, ["exactly one of value"]),
    ("ordering op needs a number", _rubric(_good_part(value="fast")), {}, ["op <= needs a number"]),
    ("in needs a list", _rubric(_good_part(op="in", value="int8")), {}, ["op in needs a list"]),
    ("is_true takes no value", _rubric(_good_part(op="is_true")), {}, ["take no value"]),
    (
        "is_false takes no tolerance",
        _rubric(_without(_good_part(op="is_false", tolerance="t"), "value")),
        {"t": 1},
        ["take no value or tolerance"],
    ),
    ("typo in a part key", _rubric({**_good_part(), "tolerence": "x"}), {}, ["unknown key(s) tolerence"]),
    ("typo in a check key", _rubric(visiblity="hidden"), {}, ["unknown key(s) visiblity"]),
    ("requires not a path", _rubric(requires=3), {}, ["requires must be a dotted path"]),
    # a path into the core's sections names a field of measurements.schema.json (lesson sections are open)
    (
        "misspelt execution field",
        _rubric(_good_part(measure="execution.cells_erored")),
        {},
        ["part 'p': measure 'execution.cells_erored'", "not a field of measurements.json"],
    ),
    ("below a leaf of the core", _rubric(_good_part(measure="execution.status.code")), {}, ["execution.status.code"]),
    ("unknown assignment field", _rubric(requires="assignment.name"), {}, ["check 'c': requires 'assignment.name'"]),
    (
        "the cells are not in measurements",
        _rubric(_good_part(measure="execution.cells.0.status")),
        {},
        ["execution.cells"],
    ),
    (
        "placeholder into the core",
        _rubric(_good_part(hint="{execution.first_eror.where}")),
        {},
        ["part 'p' hint: placeholder 'execution.first_eror.where'"],
    ),
    ("requires an empty path", _rubric(requires=["a", ""]), {}, ["requires must be a dotted path"]),
    ("unknown template format", _rubric(_good_part(message="{measured:pct}")), {}, ["unknown format ':pct'"]),
    ("template not a string", _rubric(_good_part(hint=["a"])), {}, ["part 'p'", "hint must be a string"]),
    ("manual not a list", {**_rubric(), "manual": {"id": "m"}}, {}, ["[[manual]]"]),
    ("typo in a manual key", {**_rubric(), "manual": [{"id": "m", "pionts": 1}]}, {}, ["manual item 'm'", "pionts"]),
    ("check not a table", {"checks": ["c"]}, {}, ["[[checks]] entry must be a table"]),
    ("part not a table", _rubric("p"), {}, ["[[checks.parts]] entry must be a table"]),
    ("infinite points", _rubric(_good_part(points=float("inf")), points=float("inf")), {}, ["points = inf"]),
    ("tolerances not a table of tolerances", _rubric(), {"dyn": {"drop_max": None}}, ["tolerances.toml", "dyn"]),
]


@pytest.mark.parametrize("rubric, tolerances, words", [c[1:] for c in BAD_RUBRICS], ids=[c[0] for c in BAD_RUBRICS])
def test_judge_rejects_bad_rubric(rubric, tolerances, words):
    with pytest.raises(AssignmentError) as info:
        judge(rubric, tolerances, MEASUREMENTS)
    for word in words:
        assert word in str(info.value), f"message {str(info.value)!r} should mention {word!r}"


def test_judge_rejects_bad_rubric_even_when_measurements_are_missing():
    with pytest.raises(AssignmentError):
        judge(_rubric(_good_part(op="~")), {}, {})


def test_validate_rubric_accepts_the_fixture_rubric():
    checks, manual = validate_rubric(RUBRIC, TOLERANCES)
    assert len(checks) == 6 and manual[0]["id"] == "reflection"


def test_validate_rubric_does_not_modify_the_rubric():
    rubric = copy.deepcopy(RUBRIC)
    validate_rubric(rubric, TOLERANCES)
    assert rubric == RUBRIC


@pytest.mark.parametrize(
    "path",
    [
        "execution.completed",
        "execution.ran",
        "execution.cells_errored",
        "execution.first_error.where",
        "execution.definitions.quantize.status",
        "execution.isolation.layers.0",
        "assignment.id",
        "environment.onnxruntime",
        "models.int8_dynamic.quality.accuracy_drop",
        "anything_a_lesson_measures.x.0",
    ],
)
def test_paths_into_the_core_fields_or_a_lesson_section_are_accepted(path):
    validate_rubric(_rubric(_good_part(measure=path), requires=path), {})


def test_a_rubric_found_valid_and_then_changed_is_checked_again():
    rubric = _rubric()
    validate_rubric(rubric, {})
    rubric["checks"][0]["parts"][0]["op"] = "=<"  # the same dict, now broken
    with pytest.raises(AssignmentError, match="unknown op '=<'"):
        validate_rubric(rubric, {})
    rubric["checks"][0]["parts"][0]["op"] = "<="
    with pytest.raises(AssignmentError, match="tolerances.toml"):
        validate_rubric(rubric, {"t": {"x": None}})  # a valid rubric with other, broken tolerances


def test_a_valid_pair_is_checked_once_however_often_it_judges(monkeypatch):
    import autograder.rubric as rubric_module

    calls = []
    check = rubric_module._check
    monkeypatch.setattr(rubric_module, "_check", lambda *a: calls.append(1) or check(*a))
    rubric = _rubric(_good_part(measure="m.unique_to_this_test"))
    for _ in range(3):
        judge(rubric, TOLERANCES, MEASUREMENTS)
    assert len(calls) == 1


_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(
        [
            "<=",
            "in",
            "is_true",
            "m.x",
            "execution.completed",
            "execution.nope",
            "{measured}",
            "{",
            "t.x",
            "percent",
            "visible",
        ]
    ),
    st.lists(st.sampled_from(["a", "m.x", ""]), max_size=2),
)
_DELETE = object()
_THRESHOLDS = {
    "<=": {"value": 1.0},
    ">": {"tolerance": "t.x"},
    "in": {"value": ["int8"]},
    "==": {"value": "x"},
    "is_true": {},
    "is_false": {},
}


def _mutated(entry, changes):
    entry = dict(entry)
    for key, value in changes:
        if value is _DELETE:
            entry.pop(key, None)
        else:
            entry[key] = value
    return entry


def _changes(keys):
    return st.lists(st.tuples(st.sampled_from(keys), _ANY | st.just(_DELETE)), max_size=2) | st.just([])


_PART = st.builds(
    lambda name, op, points, measure, changes: _mutated(
        {"name": name, "measure": measure, "op": op, "points": points, **_THRESHOLDS[op]}, changes
    ),
    name=st.sampled_from(["a", "b"]),
    op=st.sampled_from(sorted(_THRESHOLDS)),
    points=st.integers(0, 5),
    measure=st.sampled_from(["m.x", "execution.completed", "functions.f.groups.g"]),
    changes=_changes(["name", "measure", "op", "value", "tolerance", "points", "format", "message", "hint", "typo"]),
)


def _check(cid, parts, changes):
    points = sum(p["points"] for p in parts if isinstance(p, dict) and isinstance(p.get("points"), int))
    return _mutated({"id": cid, "title": "T", "points": points, "parts": parts}, changes)


_CHECK = st.builds(
    _check,
    cid=st.sampled_from(["c", "d"]),
    parts=st.lists(_PART, min_size=1, max_size=3),
    changes=_changes(["id", "title", "points", "visibility", "requires", "description", "parts", "typo"]),
)


@settings(max_examples=300, deadline=None)
@given(
    checks=st.lists(_CHECK, max_size=3) | _ANY,
    manual=st.none() | st.lists(_ANY | _PART, max_size=2),
    tolerances=st.fixed_dictionaries({"t": st.fixed_dictionaries({"x": st.floats(0, 2) | _ANY})}) | _ANY,
)
def test_any_rubric_is_accepted_or_refused_with_an_assignment_error(checks, manual, tolerances):
    """Schema first, then the semantic checks: whatever the shape, never a KeyError or a TypeError."""
    rubric = {"checks": checks} if manual is None else {"checks": checks, "manual": manual}
    try:
        validated, _ = validate_rubric(rubric, tolerances)
    except AssignmentError as e:
        assert str(e).startswith(("rubric", "tolerances.toml")), str(e)
    else:
        assert validated is checks
        judge(rubric, tolerances, MEASUREMENTS)
