"""The example submissions: each mistake says what it gets wrong and which one check must lose points;
each valid variant says it is the solution written another way."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / "07-quantization" / "examples"
EXPECTED = tomllib.loads((ROOT / "reference" / "07-quantization" / "expected_examples.toml").read_text())
CHECK_IDS = {
    "quantize",
    "dequantize",
    "choose_qparams",
    "fp32_model",
    "dynamic_model",
    "static_model",
    "size",
    "reported_results",
    "execution",
}


@pytest.fixture(scope="module")
def make_examples():
    path = ROOT / "reference" / "07-quantization" / "make_examples.py"
    spec = importlib.util.spec_from_file_location("make_examples_07_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(EXAMPLES / name, as_version=4)


def test_every_check_but_fp32_model_has_a_mistake_example():
    assert EXPECTED["reference.ipynb"] == {"full_marks": True}
    mistakes = {k: v["loses"] for k, v in EXPECTED.items() if "loses" in v}
    assert len(mistakes) >= 6 and set(mistakes.values()) <= CHECK_IDS
    assert set(mistakes.values()) == CHECK_IDS - {"fp32_model"}, "every check but fp32_model has a mistake example"


def test_every_mistake_names_parts_of_its_own_check(assignment07):
    parts = {c["id"]: {p["name"] for p in c["parts"]} for c in assignment07.rubric()["checks"]}
    for name, v in EXPECTED.items():
        if "loses" in v:
            assert v.get("parts") and set(v["parts"]) <= parts[v["loses"]], f"{name}: {v.get('parts')}"


def test_every_mistake_scores_100_minus_its_parts(assignment07):
    points = {(c["id"], p["name"]): p["points"] for c in assignment07.rubric()["checks"] for p in c["parts"]}
    for name, v in EXPECTED.items():
        if "loses" in v:
            assert v["score"] == 100 - sum(points[(v["loses"], p)] for p in v["parts"]), name


def test_the_script_and_the_expectations_agree(make_examples):
    assert {m.file: m.check for m in make_examples.MISTAKES} == {
        k: v["loses"] for k, v in EXPECTED.items() if "loses" in v
    }
    assert {v.file for v in make_examples.VARIANTS} == {k for k, v in EXPECTED.items() if v.get("full_marks")} - {
        "reference.ipynb"
    }


VARIANTS = sorted(k for k, v in EXPECTED.items() if v.get("full_marks") and k != "reference.ipynb")


@pytest.mark.parametrize("name", VARIANTS)
def test_each_variant_says_it_is_valid_in_its_first_cell(name):
    first = _read(name).cells[0]
    assert first.cell_type == "markdown" and "another valid way" in first.source, name
    assert "Expected grade: full marks" in first.source and not any(f"`{c}` check" in first.source for c in CHECK_IDS)


@pytest.mark.parametrize("name", sorted(k for k, v in EXPECTED.items() if "loses" in v))
def test_each_mistake_states_its_mistake_and_check_in_its_first_cell(name):
    first = _read(name).cells[0]
    assert first.cell_type == "markdown", f"{name}: the first cell must be the Markdown statement of the mistake"
    assert f"`{EXPECTED[name]['loses']}`" in first.source and "Expected grade" in first.source, name
    others = CHECK_IDS - {EXPECTED[name]["loses"]}
    assert not any(f"`{c}` check" in first.source for c in others), f"{name} names a second check"


@pytest.mark.parametrize("name", sorted(k for k, v in EXPECTED.items() if "loses" in v) + VARIANTS)
def test_each_mistake_is_the_solution_plus_one_small_edit(name):
    reference, example = _read("reference.ipynb"), _read(name)
    assert len(example.cells) == len(reference.cells) + 1
    changed = [i for i, (a, b) in enumerate(zip(reference.cells, example.cells[1:])) if a.source != b.source]
    assert len(changed) == 1, f"{name}: expected one edited cell, got {changed}"
    assert all(reference.cells[i].cell_type == "code" for i in changed)


def test_an_edit_that_no_longer_matches_fails_loudly():
    from autograder.authoring.example_edits import apply_edit  # every lesson's examples are made through it

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    with pytest.raises(ValueError, match="exactly once"):
        apply_edit(nb, "y = 2", "y = 3")
