"""Every assignment's rubric reads measurements.json by paths the contracts allow.

The core's sections (``execution``, ``assignment``, ``environment``) are closed by
autograder/schemas/measurements.schema.json and the rubric's own validation refuses a path they
do not have; an assignment's sections are its own, so here each path's first segment must be a
section name ``measure`` may return, and a probe group named in ``functions.<f>.groups.<g>`` must
be one of ``<f>``'s probe cases. Runs for every assignment folder, so a new lesson is covered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.assignment import load_assignment
from autograder.contracts import knows_path, schema
from autograder.grade_text import TEMPLATE_FIELDS, placeholders
from autograder.grading_plugin import RESERVED_SECTIONS, SECTION_NAME
from autograder.rubric import validate_rubric

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "assignments").iterdir() if (p / "assignment.toml").is_file())
CORE = set(schema("measurements")["properties"]) - {"figure"}


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def assignment(request):
    return load_assignment(request.param, ROOT)


def rubric_paths(rubric):
    """(where, dotted path) of every measure, requires and template placeholder of the rubric."""
    for check in rubric["checks"]:
        requires = check.get("requires", [])
        for path in [requires] if isinstance(requires, str) else requires:
            yield f"{check['id']} requires", path
        for part in check["parts"]:
            yield f"{check['id']} / {part['name']}", part["measure"]
            for key in ("message", "hint"):
                for name in placeholders(part.get(key, "")):
                    if name not in TEMPLATE_FIELDS and not name.startswith("tolerances."):
                        yield f"{check['id']} / {part['name']} {key}", name


def test_the_rubric_fits_its_schema_with_the_calibrated_tolerances(assignment):
    validate_rubric(assignment.rubric(), assignment.tolerances())


def test_every_path_is_a_core_field_or_in_a_section_the_assignment_may_write(assignment):
    paths = list(rubric_paths(assignment.rubric()))
    assert paths
    for where, path in paths:
        root = path.split(".")[0]
        if root in CORE:
            assert knows_path("measurements", path), f"{where}: {path} is not a field of the core's {root}"
        else:
            assert SECTION_NAME.match(root) and root not in RESERVED_SECTIONS, f"{where}: {path}"


def test_probe_groups_named_in_paths_are_probe_groups_of_that_function(assignment):
    groups: dict[str, set[str]] = {}
    for case in assignment.grading.probe_cases():
        groups.setdefault(case.function, set()).add(case.group)
    for where, path in rubric_paths(assignment.rubric()):
        segments = path.split(".")
        if segments[0] == "functions" and len(segments) > 3 and segments[2] == "groups":
            assert segments[3] in groups.get(segments[1], set()), (
                f"{where}: {path}: {segments[3]} is not a probe group of {segments[1]}"
            )


def test_the_core_sections_are_closed_so_a_misspelt_path_is_caught():
    assert knows_path("measurements", "execution.cells_errored")
    assert not knows_path("measurements", "execution.cells_erored")
    assert not knows_path("measurements", "assignment.title")
