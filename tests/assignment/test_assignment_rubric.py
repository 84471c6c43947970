"""rubric.toml of assignment 07: the contract's check ids, 100 points, documented paths, known tolerances."""

from __future__ import annotations

import re

import pytest

from autograder.judge import _PLACEHOLDER, judge, lookup, validate_rubric

CONTRACT_IDS = ["quantize", "dequantize", "choose_qparams", "fp32_model", "dynamic_model", "static_model",
                "size", "reported_results", "execution"]
TEMPLATE_FIELDS = {"measured", "threshold", "op", "name"}


@pytest.fixture(scope="module")
def rubric(assignment07):
    return assignment07.rubric()


@pytest.fixture(scope="module")
def tolerances(assignment07):
    return assignment07.tolerances()


def _jsonc_block(doc: str, heading: str) -> str:
    section = doc.split(heading, 1)[1]
    return section.split("```jsonc", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def documented_keys(project_root):
    """Keys of measurements.json (Stage 2) and of execution.json (Stage 1), from docs/ARCHITECTURE.md."""
    doc = (project_root / "docs" / "ARCHITECTURE.md").read_text()
    keys = lambda block: set(re.findall(r'"([A-Za-z_][\w]*)"\s*:', block))  # noqa: E731
    return {"measurements": keys(_jsonc_block(doc, "## Stage 2")),
            "execution": keys(_jsonc_block(doc, "## Stage 1")) | {"completed", "ran"}}


@pytest.fixture(scope="module")
def probe_groups(assignment07):
    groups: dict[str, set[str]] = {}
    for case in assignment07.grading.probe_cases():
        groups.setdefault(case.function, set()).add(case.group)
    return groups


def _undocumented(path: str, documented_keys, probe_groups) -> list[str]:
    segments = path.split(".")
    allowed = documented_keys["execution"] if segments[0] == "execution" else documented_keys["measurements"]
    bad = []
    for i, seg in enumerate(segments):
        if i and segments[i - 1] == "groups":
            function = segments[i - 2]
            if seg not in probe_groups.get(function, set()):
                bad.append(f"{seg} (not a probe group of {function})")
        elif i == 0 and seg == "execution":
            continue
        elif seg not in allowed and not seg.isdigit():
            bad.append(seg)
    return bad


def _parts(rubric):
    for check in rubric["checks"]:
        for part in check["parts"]:
            yield check, part


def test_check_ids_are_the_contracts_in_order(rubric):
    assert [c["id"] for c in rubric["checks"]] == CONTRACT_IDS


def test_points_total_100_and_each_check_adds_up(rubric):
    assert sum(c["points"] for c in rubric["checks"]) == 100
    for check in rubric["checks"]:
        assert check["points"] == sum(p["points"] for p in check["parts"]), check["id"]
        assert len(check["parts"]) >= 2, f"{check['id']}: split a check into parts for partial credit"


def test_reflection_is_a_manual_item_worth_zero_autograded_points(rubric):
    assert [(m["id"], m["points"]) for m in rubric["manual"]] == [("reflection", 0)]


def test_the_judge_accepts_the_rubric_with_these_tolerances(rubric, tolerances):
    validate_rubric(rubric, tolerances)   # raises AssignmentError on any unknown op, key or tolerance


def test_every_measure_path_is_in_the_documented_schema(rubric, documented_keys, probe_groups):
    for check, part in _parts(rubric):
        bad = _undocumented(part["measure"], documented_keys, probe_groups)
        assert not bad, f"{check['id']} / {part['name']}: {part['measure']} uses undocumented keys {bad}"
    for check in rubric["checks"]:
        if "requires" in check:
            assert not _undocumented(check["requires"], documented_keys, probe_groups), check["id"]


def test_template_placeholders_name_documented_measurements_or_tolerances(rubric, tolerances, documented_keys,
                                                                         probe_groups):
    for check, part in _parts(rubric):
        for key in ("message", "hint"):
            for m in _PLACEHOLDER.finditer(part.get(key, "")):
                name = m.group(1)
                if name is None or name in TEMPLATE_FIELDS:
                    continue
                if name.startswith("tolerances."):
                    assert lookup(tolerances, name[len("tolerances."):])[1] is None, f"{check['id']}: {name}"
                    continue
                bad = _undocumented(name, documented_keys, probe_groups)
                assert not bad, f"{check['id']} / {part['name']} {key}: {{{name}}} uses undocumented keys {bad}"


def test_every_tolerance_key_exists_and_is_derived(rubric, tolerances):
    for check, part in _parts(rubric):
        if "tolerance" not in part:
            continue
        entry, reason = lookup(tolerances, part["tolerance"])
        assert reason is None, f"{check['id']}: tolerance {part['tolerance']} missing from tolerances.toml"
        assert isinstance(entry, dict) and entry.get("measure") == part["measure"], \
            f"{part['tolerance']} was derived from {entry.get('measure')!r}, the rubric measures {part['measure']!r}"


def test_every_part_has_a_message_and_a_hint_that_does_not_name_the_solution(rubric):
    for check, part in _parts(rubric):
        assert part.get("message") and part.get("hint"), f"{check['id']} / {part['name']}"
        for giveaway in ("np.rint(np.asarray", "astype(np.int32) - np.int32", "weight_type=QuantType.QInt8"):
            assert giveaway not in part["hint"], f"{check['id']} / {part['name']}: the hint gives the code away"


def test_a_perfect_measurement_set_scores_100_and_an_empty_one_0(rubric, tolerances, assignment07, project_root):
    empty = judge(rubric, tolerances, {})
    assert empty["score"] == 0 and all(p["reason"] for c in empty["checks"] for p in c["parts"])
