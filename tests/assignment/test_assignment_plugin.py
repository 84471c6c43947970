"""The grading-plugin interface is enforced by the core (autograder/grading_plugin.py), and the
other things an assignment chooses (its environment packages, its summary scatter) come from it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autograder.assignment import load_assignment
from autograder.errors import AssignmentError
from autograder.grading_plugin import RESERVED_SECTIONS, CalibrationContext, validate_sections
from autograder.probe_format import ProbeCase

VALID = "def probe_cases():\n    return []\n\n\ndef measure(ctx):\n    return {}\n"


def make_assignment(root: Path, grading: str, toml: str = "", name: str = "plug-01"):
    folder = root / "assignments" / name
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text(f'id = "{name}"\n{toml}')
    (folder / "grading" / "__init__.py").write_text(grading)
    (root / "reference" / name).mkdir(parents=True)
    for module in [m for m in sys.modules if m.startswith("autograder_assignment_plug")]:
        del sys.modules[module]
    return load_assignment(name, root)


@pytest.mark.parametrize(
    "grading, message",
    [
        ("", "must define probe_cases() and measure()"),
        ("def probe_cases():\n    return []\n", "must define measure()"),
        ("probe_cases = []\ndef measure(ctx):\n    return {}\n", "must define probe_cases()"),
        (VALID + "leaderboard = 3\n", "leaderboard must be a function, not int"),
    ],
)
def test_a_package_without_the_interface_is_refused_when_loaded(tmp_path, grading, message):
    a = make_assignment(tmp_path, grading)
    with pytest.raises(AssignmentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _ = a.grading


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"execution": {}}, "section 'execution', a name the core writes itself"),
        ({"schema": {}}, "section 'schema'"),
        ({"environment": {}}, "section 'environment'"),
        ({"assignment": {}}, "section 'assignment'"),
        ({"error": "x"}, "section 'error'"),
        ({"models.fp32": {}}, "section names are identifiers"),
        ({"models": 3}, "section 'models' as int"),
        ([1, 2], "must return a dict of sections, got list"),
    ],
)
def test_measure_sections_are_validated(sections, message):
    with pytest.raises(AssignmentError, match=message):
        validate_sections(sections, "x/grading: measure(ctx)")


def test_reserved_names_are_what_the_pipeline_writes():
    assert {"schema", "assignment", "environment", "execution"} <= RESERVED_SECTIONS


def test_measure_through_the_plugin_refuses_a_reserved_section(tmp_path):
    a = make_assignment(
        tmp_path,
        "def probe_cases():\n    return []\n\n\n"
        "def measure(ctx):\n    return {'functions': {}, 'execution': {'completed': True}}\n",
    )
    with pytest.raises(AssignmentError, match="plug-01/grading: measure\\(ctx\\) returned a section 'execution'"):
        a.grading.measure(None)


def test_probe_cases_must_be_probe_cases_with_unique_ids(tmp_path):
    bad = make_assignment(
        tmp_path / "a", "def probe_cases():\n    return ['f(1)']\n\ndef measure(ctx):\n    return {}\n"
    )
    with pytest.raises(AssignmentError, match="must return a list of ProbeCase"):
        bad.grading.probe_cases()
    dup = make_assignment(
        tmp_path / "b",
        "from autograder.probe_format import ProbeCase\n"
        "def probe_cases():\n    return [ProbeCase('f/1', 'f'), ProbeCase('f/1', 'f')]\n"
        "def measure(ctx):\n    return {}\n",
    )
    with pytest.raises(AssignmentError, match=r"repeated: \['f/1'\]"):
        dup.grading.probe_cases()


def test_optional_hooks_default_to_nothing(tmp_path):
    a = make_assignment(tmp_path, VALID)
    assert a.grading.prepare is None
    assert a.grading.leaderboard({}, {}) == []
    ctx = CalibrationContext(assignment=a, workspace=tmp_path, run=0, measurements={})
    assert a.grading.calibration_samples(ctx) == []


def test_calibration_samples_are_validated_like_sections(tmp_path):
    a = make_assignment(tmp_path, VALID + "def calibration_samples(ctx):\n    return [{'schema': 1}]\n")
    ctx = CalibrationContext(assignment=a, workspace=tmp_path, run=0, measurements={})
    with pytest.raises(AssignmentError, match=r"calibration_samples\(ctx\)\[0\] returned a section 'schema'"):
        a.grading.calibration_samples(ctx)


def test_the_packages_own_attributes_stay_reachable(assignment07):
    assert assignment07.grading.probe_cases and isinstance(assignment07.grading.probe_cases()[0], ProbeCase)
    assert assignment07.grading.functions.FUNCTIONS == ("quantize", "dequantize", "choose_qparams")
    assert assignment07.grading.module.__name__ == assignment07.grading.__name__


def test_environment_records_the_core_and_the_assignments_packages(tmp_path):
    a = make_assignment(tmp_path, VALID, toml='[environment]\npackages = ["pyyaml", "not-a-real-package-xyz"]\n')
    versions = a.environment()
    assert {"python", "autograder", "onnxruntime", "onnx", "numpy", "nbclient", "ipykernel"} <= set(versions)
    assert versions["pyyaml"] != "missing" and versions["not-a-real-package-xyz"] == "missing"
    assert "scikit-learn" not in versions, "the core records only what it depends on itself"
    other = make_assignment(tmp_path / "b", VALID)
    assert a.environment_fingerprint() != other.environment_fingerprint()
    with pytest.raises(AssignmentError, match=r"environment\.packages: packages must be a list"):  # on load
        make_assignment(tmp_path / "c", VALID, toml='[environment]\npackages = "numpy"\n')


def test_summary_scatter_comes_from_the_assignment_only(tmp_path, assignment07):
    from autograder.report.summary import scatter_config

    assert scatter_config(make_assignment(tmp_path / "a", VALID)) is None, "no lesson default in the core"
    cfg = scatter_config(assignment07)
    assert cfg["series"] == {"dynamic": "models.int8_dynamic", "static QDQ": "models.int8_qdq"}
    minimal = make_assignment(
        tmp_path / "b", VALID, toml='[summary.scatter]\nx = "a"\ny = "b"\n[summary.scatter.series]\ns = "m"\n'
    )
    assert scatter_config(minimal)["title"] == "b against a"
    with pytest.raises(AssignmentError, match=r"summary\.scatter: needs y, series"):  # on load
        make_assignment(tmp_path / "c", VALID, toml='[summary.scatter]\nx = "a"\n')


@pytest.mark.parametrize(
    "change",
    [
        lambda g: (g / "model.onnx").write_bytes(b"\x08\x07"),  # a data file shipped beside the code
        lambda g: (g / "tables").mkdir() or (g / "tables" / "levels.csv").write_text("a,1\n"),
        lambda g: (g / "helpers.py").write_text("X = 1\n"),
    ],
)
def test_every_file_of_the_grading_package_is_in_the_code_fingerprint(tmp_path, change):
    a = make_assignment(tmp_path, VALID)
    before = a.code_fingerprint()
    (a.folder / "grading" / "__pycache__").mkdir()
    (a.folder / "grading" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")
    assert a.code_fingerprint() == before, "Python's bytecode cache is not grading code"
    change(a.folder / "grading")
    assert a.code_fingerprint() != before
