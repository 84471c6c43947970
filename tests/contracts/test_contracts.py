"""The stage contracts (autograder/schemas/*.schema.json) and their one loader, autograder.contracts.

Real producers' output fits (the sandbox's execution record, the pipeline's execution summary);
a file that does not fit is a ContractError naming the file, the JSON path and the schema; any
JSON value whatever gives a fit or a ContractError, never another exception. A real grade's three
files are validated in tests/integration/test_examples_graded.py, for every example of every
assignment.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import time
import tomllib
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import contracts
from autograder.contracts import KINDS, ContractError, validate
from autograder.pipeline import _execution_summary
from autograder.sandbox.record import CellRecord, Outcome, build_record

ROOT = Path(__file__).resolve().parents[2]
ISOLATION = {"mode": "bwrap", "layers": ["bwrap", "netns"], "warnings": []}


def record(status="completed", cells=None, **kw):
    cells = (
        cells
        if cells is not None
        else [
            CellRecord(0, "ok", 0.1, number=1),
            CellRecord(2, "error", 0.2, "ValueError", "bad", "Traceback…", number=2, line=3),
            CellRecord(3, "not_run", 0.0, number=3),
        ]
    )
    return build_record(
        Outcome(status, None if status == "completed" else "why"),
        cells,
        copy.deepcopy(ISOLATION),
        time.monotonic(),
        probe="completed" if status == "completed" else "not_run",
        **kw,
    )


def measurements(execution):
    return {
        "schema": 1,
        "assignment": {"id": "07-quantization", "version": "1", "fingerprint": "ab12", "hidden_secret": "3f9a"},
        "environment": {"python": "3.11.7", "autograder": "0.1.0", "onnxruntime": "1.32.0"},
        "execution": _execution_summary(execution),
        "functions": {"quantize": {"defined": True, "agree_share": 1.0}},
        "models": {"error": "no file"},
    }


def test_every_schema_is_a_valid_draft_2020_12_schema_shipped_as_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    for kind in KINDS:
        name = f"schemas/{kind}.schema.json"
        assert files("autograder").joinpath(name).is_file(), name
        assert any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(name, g.replace("**/", "")) for g in globs), name
        loaded = contracts.schema(kind)
        jsonschema.Draft202012Validator.check_schema(loaded)
        assert loaded["$schema"].endswith("/draft/2020-12/schema") and loaded["$id"].endswith(f"/{kind}.schema.json")


@pytest.mark.parametrize("status", ["completed", "timeout", "kernel_died", "startup_failed", "unreadable"])
def test_the_sandbox_record_and_the_pipeline_summary_fit(status):
    execution = record(
        status,
        sources=["import numpy", "", "x = 1\nraise ValueError('bad')", "y"],
        names=["quantize"],
        cells_in_notebook=5,
        language=None,
    )
    validate("execution", execution)
    validate("measurements", measurements(execution))


def test_an_empty_notebook_record_fits():
    execution = record(cells=[])
    validate("execution", execution)
    validate("measurements", measurements(execution))


# (what is spoiled, how, the JSON path the error names)
SPOILED = [
    ("execution", lambda e: e.update(status="exploded"), "$.status"),
    ("execution", lambda e: e.pop("isolation"), "$"),
    ("execution", lambda e: e.update(surprise=1), "$"),
    ("execution", lambda e: e["cells"][1].update(status="fine"), "$.cells[1].status"),
    ("execution", lambda e: e["cells"][0].update(index="0"), "$.cells[0].index"),
    ("execution", lambda e: e["first_error"].update(cell=-1), "$.first_error.cell"),
    ("execution", lambda e: e["isolation"].update(layers="bwrap"), "$.isolation.layers"),
    ("measurements", lambda m: m.update(schema=2), "$.schema"),
    ("measurements", lambda m: m["assignment"].pop("id"), "$.assignment"),
    ("measurements", lambda m: m["execution"].update(ran=False), "$.execution.ran"),
    ("measurements", lambda m: m["execution"].update(cells=[]), "$.execution"),
    ("measurements", lambda m: m.update(models=[1, 2]), "$.models"),
    ("measurements", lambda m: m["environment"].update(numpy=2), "$.environment.numpy"),
]


@pytest.mark.parametrize("kind, spoil, path", SPOILED, ids=[f"{k}{p}" for k, _, p in SPOILED])
def test_a_file_that_does_not_fit_names_the_file_the_path_and_the_schema(kind, spoil, path):
    execution = record()
    data = copy.deepcopy(execution if kind == "execution" else measurements(execution))
    spoil(data)
    with pytest.raises(ContractError) as info:
        validate(kind, data, f"alice/{kind}.json")
    message = str(info.value)
    assert message.startswith(f"alice/{kind}.json: {path}: ") and f"(schema: {kind}.schema.json)" in message


def test_messages_say_what_is_wrong_in_words():
    execution = record()
    execution["status"] = "exploded"
    with pytest.raises(ContractError, match=r"unknown status 'exploded' \(known: completed timeout"):
        validate("execution", execution)
    execution = record()
    execution["extra"] = 1
    with pytest.raises(ContractError, match=r"unknown key\(s\) extra \(known: cells, cells_errored"):
        validate("execution", execution)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(KINDS), data=JSON)
def test_any_json_value_fits_or_is_a_contract_error(kind, data):
    try:
        validate(kind, data, "x.json")
    except ContractError as e:
        assert str(e).startswith("x.json: $")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_value_at_any_place_of_a_real_record_fits_or_is_named_at_its_path(data):
    """Replace one value anywhere in a real execution record: the error, if any, names that place,
    a place inside the new value, or a table above it (that lost a key it needs); never elsewhere."""
    execution = record(sources=["import numpy", "", "x = 1\nraise ValueError('bad')", "y"], names=["quantize"])
    places = list(_places(execution))
    path = data.draw(st.sampled_from(places))
    value = data.draw(JSON)
    node = execution
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    problem = contracts.first_problem("execution", execution)
    if problem is not None:
        where, _ = problem
        assert where == path[: len(where)] or path == where[: len(path)], (where, path)


def _places(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield [*prefix, k]
            yield from _places(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield [*prefix, i]
            yield from _places(v, (*prefix, i))


def test_knows_path_walks_refs_branches_and_lists():
    assert contracts.knows_path("execution", "cells.3.status")
    assert not contracts.knows_path("execution", "cells.3.colour")
    assert contracts.knows_path("grade", "checks.0.parts.1.reason")
    assert contracts.knows_path("batch", "tolerances_used.calibrated.sha256")
    assert not contracts.knows_path("batch", "tolerances_used.colour")
    assert contracts.knows_path("measurements", "execution.ran.error")
    assert not contracts.knows_path("measurements", "execution.status.code")


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="no contract named 'results'"):
        validate("results", {})


def test_the_schemas_are_plain_json_files(tmp_path):
    for kind in KINDS:
        assert json.loads(files("autograder").joinpath(f"schemas/{kind}.schema.json").read_text())["title"]
