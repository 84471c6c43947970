"""Shared fixtures: the project root, the assignment, and the Gradescope results schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "tests" / "schemas" / "gradescope_results.schema.json"


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def assignment07():
    from autograder.assignment import load_assignment

    return load_assignment("07-quantization", root=ROOT)


@pytest.fixture(scope="session")
def results_validator():
    """A callable that validates a results.json dict against Gradescope's documented format."""
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)

    def validate(results: dict) -> None:
        errors = sorted(validator.iter_errors(results), key=lambda e: list(e.path))
        assert not errors, "results.json violates Gradescope's format:\n" + "\n".join(
            f"- {'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:10])

    return validate
