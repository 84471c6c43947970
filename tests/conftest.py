"""Shared fixtures (the project root, the assignment, the Gradescope results schema) and the rule
that marks each test with what it needs (tests/needs.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from needs import mark_by_fixtures

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "tests" / "schemas" / "gradescope_results.schema.json"


def pytest_collection_modifyitems(config, items):
    """Mark each test with what its fixtures need (tests/needs.py); skip root tests when not root."""
    mark_by_fixtures(items, as_root=os.geteuid() == 0)


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def one_hidden_data_secret():
    """The whole suite, its subprocesses and every fake project root grade with this checkout's
    hidden-data secret (created on first use): the same in every xdist worker and run, so cached
    images of the Gradescope zip stay valid, and no fake root prints a note of its own.
    tests/assignment/test_hidden_secret.py tests the other ways of finding it."""
    import os

    from autograder import hidden_secret

    if os.environ.get(hidden_secret.SECRET_ENV):
        yield
        return
    import tempfile

    from autograder.errors import AssignmentError

    path, spare = hidden_secret.secret_path(ROOT), None
    try:
        hidden_secret.deployment(ROOT)
    except AssignmentError:  # a read-only checkout without one (e.g. bound into a container)
        spare = tempfile.mkdtemp(prefix="autograder-test-secret-")
        path = Path(spare) / hidden_secret.SECRET_FILE
        hidden_secret.ensure(path)
    os.environ[hidden_secret.SECRET_ENV] = str(path)
    try:
        yield
    finally:
        os.environ.pop(hidden_secret.SECRET_ENV, None)
        if spare:
            import shutil

            shutil.rmtree(spare, ignore_errors=True)


@pytest.fixture(scope="session")
def lessons(tmp_path_factory):
    """``lessons(root, id)`` → the one ``conformancekit.Lesson`` of that root and id in this
    session: its examples are graded once, as one batch, the first time a test reads them (such a
    test carries the ``kernel`` and ``slow`` markers itself). The conformance suite and the
    lessons' own end-to-end tests share it."""
    from conformancekit import Lesson

    made: dict = {}

    def get(root: Path, lesson_id: str) -> Lesson:
        key = (Path(root).resolve(), lesson_id)
        if key not in made:
            made[key] = Lesson(key[0], lesson_id, tmp_path_factory.mktemp(f"lesson-{lesson_id}"))
        return made[key]

    return get


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
            f"- {'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:10]
        )

    return validate
